#pragma once
// ModelInfo: what a checkpoint is, read from its metadata without reading any weight: the
// config, the tokenizer and chat template it ships, every tensor's dtype and shape, and the
// exact bytes its weights and KV caches will take. For choosing a model, a context length or a
// cache dtype before paying for a load (kvinfer-kv-plan is built on it).
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "kvinfer/config.h"
#include "kvinfer/dtype.h"

namespace kvinfer {

enum class ModelFormat { HfDirectory, Gguf, ConfigJson };  // ConfigJson: a bare config.json, no weights

struct TensorInfo {
  std::string name;            // as the file stores it
  DType dtype;                 // as stored
  std::vector<int64_t> shape;  // outermost first, as HF writes it (a GGUF (ne0, ne1) is {ne1, ne0})
  uint64_t bytes = 0;          // bytes as stored
};

struct ModelInfo {
  std::filesystem::path path;
  ModelFormat format = ModelFormat::HfDirectory;
  ModelConfig config;
  std::vector<TensorInfo> tensors;  // in file order; empty for a bare config.json
  DType weight_dtype = DType::F32;  // of the projection matrices, as Model::weight_dtype() reports after a load
  uint64_t weight_bytes = 0;        // every tensor as stored (0 without weights)
  bool has_tokenizer = false;       // tokenizer.json in the directory, tokenizer.ggml.* in the GGUF file
  std::string chat_template;        // "" when none
  std::string name;                 // general.name (GGUF) or the directory's name; may be ""

  // The cache dtype a KvCache of this model gets by default (default_kv_dtype of weight_dtype).
  DType default_kv_dtype() const;
  // plan_kv_bytes(config, tokens, dtype or the default): what KvCache::bytes() will report.
  uint64_t kv_bytes(int64_t tokens, std::optional<DType> kv_dtype = std::nullopt) const;
};

// Reads a HF model directory (config.json, safetensors headers, tokenizer files), a GGUF file
// (header, metadata and tensor table; known by its magic) or a bare config.json. Reads no weight
// data: the cost is the files' headers. Throws kvinfer::Error (BadFile for a missing or malformed
// file, Unsupported for an architecture Model::load refuses) naming the file and key at fault.
ModelInfo inspect_model(const std::filesystem::path& path);

}  // namespace kvinfer
