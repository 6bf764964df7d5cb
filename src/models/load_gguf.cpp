// Model::load for GGUF files of llama.cpp's "llama", "qwen2", "qwen3", "gemma2", "gemma3", "gpt2", "phi3",
// "qwen2moe" and "qwen3moe" architectures: the config from
// the metadata (formats/gguf_config.h), every tensor checked against it and bound in place, in
// its stored type (f32, f16, bf16 or one of the quantised block formats), never widened.
#include <array>
#include <cmath>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fmt/std.h>

#include "core/escape.h"
#include "formats/gguf.h"
#include "formats/gguf_config.h"
#include "kvinfer/error.h"
#include "kvinfer/tokenizer.h"
#include "cuda/device_memory.h"
#include "models/load_common.h"
#include "tokenizer/load.h"

namespace kvinfer {

namespace {

// llama.cpp's tensor names (llama-arch.cpp).
const TensorNames kGgufNames = {
    .embed = "token_embd.weight",
    .final_norm = "output_norm.weight",
    .lm_head = "output.weight",
    .layer = "blk.{}.",
    .attn_norm = "attn_norm.weight",
    .q = "attn_q",
    .k = "attn_k",
    .v = "attn_v",
    .o = "attn_output",
    .ffn_norm = "ffn_norm.weight",
    .gate = "ffn_gate",
    .up = "ffn_up",
    .down = "ffn_down",
    .q_norm = "attn_q_norm.weight",
    .k_norm = "attn_k_norm.weight",
    .post_attn_norm = "post_attention_norm.weight",
    .post_ffn_norm = "post_ffw_norm.weight",
    .norm_plus_one = false,  // llama.cpp's converter adds Gemma's 1 itself
    // Mixtral ("llama" with experts), "qwen2moe" and "qwen3moe": experts stacked in 3-D tensors, ggml dims
    // [hidden, inter, experts] (gate, up) and [inter, hidden, experts] (down).
    .moe = {.layout = MoeNames::Layout::Stacked,
            .router = "ffn_gate_inp.weight",
            .gate = "ffn_gate_exps.weight",
            .up = "ffn_up_exps.weight",
            .down = "ffn_down_exps.weight",
            .shared_gate = "ffn_gate_shexp.weight",
            .shared_up = "ffn_up_shexp.weight",
            .shared_down = "ffn_down_shexp.weight",
            .shared_expert_gate = "ffn_gate_inp_shexp.weight"},
    .qkv = {},
    .gate_up = {},
};
// llama.cpp's "gpt2": the projections are stored (out, in) (its converter transposed HF's Conv1D).
const Gpt2TensorNames kGgufGpt2Names = {
    .embed = "token_embd.weight",
    .pos_embed = "position_embd.weight",
    .final_norm = "output_norm",
    .lm_head = "output.weight",
    .layer = "blk.{}.",
    .attn_norm = "attn_norm",
    .qkv = "attn_qkv",
    .attn_out = "attn_output",
    .ffn_norm = "ffn_norm",
    .ffn_up = "ffn_up",
    .ffn_down = "ffn_down",
    .conv1d = false,
};
constexpr const char* kRopeFreqs = "rope_freqs.weight";
// llama.cpp's "phi3": q/k/v fused in attn_qkv, gate and up fused in ffn_up (gate first, as
// ggml_swiglu splits it); LongRoPE's factors as two tensors.
TensorNames phi3_names() {
  TensorNames n = kGgufNames;
  n.qkv = "attn_qkv";
  n.gate_up = "ffn_up";
  return n;
}
constexpr const char* kRopeFactorsShort = "rope_factors_short.weight";
constexpr const char* kRopeFactorsLong = "rope_factors_long.weight";

// The ggml types kvinfer computes with, and their DType.
constexpr std::array<std::pair<GgmlType, DType>, 11> kTypes = {{
    {GgmlType::F32, DType::F32},   {GgmlType::F16, DType::F16},   {GgmlType::BF16, DType::BF16},
    {GgmlType::Q8_0, DType::Q8_0}, {GgmlType::Q4_0, DType::Q4_0}, {GgmlType::Q4_1, DType::Q4_1},
    {GgmlType::Q5_0, DType::Q5_0}, {GgmlType::Q5_1, DType::Q5_1}, {GgmlType::Q4_K, DType::Q4_K},
    {GgmlType::Q5_K, DType::Q5_K}, {GgmlType::Q6_K, DType::Q6_K},
}};

class GgufSource : public TensorSource {
 public:
  explicit GgufSource(const GgufFile& f) : f_(f) {}

  // ggml lists dims from the contiguous one: a (rows, cols) matrix is [cols, rows].
  Matrix matrix(const std::string& name, int64_t rows, int64_t cols) const override {
    return bind(name, {cols, rows}, rows, cols);
  }
  Matrix vector(const std::string& name, int64_t n) const override { return bind(name, {n}, 1, n); }
  Matrix stacked(const std::string& name, int64_t count, int64_t rows, int64_t cols) const override {
    return bind(name, {cols, rows, count}, count * rows, cols);
  }
  bool has(const std::string& name) const override { return f_.find_tensor(name) != nullptr; }
  bool used(const std::string& name) const { return used_.contains(name); }

 private:
  Matrix bind(const std::string& name, const std::vector<int64_t>& dims, int64_t rows, int64_t cols) const {
    const GgufTensorInfo* t = f_.find_tensor(name);
    if (!t)
      throw Error(ErrorKind::BadFile, fmt::format("{}: tensor '{}' is missing (wanted dims [{}], ggml order)", f_.path(), name,
                              fmt::join(dims, ", ")));
    // A 1 × n matrix may be stored as a vector (ffn_gate_inp_shexp: llama.cpp reads {n_embd}).
    if (t->dims != dims && !(rows == 1 && dims.size() == 2 && t->dims == std::vector<int64_t>{cols}))
      throw Error(ErrorKind::BadFile, fmt::format("{}: tensor '{}' has dims [{}] but the metadata implies [{}] (ggml order: columns "
                              "first)",
                              f_.path(), name, fmt::join(t->dims, ", "), fmt::join(dims, ", ")));
    for (auto [ggml, dtype] : kTypes)
      if (t->type == ggml) {
        used_.insert(name);
        return Matrix{dtype, t->data, rows, cols};
      }
    std::vector<std::string_view> supported;
    for (auto [ggml, dtype] : kTypes) supported.push_back(ggml_type_info(ggml).name);
    throw Error(ErrorKind::Unsupported, fmt::format("{}: tensor '{}' has type {}, which kvinfer does not support (supported: {})", f_.path(),
                            name, ggml_type_info(t->type).name, fmt::join(supported, ", ")));
  }

  const GgufFile& f_;
  mutable std::set<std::string, std::less<>> used_;
};

// Llama 3 rope scaling as llama.cpp stores it: one divisor per frequency (ggml_rope_ext's
// freq_factors), so inv_freq[i] /= rope_freqs[i].
void apply_rope_freqs(const GgufFile& f, const GgufSource& source, const HostStorage& storage,
                      std::vector<float>& inv_freq) {
  if (!f.find_tensor(kRopeFreqs)) return;
  const std::vector<float> factors = storage.read_f32(source.vector(kRopeFreqs, static_cast<int64_t>(inv_freq.size())));
  for (size_t i = 0; i < factors.size(); ++i) {
    if (!(factors[i] > 0) || !std::isfinite(factors[i]))
      throw Error(ErrorKind::BadFile, fmt::format("{}: tensor '{}' holds {} at [{}]; frequency factors must be positive and finite",
                              f.path(), kRopeFreqs, factors[i], i));
    inv_freq[i] /= factors[i];
  }
}

// LongRoPE's factor lists from their tensors (rope_dim / 2 values each), positive and finite.
std::vector<float> longrope_factors(const GgufFile& f, const GgufSource& source, const HostStorage& storage,
                                    const char* name, int64_t n) {
  std::vector<float> factors = storage.read_f32(source.vector(name, n));
  for (size_t i = 0; i < factors.size(); ++i)
    if (!(factors[i] > 0) || !std::isfinite(factors[i]))
      throw Error(ErrorKind::BadFile, fmt::format("{}: tensor '{}' holds {} at [{}]; rope factors must be positive and "
                                                  "finite",
                                                  f.path(), name, factors[i], i));
  return factors;
}

// As llama.cpp: a tensor the model does not use means a feature kvinfer would silently drop, or,
// under a layer beyond the block count, metadata and tensors that disagree.
void check_all_used(const GgufFile& f, const GgufSource& source, const ModelConfig& c) {
  const std::string arch = f.string("general.architecture");
  for (const GgufTensorInfo& t : f.tensors()) {
    if (source.used(t.name)) continue;
    // kGgufGpt2Names.layer is the same "blk.{}.".
    if (const auto l = layer_tensor(t.name, kGgufNames.layer); l && l->layer >= c.num_layers)
      throw Error(ErrorKind::BadFile, fmt::format("{}: tensor '{}' is for layer {}, but key '{}.block_count' is {}", f.path(), escape_name(t.name),
                              l->layer, escape_name(arch), c.num_layers));
    throw Error(ErrorKind::Unsupported, fmt::format("{}: tensor '{}' is not part of a {} model as kvinfer reads it", f.path(),
                                                    escape_name(t.name), escape_name(arch)));
  }
}

}  // namespace

std::shared_ptr<const Model> load_gguf(const std::filesystem::path& path, const LoadOptions& options) {
  const Device device = resolve_device(path, options.device, options.device_index);
  const cuda_backend::DeviceScope on(device == Device::CUDA ? options.device_index : -1);  // budget, upload
  const MemoryBudget budget = load_budget(device, options);  // before anything is allocated
  auto file = std::make_shared<const GgufFile>(path);
  ModelConfig c = gguf_config(*file);
  auto storage = std::make_shared<HostStorage>();
  storage->checkpoint = file;
  storage->mapped = {&file->file()};
  const GgufSource source(*file);
  std::unique_ptr<ModelWeights> w;
  if (c.is_gpt2()) {
    w = bind_gpt2_weights(c, kGgufGpt2Names, source, *storage, path);
  } else {
    if (c.rope_scaling.type == RopeScaling::Type::LongRope) {
      c.rope_scaling.short_factor = longrope_factors(*file, source, *storage, kRopeFactorsShort, c.rope_dim() / 2);
      c.rope_scaling.long_factor = longrope_factors(*file, source, *storage, kRopeFactorsLong, c.rope_dim() / 2);
    }
    w = bind_weights(c, c.arch == Architecture::Phi3 ? phi3_names() : kGgufNames, source, *storage, path);
    std::vector<float> inv_freq = rope_inv_freq(c, options.context_length);
    apply_rope_freqs(*file, source, *storage, inv_freq);
    w->rope_inv_freq = storage->add(inv_freq);
    if (c.rope_local_theta > 0) w->rope_local_inv_freq = storage->add(rope_local_inv_freq(c, options.context_length));
  }
  w->storage = storage;
  check_all_used(*file, source, c);
  std::shared_ptr<const Tokenizer> tokenizer;
  if (gguf_has_tokenizer(*file)) tokenizer = std::make_shared<const Tokenizer>(gguf_tokenizer(*file));
  return finish_load(c, std::move(w), device, std::move(tokenizer), path, options, budget, *storage);
}

}  // namespace kvinfer
