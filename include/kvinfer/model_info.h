#pragma once
// ModelInfo: what a checkpoint is, read from its metadata without reading any weight: the
// config, the tokenizer and chat template it ships, every tensor's dtype and shape, and the
// exact bytes its weights and KV caches will take. For choosing a model, a context length or a
// cache dtype before paying for a load (kvinfer-kv-plan is built on it).
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvinfer/config.h"
#include "kvinfer/dtype.h"
#include "kvinfer/export.h"

KVINFER_PUBLIC_BEGIN
namespace kvinfer {

enum class ModelFormat { HfDirectory, Gguf, ConfigJson };  // ConfigJson: a bare config.json, no weights
// "hf_directory", "gguf", "config_json".
std::string_view model_format_name(ModelFormat format);

struct TensorInfo {
  std::string name;            // as the file stores it
  std::string type;            // as the file spells it: "BF16", "U8" (safetensors), "f16", "q4_K" (ggml)
  // As stored; nullopt for a type kvinfer does not compute with, which only a tensor Model::load
  // skips may have (GPT-2's U8 attn.bias mask buffers).
  std::optional<DType> dtype;
  std::vector<int64_t> shape;  // outermost first, as HF writes it (a GGUF (ne0, ne1) is {ne1, ne0})
  uint64_t bytes = 0;          // bytes as stored
};

struct ModelInfo {
  std::filesystem::path path;
  ModelFormat format = ModelFormat::HfDirectory;
  ModelConfig config;
  // GGUF: in file order; HF: sorted by name, across shards. Empty without weights.
  std::vector<TensorInfo> tensors;
  // false for a bare config.json and for a directory with neither model.safetensors nor an index.
  bool has_weights = false;
  // Of the projection matrices (layer 0's query), as Model::weight_dtype() reports after a load;
  // F32 without weights.
  DType weight_dtype = DType::F32;
  uint64_t stored_bytes = 0;  // every tensor's bytes as stored (0 without weights)
  // What Model::weight_bytes() reports after a load, and what the load checks against the memory
  // available: the matrices as stored, norms and biases widened to f32, a tied LM head once; the
  // tensors Model::load reads but does not keep (rotary inv_freq and GPT-2 mask buffers, GGUF
  // rope_freqs.weight, a tied model's stored lm_head.weight) are left out. 0 without weights.
  uint64_t weight_bytes = 0;
  bool has_tokenizer = false;       // tokenizer.json in the directory, tokenizer.ggml.* in the GGUF file
  std::string chat_template;        // as Tokenizer::chat_template() will hold it; "" when none
  std::string name;                 // general.name (GGUF) or the directory's name; "" for a bare config.json

  // The cache dtype a KvCache of this model gets by default (default_kv_dtype of weight_dtype).
  DType default_kv_dtype() const;
  // plan_kv_bytes(config, tokens, dtype or the default): what KvCache::bytes() will report.
  uint64_t kv_bytes(int64_t tokens, std::optional<DType> kv_dtype = std::nullopt) const;
  // weight_bytes + kv_bytes(kv_tokens, kv_dtype): what a CPU Model::load with LoadOptions::kv_tokens
  // = kv_tokens checks against LoadOptions::memory_limit (a CUDA load adds its session scratch).
  uint64_t load_bytes(int64_t kv_tokens, std::optional<DType> kv_dtype = std::nullopt) const;
};

// Reads a HF model directory (config.json, safetensors headers, tokenizer files), a GGUF file
// (header, metadata and tensor table; known by its magic "GGUF", as Model::load knows it) or a
// bare config.json. Reads no weight data: the files are mapped and only their headers read, so
// the cost is the headers', whatever the weights' size. Throws kvinfer::Error naming the file and
// key at fault: BadFile for a missing, truncated (tensor data shorter than the header says) or
// malformed file, Unsupported for an architecture Model::load refuses or a tensor it would use
// whose type kvinfer has no DType for. It does not check that every tensor has the shape the config implies: a
// model that inspects may still fail to load.
ModelInfo inspect_model(const std::filesystem::path& path);

}  // namespace kvinfer
KVINFER_PUBLIC_END
