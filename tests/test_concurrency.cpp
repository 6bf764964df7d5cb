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
#include "concurrent_generation.h"
#include "test_files.h"

namespace kvinfer {
namespace {

using test::expect_concurrent_equals_sequential;

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
