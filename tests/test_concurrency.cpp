// Concurrent sessions over one shared model (the ThreadSanitizer build runs this file: see
// tools/sanitize.sh): 4 threads generate at once, each with its own Session, KvCache and
// sampler, and every thread's tokens and logits equal, bit for bit, those of the same request
// run alone.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kvinfer/chat_template.h"
#include "kvinfer/generate.h"
#include "kvinfer/model.h"
#include "kvinfer/session.h"
#include "kvinfer/tokenizer.h"
#include "test_files.h"

namespace kvinfer {
namespace {

// One request's result: its tokens, and the bits of every logit it was sampled from.
struct Run {
  std::vector<int32_t> tokens;
  std::vector<uint32_t> logit_bits;
  bool operator==(const Run&) const = default;
};

Run generate_one(const std::shared_ptr<const Model>& model, const std::vector<int32_t>& prompt, uint64_t seed,
                 bool use_kv_cache) {
  Session session(model);
  KvCache kv(*model, 64);
  GenerateOptions opt;
  opt.max_new_tokens = 12;
  opt.ignore_eos = true;
  opt.use_kv_cache = use_kv_cache;
  opt.sampling = SamplingParams{};  // temperature 0.8, top-k 40, top-p 0.95, min-p 0.05
  opt.sampling.seed = seed;
  Run run;
  const auto result = generate_tokens(session, kv, prompt, opt, [&](int32_t, std::span<const float> logits) {
    for (float v : logits) {
      uint32_t bits;
      std::memcpy(&bits, &v, sizeof bits);
      run.logit_bits.push_back(bits);
    }
    return true;
  });
  run.tokens = result.tokens;
  return run;
}

void expect_concurrent_equals_sequential(const std::shared_ptr<const Model>& model) {
  const int64_t vocab = model->config().vocab_size;
  std::vector<std::vector<int32_t>> prompts;
  for (int k = 0; k < 4; ++k) {
    std::vector<int32_t> p;
    for (int i = 0; i < 5 + 3 * k; ++i) p.push_back(static_cast<int32_t>((17 * i + 29 * k + 3) % vocab));
    prompts.push_back(p);
  }
  // Threads 0 and 1 use the cache, 2 and 3 recompute (the cache-off path) at the same time.
  auto request = [&](size_t k) { return generate_one(model, prompts[k], 1000 + k, k < 2); };
  std::vector<Run> alone;
  for (size_t k = 0; k < 4; ++k) {
    alone.push_back(request(k));
    ASSERT_EQ(alone.back().tokens.size(), 12u);
    ASSERT_EQ(alone.back().logit_bits.size(), static_cast<size_t>(12 * vocab));
  }
  for (int round = 0; round < 2; ++round) {
    std::vector<Run> together(4);
    std::vector<std::thread> threads;
    for (size_t k = 0; k < 4; ++k) threads.emplace_back([&, k] { together[k] = request(k); });
    for (auto& t : threads) t.join();
    for (size_t k = 0; k < 4; ++k) {
      EXPECT_EQ(together[k].tokens, alone[k].tokens) << "thread " << k << ", round " << round;
      EXPECT_TRUE(together[k].logit_bits == alone[k].logit_bits) << "thread " << k << ", round " << round;
    }
  }
}

TEST(ConcurrentSessions, FourThreadsGenerateAsSequentialRunsLlama) {
  expect_concurrent_equals_sequential(Model::load(test::fixture_dir("llama_gqa4"), {.device = Device::CPU}));
}

TEST(ConcurrentSessions, FourThreadsGenerateAsSequentialRunsGpt2Gguf) {
  expect_concurrent_equals_sequential(
      Model::load(std::filesystem::path(KVINFER_TEST_DATA) / "gguf" / "models" / "gpt2_tiny.q8_0.gguf",
                  {.device = Device::CPU}));
}

// Shared tokenizer and chat template: 4 threads encode and render at once, as one would alone.
TEST(ConcurrentSessions, TokenizerAndChatTemplateAreSharedSafely) {
  const auto model = Model::load(test::fixture_dir("chatml_tiny"), {.device = Device::CPU});
  const Tokenizer tok = Tokenizer::from_hf(test::fixture_dir("chatml_tiny"));
  const ChatTemplate tmpl(test::read_bytes(std::filesystem::path(KVINFER_TEST_DATA) / "chat" / "templates" /
                                           "smollm2.jinja"));
  auto work = [&](int k) {
    const std::vector<ChatMessage> messages = {{"user", "Hello number " + std::to_string(k) + "!"}};
    const std::string prompt = tmpl.render(messages, true);
    return std::make_pair(prompt, tok.encode(prompt));
  };
  std::vector<std::pair<std::string, std::vector<int32_t>>> alone, together(4);
  for (int k = 0; k < 4; ++k) alone.push_back(work(k));
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k) threads.emplace_back([&, k] {
    for (int r = 0; r < 20; ++r) together[static_cast<size_t>(k)] = work(k);
  });
  for (auto& t : threads) t.join();
  EXPECT_EQ(together, alone);
  (void)model;
}

}  // namespace
}  // namespace kvinfer
