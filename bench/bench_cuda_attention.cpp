// Decode attention bandwidth (kernels/attention_decode.cu) against the device's own copy
// bandwidth (cuda_backend::measure_copy_bandwidth: cudaMemcpyAsync device to device of 1 GiB,
// read + write bytes). Contexts 4K, 8K and 32K (tools/gpu_check.sh tabulates 8K and 32K).
// Decode bytes = the K and V rows of the context + q + out. Head_dim 128, bf16 cache, 8 KV heads,
// heads = group × 8. L2 is flushed before every timed call (the 4K-context cache, 16 MB, would
// otherwise sit in it). Median of 20 calls. Exits 0 with a message when there is no device.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "core/convert.h"
#include "cuda_check.h"
#include "cuda_events.h"
#include "cuda/device_memory.h"
#include "cuda_ops.h"
#include "kvinfer/device.h"

namespace {

using namespace kvinfer;

struct Buffer {
  void* p = nullptr;
  explicit Buffer(size_t bytes) { CUDA_CHECK(cudaMalloc(&p, bytes)); }
  ~Buffer() { cudaFree(p); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Row {
  int64_t context, group;
  double seconds, bytes;
};

Row decode(int64_t context, int64_t group, Buffer& flush, size_t flush_bytes) {
  constexpr int64_t kKvHeads = 8, kHeadDim = 128;
  const int64_t heads = kKvHeads * group;
  const size_t block = static_cast<size_t>(kKvHeads * context * kHeadDim) * 2;  // (kv_heads, ctx, hd) bf16
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<uint16_t> host(block / 2);
  for (auto& x : host) x = core::f32_to_bf16(u(rng));
  std::vector<float> q(static_cast<size_t>(heads * kHeadDim));
  for (auto& x : q) x = u(rng);
  Buffer k(block), v(block), q_d(q.size() * 4), out(q.size() * 4);
  CUDA_CHECK(cudaMemcpy(k.p, host.data(), block, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(v.p, host.data(), block, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(q_d.p, q.data(), q.size() * 4, cudaMemcpyHostToDevice));
  const size_t ws_bytes = cuda::attention_decode_workspace_bytes(heads, kHeadDim, context);
  Buffer ws(ws_bytes);
  cuda::AttentionParams p;
  p.q = static_cast<const float*>(q_d.p);
  p.k = k.p;
  p.v = v.p;
  p.out = static_cast<float*>(out.p);
  p.kv_dtype = DType::BF16;
  p.n = 1;
  p.start = context - 1;
  p.heads = heads;
  p.kv_heads = kKvHeads;
  p.head_dim = kHeadDim;
  p.capacity = context;
  p.rows = context;
  for (int i = 0; i < 3; ++i) cuda::attention_decode(p, ws.p, ws_bytes, nullptr);
  kvinfer::bench::CudaEvents t;
  std::vector<double> secs;
  for (int i = 0; i < 20; ++i) {
    CUDA_CHECK(cudaMemsetAsync(flush.p, i, flush_bytes));  // evict the cache from L2
    t.start();
    cuda::attention_decode(p, ws.p, ws_bytes, nullptr);
    secs.push_back(t.stop_seconds());
  }
  CUDA_CHECK(cudaGetLastError());
  return {context, group, median(secs), 2.0 * static_cast<double>(block) + 2.0 * static_cast<double>(q.size()) * 4};
}

}  // namespace

int main() {
  if (kvinfer::cuda_device_count() == 0) {
    std::printf("no CUDA device: decode attention benchmark not run\n");
    return 0;
  }
  try {
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    const double copy = kvinfer::cuda_backend::measure_copy_bandwidth().bytes_per_s;
    std::printf("device: %s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);
    std::printf("copy bandwidth (D2D 1 GiB, read + write): %.0f GB/s\n\n", copy * 1e-9);
    std::printf("decode attention, head_dim 128, bf16 cache, 8 KV heads\n");
    std::printf("%8s %6s %6s %10s %10s %9s %7s\n", "context", "group", "heads", "KV MiB", "time us", "GB/s", "% copy");
    const size_t flush_bytes = std::max<size_t>(static_cast<size_t>(prop.l2CacheSize) * 4, size_t{256} << 20);
    Buffer flush(flush_bytes);
    for (int64_t context : {4096, 8192, 32768})
      for (int64_t group : {1, 4, 7, 8}) {
        const Row r = decode(context, group, flush, flush_bytes);
        const double gbs = r.bytes / r.seconds;
        std::printf("%8lld %6lld %6lld %10.1f %10.1f %9.0f %6.1f%%\n", static_cast<long long>(r.context),
                    static_cast<long long>(r.group), static_cast<long long>(8 * r.group), r.bytes / (1 << 20),
                    r.seconds * 1e6, gbs * 1e-9, 100.0 * gbs / copy);
      }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_cuda_attention: %s\n", e.what());
    return 1;
  }
  return 0;
}
