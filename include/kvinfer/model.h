#pragma once
// Model: configuration and weights of one checkpoint. Immutable after load; one Model may be
// shared by any number of threads, each with its own Session and KvCache.
#include <cstdint>
#include <filesystem>
#include <memory>

#include "kvinfer/config.h"
#include "kvinfer/device.h"
#include "kvinfer/dtype.h"

namespace kvinfer {

struct ModelWeights;  // src/models/weights.h

struct LoadOptions {
  Device device = Device::Auto;
};

class Model {
 public:
  // Loads a HF model directory: config.json + model.safetensors, or shards listed in
  // model.safetensors.index.json. Weights are memory-mapped and used in their stored dtype.
  static std::shared_ptr<const Model> load(const std::filesystem::path& path, const LoadOptions& options = {});

  const ModelConfig& config() const { return config_; }
  Device device() const { return device_; }
  // The dtype of the projection weights (what the checkpoint stores).
  DType weight_dtype() const { return weight_dtype_; }
  // Bytes of all weights as stored (what one forward pass reads, embeddings aside).
  uint64_t weight_bytes() const { return weight_bytes_; }
  const ModelWeights& weights() const { return *weights_; }

  Model(ModelConfig config, std::unique_ptr<ModelWeights> weights, Device device);
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

 private:
  ModelConfig config_;
  std::unique_ptr<ModelWeights> weights_;
  Device device_;
  DType weight_dtype_;
  uint64_t weight_bytes_;
};

}  // namespace kvinfer
