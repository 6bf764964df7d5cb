#pragma once
// What the library knows of a Model beyond its public face: its weights, the memory account its
// caches reserve from and its identity for saved KV caches, and how a loader builds one.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>

#include "core/memory.h"
#include "kvinfer/model.h"
#include "models/weights.h"

namespace kvinfer {

struct Model::Internal {
  std::unique_ptr<ModelWeights> weights;
  // The figure the weights were checked against; null for a model built without a load, whose
  // caches are checked against the memory available when made.
  std::shared_ptr<MemoryAccount> memory;
  uint64_t fingerprint = 0;  // model_fingerprint at load; 0: not computed (ModelAccess::fingerprint)
  std::once_flag grammar_once;  // Model::grammar_vocabulary(), made on first use
  std::shared_ptr<const GrammarVocabulary> grammar_vocabulary;
};

// Everything a Model is made of (the loaders and random_model fill it).
struct ModelParts {
  ModelConfig config;
  std::unique_ptr<ModelWeights> weights;
  Device device = Device::CPU;
  int device_index = 0;  // the CUDA device (LoadOptions::device_index)
  std::shared_ptr<const Tokenizer> tokenizer = nullptr;
  std::filesystem::path source = {};
  ActivationMode activations = ActivationMode::Exact;
  std::shared_ptr<MemoryAccount> memory = nullptr;
  bool check_finite = false;
  int64_t context_length = 0;  // 0: config.max_position_embeddings
  int threads = 0;             // 0: default_cpu_threads()
  uint64_t fingerprint = 0;    // model_fingerprint of the stored weights; 0: of the shapes only
};

struct ModelAccess {
  static std::shared_ptr<const Model> make(ModelParts parts);
  static const ModelWeights& weights(const Model& m) { return *m.internal_->weights; }
  static const std::shared_ptr<MemoryAccount>& memory(const Model& m) { return m.internal_->memory; }
  // The model's fingerprint as computed at load; for a model made without one, computed now
  // from its config and tensor shapes only.
  static uint64_t fingerprint(const Model& m);
};

// A 64-bit identity (hash64) of a checkpoint as loaded: every ModelConfig field that shapes the
// forward pass (architecture, sizes, norm epsilon, rope theta, scaling and layout, context,
// sliding window, tying, biases); every tensor's role (its place in ModelWeights), dtype and
// shape; each norm/bias/rope vector whole; and of each weight matrix its first and last 4 KiB as
// stored. Computed from host memory before the weights are packed or uploaded, so the same
// checkpoint gives the same value on every device and CPU. Not covered: bytes in the middle of a
// matrix (a change there alone is not detected), the tokenizer, LoadOptions (activations,
// the device: a cache from one continues in another, with the bits its own model computed).
// storage: reads the matrices' bytes (HostStorage::read); null: config, shapes and dtypes only.
struct HostStorage;
uint64_t model_fingerprint(const ModelConfig& config, const ModelWeights& weights, const HostStorage* storage);

inline std::shared_ptr<const Model> make_model(ModelParts parts) { return ModelAccess::make(std::move(parts)); }
inline const ModelWeights& model_weights(const Model& m) { return ModelAccess::weights(m); }

}  // namespace kvinfer
