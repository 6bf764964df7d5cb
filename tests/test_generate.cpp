// Greedy generation: stop conditions, capacity, statistics, and argmax ties.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "kvinfer/kvinfer.h"
#include "reference.h"
#include "sampling_presets.h"

namespace kvinfer {
namespace {

class GenerateTest : public ::testing::Test {
 protected:
  std::shared_ptr<const Model> model_ = Model::load(test::model_dir("llama_gqa4"), {.device = Device::CPU});
  test::Reference ref_{"llama_gqa4"};
};

TEST_F(GenerateTest, StopsAtFirstEosIdAndIncludesIt) {
  // llama_gqa4's eos ids are [1, 2]; make the 5th greedy token a stop id instead.
  const int32_t stop = ref_.greedy_ids[4];
  ASSERT_EQ(std::find(ref_.greedy_ids.begin(), ref_.greedy_ids.begin() + 4, stop), ref_.greedy_ids.begin() + 4);
  KvCache kv(*model_, 64);
  Session s(model_);
  GenerateOptions opt;
  opt.stop_ids = {stop};
  auto r = generate_greedy(s, kv, ref_.prompt_ids, opt);
  EXPECT_EQ(r.stop, StopReason::Eos);
  EXPECT_EQ(r.tokens, std::vector<int32_t>(ref_.greedy_ids.begin(), ref_.greedy_ids.begin() + 5));
  EXPECT_EQ(r.stats.prompt_tokens, static_cast<int64_t>(ref_.prompt_ids.size()));
  EXPECT_GT(r.stats.prefill_seconds, 0.0);
  // The stop token was generated but never fed back: the cache holds prompt + 4 tokens.
  EXPECT_EQ(kv.size(), static_cast<int64_t>(ref_.prompt_ids.size()) + 4);
}

TEST_F(GenerateTest, ModelEosIdsStopUnlessIgnored) {
  // HF's greedy continuation of this fixture meets eos id 1 (of [1, 2]) at step 26.
  ASSERT_EQ(model_->config().eos_token_ids, (std::vector<int32_t>{1, 2}));
  ASSERT_EQ(ref_.greedy_ids[26], 1);
  Session s(model_);
  GenerateOptions opt;
  opt.max_new_tokens = 32;
  KvCache kv(*model_, 64);
  auto r = generate_greedy(s, kv, ref_.prompt_ids, opt);
  EXPECT_EQ(r.stop, StopReason::Eos);
  EXPECT_EQ(r.tokens, std::vector<int32_t>(ref_.greedy_ids.begin(), ref_.greedy_ids.begin() + 27));
  opt.ignore_eos = true;
  KvCache kv2(*model_, 64);
  r = generate_greedy(s, kv2, ref_.prompt_ids, opt);
  EXPECT_EQ(r.stop, StopReason::MaxTokens);
  EXPECT_EQ(r.tokens, ref_.greedy_ids);
}

TEST_F(GenerateTest, MaxNewTokensAndZero) {
  KvCache kv(*model_, 64);
  Session s(model_);
  GenerateOptions opt;
  opt.max_new_tokens = 3;
  opt.ignore_eos = true;
  auto r = generate_greedy(s, kv, ref_.prompt_ids, opt);
  EXPECT_EQ(r.tokens.size(), 3u);
  EXPECT_EQ(r.stop, StopReason::MaxTokens);
  kv.clear();
  opt.max_new_tokens = 0;
  r = generate_greedy(s, kv, ref_.prompt_ids, opt);
  EXPECT_TRUE(r.tokens.empty());
  EXPECT_EQ(kv.size(), 0);
  opt.max_new_tokens = -1;
  EXPECT_THROW(generate_greedy(s, kv, ref_.prompt_ids, opt), Error);
}

TEST_F(GenerateTest, FullCacheStopsWithContextFullInBothModes) {
  const int64_t T = static_cast<int64_t>(ref_.prompt_ids.size());
  for (bool cached : {true, false}) {
    KvCache kv(*model_, T + 5);
    Session s(model_);
    GenerateOptions opt;
    opt.max_new_tokens = 100;
    opt.ignore_eos = true;
    opt.use_kv_cache = cached;
    auto r = generate_greedy(s, kv, ref_.prompt_ids, opt);
    EXPECT_EQ(r.stop, StopReason::ContextFull);
    // T + 5 positions hold the prompt and 5 fed-back tokens; the 6th token needs no position.
    EXPECT_EQ(r.tokens, std::vector<int32_t>(ref_.greedy_ids.begin(), ref_.greedy_ids.begin() + 6));
    EXPECT_EQ(kv.size(), T + 5);
  }
}

TEST_F(GenerateTest, CallbackCanStop) {
  KvCache kv(*model_, 64);
  Session s(model_);
  int calls = 0;
  auto r = generate_greedy(s, kv, ref_.prompt_ids, {}, [&](int32_t, std::span<const float> logits) {
    EXPECT_EQ(logits.size(), 128u);
    return ++calls < 2;
  });
  EXPECT_EQ(r.stop, StopReason::Callback);
  EXPECT_EQ(r.tokens.size(), 2u);
}

TEST_F(GenerateTest, MultiTurnPrefillAppendsToTheCache) {
  // Prefill in two parts == one prefill of the concatenation, bit for bit.
  Session s(model_);
  const auto& p = ref_.prompt_ids;
  KvCache a(*model_, 32, DType::F32), b(*model_, 32, DType::F32);
  auto whole = s.prefill(a, p);
  std::vector<float> want(whole.begin(), whole.end());
  s.prefill(b, std::span(p).first(4));
  auto split = s.prefill(b, std::span(p).subspan(4));
  EXPECT_TRUE(std::equal(want.begin(), want.end(), split.begin()));
  EXPECT_EQ(a.size(), b.size());
}

TEST_F(GenerateTest, TruncateRewindsToAnEarlierPosition) {
  // Rewinding and re-decoding gives the same logits as the first time.
  Session s(model_);
  KvCache kv(*model_, 32, DType::F32);
  s.prefill(kv, ref_.prompt_ids);
  auto first = s.decode(kv, ref_.greedy_ids[0]);
  std::vector<float> want(first.begin(), first.end());
  s.decode(kv, ref_.greedy_ids[1]);
  kv.truncate(static_cast<int64_t>(ref_.prompt_ids.size()));
  auto again = s.decode(kv, ref_.greedy_ids[0]);
  EXPECT_TRUE(std::equal(want.begin(), want.end(), again.begin()));
  EXPECT_THROW(kv.truncate(kv.size() + 1), Error);
  kv.clear();
  EXPECT_EQ(kv.size(), 0);
}

// Session::step / sample / logits on the CPU: the logits prefill and decode return, and the ids
// Sampler::sample picks from them; no logits before a call or after one that threw.
TEST_F(GenerateTest, StepAndSampleAreDecodeAndSamplerSample) {
  SamplingParams p = test::llama_cpp_sampling();
  p.seed = 11;
  p.repetition_penalty = 1.2f;
  p.logit_bias = {{7, 1.0f}};
  const int32_t vocab = 128;
  Session a(model_), b(model_);
  KvCache ka(*model_, 32, DType::F32), kb(*model_, 32, DType::F32);
  Sampler sa(p, vocab), sb(p, vocab);
  sa.accept(ref_.prompt_ids);
  sb.accept(ref_.prompt_ids);
  EXPECT_THROW(a.sample(sa), Error);
  EXPECT_THROW(a.logits(), Error);
  auto logits = b.prefill(kb, ref_.prompt_ids);
  a.step(ka, ref_.prompt_ids);
  for (int i = 0; i < 12; ++i) {
    const auto got = a.logits();
    ASSERT_EQ(got.size(), logits.size());
    EXPECT_TRUE(std::equal(got.begin(), got.end(), logits.begin())) << "step " << i;
    const int32_t id = a.sample(sa), want = sb.sample(logits);
    ASSERT_EQ(id, want) << "step " << i;
    sa.accept(id);
    sb.accept(want);
    a.step(ka, id);
    logits = b.decode(kb, want);
  }
  EXPECT_EQ(ka.size(), kb.size());
  // After prefill with Logits::All, sample() reads the last row.
  KvCache kc(*model_, 32, DType::F32);
  Session c(model_);
  const auto all = c.prefill(kc, ref_.prompt_ids, Logits::All);
  EXPECT_EQ(c.logits().size(), all.size());
  Sampler g(SamplingParams::greedy(), vocab);
  EXPECT_EQ(c.sample(g), argmax(all.last(128)));
  // A call that throws leaves no logits; a sampler for another vocabulary is refused.
  EXPECT_THROW(c.step(kc, std::vector<int32_t>{vocab}), Error);
  EXPECT_THROW(c.sample(g), Error);
  c.step(kc, 3);
  Sampler other(SamplingParams::greedy(), vocab + 1);
  EXPECT_THROW(c.sample(other), Error);
  EXPECT_NO_THROW(c.sample(g));
}

TEST(Argmax, LowestIndexWinsTies) {
  const float l[] = {0.5f, 2.0f, -1.0f, 2.0f};
  EXPECT_EQ(argmax(l), 1);
  EXPECT_THROW(argmax(std::span<const float>{}), Error);
}

}  // namespace
}  // namespace kvinfer
