// End-to-end CUDA benchmark on a ≥ 1B-parameter Llama-style model with random bf16 weights
// built in memory (TinyLlama-1.1B's shape): prefill tokens/s, batch-1 decode tokens/s and the
// achieved bandwidth of a decode step, (weight bytes + KV bytes read) / step time, against a
// device copy bandwidth measured here. Prints one table; exits 0 with a message without a device.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "cuda/cuda_backend.h"
#include "cuda/device_memory.h"
#include "cuda_check.h"
#include "kvinfer/kvinfer.h"

namespace {

using namespace kvinfer;
using Clock = std::chrono::steady_clock;

double copy_bandwidth_gbs() {
  const size_t bytes = size_t{1} << 30;
  DeviceBuffer a(bytes, "copy source"), b(bytes, "copy destination");
  CUDA_CHECK(cudaMemset(a.get(), 1, bytes));
  cudaEvent_t e0, e1;
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));
  std::vector<double> gbs;
  for (int i = 0; i < 10; ++i) {
    CUDA_CHECK(cudaEventRecord(e0));
    CUDA_CHECK(cudaMemcpyAsync(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice));
    CUDA_CHECK(cudaEventRecord(e1));
    CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    gbs.push_back(2.0 * static_cast<double>(bytes) / (ms * 1e-3) / 1e9);  // read + write
  }
  std::sort(gbs.begin(), gbs.end());
  return gbs[gbs.size() / 2];
}

}  // namespace

int main() {
  if (cuda_device_count() == 0) {
    std::printf("no CUDA device: nothing to benchmark\n");
    return 0;
  }
  try {
    const ModelConfig cfg = synthetic_config("tinyllama-1.1b");
    auto model = random_model(cfg, {.weight_dtype = DType::BF16, .device = Device::CUDA});
    const double copy_gbs = copy_bandwidth_gbs();
    const int64_t prompt_len = 512, steps = 128;
    std::vector<int32_t> prompt(static_cast<size_t>(prompt_len));
    for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>((i * 7919) % 32000);
    Session s(model);
    KvCache kv(*model, prompt_len + steps + 1, DType::BF16);
    s.prefill(kv, prompt);  // warm-up
    kv.clear();
    auto t0 = Clock::now();
    auto logits = s.prefill(kv, prompt);
    const double prefill_s = std::chrono::duration<double>(Clock::now() - t0).count();
    int32_t next = argmax(logits);
    std::vector<double> step_s;
    for (int64_t i = 0; i < steps; ++i) {
      auto t = Clock::now();
      next = argmax(s.decode(kv, next));
      step_s.push_back(std::chrono::duration<double>(Clock::now() - t).count());
    }
    std::sort(step_s.begin(), step_s.end());
    const double median = step_s[step_s.size() / 2];
    const double kv_read = static_cast<double>(kv_bytes_per_token(cfg, DType::BF16)) *
                           static_cast<double>(prompt_len + steps / 2);
    const double step_bytes = static_cast<double>(model->step_weight_bytes()) + kv_read;
    const double achieved = step_bytes / median / 1e9;
    std::printf("| metric | value |\n|---|---|\n");
    std::printf("| model | TinyLlama-1.1B shape, bf16 random weights, %.2f GB |\n", static_cast<double>(model->weight_bytes()) / 1e9);
    std::printf("| device copy bandwidth (read+write) | %.0f GB/s |\n", copy_gbs);
    std::printf("| prefill %lld tokens | %.0f tokens/s |\n", static_cast<long long>(prompt_len),
                static_cast<double>(prompt_len) / prefill_s);
    std::printf("| decode batch 1 (median of %lld steps) | %.1f tokens/s, %.3f ms/step |\n",
                static_cast<long long>(steps), 1.0 / median, median * 1e3);
    std::printf("| decode achieved bandwidth | %.0f GB/s = %.0f%% of copy |\n", achieved, 100.0 * achieved / copy_gbs);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_cuda_decode: %s\n", e.what());
    return 1;
  }
  return 0;
}
