// Micro-benchmarks of every op of the CPU backend (src/cpu/cpu_ops.h). Each reports two counters:
//   bytes/s  the bytes one iteration reads and writes, each distinct byte once (an operand that
//            stays in cache and is read again is not counted again);
//   FLOP/s   multiplies, adds (and subtractions, divisions) and transcendental functions (exp,
//            tanh, sqrt, cos, sin) count 1 FLOP each; integer and bit operations (f16/bf16
//            conversions, unpacking quantised codes, comparisons) count 0.
// Each benchmark's comment gives its shape and what it counts. Inputs are fixed-seed random.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iterator>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <benchmark/benchmark.h>

#include "core/convert.h"
#include "core/quant.h"
#include "core/rope.h"
#include "cpu/aligned.h"
#include "cpu/cpu_features.h"
#include "cpu/cpu_ops.h"
#include "core/kv_cache_access.h"
#include "kvinfer/kv_cache.h"

#if defined(KVINFER_BENCH_OPENBLAS)
#include <cblas.h>
#endif
#if defined(_OPENMP)
#include <omp.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace {

using kvinfer::DType;
namespace cpu = kvinfer::cpu;
namespace core = kvinfer::core;

constexpr int64_t kF32 = sizeof(float);
constexpr int64_t kMi = int64_t{1} << 20;  // elementwise ops and conversions run on 1M values

// Weight dtypes: the plain ones, then ggml's quantised formats. Every one but f32 is widened.
constexpr DType kWeightTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_1,
                                  DType::Q5_0, DType::Q5_1, DType::Q4_K, DType::Q5_K, DType::Q6_K};
constexpr auto kWidenedTypes = std::span(kWeightTypes).subspan(1);
constexpr DType kHalfTypes[] = {DType::F16, DType::BF16};
constexpr DType kEmbedTypes[] = {DType::F32, DType::F16};
constexpr DType kCacheTypes[] = {DType::F32, DType::F16, DType::BF16};

// ---- Shared helpers -------------------------------------------------------------------------

// n values drawn from N(0, 1) with a fixed seed.
std::vector<float> random_floats(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(rng);
  return v;
}

// n values of dtype t, starting at a cache line as the matrices a model loads do (GGUF data is
// 32-byte aligned, HostStorage 64). Plain types: random_floats narrowed to t. Quantised types:
// random bytes (codes and 6/8-bit sub-block scales), then every f16 field set to 0.01, since
// random bits there could be an Inf or a NaN.
cpu::AlignedVector<std::byte> random_values(DType t, int64_t n, uint32_t seed) {
  cpu::AlignedVector<std::byte> out(kvinfer::dtype_row_bytes(t, n));
  if (!kvinfer::is_quantized(t)) {
    cpu::from_f32(t, random_floats(n, seed).data(), out.data(), n);
    return out;
  }
  std::mt19937 rng(seed);
  for (auto& b : out) b = static_cast<std::byte>(rng() & 0xFFu);
  const uint16_t scale = core::f32_to_f16(0.01f);
  const auto block_bytes = static_cast<size_t>(kvinfer::dtype_block(t).bytes);
  const core::HalfFields fields = core::half_fields(t);
  for (size_t block = 0; block < out.size(); block += block_bytes)
    for (size_t f : fields) {  // little endian, as GGUF stores them
      out[block + f] = static_cast<std::byte>(scale & 0xFFu);
      out[block + f + 1] = static_cast<std::byte>(scale >> 8);
    }
  return out;
}

// FLOPs to widen one value of t to f32: none for the plain types (bit operations), one multiply
// by the scale (Q8_0, Q4_0, Q5_0, Q6_K), or a multiply and the add of the offset (Q4_1, Q5_1,
// Q4_K, Q5_K). The K-quants' per-sub-block scale products (1 per 16 or 32 values) are left out.
int64_t widen_flops(DType t) {
  switch (t) {
    case DType::Q8_0:
    case DType::Q4_0:
    case DType::Q5_0:
    case DType::Q6_K: return 1;
    case DType::Q4_1:
    case DType::Q5_1:
    case DType::Q4_K:
    case DType::Q5_K: return 2;
    default: return 0;
  }
}

// The counters every benchmark reports, from the bytes one iteration reads + writes and its FLOPs.
void set_counters(benchmark::State& state, int64_t bytes, int64_t flops) {
  const auto iters = static_cast<double>(state.iterations());
  state.counters["bytes/s"] = benchmark::Counter(static_cast<double>(bytes) * iters, benchmark::Counter::kIsRate,
                                                 benchmark::Counter::kIs1024);
  state.counters["FLOP/s"] = benchmark::Counter(static_cast<double>(flops) * iters, benchmark::Counter::kIsRate);
}

// Registers fn(state, t) for every dtype t as "<name>/<dtype>", then applies `options` to each.
using DTypeBenchmark = void (*)(benchmark::State&, DType);
bool per_dtype(std::string_view name, DTypeBenchmark fn, std::span<const DType> types,
               const std::function<void(benchmark::internal::Benchmark*)>& options = nullptr) {
  for (DType t : types) {
    std::string full(name);
    full += '/';
    full += kvinfer::dtype_name(t);
    auto* b = benchmark::RegisterBenchmark(full.c_str(), fn, t);
    if (options) options(b);
  }
  return true;
}

// The attention shape: GQA with 32 query heads over 8 KV heads, head_dim 128, one layer.
constexpr int64_t kHeads = 32, kKvHeads = 8, kHeadDim = 128;
kvinfer::ModelConfig kv_config() {
  kvinfer::ModelConfig cfg;
  cfg.num_layers = 1;
  cfg.num_heads = kHeads;
  cfg.num_kv_heads = kKvHeads;
  cfg.head_dim = kHeadDim;
  return cfg;
}

// ---- The machine's peak -----------------------------------------------------------------------

#if defined(__x86_64__) || defined(__i386__)
// 12 independent chains of `iters` fused multiply-adds on 8 or 16 f32 lanes: enough chains to hide
// the FMA latency (4 cycles) on two FMA pipes. Returns a lane of the result, so nothing is elided.
__attribute__((target("avx2,fma"))) float fma_chains_avx2(int64_t iters, float b, float c) {
  __m256 a[12];
  for (int i = 0; i < 12; ++i) a[i] = _mm256_set1_ps(static_cast<float>(i));
  const __m256 vb = _mm256_set1_ps(b), vc = _mm256_set1_ps(c);
  for (int64_t k = 0; k < iters; ++k)
    for (auto& v : a) v = _mm256_fmadd_ps(v, vb, vc);
  for (int i = 1; i < 12; ++i) a[0] = _mm256_add_ps(a[0], a[i]);
  return _mm256_cvtss_f32(a[0]);
}
__attribute__((target("avx512f"))) float fma_chains_avx512(int64_t iters, float b, float c) {
  __m512 a[12];
  for (int i = 0; i < 12; ++i) a[i] = _mm512_set1_ps(static_cast<float>(i));
  const __m512 vb = _mm512_set1_ps(b), vc = _mm512_set1_ps(c);
  for (int64_t k = 0; k < iters; ++k)
    for (auto& v : a) v = _mm512_fmadd_ps(v, vb, vc);
  for (int i = 1; i < 12; ++i) a[0] = _mm512_add_ps(a[0], a[i]);
  return _mm512_cvtss_f32(a[0]);
}

// fma_chains of 8 or 16 lanes on `threads` OpenMP threads at once: 12 · kPeakIters fused
// multiply-adds a thread (about 0.6 ms at 2.6 GHz). Returns the FLOPs.
constexpr int64_t kPeakIters = int64_t{1} << 18;
int64_t fma_burst(int lanes, int threads) {
  volatile float b = 0.999f, c = 0.001f;  // values the compiler cannot see
  float sink = 0.0f;
#if defined(_OPENMP)
#pragma omp parallel num_threads(threads) reduction(+ : sink)
#endif
  sink += lanes == 16 ? fma_chains_avx512(kPeakIters, b, c) : fma_chains_avx2(kPeakIters, b, c);
  benchmark::DoNotOptimize(sink);
  return int64_t{threads} * kPeakIters * 12 * lanes * 2;
}

int team_size() {
#if defined(_OPENMP)
  return omp_get_max_threads();
#else
  return 1;
#endif
}

// BM_fma_peak/<isa>: fma_chains on every OpenMP thread at once, the FP32 rate the cores reach
// with fused multiply-adds of that width: the peak the prefill products are measured against
// (docs/benchmarks-history.md). 2 FLOP per lane per FMA; no bytes. avx512 is registered only where the
// CPU supports AVX-512F; there prefill's f32 tiles use it too (cpu/linear_avx512.h), while the
// other kernels are AVX2 and reach at most half of it.
void BM_fma_peak(benchmark::State& state, int lanes) {
  int64_t flops = 0;
  for (auto _ : state) flops = fma_burst(lanes, team_size());
  set_counters(state, 0, flops);
}
[[maybe_unused]] const bool kFmaPeak = [] {
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    benchmark::RegisterBenchmark("BM_fma_peak/avx2", BM_fma_peak, 8)->UseRealTime();
  if (__builtin_cpu_supports("avx512f")) benchmark::RegisterBenchmark("BM_fma_peak/avx512", BM_fma_peak, 16)->UseRealTime();
  return true;
}();

// BM_linear_vs_peak/<t>/rows:N: BM_linear's product, each call right after a burst of the widest
// FMA chains the prefill tiles use, on the same threads (BM_fma_peak's, 0.6 ms): AVX-512 where
// cpu_has_avx512(), else AVX2 (so KVINFER_NO_AVX512=1 measures the AVX2 path against its peak).
// peak_share is the product's FLOP rate over the bursts' rate, both summed over the iterations:
// the product against the peak the cores gave within milliseconds of it. On a shared machine
// whose FMA rate varies from second to second, that is steadier than dividing BM_linear by a
// BM_fma_peak run seconds apart. The reported time and FLOP/s are the product's alone (manual
// time). With --benchmark_repetitions, a "max" aggregate joins the mean and median: a
// neighbour's load only ever slows the product (its loads, more than the bursts' register-only
// chains), so the best repetition is the nearest to what the code reaches on a quiet machine;
// docs/benchmarks-history.md quotes it beside the median. BM_linear_int8_vs_peak: the same for the
// 8-bit activation products (--int8-activations), against the same FP32 peak.
void run_linear_vs_peak(benchmark::State& state, DType t, kvinfer::ActivationMode activations) {
  const int64_t n = state.range(0), in = 2048, out = 2048;
  const auto w = random_values(t, out * in, 5);
  const kvinfer::Linear layer{{t, w.data(), out, in}, {}};
  const auto x = random_floats(n * in, 6);
  std::vector<float> y(static_cast<size_t>(n * out));
  const int lanes = cpu::cpu_has_avx512() ? 16 : 8;  // the width of the prefill tiles (KVINFER_NO_AVX512: 8)
  using Clock = std::chrono::steady_clock;
  double burst_s = 0, product_s = 0, burst_flops = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    burst_flops += static_cast<double>(fma_burst(lanes, team_size()));
    const auto t1 = Clock::now();
    cpu::linear(layer, x.data(), n, y.data(), activations);
    benchmark::DoNotOptimize(y.data());
    const auto t2 = Clock::now();
    burst_s += std::chrono::duration<double>(t1 - t0).count();
    product_s += std::chrono::duration<double>(t2 - t1).count();
    state.SetIterationTime(std::chrono::duration<double>(t2 - t1).count());
  }
  set_counters(state, static_cast<int64_t>(layer.weight.bytes()) + (n * in + n * out) * kF32, 2 * n * in * out);
  const double product_flops = static_cast<double>(state.iterations()) * 2.0 * static_cast<double>(n * in * out);
  state.counters["peak_FLOP/s"] = benchmark::Counter(burst_s > 0 ? burst_flops / burst_s : 0.0);
  state.counters["peak_share"] =
      benchmark::Counter(burst_flops > 0 && product_s > 0 ? (product_flops / product_s) / (burst_flops / burst_s) : 0.0);
}
void BM_linear_vs_peak(benchmark::State& state, DType t) { run_linear_vs_peak(state, t, kvinfer::ActivationMode::Exact); }
void BM_linear_int8_vs_peak(benchmark::State& state, DType t) {
  run_linear_vs_peak(state, t, kvinfer::ActivationMode::Int8);
}
void vs_peak_args(benchmark::internal::Benchmark* b) {
  b->UseManualTime()->ArgName("rows")->Arg(16)->Arg(64)->Arg(512);
  b->ComputeStatistics("max", [](const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); });
}
constexpr DType kSharedPeakTypes[] = {DType::F32, DType::BF16, DType::Q8_0, DType::Q4_1};
constexpr DType kInt8PeakTypes[] = {DType::Q8_0, DType::Q4_1};
[[maybe_unused]] const bool kLinearVsPeak =
    __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
    per_dtype("BM_linear_vs_peak", BM_linear_vs_peak, kSharedPeakTypes, vs_peak_args) &&
    per_dtype("BM_linear_int8_vs_peak", BM_linear_int8_vs_peak, kInt8PeakTypes, vs_peak_args);
#endif

// ---- Reductions ------------------------------------------------------------------------------

// dot of two n-value f32 vectors: reads 2n floats; 2n FLOP (a multiply and an add per value).
void BM_dot(benchmark::State& state) {
  const int64_t n = state.range(0);
  const auto a = random_floats(n, 1), b = random_floats(n, 2);
  for (auto _ : state) benchmark::DoNotOptimize(cpu::dot(a.data(), b.data(), n));
  set_counters(state, 2 * n * kF32, 2 * n);
}
BENCHMARK(BM_dot)->ArgName("n")->Arg(4096);

// sum of n f32 values: reads n floats; n FLOP.
void BM_sum(benchmark::State& state) {
  const int64_t n = state.range(0);
  const auto a = random_floats(n, 1);
  for (auto _ : state) benchmark::DoNotOptimize(cpu::sum(a.data(), n));
  set_counters(state, n * kF32, n);
}
BENCHMARK(BM_sum)->ArgName("n")->Arg(4096);

// ---- Conversions -----------------------------------------------------------------------------

// to_f32: widens 1M values of dtype t (quantised: random codes, f16 scales 0.01). Bytes: the
// stored values and the f32 output; FLOPs: widen_flops per value.
void BM_to_f32(benchmark::State& state, DType t) {
  const int64_t n = kMi;
  const auto src = random_values(t, n, 3);
  std::vector<float> dst(static_cast<size_t>(n));
  for (auto _ : state) {
    cpu::to_f32(t, src.data(), dst.data(), n);
    benchmark::DoNotOptimize(dst.data());
  }
  set_counters(state, std::ssize(src) + n * kF32, n * widen_flops(t));
}
[[maybe_unused]] const bool kToF32 = per_dtype("BM_to_f32", BM_to_f32, kWidenedTypes);

// from_f32: narrows 1M f32 values to f16 or bf16 (round to nearest even, bit operations: 0 FLOP).
void BM_from_f32(benchmark::State& state, DType t) {
  const int64_t n = kMi;
  const auto src = random_floats(n, 4);
  std::vector<std::byte> dst(kvinfer::dtype_row_bytes(t, n));
  for (auto _ : state) {
    cpu::from_f32(t, src.data(), dst.data(), n);
    benchmark::DoNotOptimize(dst.data());
  }
  set_counters(state, n * kF32 + std::ssize(dst), 0);
}
[[maybe_unused]] const bool kFromF32 = per_dtype("BM_from_f32", BM_from_f32, kHalfTypes);

// ---- Linear ----------------------------------------------------------------------------------

// y (rows, 2048) = x (rows, 2048) · Wᵀ, W 2048×2048 of dtype t. Decode (rows = 1) streams W once
// and is memory-bound; prefill (rows = 64, a short prompt, or 512) widens each block of W's rows
// once and reuses it for every input row (of a slice, for 512: cpu::linears).
// Bytes: W, x and y (at rows = 1, W is 99.9 % of them). FLOPs: 2·rows·in·out (a multiply and an
// add per weight and row); widening W (widen_flops per weight) is not counted, so FLOP/s compare
// across dtypes. linear splits W's rows across OpenMP threads, so its rates are per wall-clock
// second (the default, the main thread's CPU time, would leave out the other threads' work).
void run_linear(benchmark::State& state, DType t, kvinfer::ActivationMode activations) {
  const int64_t n = state.range(0), in = 2048, out = 2048;
  const auto w = random_values(t, out * in, 5);
  const kvinfer::Linear layer{{t, w.data(), out, in}, {}};
  const auto x = random_floats(n * in, 6);
  std::vector<float> y(static_cast<size_t>(n * out));
  for (auto _ : state) {
    cpu::linear(layer, x.data(), n, y.data(), activations);
    benchmark::DoNotOptimize(y.data());
  }
  set_counters(state, static_cast<int64_t>(layer.weight.bytes()) + (n * in + n * out) * kF32, 2 * n * in * out);
}
void BM_linear(benchmark::State& state, DType t) { run_linear(state, t, kvinfer::ActivationMode::Exact); }
[[maybe_unused]] const bool kLinear = per_dtype("BM_linear", BM_linear, kWeightTypes, [](auto* b) {
  b->UseRealTime()->ArgName("rows")->Arg(1)->Arg(64)->Arg(512);
});

// BM_linear with 8-bit activations (cpu/linear_int8.h; --int8-activations): the input rows are
// quantised per 32 values and multiplied in integers. Same shape, bytes and FLOPs as BM_linear.
void BM_linear_int8(benchmark::State& state, DType t) { run_linear(state, t, kvinfer::ActivationMode::Int8); }
constexpr DType kInt8Types[] = {DType::Q8_0, DType::Q4_0, DType::Q4_1};
[[maybe_unused]] const bool kLinearInt8 = per_dtype("BM_linear_int8", BM_linear_int8, kInt8Types, [](auto* b) {
  b->UseRealTime()->ArgName("rows")->Arg(1)->Arg(64)->Arg(512);
});

// BM_linear with 15-bit activations (cpu/linear_int15.h; --activations int15): two integer passes
// a weight block. Same shape, bytes and FLOPs as BM_linear.
void BM_linear_int15(benchmark::State& state, DType t) { run_linear(state, t, kvinfer::ActivationMode::Int15); }
[[maybe_unused]] const bool kLinearInt15 = per_dtype("BM_linear_int15", BM_linear_int15, kInt8Types, [](auto* b) {
  b->UseRealTime()->ArgName("rows")->Arg(1)->Arg(64);
});

#if defined(KVINFER_BENCH_OPENBLAS)
// The same product as BM_linear/f32 through OpenBLAS: y (rows, 2048) = x (rows, 2048) · Wᵀ with
// cblas_sgemm (row-major, W transposed), on as many threads as OpenMP would use. For comparison
// only: sgemm's blocking, and so its order of additions, depends on the number of rows, which
// would break cache-on == cache-off. Same bytes and FLOPs as BM_linear.
void BM_linear_openblas(benchmark::State& state) {
  const int64_t n = state.range(0), in = 2048, out = 2048;
  const auto w = random_floats(out * in, 5);
  const auto x = random_floats(n * in, 6);
  std::vector<float> y(static_cast<size_t>(n * out));
#if defined(_OPENMP)
  openblas_set_num_threads(omp_get_max_threads());
#else
  openblas_set_num_threads(1);
#endif
  for (auto _ : state) {
    if (n == 1)
      cblas_sgemv(CblasRowMajor, CblasNoTrans, static_cast<int>(out), static_cast<int>(in), 1.0f, w.data(),
                  static_cast<int>(in), x.data(), 1, 0.0f, y.data(), 1);
    else
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(n), static_cast<int>(out),
                  static_cast<int>(in), 1.0f, x.data(), static_cast<int>(in), w.data(), static_cast<int>(in), 0.0f,
                  y.data(), static_cast<int>(out));
    benchmark::DoNotOptimize(y.data());
  }
  set_counters(state, (out * in + n * in + n * out) * kF32, 2 * n * in * out);
  // The kernels OpenBLAS chose: it reads the CPU's family and model, and under some hypervisors
  // falls back to its SSE3 "Prescott" kernels (OPENBLAS_CORETYPE=SkylakeX overrides that).
  state.SetLabel(openblas_get_corename());
}
BENCHMARK(BM_linear_openblas)->UseRealTime()->ArgName("rows")->Arg(1)->Arg(64)->Arg(512);
#endif

// ---- Embedding -------------------------------------------------------------------------------

// embed: gathers 64 random rows of a 32000×2048 table of dtype t into f32. Only the rows the ids
// select are filled: the rest of the table is allocated but never touched, so it costs neither
// memory nor setup time (like the unread pages of a mapped checkpoint). Bytes: the 64 stored rows
// and the f32 output; FLOPs: widen_flops per value.
void BM_embed(benchmark::State& state, DType t) {
  const int32_t vocab = 32000;
  const int64_t hidden = 2048, n = 64;
  const auto row_bytes = static_cast<size_t>(kvinfer::dtype_row_bytes(t, hidden));
  auto table = std::make_unique_for_overwrite<std::byte[]>(static_cast<size_t>(vocab) * row_bytes);
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> pick(0, vocab - 1);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (auto& id : ids) {
    id = pick(rng);
    const auto row = random_values(t, hidden, static_cast<uint32_t>(id));
    std::memcpy(table.get() + static_cast<size_t>(id) * row_bytes, row.data(), row.size());
  }
  const kvinfer::Matrix matrix{t, table.get(), vocab, hidden};
  std::vector<float> out(static_cast<size_t>(n * hidden));
  for (auto _ : state) {
    cpu::embed(matrix, ids, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  set_counters(state, n * (static_cast<int64_t>(row_bytes) + hidden * kF32), n * hidden * widen_flops(t));
}
[[maybe_unused]] const bool kEmbed = per_dtype("BM_embed", BM_embed, kEmbedTypes);

// ---- Norms -----------------------------------------------------------------------------------

// rms_norm of rows × dim. Bytes: x, weight, y. FLOPs per row: x·x (2·dim), the mean, + eps, sqrt
// and the reciprocal (4), then x · inv · weight (2·dim).
void BM_rms_norm(benchmark::State& state) {
  const int64_t n = state.range(0), dim = state.range(1);
  const auto x = random_floats(n * dim, 8), weight = random_floats(dim, 9);
  std::vector<float> y(x.size());
  for (auto _ : state) {
    cpu::rms_norm(x.data(), weight.data(), n, dim, 1e-5f, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  set_counters(state, (2 * n * dim + dim) * kF32, n * (4 * dim + 4));
}
BENCHMARK(BM_rms_norm)->ArgNames({"rows", "dim"})->Args({64, 2048});

// layer_norm of rows × dim. Bytes: x, weight, bias, y. FLOPs per row: the sum (dim) and the mean
// (1), the deviations (dim), their dot (2·dim), the variance, + eps, sqrt and the reciprocal (4),
// then dev · inv · weight + bias (3·dim).
void BM_layer_norm(benchmark::State& state) {
  const int64_t n = state.range(0), dim = state.range(1);
  const auto x = random_floats(n * dim, 8), weight = random_floats(dim, 9), bias = random_floats(dim, 10);
  std::vector<float> y(x.size());
  for (auto _ : state) {
    cpu::layer_norm(x.data(), weight.data(), bias.data(), n, dim, 1e-5f, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  set_counters(state, (2 * n * dim + 2 * dim) * kF32, n * (7 * dim + 5));
}
BENCHMARK(BM_layer_norm)->ArgNames({"rows", "dim"})->Args({64, 2048});

// ---- Rope and elementwise ops ----------------------------------------------------------------

// rope of q (64 rows × 32 heads × head_dim 64) in place, at positions 0..63, in either layout.
// Bytes: x read and written, inv_freq. FLOPs per row and frequency: the angle, its cos and sin
// (3); per pair: the rotation (4 multiplies, 2 adds).
void BM_rope(benchmark::State& state, kvinfer::RopeLayout layout) {
  constexpr int kHeadDimRope = 64;
  const int64_t n = 64, heads = 32, half = kHeadDimRope / 2;
  auto x = random_floats(n * heads * kHeadDimRope, 11);
  std::vector<float> inv_freq(static_cast<size_t>(half));
  for (int i = 0; i < half; ++i)
    inv_freq[static_cast<size_t>(i)] = core::rope_default_inv_freq(i, kHeadDimRope, 10000.0f);
  for (auto _ : state) {
    cpu::rope(x.data(), n, heads, kHeadDimRope, 0, inv_freq.data(), layout);
    benchmark::DoNotOptimize(x.data());
  }
  set_counters(state, (2 * n * heads * kHeadDimRope + half) * kF32, n * half * (3 + 6 * heads));
}
BENCHMARK_CAPTURE(BM_rope, half_split, kvinfer::RopeLayout::HalfSplit);
BENCHMARK_CAPTURE(BM_rope, interleaved, kvinfer::RopeLayout::Interleaved);

// silu_mul of n values: reads gate and up, writes out. FLOPs per value: exp, the add, the
// division and the multiply (4).
void BM_silu_mul(benchmark::State& state) {
  const int64_t n = state.range(0);
  const auto gate = random_floats(n, 12), up = random_floats(n, 13);
  std::vector<float> out(gate.size());
  for (auto _ : state) {
    cpu::silu_mul(gate.data(), up.data(), out.data(), n);
    benchmark::DoNotOptimize(out.data());
  }
  set_counters(state, 3 * n * kF32, 4 * n);
}
BENCHMARK(BM_silu_mul)->ArgName("n")->Arg(kMi);

// gelu_tanh of n values: reads x, writes out. FLOPs per value: 0.044715·x³ (3), + x, · sqrt(2/π),
// tanh, 1 + , 0.5 · x and the last product (6).
void BM_gelu_tanh(benchmark::State& state) {
  const int64_t n = state.range(0);
  const auto x = random_floats(n, 14);
  std::vector<float> out(x.size());
  for (auto _ : state) {
    cpu::gelu_tanh(x.data(), out.data(), n);
    benchmark::DoNotOptimize(out.data());
  }
  set_counters(state, 2 * n * kF32, 9 * n);
}
BENCHMARK(BM_gelu_tanh)->ArgName("n")->Arg(kMi);

// add: x += y over n values: reads x and y, writes x; n FLOP.
void BM_add(benchmark::State& state) {
  const int64_t n = state.range(0);
  auto x = random_floats(n, 15);
  const auto y = random_floats(n, 16);
  for (auto _ : state) {
    cpu::add(x.data(), y.data(), n);
    benchmark::DoNotOptimize(x.data());
  }
  set_counters(state, 3 * n * kF32, n);
}
BENCHMARK(BM_add)->ArgName("n")->Arg(kMi);

// ---- KV cache and attention ------------------------------------------------------------------

// store_kv: writes K and V (f32) of 64 positions × 8 KV heads × head_dim 128 into a cache of dtype
// t, narrowing them (bit operations: 0 FLOP). Bytes: k and v read, the cache written.
void BM_store_kv(benchmark::State& state, DType t) {
  const int64_t n = 64, values = n * kKvHeads * kHeadDim;
  kvinfer::KvCache kv(kv_config(), n, t);
  const auto k = random_floats(values, 17), v = random_floats(values, 18);
  for (auto _ : state) {
    cpu::store_kv(kv, 0, 0, n, k.data(), v.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, 2 * values * kF32 + static_cast<int64_t>(kv.bytes()), 0);
}
[[maybe_unused]] const bool kStoreKv = per_dtype("BM_store_kv", BM_store_kv, kCacheTypes);

// An f16 cache of `positions` random K/V rows (kv_config), all committed.
kvinfer::KvCache filled_cache(int64_t positions) {
  kvinfer::KvCache kv(kv_config(), positions, DType::F16);
  const int64_t values = positions * kKvHeads * kHeadDim;
  cpu::store_kv(kv, 0, 0, positions, random_floats(values, 19).data(), random_floats(values, 20).data());
  kvinfer::KvCacheAccess::commit(kv, std::vector<int32_t>(static_cast<size_t>(positions), 0));
  return kv;
}

// One decode step's attention (n = 1, at position ctx - 1) over `ctx` cached f16 positions, GQA
// 32 query heads / 8 KV heads, head_dim 128. Bytes: the cache, q and out. FLOPs: 4·heads·ctx·head_dim
// (q·k and p·v, a multiply and an add each); the softmax (~4 per score) is left out.
void BM_attention_decode(benchmark::State& state) {
  const int64_t ctx = state.range(0);
  const auto kv = filled_cache(ctx);
  const auto q = random_floats(kHeads * kHeadDim, 21);
  std::vector<float> out(q.size());
  for (auto _ : state) {
    cpu::attention(kv, 0, q.data(), 1, ctx - 1, kHeads, 0, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  set_counters(state, static_cast<int64_t>(kv.bytes()) + 2 * kHeads * kHeadDim * kF32, 4 * kHeads * ctx * kHeadDim);
}
BENCHMARK(BM_attention_decode)->Arg(1000)->Arg(4096);

// Causal prefill attention of n queries at start 0 over the same f16 cache shape: query t attends
// to t + 1 positions. Bytes: the cache (each row once), q and out. FLOPs: 4·heads·head_dim per
// (query, position) pair, n(n + 1)/2 pairs; the softmax is left out.
void BM_attention_prefill(benchmark::State& state) {
  const int64_t n = state.range(0);
  const auto kv = filled_cache(n);
  const auto q = random_floats(n * kHeads * kHeadDim, 22);
  std::vector<float> out(q.size());
  for (auto _ : state) {
    cpu::attention(kv, 0, q.data(), n, 0, kHeads, 0, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  set_counters(state, static_cast<int64_t>(kv.bytes()) + 2 * n * kHeads * kHeadDim * kF32,
               4 * kHeads * kHeadDim * (n * (n + 1) / 2));
}
BENCHMARK(BM_attention_prefill)->ArgName("n")->Arg(256);

}  // namespace

BENCHMARK_MAIN();
