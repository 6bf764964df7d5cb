#include "models/load_common.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <cstring>
#include <new>
#include <string_view>
#include <type_traits>

#include <fmt/format.h>
#include <fmt/std.h>

#include "core/hash.h"
#include "core/log.h"
#include "core/rope.h"
#include "cpu/cpu_ops.h"
#include "cuda/cuda_backend.h"
#include "kvinfer/error.h"
#include "kvinfer/kv_plan.h"
#include "kvinfer/tokenizer.h"
#include "models/model_internal.h"

namespace kvinfer {

namespace {
#if defined(KVINFER_WITH_CUDA)
constexpr bool kWithCuda = true;
#else
constexpr bool kWithCuda = false;
#endif
}  // namespace

#if defined(KVINFER_CUDA_SIM)
constexpr bool kSimulated = true;  // Device::Auto never picks the simulated device: it is opted into
#else
constexpr bool kSimulated = false;
#endif

Device resolve_device(const std::filesystem::path& path, Device requested, int index) {
  if (index < 0)
    throw Error(ErrorKind::InvalidArgument,
                fmt::format("{}: LoadOptions::device_index is {}; CUDA devices are numbered from 0", path, index));
  if (requested == Device::CPU) return requested;
  const int count = cuda_device_count();
  if (requested == Device::Auto) return !kSimulated && index < count ? Device::CUDA : Device::CPU;
  if (count == 0)
    throw Error(ErrorKind::Device, fmt::format("{}: Device::CUDA requested but no CUDA device is usable here{}", path,
                            kSimulated   ? " (this is the CUDA simulation build: set KVINFER_SIM_DEVICE=sm_90 or sm_86)"
                            : kWithCuda ? ""
                                        : " (this build has no CUDA backend)"));
  if (index >= count)
    throw Error(ErrorKind::Device, fmt::format("{}: CUDA device {} requested but this machine has {} (0 .. {})", path,
                                               index, count, count - 1));
  return requested;
}

Vector HostStorage::add(const std::vector<float>& values) {
  vectors.push_back(std::make_unique<float[]>(values.size()));
  std::copy(values.begin(), values.end(), vectors.back().get());
  return Vector{vectors.back().get(), static_cast<int64_t>(values.size())};
}

std::byte* HostStorage::allocate(size_t bytes) {
  matrices.emplace_back(bytes);  // uninitialised
  return matrices.back().data();
}

std::optional<LayerTensor> layer_tensor(std::string_view name, std::string_view layer) {
  const size_t hole = layer.find("{}");
  const std::string_view before = layer.substr(0, hole), after = layer.substr(hole + 2);
  if (!name.starts_with(before)) return std::nullopt;
  name.remove_prefix(before.size());
  const size_t digits = std::min(name.find_first_not_of("0123456789"), name.size());
  const std::string_view rest = name.substr(digits);
  if (digits == 0 || !rest.starts_with(after)) return std::nullopt;
  int64_t index = 0;
  if (std::from_chars(name.data(), name.data() + digits, index).ec != std::errc())
    index = std::numeric_limits<int64_t>::max();  // too many digits: beyond any layer count
  return LayerTensor{index, rest.substr(after.size())};
}

const MappedFile* HostStorage::file_of(const std::byte* p, uint64_t bytes) const {
  for (const MappedFile* f : mapped)
    if (f->contains(p, bytes)) return f;
  return nullptr;
}

void HostStorage::read(const std::byte* p, uint64_t bytes, std::byte* out) const {
  if (const MappedFile* f = file_of(p, bytes))
    f->read(p, bytes, out);
  else
    std::memcpy(out, p, bytes);
}

std::vector<float> HostStorage::read_f32(const Matrix& stored) const {
  std::vector<std::byte> bytes(stored.bytes());  // (cols) values as stored
  read(stored.data, stored.bytes(), bytes.data());
  std::vector<float> out(static_cast<size_t>(stored.cols));
  cpu::to_f32(stored.dtype, bytes.data(), out.data(), stored.cols);
  return out;
}

void HostStorage::release_checkpoint(const ModelWeights& w) {
  bool in_files = false;
  for_each_tensor(w, [&](const auto& t) {
    in_files |= t.data && file_of(reinterpret_cast<const std::byte*>(t.data), t.bytes());
  });
  if (in_files) return;  // a view left in a file (a loader's bug) keeps it mapped rather than dangling
  mapped.clear();
  checkpoint.reset();
}

namespace {

// Row block [first, first + rows) of m: a view, no copy (quantised rows are whole blocks).
Matrix row_block(const Matrix& m, int64_t first, int64_t rows) {
  Matrix b = m;
  b.data = m.data + static_cast<uint64_t>(first) * m.row_bytes();
  b.rows = rows;
  return b;
}

// A mixture-of-experts layer's router and experts (and Qwen2-MoE's shared expert in L.gate/up/down),
// under layer prefix p. Every expert is bound as its own (rows, cols) view.
void bind_moe(const ModelConfig& c, const MoeNames& n, const std::string& p, const TensorSource& source,
              LayerWeights& L) {
  const int64_t hidden = c.hidden_size, inter = c.moe_intermediate_size, experts = c.num_experts;
  MoeWeights& m = L.moe;
  m.router.weight = source.matrix(p + n.router, experts, hidden);
  switch (n.layout) {
    case MoeNames::Layout::PerExpert:
      for (int64_t e = 0; e < experts; ++e) {
        const auto name = [&](const std::string& pattern) { return p + fmt::format(fmt::runtime(pattern), e); };
        m.gate.push_back({source.matrix(name(n.gate), inter, hidden), {}});
        m.up.push_back({source.matrix(name(n.up), inter, hidden), {}});
        m.down.push_back({source.matrix(name(n.down), hidden, inter), {}});
      }
      break;
    case MoeNames::Layout::Stacked: {
      const Matrix gate = source.stacked(p + n.gate, experts, inter, hidden);
      const Matrix up = source.stacked(p + n.up, experts, inter, hidden);
      const Matrix down = source.stacked(p + n.down, experts, hidden, inter);
      for (int64_t e = 0; e < experts; ++e) {
        m.gate.push_back({row_block(gate, e * inter, inter), {}});
        m.up.push_back({row_block(up, e * inter, inter), {}});
        m.down.push_back({row_block(down, e * hidden, hidden), {}});
      }
      break;
    }
    case MoeNames::Layout::FusedGateUp: {
      const Matrix gate_up = source.stacked(p + n.gate, experts, 2 * inter, hidden);
      const Matrix down = source.stacked(p + n.down, experts, hidden, inter);
      for (int64_t e = 0; e < experts; ++e) {
        m.gate.push_back({row_block(gate_up, 2 * e * inter, inter), {}});
        m.up.push_back({row_block(gate_up, (2 * e + 1) * inter, inter), {}});
        m.down.push_back({row_block(down, e * hidden, hidden), {}});
      }
      break;
    }
  }
  if (c.shared_expert_intermediate_size > 0) {
    const int64_t shared = c.shared_expert_intermediate_size;
    L.gate.weight = source.matrix(p + n.shared_gate, shared, hidden);
    L.up.weight = source.matrix(p + n.shared_up, shared, hidden);
    L.down.weight = source.matrix(p + n.shared_down, hidden, shared);
    L.shared_expert_gate.weight = source.matrix(p + n.shared_expert_gate, 1, hidden);
  }
}

}  // namespace

std::unique_ptr<ModelWeights> bind_weights(const ModelConfig& c, const TensorNames& names, const TensorSource& source,
                                           HostStorage& storage, const std::filesystem::path& path) {
  // The config is input like any other: its dimensions are positive, but their product may not fit.
  int64_t q_dim = 0;
  if (__builtin_mul_overflow(c.num_heads, c.head_dim, &q_dim))
    throw Error(ErrorKind::BadFile, fmt::format("{}: attention heads ({}) × head_dim ({}) overflows 64 bits", path, c.num_heads,
                            c.head_dim));
  const int64_t hidden = c.hidden_size, kv_dim = c.num_kv_heads * c.head_dim;  // kv heads <= heads
  auto vector = [&](const std::string& name, int64_t n) {
    return storage.add(storage.read_f32(source.vector(name, n)));
  };
  auto norm = [&](const std::string& name, int64_t n) {  // HF Gemma: (1 + w), added once here in f32 as HF does
    std::vector<float> values = storage.read_f32(source.vector(name, n));
    if (names.norm_plus_one)
      for (float& x : values) x = 1.0f + x;
    return storage.add(values);
  };
  auto linear = [&](const std::string& prefix, int64_t out, int64_t in, bool bias) {
    Linear l{source.matrix(prefix + ".weight", out, in), {}};
    if (bias) l.bias = vector(prefix + ".bias", out);
    return l;
  };

  auto w = std::make_unique<ModelWeights>();
  w->embed = source.matrix(names.embed, c.vocab_size, hidden);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = fmt::format(fmt::runtime(names.layer), l);
    LayerWeights L;
    L.attn_norm = norm(p + names.attn_norm, hidden);
    if (names.qkv.empty()) {
      L.q = linear(p + names.q, q_dim, hidden, c.attention_bias);
      L.k = linear(p + names.k, kv_dim, hidden, c.attention_bias);
      L.v = linear(p + names.v, kv_dim, hidden, c.attention_bias);
    } else {  // Phi-3's qkv_proj: rows [q | k | v] (q_dim + 2 kv_dim, hidden), bound in place
      const Matrix qkv = source.matrix(p + names.qkv + ".weight", q_dim + 2 * kv_dim, hidden);
      L.q.weight = row_block(qkv, 0, q_dim);
      L.k.weight = row_block(qkv, q_dim, kv_dim);
      L.v.weight = row_block(qkv, q_dim + kv_dim, kv_dim);
    }
    L.o = linear(p + names.o, hidden, q_dim, c.attention_out_bias);
    if (c.qk_norm) {
      L.q_norm = norm(p + names.q_norm, c.head_dim);
      L.k_norm = norm(p + names.k_norm, c.head_dim);
    }
    if (c.is_gemma()) {
      L.post_attn_norm = norm(p + names.post_attn_norm, hidden);
      L.post_ffn_norm = norm(p + names.post_ffn_norm, hidden);
    }
    L.ffn_norm = norm(p + names.ffn_norm, hidden);
    if (c.is_moe_layer(l)) {
      bind_moe(c, names.moe, p, source, L);
    } else {
      if (names.gate_up.empty()) {
        L.gate = linear(p + names.gate, c.intermediate_size, hidden, c.mlp_bias);
        L.up = linear(p + names.up, c.intermediate_size, hidden, c.mlp_bias);
      } else {  // Phi-3's gate_up_proj: rows [gate | up] (2 inter, hidden), bound in place
        const Matrix gate_up = source.matrix(p + names.gate_up + ".weight", 2 * c.intermediate_size, hidden);
        L.gate.weight = row_block(gate_up, 0, c.intermediate_size);
        L.up.weight = row_block(gate_up, c.intermediate_size, c.intermediate_size);
      }
      L.down = linear(p + names.down, hidden, c.intermediate_size, c.mlp_bias);
    }
    w->layers.push_back(std::move(L));
  }
  w->final_norm = norm(names.final_norm, hidden);
  w->lm_head.weight = c.tie_word_embeddings ? w->embed : source.matrix(names.lm_head, c.vocab_size, hidden);
  return w;
}

namespace {
// HF's _compute_dynamic_ntk_parameters for a sequence of `context` positions: the base grows as
// (factor · L / max_positions - (factor - 1))^(d / (d - 2)) once L = context passes
// max_position_embeddings. Beyond it HF computes the base from a tensor seq_len, so in f32, each
// step rounded as here; up to it the base is rope_theta exactly (HF's double formula gives 1^x).
float dynamic_ntk_theta(const ModelConfig& c, int64_t context) {
  if (context <= c.max_position_embeddings) return static_cast<float>(c.rope_theta);
  const double d = static_cast<double>(c.rope_dim());
  const float factor = static_cast<float>(c.rope_scaling.factor);
  float g = factor * static_cast<float>(context);
  g = g / static_cast<float>(c.max_position_embeddings);
  g = g - static_cast<float>(c.rope_scaling.factor - 1.0);
  g = powf(g, static_cast<float>(d / (d - 2.0)));
  return static_cast<float>(c.rope_theta) * g;
}

// YaRN's correction range over the rotated dimensions, as HF's find_correction_range (double):
// the dimensions turning beta_fast and beta_slow times over the original context bound the ramp.
struct YarnRange {
  float low = 0, range = 1;
};
YarnRange yarn_range(const ModelConfig& c) {
  const RopeScaling& s = c.rope_scaling;
  const double dim = static_cast<double>(c.rope_dim()), base = c.rope_theta;
  const double orig = static_cast<double>(s.original_max_position_embeddings);
  const auto correction_dim = [&](double rotations) {
    return dim * std::log(orig / (rotations * 2.0 * M_PI)) / (2.0 * std::log(base));
  };
  double low = correction_dim(s.beta_fast), high = correction_dim(s.beta_slow);
  if (s.truncate) low = std::floor(low), high = std::ceil(high);
  low = std::max(low, 0.0), high = std::min(high, dim - 1.0);
  if (low == high) high += 0.001;  // HF: "prevent singularity"
  return {static_cast<float>(low), static_cast<float>(high - low)};
}
}  // namespace

std::vector<float> rope_inv_freq(const ModelConfig& c, int64_t context_length) {
  const int dim = static_cast<int>(c.rope_dim());
  std::vector<float> f(static_cast<size_t>(dim / 2));
  const RopeScaling& s = c.rope_scaling;
  const int64_t context = context_length > 0 ? context_length : c.max_position_embeddings;
  const float theta = s.type == RopeScaling::Type::Dynamic ? dynamic_ntk_theta(c, context) : static_cast<float>(c.rope_theta);
  const YarnRange yarn = s.type == RopeScaling::Type::Yarn ? yarn_range(c) : YarnRange{};
  const std::vector<float>& longrope = context > s.original_max_position_embeddings ? s.long_factor : s.short_factor;
  for (int i = 0; i < static_cast<int>(f.size()); ++i) {
    float inv = core::rope_default_inv_freq(i, dim, theta);
    if (s.type == RopeScaling::Type::Linear) inv /= static_cast<float>(s.factor);
    if (s.type == RopeScaling::Type::Llama3)
      inv = core::llama3_inv_freq(inv, static_cast<float>(s.factor), static_cast<float>(s.low_freq_factor),
                                  static_cast<float>(s.high_freq_factor),
                                  static_cast<float>(s.original_max_position_embeddings));
    if (s.type == RopeScaling::Type::Yarn)
      inv = core::yarn_inv_freq(core::rope_pos_freq(i, dim, theta), static_cast<float>(s.factor),
                                core::yarn_ramp(i, yarn.low, yarn.range));
    if (s.type == RopeScaling::Type::LongRope)
      inv = 1.0f / (longrope[static_cast<size_t>(i)] * core::rope_pos_freq(i, dim, theta));
    f[static_cast<size_t>(i)] = inv;
  }
  return f;
}

std::vector<float> rope_local_inv_freq(const ModelConfig& c, int64_t context_length) {
  if (c.rope_local_theta <= 0) return {};
  ModelConfig local = c;
  local.rope_theta = c.rope_local_theta;
  local.rope_scaling = {};
  return rope_inv_freq(local, context_length);
}

MemoryBudget load_budget(Device device, const LoadOptions& options) {
  return memory_budget(device, options.memory_limit);
}

namespace {
// LoadOptions::context_length checked: 0 is the model's; longer only where positions are rotary.
int64_t context_length(const ModelConfig& c, const LoadOptions& options, const std::filesystem::path& path) {
  if (options.context_length < 0)
    throw Error(ErrorKind::InvalidArgument, fmt::format("{}: LoadOptions::context_length is {}; it must be 0 (the model's) or positive", path,
                            options.context_length));
  if (options.context_length == 0) return c.max_position_embeddings;
  if (options.context_length > c.max_position_embeddings && c.is_gpt2())
    throw Error(ErrorKind::InvalidArgument, fmt::format("{}: a context of {} tokens is beyond GPT-2's {} learned positions (n_positions); "
                            "they cannot be extended",
                            path, format_count(options.context_length), format_count(c.max_position_embeddings)));
  return options.context_length;
}

// $KVINFER_CHECK_FINITE=1 turns LoadOptions::check_finite on.
bool check_finite_from_env() {
  const char* v = std::getenv("KVINFER_CHECK_FINITE");
  return v != nullptr && std::string_view(v) == "1";
}
}  // namespace

uint64_t model_fingerprint(const ModelConfig& c, const ModelWeights& w, const HostStorage* storage) {
  uint64_t h = kHash64Seed;
  const auto mix = [&h](const auto& value) { h = hash64(&value, sizeof value, h); };
  const auto mix_int = [&mix](int64_t v) { mix(v); };
  mix_int(static_cast<int64_t>(c.arch));
  for (int64_t v : {c.vocab_size, c.hidden_size, c.intermediate_size, c.num_layers, c.num_heads, c.num_kv_heads,
                    c.head_dim, c.max_position_embeddings, c.sliding_window.value_or(-1)})
    mix_int(v);
  for (double v : {c.norm_eps, c.rope_theta, c.rope_scaling.factor, c.rope_scaling.low_freq_factor,
                   c.rope_scaling.high_freq_factor})
    mix(v);
  mix_int(static_cast<int64_t>(c.rope_scaling.type));
  mix_int(c.rope_scaling.original_max_position_embeddings);
  mix_int(static_cast<int64_t>(c.rope_layout));
  // YaRN / LongRoPE's attention factor and partial rotary change the result too (the frequencies
  // themselves are hashed with the weights).
  mix(c.rope_scaling.attention_factor);
  mix_int(c.rope_dim());
  for (bool b : {c.tie_word_embeddings, c.attention_bias, c.attention_out_bias, c.mlp_bias, c.norm_topk_prob})
    mix_int(b ? 1 : 0);
  for (int64_t v : {c.num_experts, c.num_experts_per_tok, c.moe_intermediate_size, c.shared_expert_intermediate_size})
    mix_int(v);
  for (int64_t l : c.dense_layers) mix_int(l);
  for (double v : {c.query_pre_attn_scalar, c.attn_logit_softcapping, c.final_logit_softcapping, c.rope_local_theta})
    mix(v);
  mix_int(c.qk_norm ? 1 : 0);
  for (bool b : c.sliding_layers) mix_int(b ? 1 : 0);

  constexpr uint64_t kSample = 4096;  // bytes at each end of a matrix
  std::vector<std::byte> sample(kSample);
  int64_t role = 0;  // the tensor's place in for_each_tensor's order: its name, in effect
  for_each_tensor(w, [&](const auto& t) {
    mix_int(role++);
    if constexpr (std::is_same_v<std::decay_t<decltype(t)>, Matrix>) {
      for (int64_t v : {static_cast<int64_t>(t.dtype), t.rows, t.cols}) mix_int(v);
      if (!storage || t.data == nullptr || t.bytes() == 0) return;
      const uint64_t n = std::min(kSample, t.bytes());
      storage->read(t.data, n, sample.data());
      h = hash64(sample.data(), n, h);
      storage->read(t.data + (t.bytes() - n), n, sample.data());
      h = hash64(sample.data(), n, h);
    } else {
      mix_int(t.n);
      if (storage && t.data != nullptr) h = hash64(t.data, t.bytes(), h);  // f32 on the host until uploaded
    }
  });
  return h == 0 ? 1 : h;  // 0 means "not computed"
}

std::shared_ptr<const Model> finish_load(const ModelConfig& c, std::unique_ptr<ModelWeights> w, Device device,
                                         std::shared_ptr<const Tokenizer> tokenizer,
                                         const std::filesystem::path& path, const LoadOptions& options,
                                         const MemoryBudget& budget, HostStorage& storage) {
  // Nothing of the weights has been read, copied or filled yet: only mapped (and, for GPT-2's
  // transposes, allocated without touching a page).
  const uint64_t weights = model_weight_bytes(*w, c.tie_word_embeddings);
  uint64_t kv = 0;
  std::string kv_text;
  const int64_t context = context_length(c, options, path);
  if (options.kv_tokens < 0)
    throw Error(ErrorKind::InvalidArgument, fmt::format("{}: LoadOptions::kv_tokens is {}; it must be 0 (no plan) or positive", path,
                            options.kv_tokens));
  if (options.kv_tokens > context)
    throw Error(ErrorKind::ContextFull, fmt::format("{}: a KV cache of {} tokens (LoadOptions::kv_tokens) is beyond the model's context "
                            "length of {} tokens",
                            path, format_count(options.kv_tokens), format_count(context)));
  if (options.kv_tokens > 0) {
    const DType kv_dtype = options.kv_dtype.value_or(default_kv_dtype(w->layers.empty() ? w->embed.dtype
                                                                                        : w->layers[0].q.weight.dtype));
    kv = plan_kv_bytes(c, options.kv_tokens, kv_dtype);
    kv_text = fmt::format(" + {} for a KV cache of {} tokens ({})", bytes_text(kv), options.kv_tokens,
                          dtype_name(kv_dtype));
  }
  // A CUDA session also needs cuBLAS's workspace and the f16 tile its quantised matrices are
  // dequantised into for prefill GEMMs: counted once, for the first session.
  const uint64_t scratch = device == Device::CUDA ? cuda_backend::session_scratch_bytes(*w) : 0;
  const std::string scratch_text =
      scratch > 0 ? fmt::format(" + {} of CUDA session scratch (cuBLAS workspace, f16 tile of quantised "
                                "weights)",
                                bytes_text(scratch))
                  : "";
  uint64_t needed = 0;
  if (__builtin_add_overflow(weights, kv, &needed) || __builtin_add_overflow(needed, scratch, &needed))
    needed = MemoryBudget::kUnknown;
  if (budget.bytes != MemoryBudget::kUnknown && needed > budget.bytes)
    throw Error(ErrorKind::OutOfMemory, fmt::format("{}: not enough {} memory for the model: it needs {} ({} of weights{}{}) but only {} is "
                            "available ({})",
                            path, device_name(device), bytes_text(needed), bytes_text(weights), kv_text, scratch_text,
                            bytes_text(budget.bytes), budget.source));

  // Asked before each tensor is read or uploaded: throwing from the progress call unwinds the
  // storage made so far.
  const auto check_cancel = [&](uint64_t done, uint64_t total) {
    if (options.cancel && options.cancel())
      throw Error(ErrorKind::Cancelled, fmt::format("{}: load cancelled after {} of {} of weights", path,
                                                    format_bytes(done), format_bytes(total)));
  };
  const LoadProgress progress = [&](uint64_t done, uint64_t total) {
    check_cancel(done, total);
    if (options.on_progress) options.on_progress(done, total);
  };
  check_cancel(0, weights);
  for (const auto& fill : storage.fills) fill();
  storage.fills.clear();
  // Of the stored bytes, before they are packed (CPU) or uploaded (CUDA): the same on every device.
  const uint64_t fingerprint = model_fingerprint(c, *w, &storage);
  if (device == Device::CUDA) {
    w = cuda_backend::upload(*w, progress);  // the mapped checkpoint is released
  } else {
    try {
      place_weights(*w, storage, !options.weights_in_place, progress);
    } catch (const std::bad_alloc&) {
      throw Error(ErrorKind::OutOfMemory, fmt::format("{}: cannot allocate the CPU copy of the weights ({}); "
                              "LoadOptions::weights_in_place (--weights-in-place) uses them from the file mapping",
                              path, bytes_text(weights)));
    }
  }
  // A file rewritten while it was read gave bytes of two files: refused.
  for (const MappedFile* f : storage.mapped) f->check_unchanged();
  // Copied, every view into the files is gone: after load nothing reads them, whatever is done to them.
  if (device == Device::CPU && !options.weights_in_place) storage.release_checkpoint(*w);
  log::message(LogLevel::Info, "{}: {} of {} weights on {}, context {} tokens, {} CPU threads", path,
               format_bytes(weights), dtype_name(w->layers.empty() ? w->embed.dtype : w->layers[0].q.weight.dtype),
               device_name(device), format_count(context), options.threads > 0 ? options.threads : default_cpu_threads());
  return make_model({.config = c,
                     .weights = std::move(w),
                     .device = device,
                     .device_index = options.device_index,
                     .tokenizer = std::move(tokenizer),
                     .source = path,
                     .activations = options.activations,
                     .memory = std::make_shared<MemoryAccount>(budget, weights),
                     .check_finite = options.check_finite || check_finite_from_env(),
                     .context_length = context,
                     .threads = options.threads,
                     .fingerprint = fingerprint});
}

}  // namespace kvinfer
