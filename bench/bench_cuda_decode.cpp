// End-to-end CUDA benchmark on a ≥ 1B-parameter Llama-style model with random bf16 weights
// built in memory (TinyLlama-1.1B's shape): prefill tokens/s, batch-1 decode tokens/s and the
// achieved bandwidth of a decode step, decode_step_bytes (models/decode_bytes.h: weights, KV
// read and written) at the middle step's context / step time, against the device copy bandwidth
// (cuda_backend::measure_copy_bandwidth). Prints one table; exits 0 with a message without a
// device. kvinfer-bench --device cuda reports the same floor for any shape and weight dtype.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "cuda/device_memory.h"
#include "kvinfer/kvinfer.h"
#include "models/decode_bytes.h"
#include "models/synthetic.h"

namespace {

using namespace kvinfer;
using Clock = std::chrono::steady_clock;

}  // namespace

int main() {
  if (cuda_device_count() == 0) {
    std::printf("no CUDA device: nothing to benchmark\n");
    return 0;
  }
  try {
    const ModelConfig cfg = synthetic_config("tinyllama-1.1b");
    auto model = random_model(cfg, {.weight_dtype = DType::BF16, .device = Device::CUDA});
    const double copy_gbs = cuda_backend::measure_copy_bandwidth().bytes_per_s / 1e9;
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
    // The middle decode step attends the prompt, the first token and steps / 2 decoded ones.
    const double step_bytes =
        static_cast<double>(decode_step_bytes(*model, prompt_len + 1 + steps / 2, DType::BF16).total());
    const double achieved = step_bytes / median / 1e9;
    std::printf("| metric | value |\n|---|---|\n");
    std::printf("| model | TinyLlama-1.1B shape, bf16 random weights, %.2f GB |\n", static_cast<double>(model->weight_bytes()) / 1e9);
    std::printf("| device copy bandwidth (read+write) | %.0f GB/s |\n", copy_gbs);
    std::printf("| prefill %lld tokens | %.0f tokens/s |\n", static_cast<long long>(prompt_len),
                static_cast<double>(prompt_len) / prefill_s);
    std::printf("| decode batch 1 (median of %lld steps) | %.1f tokens/s, %.3f ms/step |\n",
                static_cast<long long>(steps), 1.0 / median, median * 1e3);
    std::printf("| decode achieved bandwidth | %.0f GB/s = %.0f%% of copy (%.3f GB a step) |\n", achieved,
                100.0 * achieved / copy_gbs, step_bytes / 1e9);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_cuda_decode: %s\n", e.what());
    return 1;
  }
  return 0;
}
