// Session::batch on CUDA: every sequence's logits are the bits its own calls give alone (the
// same prompt chunks, batch_invariance.h), with short sequences' rows sharing gemv launches and
// long ones taking their own GEMMs; and the scheduler's tokens equal generating alone with the
// prompt in the same chunks. Runs on a device, or on the simulated one (label cuda_sim).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "batch_invariance.h"
#include "kvinfer/kvinfer.h"

namespace kvinfer {
namespace {

namespace fs = std::filesystem;
const fs::path kModels = fs::path(KVINFER_TEST_DATA) / "models";

#define SKIP_WITHOUT_DEVICE()                                                   \
  do {                                                                          \
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: the CUDA batch tests need one"; \
  } while (0)

class CudaBatchInvariance : public ::testing::TestWithParam<const char*> {};

TEST_P(CudaBatchInvariance, EverySequenceMatchesItsOwnCalls) {
  SKIP_WITHOUT_DEVICE();
  const auto model = Model::load(kModels / GetParam(), {.device = Device::CUDA});
  // Up to 12 sequences, prompts of 1..24 tokens (chunks above and below gemv's 8 rows), 3 steps.
  EXPECT_GE(test::expect_batch_invariant(model, 12, 24, 3, 5), 4u);
}

// f32 (llama_gqa4), bf16 weights, GPT-2's layer norms and biases, Mistral's window.
INSTANTIATE_TEST_SUITE_P(Fixtures, CudaBatchInvariance,
                         ::testing::Values("llama_gqa4", "llama_bf16", "gpt2_tiny", "mistral_window", "mixtral_tiny",
                                           "qwen2_moe_tiny", "qwen3_moe_tiny"),
                         [](const ::testing::TestParamInfo<const char*>& p) { return std::string(p.param); });

// One long prompt beside decoding sequences: its chunk's GEMM and their gemv rows in one step
// give each the bits of its own call.
TEST(CudaScheduler, TokensEqualGeneratingAloneInTheSameChunks) {
  SKIP_WITHOUT_DEVICE();
  const auto model = Model::load(kModels / "llama_gqa4", {.device = Device::CUDA});
  std::vector<SchedulerRequest> requests;
  for (int i = 0; i < 4; ++i) {
    SchedulerRequest r;
    for (int t = 0; t < 6 + 5 * i; ++t) r.prompt.push_back((7 * t + 3 * i) % 128);
    r.options = {.max_new_tokens = 5, .ignore_eos = true};
    requests.push_back(std::move(r));
  }
  // step_tokens 64: every prompt fits its first step, so each is prefilled in one chunk, as alone.
  Scheduler sched(model, {.step_tokens = 64, .max_sequences = 4});
  std::vector<SequenceResult> results(requests.size());
  for (size_t i = 0; i < requests.size(); ++i)
    sched.submit(requests[i], {}, [&results, i](const SequenceResult& r) { results[i] = r; });
  sched.run_until_idle();
  for (size_t i = 0; i < requests.size(); ++i) {
    Session s(model);
    KvCache kv(*model, 64);
    EXPECT_EQ(results[i].result.tokens, generate_tokens(s, kv, requests[i].prompt, requests[i].options).tokens)
        << "request " << i;
  }
}

}  // namespace
}  // namespace kvinfer
