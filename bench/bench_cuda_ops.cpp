// kvinfer-bench-cuda-ops: Google Benchmark micro-benchmarks of every CUDA op the forward pass
// uses (the launchers of kernels/cuda_ops.h, and linear through cuda_backend::linear), at the
// shapes of a ~1B model: hidden 2048, 32 heads over 8 KV heads of head_dim 64, intermediate
// 8192, vocab 32000, contexts of 1024 and 4096 positions.
//
// Timing: cudaEvents around each call on the op's stream (UseManualTime), so the time is the
// device's, without launch or host overhead. Counters, per benchmark:
//   bytes/s  bytes read + written by one call (each input and output once; what an ideal kernel
//            moves), over its time, in 1024 units;
//   FLOP/s   arithmetic per call over its time (a transcendental counts as one; gathers, copies
//            and conversions count 0).
// Working sets: activations stay hot in L2 between calls, as they do between the ops of a
// forward pass. What a forward pass reads cold (weights, a layer's KV cache, embedding rows) is
// spread over copies that together exceed twice the L2 and taken in turn, one per call.
// Inputs are random with fixed seeds. Without a device: one line, exit 0.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>

#include "core/convert.h"
#include "cuda/cuda_backend.h"
#include "cuda_check.h"
#include "cuda_events.h"
#include "cuda_ops.h"
#include "kvinfer/dtype.h"
#include "models/weights.h"

namespace {

using namespace kvinfer;

// The model shape.
constexpr int64_t kHidden = 2048, kHeads = 32, kKvHeads = 8, kHeadDim = 64, kInter = 8192, kVocab = 32000;
constexpr int64_t kMaxCopies = 64;

cudaStream_t g_stream = nullptr;  // every launcher benchmark's stream (non-blocking)
size_t g_l2_bytes = 0;            // the device's L2 size
bool g_failed = false;            // any benchmark skipped with an error: exit 1

// ---- device memory and random data --------------------------------------------------------------

class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t bytes) : bytes_(bytes) { CUDA_CHECK(cudaMalloc(&p_, bytes)); }
  ~Buffer() {
    if (p_) cudaFree(p_);
  }
  Buffer(Buffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  Buffer& operator=(Buffer&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  template <typename T = void>
  T* as() const {
    return static_cast<T*>(p_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

std::string fmt_key(const char* kind, DType t, int64_t a, int64_t b, uint64_t seed, float lo, float hi) {
  std::string k(kind);
  for (const std::string& part : {std::string(dtype_name(t)), std::to_string(a), std::to_string(b),
                                  std::to_string(seed), std::to_string(lo), std::to_string(hi)})
    k.append("/").append(part);
  return k;
}

// splitmix64: fast, fixed-seed, the same stream on every machine.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  float uniform(float lo, float hi) {  // [lo, hi)
    return lo + (hi - lo) * static_cast<float>(next() >> 40) * 0x1p-24f;
  }

 private:
  uint64_t s_;
};

// Host data is made once per (kind, shape, seed) and kept: Google Benchmark calls a benchmark
// function several times (to size its iteration count), and filling a 256 MB table takes ~0.5 s.
template <typename Make>
const std::vector<std::byte>& memo(const std::string& key, Make&& make) {
  static std::map<std::string, std::vector<std::byte>> cache;
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, make()).first;
  return it->second;
}

std::vector<std::byte> make_random_host(DType t, int64_t count, uint64_t seed, float lo, float hi) {
  Rng rng(seed);
  std::vector<std::byte> out(static_cast<size_t>(count) * dtype_size(t));
  for (int64_t i = 0; i < count; ++i) {
    const float v = rng.uniform(lo, hi);
    if (t == DType::F32) {
      std::memcpy(out.data() + i * 4, &v, 4);
    } else {
      const uint16_t h = t == DType::F16 ? core::f32_to_f16(v) : core::f32_to_bf16(v);
      std::memcpy(out.data() + i * 2, &h, 2);
    }
  }
  return out;
}

// A (rows, cols) matrix of a ggml type (Q8_0 or Q4_K here): random quants and scale bytes, with
// every f16 scale (Q8_0's d; Q4_K's d, dmin) set to a small finite value.
std::vector<std::byte> make_random_quantized(DType t, int64_t rows, int64_t cols, uint64_t seed) {
  if (t != DType::Q8_0 && t != DType::Q4_K) throw Error(ErrorKind::InvalidArgument, "bench: random_quantized supports q8_0 and q4_k");
  Rng rng(seed);
  std::vector<std::byte> out(static_cast<size_t>(rows) * dtype_row_bytes(t, cols));
  for (auto& b : out) b = static_cast<std::byte>(rng.next() & 0xFF);
  const size_t block = static_cast<size_t>(dtype_block(t).bytes);
  const int scales = t == DType::Q8_0 ? 1 : 2;  // f16 fields at the start of the block
  for (size_t off = 0; off < out.size(); off += block)
    for (int s = 0; s < scales; ++s) {
      const uint16_t h = core::f32_to_f16(rng.uniform(0.001f, 0.01f));
      std::memcpy(out.data() + off + 2 * static_cast<size_t>(s), &h, 2);
    }
  return out;
}

// count values uniform in [lo, hi), narrowed to t (f32, f16 or bf16).
const std::vector<std::byte>& random_host(DType t, int64_t count, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  const std::string key = fmt_key("plain", t, count, 1, seed, lo, hi);
  return memo(key, [&] { return make_random_host(t, count, seed, lo, hi); });
}
const std::vector<std::byte>& random_quantized(DType t, int64_t rows, int64_t cols, uint64_t seed) {
  const std::string key = fmt_key("quant", t, rows, cols, seed, 0.0f, 0.0f);
  return memo(key, [&] { return make_random_quantized(t, rows, cols, seed); });
}

Buffer upload(const void* host, size_t bytes) {
  Buffer b(bytes);
  CUDA_CHECK(cudaMemcpy(b.as(), host, bytes, cudaMemcpyHostToDevice));
  return b;
}
template <typename T>
Buffer upload(const std::vector<T>& host) {
  return upload(host.data(), host.size() * sizeof(T));
}
Buffer random_f32(int64_t count, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  return upload(random_host(DType::F32, count, seed, lo, hi));
}

// How many copies of a `bytes` working set exceed twice the L2 (1 .. kMaxCopies).
int64_t cold_copies(size_t bytes) {
  const size_t want = (2 * g_l2_bytes + bytes - 1) / std::max<size_t>(bytes, 1);
  return static_cast<int64_t>(std::clamp<size_t>(want, 1, static_cast<size_t>(kMaxCopies)));
}

// `copies` device copies of the same host bytes.
std::vector<Buffer> upload_copies(const std::vector<std::byte>& host, int64_t copies) {
  std::vector<Buffer> out;
  for (int64_t i = 0; i < copies; ++i) out.push_back(upload(host));
  return out;
}

// Random token ids in [0, vocab): `sets` sets of n ids, one set per call in turn.
Buffer random_ids(int64_t n, int64_t sets, uint64_t seed) {
  Rng rng(seed);
  std::vector<int32_t> ids(static_cast<size_t>(n * sets));
  for (auto& id : ids) id = static_cast<int32_t>(rng.next() % static_cast<uint64_t>(kVocab));
  return upload(ids);
}

// ---- timing ---------------------------------------------------------------------------------------

// Times op(i) (i = 0, 1, ...: the call's index, for the cold copies) on `stream`, after two
// untimed calls (scratch growth, cuBLAS's first-call setup), and sets the two counters.
void time_op(benchmark::State& state, cudaStream_t stream, double bytes, double flops,
             const std::function<void(int64_t)>& op) {
  op(0);
  op(1);
  CUDA_CHECK(cudaStreamSynchronize(stream));
  kvinfer::bench::CudaEvents ev;
  int64_t i = 0;
  for (auto _ : state) {
    ev.start(stream);
    op(i++);
    state.SetIterationTime(ev.stop_seconds(stream));
  }
  const double iters = static_cast<double>(state.iterations());
  state.counters["bytes/s"] =
      benchmark::Counter(bytes * iters, benchmark::Counter::kIsRate, benchmark::Counter::kIs1024);
  state.counters["FLOP/s"] = benchmark::Counter(flops * iters, benchmark::Counter::kIsRate);
}

// Registers fn as a benchmark named `name` (microseconds, manual time). An exception (a CUDA
// error, an argument check) skips it with the message and makes the program exit 1.
benchmark::internal::Benchmark* reg(const std::string& name, std::function<void(benchmark::State&)> fn) {
  auto* b = benchmark::RegisterBenchmark(name.c_str(), [fn = std::move(fn)](benchmark::State& state) {
    try {
      fn(state);
    } catch (const std::exception& e) {
      g_failed = true;
      state.SkipWithError(e.what());
    }
  });
  return b->UseManualTime()->Unit(benchmark::kMicrosecond);
}

double d(int64_t v) { return static_cast<double>(v); }

// ---- the benchmarks -------------------------------------------------------------------------------

// out (n, hidden) f32 = table[ids] for a (vocab, hidden) table of a plain dtype.
void bm_embed(benchmark::State& state, DType t) {
  const int64_t n = state.range(0), sets = 16;
  const Buffer table = upload(random_host(t, kVocab * kHidden, 1));
  const Buffer ids = random_ids(n, sets, 2), out(static_cast<size_t>(n * kHidden) * 4);
  const double bytes = d(n * kHidden) * (d(static_cast<int64_t>(dtype_size(t))) + 4.0) + d(n) * 4.0;
  time_op(state, g_stream, bytes, 0.0, [&](int64_t i) {
    cuda::embed(t, table.as(), kVocab, kHidden, ids.as<int32_t>() + (i % sets) * n, n, out.as<float>(), g_stream);
  });
}

// The same from a quantised table: only the gathered rows are dequantised.
void bm_embed_quantized(benchmark::State& state, DType t) {
  const int64_t n = state.range(0), sets = 16;
  const Buffer table = upload(random_quantized(t, kVocab, kHidden, 3));
  const Buffer ids = random_ids(n, sets, 4), out(static_cast<size_t>(n * kHidden) * 4);
  const double bytes = d(n) * d(static_cast<int64_t>(dtype_row_bytes(t, kHidden))) + d(n * kHidden) * 4.0 + d(n) * 4.0;
  time_op(state, g_stream, bytes, d(n * kHidden), [&](int64_t i) {
    cuda::embed_quantized(t, table.as(), kVocab, kHidden, ids.as<int32_t>() + (i % sets) * n, n, out.as<float>(),
                          g_stream);
  });
}

// y (n, hidden) = rms_norm(x) · weight: square, add, scale, weight: 4 FLOP an element.
void bm_rms_norm(benchmark::State& state) {
  const int64_t n = state.range(0);
  const Buffer x = random_f32(n * kHidden, 5, -2.0f, 2.0f), w = random_f32(kHidden, 6, 0.5f, 1.5f);
  const Buffer y(x.bytes());
  time_op(state, g_stream, d(n * kHidden) * 8.0 + d(kHidden) * 4.0, 4.0 * d(n * kHidden), [&](int64_t) {
    cuda::rms_norm(x.as<float>(), w.as<float>(), n, kHidden, 1e-5f, y.as<float>(), g_stream);
  });
}

// y (n, hidden) = layer_norm(x) · weight + bias: sum; subtract, square, add; scale, weight, bias:
// 7 FLOP an element.
void bm_layer_norm(benchmark::State& state) {
  const int64_t n = state.range(0);
  const Buffer x = random_f32(n * kHidden, 7, -1.0f, 3.0f), w = random_f32(kHidden, 8, 0.5f, 1.5f);
  const Buffer b = random_f32(kHidden, 9, -0.5f, 0.5f), y(x.bytes());
  time_op(state, g_stream, d(n * kHidden) * 8.0 + d(kHidden) * 8.0, 7.0 * d(n * kHidden), [&](int64_t) {
    cuda::layer_norm(x.as<float>(), w.as<float>(), b.as<float>(), n, kHidden, 1e-5f, y.as<float>(), g_stream);
  });
}

// q (n, heads, head_dim) rotated in place at positions 1024 ..: a pair is 4 products and 2 sums.
void bm_rope(benchmark::State& state, cuda::RopeLayout layout) {
  const int64_t n = state.range(0), elems = n * kHeads * kHeadDim;
  std::vector<float> inv_freq(static_cast<size_t>(kHeadDim / 2));
  for (size_t i = 0; i < inv_freq.size(); ++i)
    inv_freq[i] = std::pow(10000.0f, -2.0f * static_cast<float>(i) / static_cast<float>(kHeadDim));
  const Buffer x = random_f32(elems, 10), f = upload(inv_freq);
  time_op(state, g_stream, d(elems) * 8.0 + d(kHeadDim / 2) * 4.0, 3.0 * d(elems), [&](int64_t) {
    cuda::rope(x.as<float>(), n, kHeads, kHeadDim, 1024, f.as<float>(), layout, g_stream);
  });
}

// out (n, inter) = silu(gate) · up: negate, exp, add, divide, multiply.
void bm_silu_mul(benchmark::State& state) {
  const int64_t count = state.range(0) * kInter;
  const Buffer g = random_f32(count, 11, -8.0f, 8.0f), u = random_f32(count, 12), out(g.bytes());
  time_op(state, g_stream, d(count) * 12.0, 5.0 * d(count), [&](int64_t) {
    cuda::silu_mul(g.as<float>(), u.as<float>(), out.as<float>(), count, g_stream);
  });
}

// out (n, inter) = gelu_tanh(x): x³ (3 products), add, scale, tanh, add, 2 products.
void bm_gelu_tanh(benchmark::State& state) {
  const int64_t count = state.range(0) * kInter;
  const Buffer x = random_f32(count, 13, -6.0f, 6.0f), out(x.bytes());
  time_op(state, g_stream, d(count) * 8.0, 9.0 * d(count),
          [&](int64_t) { cuda::gelu_tanh(x.as<float>(), out.as<float>(), count, g_stream); });
}

// x (n, hidden) += y: the residual add.
void bm_add(benchmark::State& state) {
  const int64_t count = state.range(0) * kHidden;
  const Buffer x = random_f32(count, 14), y = random_f32(count, 15);
  time_op(state, g_stream, d(count) * 12.0, d(count),
          [&](int64_t) { cuda::add(x.as<float>(), y.as<float>(), count, g_stream); });
}

// y (n, inter) += bias (inter): a biased projection's epilogue.
void bm_add_bias(benchmark::State& state) {
  const int64_t n = state.range(0);
  const Buffer y = random_f32(n * kInter, 16), b = random_f32(kInter, 17);
  time_op(state, g_stream, d(n * kInter) * 8.0 + d(kInter) * 4.0, d(n * kInter),
          [&](int64_t) { cuda::add_bias(y.as<float>(), b.as<float>(), n, kInter, g_stream); });
}

// k, v (n, kv_heads, head_dim) f32 → the last n positions of a 4096-position f16 cache layer.
void bm_store_kv(benchmark::State& state) {
  const int64_t n = state.range(0), capacity = 4096, elems = n * kKvHeads * kHeadDim;
  const Buffer k = random_f32(elems, 18), v = random_f32(elems, 19);
  const Buffer kl(static_cast<size_t>(kKvHeads * capacity * kHeadDim) * 2), vl(kl.bytes());
  time_op(state, g_stream, 2.0 * d(elems) * (4.0 + 2.0), 0.0, [&](int64_t) {
    cuda::store_kv(DType::F16, k.as<float>(), v.as<float>(), n, kKvHeads, kHeadDim, capacity - n, capacity, kl.as(),
                   vl.as(), g_stream);
  });
}

// Causal attention of a whole `context`-token prompt over its f16 cache: query t reads t + 1
// positions, 2·head_dim FLOP each for q·k and for p·v, per head.
void bm_attention_prefill(benchmark::State& state) {
  const int64_t context = state.range(0), q_elems = context * kHeads * kHeadDim;
  const int64_t kv_elems = kKvHeads * context * kHeadDim;
  const Buffer q = random_f32(q_elems, 20), out(static_cast<size_t>(q_elems) * 4);
  const Buffer k = upload(random_host(DType::F16, kv_elems, 21)), v = upload(random_host(DType::F16, kv_elems, 22));
  cuda::AttentionParams p;
  p.q = q.as<float>();
  p.k = k.as();
  p.v = v.as();
  p.out = out.as<float>();
  p.kv_dtype = DType::F16;
  p.n = context;
  p.start = 0;
  p.heads = kHeads;
  p.kv_heads = kKvHeads;
  p.head_dim = kHeadDim;
  p.capacity = context;
  p.rows = context;
  const double flops = 4.0 * d(kHeadDim * kHeads) * d(context) * d(context + 1) / 2.0;
  time_op(state, g_stream, d(q_elems) * 8.0 + 2.0 * d(kv_elems) * 2.0, flops,
          [&](int64_t) { cuda::attention_prefill(p, g_stream); });
}

// One decode step (n = 1) at position context - 1 over an f16 cache read cold.
void bm_attention_decode(benchmark::State& state) {
  const int64_t context = state.range(0), q_elems = kHeads * kHeadDim;
  const int64_t kv_elems = kKvHeads * context * kHeadDim;
  const auto& kv_host = random_host(DType::F16, kv_elems, 23);
  const int64_t copies = cold_copies(2 * kv_host.size());
  const auto ks = upload_copies(kv_host, copies), vs = upload_copies(kv_host, copies);
  const Buffer q = random_f32(q_elems, 24), out(static_cast<size_t>(q_elems) * 4);
  const size_t ws_bytes = cuda::attention_decode_workspace_bytes(kHeads, kHeadDim, context);
  const Buffer ws(ws_bytes);
  cuda::AttentionParams p;
  p.q = q.as<float>();
  p.out = out.as<float>();
  p.kv_dtype = DType::F16;
  p.n = 1;
  p.start = context - 1;
  p.heads = kHeads;
  p.kv_heads = kKvHeads;
  p.head_dim = kHeadDim;
  p.capacity = context;
  p.rows = context;
  time_op(state, g_stream, 2.0 * d(kv_elems) * 2.0 + d(q_elems) * 8.0, 4.0 * d(kHeads * kHeadDim) * d(context),
          [&](int64_t i) {
            p.k = ks[static_cast<size_t>(i % copies)].as();
            p.v = vs[static_cast<size_t>(i % copies)].as();
            cuda::attention_decode(p, ws.as(), ws_bytes, g_stream);
          });
}

// A quantised (inter, hidden) matrix → f16, the operand of a quantised linear layer's GEMM: one
// scale product an element (counted as 1 FLOP).
void bm_dequantize_f16(benchmark::State& state, DType t) {
  const int64_t rows = kInter, cols = kHidden;
  const auto& host = random_quantized(t, rows, cols, 25);
  const int64_t copies = cold_copies(host.size());
  const auto ws = upload_copies(host, copies);
  const Buffer out(static_cast<size_t>(rows * cols) * 2);
  time_op(state, g_stream, d(static_cast<int64_t>(host.size())) + d(rows * cols) * 2.0, d(rows * cols),
          [&](int64_t i) {
            cuda::dequantize_f16(t, ws[static_cast<size_t>(i % copies)].as(), rows, cols, out.as(), g_stream);
          });
}

// The greedy pick over one row of logits: one comparison an element.
void bm_argmax(benchmark::State& state) {
  const Buffer logits = random_f32(kVocab, 26, -10.0f, 10.0f), out(sizeof(int32_t));
  time_op(state, g_stream, d(kVocab) * 4.0 + 4.0, d(kVocab),
          [&](int64_t) { cuda::argmax(logits.as<float>(), kVocab, out.as<int32_t>(), g_stream); });
}

// y (n, inter) = x (n, hidden) · Wᵀ through cuda_backend::linear, as the forward pass calls it:
// n <= 8 reads the weights once in place (GEMV, kernels/gemv.cu); larger n takes cuBLAS (f16/bf16
// weights narrow x first; quantised ones are dequantised a bounded tile at a time). Weights read
// cold. Bytes: W, x and y once (not the narrowed copy or the f16 tiles).
void bm_linear(benchmark::State& state, DType t) {
  const int64_t n = state.range(0), out = kInter, in = kHidden;
  const auto& host = is_quantized(t) ? random_quantized(t, out, in, 27) : random_host(t, out * in, 27, -0.02f, 0.02f);
  const int64_t copies = cold_copies(host.size());
  const auto ws = upload_copies(host, copies);
  const Buffer x = random_f32(n * in, 28), y(static_cast<size_t>(n * out) * 4);
  auto ctx = cuda_backend::create_context();
  const double bytes = d(static_cast<int64_t>(host.size())) + d(n * in) * 4.0 + d(n * out) * 4.0;
  time_op(state, cuda_backend::stream(*ctx), bytes, 2.0 * d(n * out) * d(in), [&](int64_t i) {
    const Linear layer{.weight = {.dtype = t, .data = ws[static_cast<size_t>(i % copies)].as<std::byte>(),
                                  .rows = out, .cols = in},
                       .bias = {}};
    cuda_backend::linear(*ctx, layer, x.as<float>(), n, y.as<float>());
  });
}

std::string name(const char* op, DType t) {
  std::string s(op);
  s.append("/").append(dtype_name(t));
  return s;
}

void register_all() {
  const std::vector<int64_t> rows = {1, 512};  // decode, a prefill chunk
  for (DType t : {DType::F32, DType::F16, DType::BF16})
    reg(name("embed", t), [t](benchmark::State& s) { bm_embed(s, t); })->ArgName("n")->ArgsProduct({rows});
  reg(name("embed_quantized", DType::Q8_0), [](benchmark::State& s) { bm_embed_quantized(s, DType::Q8_0); })
      ->ArgName("n")
      ->ArgsProduct({rows});
  reg("rms_norm", bm_rms_norm)->ArgName("n")->ArgsProduct({rows});
  reg("layer_norm", bm_layer_norm)->ArgName("n")->ArgsProduct({rows});
  reg("rope/half_split", [](benchmark::State& s) { bm_rope(s, cuda::RopeLayout::HalfSplit); })
      ->ArgName("n")
      ->ArgsProduct({rows});
  reg("rope/interleaved", [](benchmark::State& s) { bm_rope(s, cuda::RopeLayout::Interleaved); })
      ->ArgName("n")
      ->ArgsProduct({rows});
  reg("silu_mul", bm_silu_mul)->ArgName("n")->ArgsProduct({rows});
  reg("gelu_tanh", bm_gelu_tanh)->ArgName("n")->ArgsProduct({rows});
  reg("add", bm_add)->ArgName("n")->ArgsProduct({rows});
  reg("add_bias", bm_add_bias)->ArgName("n")->ArgsProduct({rows});
  reg("store_kv/f16", bm_store_kv)->ArgName("n")->ArgsProduct({rows});
  reg("attention_prefill/f16", bm_attention_prefill)->ArgName("context")->Arg(1024)->Arg(4096);
  reg("attention_decode/f16", bm_attention_decode)->ArgName("context")->Arg(1024)->Arg(4096);
  for (DType t : {DType::Q8_0, DType::Q4_K})
    reg(name("dequantize_f16", t), [t](benchmark::State& s) { bm_dequantize_f16(s, t); });
  reg("argmax", bm_argmax);
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_K})
    reg(name("linear", t), [t](benchmark::State& s) { bm_linear(s, t); })->ArgName("n")->Arg(1)->Arg(8)->Arg(64);
}

}  // namespace

int main(int argc, char** argv) {
  int devices = 0;
  const cudaError_t err = cudaGetDeviceCount(&devices);
  if (err != cudaSuccess || devices == 0) {
    std::string reason = "cudaGetDeviceCount found 0 devices";
    if (err != cudaSuccess) reason.assign(cudaGetErrorName(err)).append(": ").append(cudaGetErrorString(err));
    std::printf("kvinfer-bench-cuda-ops: no CUDA device (%s); nothing to run\n", reason.c_str());
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  try {
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    g_l2_bytes = static_cast<size_t>(prop.l2CacheSize);
    benchmark::AddCustomContext("device", prop.name);
    benchmark::AddCustomContext("L2 MiB", std::to_string(prop.l2CacheSize >> 20));
    CUDA_CHECK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvinfer-bench-cuda-ops: %s\n", e.what());
    return 1;
  }
  register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  cudaStreamDestroy(g_stream);
  if (g_failed) std::fprintf(stderr, "kvinfer-bench-cuda-ops: some benchmarks failed (see their error_message)\n");
  return g_failed ? 1 : 0;
}
