#pragma once
// A HF model directory: config.json plus model.safetensors, or the shards named by
// model.safetensors.index.json. Tensors are looked up by name across all shards.
#include <filesystem>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "formats/safetensors.h"
#include "kvinfer/config.h"

namespace kvinfer {

class HfCheckpoint {
 public:
  explicit HfCheckpoint(const std::filesystem::path& dir);  // throws kvinfer::Error naming the file

  const ModelConfig& config() const { return config_; }
  const std::filesystem::path& dir() const { return dir_; }
  const TensorView* find(const std::string& name) const;
  const TensorView& get(const std::string& name) const;  // throws naming the tensor and the directory
  std::vector<std::string> names() const;  // every tensor's, sorted (so errors name the same one each run)
  // The bytes of every tensor, as stored.
  uint64_t tensor_bytes() const;
  // Each shard's file, mapped.
  std::vector<const MappedFile*> files() const;

 private:
  std::filesystem::path dir_;
  ModelConfig config_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::unordered_map<std::string, const TensorView*> tensors_;
};

}  // namespace kvinfer
