// inspect_model: a checkpoint described from its headers alone. The readers are the loaders' own
// (GgufFile, HfCheckpoint, load_config, gguf_config, the tokenizer loaders' chat-template code);
// GGUF and safetensors files are mapped, and only their headers are read (pread), so no page of
// tensor data is touched.
#include "kvinfer/model_info.h"

#include <array>
#include <span>
#include <string_view>
#include <variant>

#include <fmt/format.h>
#include <fmt/std.h>

#include "core/escape.h"
#include "core/input_file.h"
#include "formats/gguf.h"
#include "formats/gguf_config.h"
#include "formats/hf_checkpoint.h"
#include "kvinfer/error.h"
#include "kvinfer/kv_plan.h"
#include "tokenizer/load.h"

namespace kvinfer {

namespace {

namespace fs = std::filesystem;

// Buffers under a layer that Model::load skips (load_hf.cpp's kUnusedLayerBuffers), and the GGUF
// tensor it reads into the rotary frequencies rather than keeping.
constexpr std::array<std::string_view, 3> kUnusedLayerBuffers = {".self_attn.rotary_emb.inv_freq", ".attn.bias",
                                                                 ".attn.masked_bias"};
constexpr std::string_view kGgufRopeFreqs = "rope_freqs.weight";

std::optional<DType> safetensors_dtype(const TensorView& t) {
  if (t.dtype == "F32") return DType::F32;
  if (t.dtype == "F16") return DType::F16;
  if (t.dtype == "BF16") return DType::BF16;
  return std::nullopt;
}

DType gguf_dtype(const GgufFile& f, const GgufTensorInfo& t) {
  switch (t.type) {
    case GgmlType::F32: return DType::F32;
    case GgmlType::F16: return DType::F16;
    case GgmlType::BF16: return DType::BF16;
    case GgmlType::Q8_0: return DType::Q8_0;
    case GgmlType::Q4_0: return DType::Q4_0;
    case GgmlType::Q4_1: return DType::Q4_1;
    case GgmlType::Q5_0: return DType::Q5_0;
    case GgmlType::Q5_1: return DType::Q5_1;
    case GgmlType::Q4_K: return DType::Q4_K;
    case GgmlType::Q5_K: return DType::Q5_K;
    case GgmlType::Q6_K: return DType::Q6_K;
    default:
      throw Error(ErrorKind::Unsupported, fmt::format("{}: tensor '{}' has type {}, which kvinfer does not support",
                                                      f.path(), escape_name(t.name), ggml_type_info(t.type).name));
  }
}

// What Model::weight_bytes() counts for one tensor it keeps: vectors (norms, biases) as f32.
uint64_t loaded_bytes(const TensorInfo& t) {
  if (t.shape.size() == 1) return static_cast<uint64_t>(t.shape[0]) * sizeof(float);
  return t.bytes;
}

bool ends_with_any(std::string_view name, std::span<const std::string_view> suffixes) {
  for (std::string_view s : suffixes)
    if (name.ends_with(s)) return true;
  return false;
}

bool skipped_by_load(const ModelInfo& info, const TensorInfo& t) {
  // Frequency factors become the rope frequencies (LongRoPE's long or short set), not weights.
  if (info.format == ModelFormat::Gguf)
    return t.name == kGgufRopeFreqs || t.name == "rope_factors_long.weight" || t.name == "rope_factors_short.weight";
  return ends_with_any(t.name, kUnusedLayerBuffers) || (t.name == "lm_head.weight" && info.config.tie_word_embeddings);
}

// weight_dtype and weight_bytes from the tensor table; `q` names layer 0's query (or fused QKV)
// projection, whose dtype Model::weight_dtype() reports.
void summarize(ModelInfo& info, const std::string& q, const fs::path& where) {
  info.has_weights = true;
  bool found_q = false;
  for (const TensorInfo& t : info.tensors) {
    info.stored_bytes += t.bytes;
    if (skipped_by_load(info, t)) continue;
    // As Model::load refuses it (TensorView::float_dtype).
    if (!t.dtype)
      throw Error(ErrorKind::Unsupported, fmt::format("{}: tensor '{}' has dtype {}; weights must be F32, F16 or BF16",
                                                      where, t.name, t.type));
    if (t.name == q) {
      info.weight_dtype = *t.dtype;
      found_q = true;
    }
    info.weight_bytes += loaded_bytes(t);
  }
  if (!found_q)
    throw Error(ErrorKind::BadFile, fmt::format("{}: tensor '{}' is missing (layer 0's query projection)", where, q));
}

void inspect_hf_directory(ModelInfo& info) {
  const fs::path& dir = info.path;
  if (!input_exists(dir / "config.json"))
    throw Error(ErrorKind::BadFile, fmt::format("{}: a model directory needs a config.json", dir));
  info.config = load_config(dir / "config.json");
  info.name = (dir.filename().empty() ? dir.parent_path() : dir).filename().string();
  info.has_tokenizer = hf_has_tokenizer(dir);
  info.chat_template = hf_chat_template(dir);
  if (!input_exists(dir / "model.safetensors") && !input_exists(dir / "model.safetensors.index.json")) return;
  const HfCheckpoint ckpt(dir);
  for (const std::string& name : ckpt.names()) {
    const TensorView& t = *ckpt.find(name);
    info.tensors.push_back({name, t.dtype, safetensors_dtype(t), t.shape, t.bytes});
  }
  const std::string prefix = ckpt.find("transformer.wte.weight") ? "transformer." : "";
  summarize(info,
            info.config.is_gpt2()                          ? prefix + "h.0.attn.c_attn.weight"
            : info.config.arch == Architecture::Phi3 ? "model.layers.0.self_attn.qkv_proj.weight"
                                                     : "model.layers.0.self_attn.q_proj.weight",
            dir);
}

void inspect_gguf(ModelInfo& info) {
  const GgufFile f(info.path);
  info.config = gguf_config(f);
  if (const GgufValue* v = f.find("general.name"); v && std::holds_alternative<std::string>(v->value))
    info.name = std::get<std::string>(v->value);
  info.has_tokenizer = gguf_has_tokenizer(f);
  info.chat_template = gguf_chat_template(f);
  for (const GgufTensorInfo& t : f.tensors())
    info.tensors.push_back({t.name, std::string(ggml_type_info(t.type).name), gguf_dtype(f, t),
                            std::vector<int64_t>(t.dims.rbegin(), t.dims.rend()), t.bytes});
  summarize(info,
            info.config.is_gpt2() || info.config.arch == Architecture::Phi3 ? "blk.0.attn_qkv.weight"
                                                                              : "blk.0.attn_q.weight",
            info.path);
}

}  // namespace

std::string_view model_format_name(ModelFormat format) {
  switch (format) {
    case ModelFormat::HfDirectory: return "hf_directory";
    case ModelFormat::Gguf: return "gguf";
    case ModelFormat::ConfigJson: return "config_json";
  }
  return "?";
}

DType ModelInfo::default_kv_dtype() const { return kvinfer::default_kv_dtype(weight_dtype); }

uint64_t ModelInfo::kv_bytes(int64_t tokens, std::optional<DType> kv_dtype) const {
  return plan_kv_bytes(config, tokens, kv_dtype.value_or(default_kv_dtype()));
}

uint64_t ModelInfo::load_bytes(int64_t kv_tokens, std::optional<DType> kv_dtype) const {
  uint64_t total = 0;
  if (__builtin_add_overflow(weight_bytes, kv_bytes(kv_tokens, kv_dtype), &total))
    throw Error(ErrorKind::InvalidArgument,
                fmt::format("{}: the weights and a KV cache of {} tokens overflow 64 bits of bytes", path,
                            format_count(kv_tokens)));
  return total;
}

ModelInfo inspect_model(const std::filesystem::path& path) {
  ModelInfo info;
  info.path = path;
  if (model_path_kind(path) == ModelPathKind::Directory) {
    info.format = ModelFormat::HfDirectory;
    inspect_hf_directory(info);
  } else if (model_file_kind(path) == ModelFileKind::Gguf) {
    info.format = ModelFormat::Gguf;
    inspect_gguf(info);
  } else {
    info.format = ModelFormat::ConfigJson;
    info.config = load_config(path);
  }
  return info;
}

}  // namespace kvinfer
