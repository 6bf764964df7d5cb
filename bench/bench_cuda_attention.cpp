// Decode attention bandwidth (kernels/attention_decode.cu) against the device's own copy
// bandwidth (cuda_backend::measure_copy_bandwidth: cudaMemcpyAsync device to device of 1 GiB,
// read + write bytes). Contexts 4K, 8K and 32K (tools/gpu_check.sh tabulates 8K and 32K).
// Decode bytes = the K and V rows of the context + q + out. Head_dim 128, bf16 cache, 8 KV heads,
// heads = group × 8. L2 is flushed before every timed call (the 4K-context cache, 16 MB, would
// otherwise sit in it). Median of 20 calls. Exits 0 with a message when there is no device.
//   kvinfer-bench-cuda-attention [--contexts 4096,8192,32768] [--groups 1,4,7,8] [--copy-mib 1024]
//                                [--reps 20]
// (tools/gpu_bundle_run.sh gives the simulated device short contexts); a bad option: exit 2.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
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

Row decode(int64_t context, int64_t group, int reps, Buffer& flush, size_t flush_bytes) {
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
  for (int i = 0; i < reps; ++i) {
    CUDA_CHECK(cudaMemsetAsync(flush.p, i, flush_bytes));  // evict the cache from L2
    t.start();
    cuda::attention_decode(p, ws.p, ws_bytes, nullptr);
    secs.push_back(t.stop_seconds());
  }
  CUDA_CHECK(cudaGetLastError());
  return {context, group, median(secs), 2.0 * static_cast<double>(block) + 2.0 * static_cast<double>(q.size()) * 4};
}

struct Options {
  std::vector<int64_t> contexts{4096, 8192, 32768}, groups{1, 4, 7, 8};
  int64_t copy_mib = 1024, reps = 20;
};

// "1,2,3" of positive numbers, or empty on anything else.
std::vector<int64_t> positive_list(const std::string& text) {
  std::vector<int64_t> v;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, comma - at);
    char* end = nullptr;
    const long long x = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || x < 1 || x > (int64_t{1} << 24)) return {};
    v.push_back(x);
    at = comma + 1;
  }
  return v;
}

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "kvinfer-bench-cuda-attention: %s needs a value\n", a.c_str());
      return false;
    }
    const std::string value = argv[++i];
    std::vector<int64_t> list = positive_list(value);
    const bool one = list.size() == 1;
    if (a == "--contexts" && !list.empty()) {
      o.contexts = list;
    } else if (a == "--groups" && !list.empty()) {
      o.groups = list;
    } else if (a == "--copy-mib" && one) {
      o.copy_mib = list[0];
    } else if (a == "--reps" && one) {
      o.reps = list[0];
    } else {
      std::fprintf(stderr, "kvinfer-bench-cuda-attention: %s %s: %s\n", a.c_str(), value.c_str(),
                   a == "--contexts" || a == "--groups" || a == "--copy-mib" || a == "--reps"
                       ? "not a positive number (lists: comma-separated)"
                       : "unknown option (--contexts, --groups, --copy-mib, --reps)");
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, o)) return 2;
  if (kvinfer::cuda_device_count() == 0) {
    std::printf("no CUDA device: decode attention benchmark not run\n");
    return 0;
  }
  try {
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    const double copy =
        kvinfer::cuda_backend::measure_copy_bandwidth(static_cast<size_t>(o.copy_mib) << 20).bytes_per_s;
    std::printf("device: %s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);
    std::printf("copy bandwidth (D2D %lld MiB, read + write): %.0f GB/s\n\n", static_cast<long long>(o.copy_mib),
                copy * 1e-9);
    std::printf("decode attention, head_dim 128, bf16 cache, 8 KV heads\n");
    std::printf("%8s %6s %6s %10s %10s %9s %7s\n", "context", "group", "heads", "KV MiB", "time us", "GB/s", "% copy");
    const size_t flush_bytes = std::max<size_t>(static_cast<size_t>(prop.l2CacheSize) * 4, size_t{256} << 20);
    Buffer flush(flush_bytes);
    for (int64_t context : o.contexts)
      for (int64_t group : o.groups) {
        const Row r = decode(context, group, static_cast<int>(o.reps), flush, flush_bytes);
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
