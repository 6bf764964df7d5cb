#pragma once
// What the library knows of a Model beyond its public face: its weights and the memory account
// its caches reserve from, and how a loader builds one.
#include <cstdint>
#include <filesystem>
#include <memory>

#include "core/memory.h"
#include "kvinfer/model.h"
#include "models/weights.h"

namespace kvinfer {

struct Model::Internal {
  std::unique_ptr<ModelWeights> weights;
  // The figure the weights were checked against; null for a model built without a load, whose
  // caches are checked against the memory available when made.
  std::shared_ptr<MemoryAccount> memory;
};

// Everything a Model is made of (the loaders and random_model fill it).
struct ModelParts {
  ModelConfig config;
  std::unique_ptr<ModelWeights> weights;
  Device device = Device::CPU;
  std::shared_ptr<const Tokenizer> tokenizer = nullptr;
  std::filesystem::path source = {};
  bool int8_activations = false;
  std::shared_ptr<MemoryAccount> memory = nullptr;
  bool check_finite = false;
  int64_t context_length = 0;  // 0: config.max_position_embeddings
  int threads = 0;             // 0: default_cpu_threads()
};

struct ModelAccess {
  static std::shared_ptr<const Model> make(ModelParts parts);
  static const ModelWeights& weights(const Model& m) { return *m.internal_->weights; }
  static const std::shared_ptr<MemoryAccount>& memory(const Model& m) { return m.internal_->memory; }
};

inline std::shared_ptr<const Model> make_model(ModelParts parts) { return ModelAccess::make(std::move(parts)); }
inline const ModelWeights& model_weights(const Model& m) { return ModelAccess::weights(m); }

}  // namespace kvinfer
