// Micro-benchmarks of the CPU backend's ops, with bytes/s and FLOP/s counters.
#include <random>
#include <vector>

#include <benchmark/benchmark.h>

#include "cpu/cpu_ops.h"
#include "kvinfer/kv_cache.h"

namespace {

using kvinfer::DType;

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// y (n, out) = x (n, in) · Wᵀ for a 2048×2048 weight: decode (n = 1) is memory-bound, prefill
// (n = 64) reuses each widened weight row across the batch.
void BM_linear(benchmark::State& state) {
  const auto dtype = static_cast<DType>(state.range(0));
  const int64_t n = state.range(1), in = 2048, out = 2048;
  auto wf = random_floats(static_cast<size_t>(in * out), 1);
  std::vector<std::byte> wbytes(static_cast<size_t>(in * out) * kvinfer::dtype_size(dtype));
  kvinfer::cpu::from_f32(dtype, wf.data(), wbytes.data(), in * out);
  kvinfer::Linear layer{{dtype, wbytes.data(), out, in}, {}};
  auto x = random_floats(static_cast<size_t>(n * in), 2);
  std::vector<float> y(static_cast<size_t>(n * out));
  for (auto _ : state) {
    kvinfer::cpu::linear(layer, x.data(), n, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  const double iters = static_cast<double>(state.iterations());
  state.counters["bytes/s"] = benchmark::Counter(static_cast<double>(layer.weight.bytes()) * iters,
                                                 benchmark::Counter::kIsRate, benchmark::Counter::kIs1024);
  state.counters["FLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(n * in * out) * iters,
                                                benchmark::Counter::kIsRate);
}
BENCHMARK(BM_linear)->ArgsProduct({{0, 2}, {1, 64}})->ArgNames({"dtype(0=f32,2=bf16)", "rows"});

// One decode step's attention: 32 query heads over 8 KV heads, head_dim 128, `ctx` cached positions.
void BM_attention_decode(benchmark::State& state) {
  const int64_t ctx = state.range(0), heads = 32;
  kvinfer::ModelConfig cfg;
  cfg.num_layers = 1;
  cfg.num_heads = heads;
  cfg.num_kv_heads = 8;
  cfg.head_dim = 128;
  kvinfer::KvCache kv(cfg, ctx, DType::F16);
  auto k = random_floats(static_cast<size_t>(ctx * 8 * 128), 3);
  auto v = random_floats(k.size(), 4);
  kvinfer::cpu::store_kv(kv, 0, 0, ctx, k.data(), v.data());
  auto q = random_floats(static_cast<size_t>(heads * 128), 5);
  std::vector<float> out(q.size());
  for (auto _ : state) {
    kvinfer::cpu::attention(kv, 0, q.data(), 1, ctx - 1, heads, 0, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  const double iters = static_cast<double>(state.iterations());
  state.counters["bytes/s"] = benchmark::Counter(static_cast<double>(kv.bytes()) * iters,
                                                 benchmark::Counter::kIsRate, benchmark::Counter::kIs1024);
  state.counters["FLOP/s"] = benchmark::Counter(4.0 * static_cast<double>(heads * ctx * 128) * iters,
                                                benchmark::Counter::kIsRate);
}
BENCHMARK(BM_attention_decode)->Arg(1000)->Arg(4096);

}  // namespace

BENCHMARK_MAIN();
