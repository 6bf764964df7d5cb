// Named model shapes with random weights built in memory (kvinfer/synthetic.h).
#include "models/synthetic.h"

#include <algorithm>
#include <cmath>
#include <string_view>

#include <fmt/format.h>

#include "core/quantize.h"
#include "cpu/cpu_ops.h"
#include "cpu/threads.h"
#include "kvinfer/error.h"
#include "cuda/device_memory.h"
#include "models/load_common.h"
#include "models/weights.h"

namespace kvinfer {

namespace {

ModelConfig gpt2_shape(int64_t hidden, int64_t layers, int64_t heads) {
  ModelConfig c;
  c.arch = Architecture::GPT2;
  c.vocab_size = 50257;
  c.hidden_size = hidden;
  c.intermediate_size = 4 * hidden;
  c.num_layers = layers;
  c.num_heads = c.num_kv_heads = heads;
  c.head_dim = hidden / heads;
  c.norm_eps = 1e-5;
  c.max_position_embeddings = 1024;
  c.tie_word_embeddings = true;
  c.attention_bias = c.attention_out_bias = c.mlp_bias = true;
  c.bos_token_id = 50256;
  c.eos_token_ids = {50256};
  return c;
}

struct LlamaShape {
  int64_t vocab, hidden, inter, layers, heads, kv_heads, head_dim, max_positions;
  double theta;
  bool tied;
};

ModelConfig llama_shape(const LlamaShape& s) {
  ModelConfig c;
  c.arch = Architecture::Llama;
  c.vocab_size = s.vocab;
  c.hidden_size = s.hidden;
  c.intermediate_size = s.inter;
  c.num_layers = s.layers;
  c.num_heads = s.heads;
  c.num_kv_heads = s.kv_heads;
  c.head_dim = s.head_dim;
  c.norm_eps = 1e-5;
  c.rope_theta = s.theta;
  c.max_position_embeddings = s.max_positions;
  c.tie_word_embeddings = s.tied;
  return c;
}

std::vector<SyntheticShape> make_shapes() {
  std::vector<SyntheticShape> v;
  v.push_back({"gpt2", "GPT-2 small (124M): 12 layers, hidden 768, 12 heads, 1024 positions", gpt2_shape(768, 12, 12)});
  v.push_back({"gpt2-medium", "GPT-2 medium (355M): 24 layers, hidden 1024, 16 heads, 1024 positions",
               gpt2_shape(1024, 24, 16)});
  v.push_back({"gpt2-large", "GPT-2 large (774M): 36 layers, hidden 1280, 20 heads, 1024 positions",
               gpt2_shape(1280, 36, 20)});
  v.push_back({"gpt2-xl", "GPT-2 XL (1.5B): 48 layers, hidden 1600, 25 heads, 1024 positions",
               gpt2_shape(1600, 48, 25)});
  v.push_back({"smollm2-135m", "SmolLM2-135M: 30 layers, hidden 576, 9 heads / 3 KV heads (GQA 3), tied",
               llama_shape({49152, 576, 1536, 30, 9, 3, 64, 8192, 100000.0, true})});
  v.push_back({"tinyllama-1.1b", "TinyLlama-1.1B: 22 layers, hidden 2048, 32 heads / 4 KV heads (GQA 8)",
               llama_shape({32000, 2048, 5632, 22, 32, 4, 64, 2048, 10000.0, false})});
  // Qwen2.5-0.5B: a small model with a 32K context, for decode at long positions.
  ModelConfig q = llama_shape({151936, 896, 4864, 24, 14, 2, 64, 32768, 1000000.0, true});
  q.arch = Architecture::Qwen2;
  q.norm_eps = 1e-6;
  q.attention_bias = true;
  v.push_back({"qwen2.5-0.5b", "Qwen2.5-0.5B (494M): 24 layers, hidden 896, 14 heads / 2 KV heads (GQA 7), tied, 32768 positions", q});
  ModelConfig l1 = llama_shape({128256, 2048, 8192, 16, 32, 8, 64, 131072, 500000.0, true});
  l1.rope_scaling = {RopeScaling::Type::Llama3, 32.0, 1.0, 4.0, 8192};
  v.push_back({"llama-1b", "Llama-3.2-1B (1.2B): 16 layers, hidden 2048, 32 heads / 8 KV heads (GQA 4), tied", l1});
  ModelConfig l8 = llama_shape({128256, 4096, 14336, 32, 32, 8, 128, 8192, 500000.0, false});
  v.push_back({"llama-8b", "Llama-3-8B: 32 layers, hidden 4096, 32 heads / 8 KV heads (GQA 4)", l8});
  // A small Mixtral-style mixture of experts and the dense model of its active size: the same
  // attention, and an MLP of 2 × 2048 (the two experts a token runs) against one of 4096.
  ModelConfig moe = llama_shape({32000, 1024, 2048, 16, 16, 4, 64, 4096, 1000000.0, false});
  moe.arch = Architecture::Mixtral;
  moe.num_experts = 8;
  moe.num_experts_per_tok = 2;
  moe.moe_intermediate_size = 2048;
  v.push_back({"moe-8x2", "Mixtral-style MoE (0.91B, 0.31B active): 16 layers, hidden 1024, 8 experts of 2048, top 2", moe});
  v.push_back({"moe-8x2-dense", "moe-8x2's active size as a dense model (0.31B): 16 layers, hidden 1024, MLP 4096",
               llama_shape({32000, 1024, 4096, 16, 16, 4, 64, 4096, 1000000.0, false})});
  return v;
}

// Uniform values with standard deviation `std` around `mean`, from a counter-based generator
// (splitmix64 of seed, tensor and index): every value is fixed by its position, so the bytes
// do not depend on how the work is split across threads.
uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// A quantised matrix needs rows of whole blocks.
void check_whole_blocks(DType dt, std::string_view name, int64_t cols) {
  if (is_quantized(dt) && cols % dtype_block(dt).elements != 0)
    throw Error(ErrorKind::InvalidArgument, fmt::format("random_model: {}: {} columns, not a whole number of {}-value {} blocks", name, cols,
                            dtype_block(dt).elements, dtype_name(dt)));
}

// The most matrices a shape has: 7 a layer (q, k, v, o, gate, up, down; with experts also the
// router, the shared expert's gate and 3 an expert), the embeddings and a head.
constexpr uint64_t kMatricesPerLayer = 7, kOtherMatrices = 3;
uint64_t matrices_per_layer(const ModelConfig& c) { return kMatricesPerLayer + 2 + 3 * static_cast<uint64_t>(c.num_experts); }

class RandomWeights {
 public:
  // total_bytes: matrix_bytes of the shape, which has `layers` layers.
  RandomWeights(uint64_t seed, DType dtype, uint64_t total_bytes, int64_t layers, uint64_t per_layer,
                const LoadProgress& progress, HostStorage& storage)
      : seed_(seed), dtype_(dtype), total_(total_bytes), progress_(progress), storage_(storage) {
    const uint64_t most = kOtherMatrices + per_layer * static_cast<uint64_t>(layers);  // matrices
    if (__builtin_mul_overflow(most, kAlign, &arena_bytes_) ||
        __builtin_add_overflow(arena_bytes_, total_bytes, &arena_bytes_))
      throw Error(ErrorKind::InvalidArgument, fmt::format("random_model: {} layers of {} bytes in all overflow 64 bits", layers, total_bytes));
  }

  // A (rows, cols) matrix in the weight dtype. Quantised types take whole blocks per row
  // (random_model checks every shape first: an exception must not leave the parallel region).
  Matrix matrix(std::string_view name, int64_t rows, int64_t cols, float std) {
    check_whole_blocks(dtype_, name, cols);
    const int64_t n = rows * cols;
    std::byte* out = place(static_cast<size_t>(rows) * dtype_row_bytes(dtype_, cols));
    const uint64_t stream = splitmix64(seed_ ^ (++tensors_ * 0x632be59bd9b4e019ULL));
    // Chunks of whole blocks (rows hold whole blocks, and the block size divides kChunk), each
    // narrowed or quantised on its own: the bytes do not depend on how chunks meet threads.
    constexpr int64_t kChunk = 1 << 16;
    static_assert(kChunk % dtype_block(DType::Q8_0).elements == 0 && kChunk % dtype_block(DType::Q4_K).elements == 0);
    const bool quantised = is_quantized(dtype_);
#pragma omp parallel
    {
      std::vector<float> tmp(kChunk);  // (kChunk)
#pragma omp for schedule(static)
      for (int64_t c = 0; c < (n + kChunk - 1) / kChunk; ++c) {
        const int64_t begin = c * kChunk, count = std::min(kChunk, n - begin);
        for (int64_t i = 0; i < count; ++i) tmp[static_cast<size_t>(i)] = uniform(stream, begin + i) * std;
        std::byte* dst = out + dtype_row_bytes(dtype_, begin);
        if (quantised)
          quantize_row(dtype_, tmp.data(), dst, count);
        else
          cpu::from_f32(dtype_, tmp.data(), dst, count);
      }
    }
    report(static_cast<uint64_t>(rows) * dtype_row_bytes(dtype_, cols));
    return Matrix{dtype_, out, rows, cols};
  }

  Vector vector(int64_t n, float mean, float std) {
    const uint64_t stream = splitmix64(seed_ ^ (++tensors_ * 0x632be59bd9b4e019ULL));
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = mean + uniform(stream, i) * std;
    return storage_.add(v);
  }

 private:
  // U(-√3, √3): mean 0, standard deviation 1.
  static float uniform(uint64_t stream, int64_t i) {
    const uint64_t r = splitmix64(stream + static_cast<uint64_t>(i));
    const double u = static_cast<double>(r >> 11) * 0x1.0p-53;  // [0, 1)
    return static_cast<float>((2.0 * u - 1.0) * 1.7320508075688772);
  }
  void report(uint64_t bytes) {
    done_ += bytes;
    if (progress_) progress_(done_, total_);
  }
  // `bytes` of one buffer for all the matrices, each on a cache line. One buffer, as place_weights
  // copies a checkpoint's: a buffer a matrix left every matrix under 2 MiB, and the last part of
  // every other, on 4 KiB pages (core/large_buffer.h), 15 % of TinyLlama-1.1B's Q8_0 bytes.
  static constexpr uint64_t kAlign = 64;
  std::byte* place(uint64_t bytes) {
    if (!arena_) arena_ = storage_.allocate(arena_bytes_);
    if (used_ + bytes > arena_bytes_)  // matrix_bytes and the matrices made disagree: a bug here
      throw Error(ErrorKind::InvalidArgument, fmt::format("random_model: the matrices need more than the {} bytes planned", arena_bytes_));
    std::byte* at = arena_ + used_;
    used_ += (bytes + kAlign - 1) / kAlign * kAlign;
    return at;
  }

  uint64_t seed_;
  DType dtype_;
  uint64_t total_, arena_bytes_ = 0, used_ = 0, done_ = 0, tensors_ = 0;
  std::byte* arena_ = nullptr;  // (arena_bytes_) every matrix, uninitialised until made
  const LoadProgress& progress_;
  HostStorage& storage_;
};

// Bytes of every matrix random_model makes in dtype dt (the sum of what RandomWeights::matrix
// reports), for a shape whose sizes are positive; throws when the sum overflows 64 bits.
uint64_t matrix_bytes(const ModelConfig& c, DType dt) {
  const auto fail = [&] {
    return Error(ErrorKind::InvalidArgument, fmt::format("random_model: the weights of this shape (vocab {}, hidden {}, intermediate {}, layers "
                             "{}, heads {}, head_dim {}) overflow 64 bits of bytes",
                             c.vocab_size, c.hidden_size, c.intermediate_size, c.num_layers, c.num_heads,
                             c.head_dim));
  };
  const auto mul = [&](uint64_t a, uint64_t b) {
    uint64_t r = 0;
    if (__builtin_mul_overflow(a, b, &r)) throw fail();
    return r;
  };
  const auto add = [&](uint64_t a, uint64_t b) {
    uint64_t r = 0;
    if (__builtin_add_overflow(a, b, &r)) throw fail();
    return r;
  };
  const auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
  // A (rows, cols) matrix; cols >= 1, so a row's bytes are at most cols × 4 (f32).
  const auto m = [&](uint64_t rows, uint64_t cols) {
    mul(cols, 4);
    return mul(rows, dtype_row_bytes(dt, static_cast<int64_t>(cols)));
  };
  const uint64_t h = u(c.hidden_size), f = u(c.intermediate_size);
  const uint64_t q = mul(u(c.num_heads), u(c.head_dim)), kv = mul(u(c.num_kv_heads), u(c.head_dim));
  uint64_t layer = add(m(q, h), mul(2, m(kv, h)));
  layer = add(layer, m(h, q));
  uint64_t total = add(mul(m(u(c.vocab_size), h), c.tie_word_embeddings ? 1 : 2), mul(u(c.num_layers), layer));
  for (int64_t l = 0; l < c.num_layers; ++l) {  // the MLPs: dense, or the router and every expert
    if (!c.is_moe_layer(l)) {
      total = add(total, add(mul(c.is_gpt2() ? 1 : 2, m(f, h)), m(h, f)));
      continue;
    }
    const uint64_t e = u(c.moe_intermediate_size), shared = u(c.shared_expert_intermediate_size);
    total = add(total, add(m(u(c.num_experts), h), mul(u(c.num_experts), add(mul(2, m(e, h)), m(h, e)))));
    if (shared > 0) total = add(total, add(add(mul(2, m(shared, h)), m(h, shared)), m(1, h)));
  }
  if (c.is_gpt2()) total = add(total, m(u(c.max_position_embeddings), h));
  return total;
}

}  // namespace

const std::vector<SyntheticShape>& synthetic_shapes() {
  static const std::vector<SyntheticShape> shapes = make_shapes();
  return shapes;
}

ModelConfig synthetic_config(std::string_view name) {
  std::string known;
  for (const SyntheticShape& s : synthetic_shapes()) {
    if (s.name == name) return s.config;
    known += (known.empty() ? "" : ", ") + s.name;
  }
  throw Error(ErrorKind::InvalidArgument, fmt::format("unknown model shape '{}' (known: {})", name, known));
}

std::shared_ptr<const Model> random_model(const ModelConfig& c, const RandomModelOptions& options) {
  const DType dt = options.weight_dtype;
  if (dt != DType::F32 && dt != DType::F16 && dt != DType::BF16 && !can_quantize(dt))
    throw Error(ErrorKind::Unsupported, fmt::format(
        "random_model: weight dtype {} is not supported (f32, f16, bf16, q8_0, q4_0, q4_1, q4_k, q5_k or q6_k)",
        dtype_name(dt)));
  if (c.vocab_size <= 0 || c.hidden_size <= 0 || c.intermediate_size <= 0 || c.num_layers <= 0 ||
      c.num_heads <= 0 || c.num_kv_heads <= 0 || c.head_dim <= 0 || c.num_heads % c.num_kv_heads != 0)
    throw Error(ErrorKind::InvalidArgument, fmt::format("random_model: invalid shape (vocab {}, hidden {}, intermediate {}, layers {}, heads {}, "
                            "KV heads {}, head_dim {})",
                            c.vocab_size, c.hidden_size, c.intermediate_size, c.num_layers, c.num_heads,
                            c.num_kv_heads, c.head_dim));
  const Device device = resolve_device("random_model", options.device, options.device_index);
  const cuda_backend::DeviceScope on(device == Device::CUDA ? options.device_index : -1);  // budget, upload
  // The weights are made in host memory first (then uploaded for CUDA): checked before any is.
  const uint64_t host_bytes = matrix_bytes(c, dt);
  const MemoryBudget host = memory_budget(Device::CPU);
  if (host.bytes != MemoryBudget::kUnknown && host_bytes > host.bytes)
    throw Error(ErrorKind::OutOfMemory, fmt::format("random_model: not enough cpu memory to make the weights: they need {} but only {} is "
                            "available ({})",
                            bytes_text(host_bytes), bytes_text(host.bytes), host.source));
  const MemoryBudget budget = device == Device::CPU ? host : memory_budget(device);

  const int64_t hidden = c.hidden_size, q_dim = c.num_heads * c.head_dim, kv_dim = c.num_kv_heads * c.head_dim;
  const int64_t inter = c.intermediate_size;
  constexpr float kStd = 0.02f;  // HF's initializer_range
  // Every matrix's column count, before any memory is spent: hidden (the embeddings, q/k/v,
  // gate/up, the LM head), heads × head_dim (the attention output) and intermediate (down).
  check_whole_blocks(dt, "the embeddings and the q/k/v/gate/up projections (hidden_size)", hidden);
  check_whole_blocks(dt, "the attention output projection (num_heads * head_dim)", q_dim);
  check_whole_blocks(dt, "the MLP down projection (intermediate_size)", inter);
  if (c.num_experts > 0) check_whole_blocks(dt, "the experts' down projections (moe_intermediate_size)", c.moe_intermediate_size);

  const cpu::ThreadScope threads(options.threads > 0 ? options.threads : default_cpu_threads());
  auto storage = std::make_shared<HostStorage>();
  RandomWeights rnd(options.seed, dt, host_bytes, c.num_layers, matrices_per_layer(c), options.on_progress, *storage);
  auto linear = [&](std::string_view name, int64_t out, int64_t in, bool bias) {
    Linear l{rnd.matrix(name, out, in, kStd), {}};
    if (bias) l.bias = rnd.vector(out, 0.0f, kStd);
    return l;
  };
  const bool layer_norm = c.is_gpt2();
  auto norm = [&](Vector& weight, Vector& bias) {
    weight = rnd.vector(hidden, 1.0f, 0.1f);
    if (layer_norm) bias = rnd.vector(hidden, 0.0f, kStd);
  };

  auto w = std::make_unique<ModelWeights>();
  w->embed = rnd.matrix("token embedding", c.vocab_size, hidden, kStd);
  if (c.is_gpt2()) w->pos_embed = rnd.matrix("position embedding", c.max_position_embeddings, hidden, kStd);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    LayerWeights L;
    norm(L.attn_norm, L.attn_norm_bias);
    L.q = linear("attention q", q_dim, hidden, c.attention_bias);
    L.k = linear("attention k", kv_dim, hidden, c.attention_bias);
    L.v = linear("attention v", kv_dim, hidden, c.attention_bias);
    L.o = linear("attention output", hidden, q_dim, c.attention_out_bias);
    norm(L.ffn_norm, L.ffn_norm_bias);
    if (c.is_moe_layer(l)) {
      const int64_t e_inter = c.moe_intermediate_size, shared = c.shared_expert_intermediate_size;
      L.moe.router = linear("MoE router", c.num_experts, hidden, false);
      for (int64_t e = 0; e < c.num_experts; ++e) {
        L.moe.gate.push_back(linear("expert gate", e_inter, hidden, false));
        L.moe.up.push_back(linear("expert up", e_inter, hidden, false));
        L.moe.down.push_back(linear("expert down", hidden, e_inter, false));
      }
      if (shared > 0) {
        L.gate = linear("shared expert gate", shared, hidden, false);
        L.up = linear("shared expert up", shared, hidden, false);
        L.down = linear("shared expert down", hidden, shared, false);
        L.shared_expert_gate = linear("shared expert's gate", 1, hidden, false);
      }
      w->layers.push_back(std::move(L));
      continue;
    }
    if (!c.is_gpt2()) L.gate = linear("MLP gate", inter, hidden, c.mlp_bias);
    L.up = linear("MLP up", inter, hidden, c.mlp_bias);
    L.down = linear("MLP down", hidden, inter, c.mlp_bias);
    w->layers.push_back(std::move(L));
  }
  norm(w->final_norm, w->final_norm_bias);
  w->lm_head.weight = c.tie_word_embeddings ? w->embed : rnd.matrix("LM head", c.vocab_size, hidden, kStd);
  if (!c.is_gpt2()) w->rope_inv_freq = storage->add(rope_inv_freq(c));
  w->storage = storage;

  LoadOptions load;
  load.device = device;
  load.device_index = options.device_index;
  load.activations = options.activations;
  load.threads = options.threads;
  if (device == Device::CUDA) load.on_progress = options.on_progress;  // the upload; host bytes are made already
  return finish_load(c, std::move(w), device, nullptr, "random_model", load, budget, *storage);
}

}  // namespace kvinfer
