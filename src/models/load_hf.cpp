// Model::load for HF directories: maps the checkpoint, checks every tensor against the config
// and binds the weights in their stored dtype.
#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fmt/std.h>

#include "core/rope.h"
#include "cpu/cpu_ops.h"
#include "cuda/cuda_backend.h"
#include "formats/hf_checkpoint.h"
#include "kvinfer/error.h"
#include "kvinfer/model.h"
#include "kvinfer/tokenizer.h"
#include "models/weights.h"

namespace kvinfer {

namespace {

#if defined(KVINFER_WITH_CUDA)
constexpr bool kWithCuda = true;
#else
constexpr bool kWithCuda = false;
#endif

// What a loaded model keeps alive: the mapped checkpoint and the f32 vectors made from it.
struct HostStorage {
  std::shared_ptr<const HfCheckpoint> checkpoint;
  std::vector<std::unique_ptr<float[]>> vectors;
  Vector add(std::vector<float> values) {
    vectors.push_back(std::make_unique<float[]>(values.size()));
    std::copy(values.begin(), values.end(), vectors.back().get());
    return Vector{vectors.back().get(), static_cast<int64_t>(values.size())};
  }
};

class Binder {
 public:
  Binder(const HfCheckpoint& ckpt, HostStorage& storage) : ckpt_(ckpt), storage_(storage) {}

  const TensorView& shaped(const std::string& name, std::vector<int64_t> shape) const {
    const TensorView& t = ckpt_.get(name);
    if (t.shape != shape)
      throw Error(fmt::format("{}: tensor '{}' has shape [{}] but config.json implies [{}]", *t.file, name,
                              fmt::join(t.shape, ", "), fmt::join(shape, ", ")));
    return t;
  }
  Matrix matrix(const std::string& name, int64_t rows, int64_t cols) const {
    const TensorView& t = shaped(name, {rows, cols});
    return Matrix{t.float_dtype(), t.data, rows, cols};
  }
  Vector vector(const std::string& name, int64_t n) const {
    const TensorView& t = shaped(name, {n});
    std::vector<float> out(static_cast<size_t>(n));
    cpu::to_f32(t.float_dtype(), t.data, out.data(), n);
    return storage_.add(std::move(out));
  }
  Linear linear(const std::string& prefix, int64_t out, int64_t in, bool bias) const {
    Linear l{matrix(prefix + ".weight", out, in), {}};
    if (bias) l.bias = vector(prefix + ".bias", out);
    return l;
  }

 private:
  const HfCheckpoint& ckpt_;
  HostStorage& storage_;
};

std::vector<float> rope_inv_freq(const ModelConfig& c) {
  std::vector<float> f(static_cast<size_t>(c.head_dim / 2));
  const RopeScaling& s = c.rope_scaling;
  for (int i = 0; i < static_cast<int>(f.size()); ++i) {
    float inv = core::rope_default_inv_freq(i, static_cast<int>(c.head_dim), static_cast<float>(c.rope_theta));
    if (s.type == RopeScaling::Type::Linear) inv /= static_cast<float>(s.factor);
    if (s.type == RopeScaling::Type::Llama3)
      inv = core::llama3_inv_freq(inv, static_cast<float>(s.factor), static_cast<float>(s.low_freq_factor),
                                  static_cast<float>(s.high_freq_factor),
                                  static_cast<float>(s.original_max_position_embeddings));
    f[static_cast<size_t>(i)] = inv;
  }
  return f;
}

}  // namespace

std::shared_ptr<const Model> Model::load(const std::filesystem::path& path, const LoadOptions& options) {
  Device device = options.device;
  if (device == Device::Auto) device = cuda_device_count() > 0 ? Device::CUDA : Device::CPU;
  if (device == Device::CUDA && cuda_device_count() == 0)
    throw Error(fmt::format("{}: Device::CUDA requested but no CUDA device is usable here{}", path,
                            kWithCuda ? "" : " (this build has no CUDA backend)"));
  auto ckpt = std::make_shared<const HfCheckpoint>(path);
  const ModelConfig& c = ckpt->config();
  // config.json is input like any other: its dimensions are positive, but their product may not fit.
  int64_t q_dim = 0;
  if (__builtin_mul_overflow(c.num_heads, c.head_dim, &q_dim))
    throw Error(fmt::format("{}: num_attention_heads ({}) × head_dim ({}) overflows 64 bits", path / "config.json",
                            c.num_heads, c.head_dim));
  const int64_t hidden = c.hidden_size, kv_dim = c.num_kv_heads * c.head_dim;  // kv heads <= heads
  auto storage = std::make_shared<HostStorage>();
  storage->checkpoint = ckpt;
  Binder bind(*ckpt, *storage);

  auto w = std::make_unique<ModelWeights>();
  w->storage = storage;
  w->embed = bind.matrix("model.embed_tokens.weight", c.vocab_size, hidden);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = fmt::format("model.layers.{}.", l);
    LayerWeights L;
    L.attn_norm = bind.vector(p + "input_layernorm.weight", hidden);
    L.q = bind.linear(p + "self_attn.q_proj", q_dim, hidden, c.attention_bias);
    L.k = bind.linear(p + "self_attn.k_proj", kv_dim, hidden, c.attention_bias);
    L.v = bind.linear(p + "self_attn.v_proj", kv_dim, hidden, c.attention_bias);
    L.o = bind.linear(p + "self_attn.o_proj", hidden, q_dim, c.attention_out_bias);
    L.ffn_norm = bind.vector(p + "post_attention_layernorm.weight", hidden);
    L.gate = bind.linear(p + "mlp.gate_proj", c.intermediate_size, hidden, c.mlp_bias);
    L.up = bind.linear(p + "mlp.up_proj", c.intermediate_size, hidden, c.mlp_bias);
    L.down = bind.linear(p + "mlp.down_proj", hidden, c.intermediate_size, c.mlp_bias);
    w->layers.push_back(std::move(L));
  }
  w->final_norm = bind.vector("model.norm.weight", hidden);
  w->lm_head.weight = c.tie_word_embeddings ? w->embed : bind.matrix("lm_head.weight", c.vocab_size, hidden);
  w->rope_inv_freq = storage->add(rope_inv_freq(c));
  if (device == Device::CUDA)
    w = cuda_backend::upload(*w, options.on_progress);  // the mapped checkpoint is released
  else
    read_weights(*w, options.on_progress);
  std::shared_ptr<const Tokenizer> tokenizer;
  if (std::filesystem::exists(path / "tokenizer.json"))
    tokenizer = std::make_shared<const Tokenizer>(Tokenizer::from_hf(path));
  return std::make_shared<const Model>(c, std::move(w), device, std::move(tokenizer), path);
}

}  // namespace kvinfer
