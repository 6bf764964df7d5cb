#pragma once
// Model: configuration and weights of one checkpoint. Immutable after load; one Model may be
// shared by any number of threads, each with its own Session and KvCache.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <vector>

#include "kvinfer/config.h"
#include "kvinfer/device.h"
#include "kvinfer/dtype.h"

namespace kvinfer {

struct ModelWeights;  // src/models/weights.h
class Tokenizer;      // kvinfer/tokenizer.h

// Called as weights are read into memory (or copied to the device): bytes done of total.
using LoadProgress = std::function<void(uint64_t done, uint64_t total)>;

struct LoadOptions {
  Device device = Device::Auto;
  LoadProgress on_progress = {};
  // CPU only, Q8_0/Q4_0/Q4_1 weights only: quantise each 32-value block of a product's input to
  // 8 bits and multiply in integers, as llama.cpp does. Faster (about twice, on such weights) but
  // not exact: logits move by about 1e-2 (docs/benchmarks.md). Off: every product is exact in f32
  // and matches HF on the dequantised weights. Cache-on == cache-off and thread-count
  // independence hold either way.
  bool int8_activations = false;
};

class Model {
 public:
  // Loads a HF model directory (config.json + model.safetensors, or shards listed in
  // model.safetensors.index.json, and tokenizer.json when the directory has one) or a GGUF file
  // of llama.cpp's "llama" or "qwen2" architecture (known by its "GGUF" magic, whatever its name;
  // its tokenizer from the tokenizer.ggml.* metadata when present). Weights are memory-mapped,
  // used in their stored dtype (GGUF's quantised types included, never dequantised up front), and
  // read once up front (so the first token does not pay for page faults), reporting progress.
  static std::shared_ptr<const Model> load(const std::filesystem::path& path, const LoadOptions& options = {});

  const ModelConfig& config() const { return config_; }
  Device device() const { return device_; }
  // The dtype of the projection weights (what the checkpoint stores).
  DType weight_dtype() const { return weight_dtype_; }
  // Bytes of all weights as stored (what one forward pass reads, embeddings aside).
  uint64_t weight_bytes() const { return weight_bytes_; }
  // Bytes of weights one decode step reads: every projection with its bias, the norms, and the
  // LM head whole (the token embedding when tied); of the embedding tables only one row each.
  uint64_t step_weight_bytes() const { return step_weight_bytes_; }
  const ModelWeights& weights() const { return *weights_; }
  bool has_tokenizer() const { return tokenizer_ != nullptr; }
  // Throws kvinfer::Error when the model was loaded without one.
  const Tokenizer& tokenizer() const;
  // Every id that ends generation: config.json's eos ids and the tokenizer's.
  std::vector<int32_t> eos_ids() const;

  // LoadOptions::int8_activations as loaded (sessions of this model use it).
  bool int8_activations() const { return int8_activations_; }

  Model(ModelConfig config, std::unique_ptr<ModelWeights> weights, Device device,
        std::shared_ptr<const Tokenizer> tokenizer = nullptr, std::filesystem::path source = {},
        bool int8_activations = false);
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

 private:
  ModelConfig config_;
  std::unique_ptr<ModelWeights> weights_;
  Device device_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::filesystem::path source_;
  DType weight_dtype_;
  uint64_t weight_bytes_;
  uint64_t step_weight_bytes_;
  bool int8_activations_;
};

}  // namespace kvinfer
