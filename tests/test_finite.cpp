// NaN and Inf never come out as a result. Every call's logits are scanned: non-finite logits
// throw, the call is undone and the message suggests the debug option. With the debug option
// (LoadOptions::check_finite or $KVINFER_CHECK_FINITE=1) the residual stream is checked after the
// embedding and after every attention and feed-forward block, and the error names the first
// layer and block where a non-finite value appeared, the position, the token and the hidden index.
// Each test poisons one weight of a copy of a fixture checkpoint.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "cache_invariance.h"
#include "kvinfer/kvinfer.h"
#include "test_files.h"

namespace kvinfer {
namespace {

namespace fs = std::filesystem;
using test::copy_fixture;
using test::error_of;
using test::ScopedEnv;
using test::TempDir;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// llama_mha: f32, untied, 2 layers, hidden 64, intermediate 64, vocab 128.
const std::string kLlama = "llama_mha";

// Writes `value` into element `index` (row-major, as stored) of the f32 tensor `name` of
// dir/model.safetensors.
void poison(const fs::path& dir, const std::string& name, size_t index, float value) {
  const fs::path file = dir / "model.safetensors";
  auto parts = test::SafetensorsParts::read(file);
  const auto& entry = parts.header.at(name);
  ASSERT_EQ(entry.at("dtype"), "F32") << name;
  const auto begin = entry.at("data_offsets")[0].get<size_t>();
  ASSERT_LT(begin + 4 * index, entry.at("data_offsets")[1].get<size_t>()) << name;
  std::memcpy(parts.data.data() + begin + 4 * index, &value, sizeof value);
  parts.write(file);
}

// A poisoned copy of `fixture`.
fs::path poisoned(const TempDir& tmp, const std::string& fixture, const std::string& tensor, size_t index,
                  float value) {
  const fs::path dir = copy_fixture(fixture, tmp);
  poison(dir, tensor, index, value);
  return dir;
}

std::shared_ptr<const Model> load(const fs::path& dir, bool check_finite, Device device = Device::CPU) {
  LoadOptions o;
  o.device = device;
  o.check_finite = check_finite;
  return Model::load(dir, o);
}

using test::filled_kv;

const std::vector<int32_t> kPrompt = {3, 5, 9};

// ---- the debug option: the first layer and block ----

TEST(CheckFinite, NamesTheFeedForwardBlockOfTheLayerWhereNaNAppears) {
  ScopedEnv env("KVINFER_CHECK_FINITE", std::nullopt);
  TempDir tmp;
  // down_proj (hidden 64 × intermediate 64): a NaN in row 5 makes hidden unit 5 NaN.
  const fs::path dir = poisoned(tmp, kLlama, "model.layers.1.mlp.down_proj.weight", 5 * 64 + 3, kNaN);
  auto model = load(dir, true);
  KvCache kv(*model, 16);
  Session s(model);
  EXPECT_THAT(error_of([&] { s.prefill(kv, kPrompt); }),
              HasSubstr("non-finite value nan in the residual stream after layer 1 (feed-forward block), at position "
                        "0 (token id 3, index 0 of this call), hidden index 5; everything before it was finite"));
  EXPECT_EQ(kv.size(), 0);
}

TEST(CheckFinite, NamesTheAttentionBlockAndCatchesInf) {
  ScopedEnv env("KVINFER_CHECK_FINITE", std::nullopt);
  TempDir tmp;
  // o_proj row 3 holds +Inf: hidden unit 3 becomes ±Inf (or NaN) after layer 0's attention.
  const fs::path dir = poisoned(tmp, kLlama, "model.layers.0.self_attn.o_proj.weight", 3 * 64 + 10, kInf);
  auto model = load(dir, true);
  KvCache kv(*model, 16);
  Session s(model);
  EXPECT_THAT(error_of([&] { s.prefill(kv, kPrompt); }),
              AllOf(HasSubstr("in the residual stream after layer 0 (attention block), at position 0"),
                    HasSubstr("hidden index 3;")));
}

TEST(CheckFinite, NamesTheEmbeddingAndThePositionAndLeavesTheCacheAsItWas) {
  ScopedEnv env("KVINFER_CHECK_FINITE", std::nullopt);
  TempDir tmp;
  // Only token 42's embedding row is poisoned (the LM head is a separate tensor): other tokens run.
  const fs::path dir = poisoned(tmp, kLlama, "model.embed_tokens.weight", 42 * 64 + 7, kNaN);
  auto model = load(dir, true);
  KvCache kv(*model, 16);
  Session s(model);
  s.prefill(kv, std::vector<int32_t>{3, 5});
  const auto before = filled_kv(kv);
  EXPECT_THAT(error_of([&] { s.prefill(kv, std::vector<int32_t>{9, 42, 11}); }),
              HasSubstr("non-finite value nan in the residual stream after the token embedding, at position 3 "
                        "(token id 42, index 1 of this call), hidden index 7"));
  EXPECT_THAT(error_of([&] { s.decode(kv, 42); }),
              HasSubstr("after the token embedding, at position 2 (token id 42, index 0 of this call)"));
  EXPECT_EQ(kv.size(), 2);
  EXPECT_EQ(filled_kv(kv), before);
  // The next call sees exactly what a run without the failed calls sees.
  const auto got = s.decode(kv, 9);
  const std::vector<float> after_errors(got.begin(), got.end());
  KvCache fresh_kv(*model, 16);
  Session fresh(model);
  fresh.prefill(fresh_kv, std::vector<int32_t>{3, 5});
  const auto want = fresh.decode(fresh_kv, 9);
  EXPECT_EQ(after_errors, std::vector<float>(want.begin(), want.end()));
}

TEST(CheckFinite, Gpt2NamesTheLayerAndBlock) {
  ScopedEnv env("KVINFER_CHECK_FINITE", std::nullopt);
  TempDir tmp;
  // Conv1D weights are stored (in, out): element (c, r) is output unit r's weight for input c.
  {
    const fs::path dir = poisoned(tmp, "gpt2_tiny", "transformer.h.1.mlp.c_proj.weight", 10 * 64 + 5, kNaN);
    auto model = load(dir, true);
    KvCache kv(*model, 16);
    Session s(model);
    EXPECT_THAT(error_of([&] { s.prefill(kv, kPrompt); }),
                HasSubstr("after layer 1 (feed-forward block), at position 0 (token id 3, index 0 of this call), "
                          "hidden index 5"));
  }
  TempDir tmp2;
  const fs::path dir = poisoned(tmp2, "gpt2_tiny", "transformer.h.0.attn.c_proj.weight", 2 * 64 + 9, kNaN);
  auto model = load(dir, true);
  KvCache kv(*model, 16);
  Session s(model);
  EXPECT_THAT(error_of([&] { s.prefill(kv, kPrompt); }),
              HasSubstr("after layer 0 (attention block), at position 0 (token id 3, index 0 of this call), hidden "
                        "index 9"));
}

TEST(CheckFinite, EnvironmentVariableTurnsItOn) {
  TempDir tmp;
  const fs::path dir = poisoned(tmp, kLlama, "model.layers.1.mlp.down_proj.weight", 5 * 64, kNaN);
  {
    ScopedEnv env("KVINFER_CHECK_FINITE", "1");
    auto model = Model::load(dir, {.device = Device::CPU});
    EXPECT_TRUE(model->check_finite());
    KvCache kv(*model, 16);
    Session s(model);
    EXPECT_THAT(error_of([&] { s.prefill(kv, kPrompt); }), HasSubstr("after layer 1 (feed-forward block)"));
  }
  ScopedEnv off("KVINFER_CHECK_FINITE", "0");
  EXPECT_FALSE(Model::load(dir, {.device = Device::CPU})->check_finite());
}

TEST(CheckFinite, ChangesNoResult) {
  ScopedEnv env("KVINFER_CHECK_FINITE", std::nullopt);
  const fs::path dir = test::fixture_dir(kLlama);
  auto off = load(dir, false), on = load(dir, true);
  ASSERT_TRUE(on->check_finite());
  ASSERT_FALSE(off->check_finite());
  std::vector<float> logits[2];
  for (int checked = 0; checked < 2; ++checked) {
    auto model = checked ? on : off;
    KvCache kv(*model, 16);
    Session s(model);
    auto l = s.prefill(kv, kPrompt, Logits::All);
    logits[checked].assign(l.begin(), l.end());
    for (int32_t id : {7, 8, 9}) {
      l = s.decode(kv, id);
      logits[checked].insert(logits[checked].end(), l.begin(), l.end());
    }
  }
  ASSERT_EQ(logits[0].size(), logits[1].size());
  EXPECT_EQ(0, std::memcmp(logits[0].data(), logits[1].data(), logits[0].size() * sizeof(float)));
  test::expect_cache_on_equals_off(on, kPrompt, 8);  // with the checks on
}

// ---- always on: the logits ----

TEST(FiniteLogits, NonFiniteLogitsThrowAndSuggestTheDebugOption) {
  ScopedEnv env("KVINFER_CHECK_FINITE", std::nullopt);
  TempDir tmp;
  // The final norm's unit 4 is NaN: the residual stream is finite, every logit is NaN.
  const fs::path dir = poisoned(tmp, kLlama, "model.norm.weight", 4, kNaN);
  auto model = load(dir, false);
  KvCache kv(*model, 16);
  Session s(model);
  EXPECT_THAT(error_of([&] { s.prefill(kv, kPrompt); }),
              AllOf(HasSubstr("non-finite logits: 128 of the 128 logits are NaN or Inf; the first, nan for vocabulary "
                              "id 0, at position 2 (token id 9, index 2 of this call). The call was undone: the KV "
                              "cache holds 0 positions as before."),
                    HasSubstr("Load with LoadOptions::check_finite = true (or set KVINFER_CHECK_FINITE=1) to find "
                              "the layer where they first appear")));
  EXPECT_EQ(kv.size(), 0);
  EXPECT_THAT(error_of([&] { s.prefill(kv, kPrompt, Logits::All); }),
              HasSubstr("384 of the 384 logits are NaN or Inf; the first, nan for vocabulary id 0, at position 0 "
                        "(token id 3, index 0 of this call)"));
  EXPECT_EQ(kv.size(), 0);

  // With the debug option every block was finite: the message says the final norm or LM head.
  auto checked = load(dir, true);
  KvCache kv2(*checked, 16);
  Session s2(checked);
  EXPECT_THAT(error_of([&] { s2.prefill(kv2, kPrompt); }),
              AllOf(HasSubstr("non-finite logits"),
                    HasSubstr("The residual stream was finite after every layer (check_finite is on): the final norm "
                              "or the LM head produced them"),
                    Not(HasSubstr("Load with"))));
}

TEST(FiniteLogits, ADecodeWithNonFiniteLogitsIsUndone) {
  ScopedEnv env("KVINFER_CHECK_FINITE", std::nullopt);
  TempDir tmp;
  // Without the debug option, token 42's poisoned embedding reaches the logits.
  const fs::path dir = poisoned(tmp, kLlama, "model.embed_tokens.weight", 42 * 64 + 7, kInf);
  auto model = load(dir, false);
  KvCache kv(*model, 16);
  Session s(model);
  s.prefill(kv, kPrompt);
  const auto before = filled_kv(kv);
  EXPECT_THAT(error_of([&] { s.decode(kv, 42); }),
              AllOf(HasSubstr("non-finite logits"), HasSubstr("at position 3 (token id 42, index 0 of this call)"),
                    HasSubstr("the KV cache holds 3 positions as before"), HasSubstr("LoadOptions::check_finite")));
  EXPECT_EQ(kv.size(), 3);
  EXPECT_EQ(filled_kv(kv), before);
  EXPECT_NO_THROW(s.decode(kv, 9));
  EXPECT_EQ(kv.size(), 4);
}

// A sliding-window model (mistral_window: window 6, rings of 11 rows) whose cache has wrapped: a
// call of 10 positions with non-finite logits wrote further back than the rings can rewind
// (6), so the undo computes the cache again from its ids; it continues as a run without the call.
TEST(FiniteLogits, ALongCallOnAWrappedRingIsUndone) {
  ScopedEnv env("KVINFER_CHECK_FINITE", std::nullopt);
  TempDir tmp;
  const fs::path dir = poisoned(tmp, "mistral_window", "model.embed_tokens.weight", 42 * 64 + 7, kInf);
  auto model = load(dir, false);
  std::vector<int32_t> prompt;
  for (int32_t i = 0; i < 20; ++i) prompt.push_back(3 + 5 * i % 37);
  KvCache kv(*model, 48);
  Session s(model);
  s.prefill(kv, prompt);
  const int64_t earliest = kv.earliest_rewind();
  ASSERT_GT(earliest, 0);
  const std::vector<int32_t> call = {9, 11, 13, 15, 17, 19, 21, 23, 25, 42};
  EXPECT_THAT(error_of([&] { s.prefill(kv, call); }),
              AllOf(HasSubstr("non-finite logits"), HasSubstr("the KV cache holds 20 positions as before")));
  EXPECT_EQ(kv.size(), 20);
  EXPECT_EQ(kv.earliest_rewind(), earliest);
  const auto got = s.decode(kv, 9);
  const std::vector<float> after_error(got.begin(), got.end());
  KvCache fresh_kv(*model, 48);
  Session fresh(model);
  fresh.prefill(fresh_kv, prompt);
  const auto want = fresh.decode(fresh_kv, 9);
  EXPECT_EQ(after_error, std::vector<float>(want.begin(), want.end()));
}

// ---- the same on the CUDA device ----

TEST(CheckFinite, CudaNamesTheLayerAndChecksTheLogits) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: the CUDA finite checks need one";
  ScopedEnv env("KVINFER_CHECK_FINITE", std::nullopt);
  TempDir tmp;
  const fs::path dir = poisoned(tmp, kLlama, "model.layers.1.mlp.down_proj.weight", 5 * 64 + 3, kNaN);
  {
    auto model = load(dir, true, Device::CUDA);
    KvCache kv(*model, 16);
    Session s(model);
    EXPECT_THAT(error_of([&] { s.prefill(kv, kPrompt); }),
                HasSubstr("non-finite value nan in the residual stream after layer 1 (feed-forward block), at "
                          "position 0 (token id 3, index 0 of this call), hidden index 5"));
    EXPECT_THAT(error_of([&] { s.decode(kv, 3); }), HasSubstr("after layer 1 (feed-forward block), at position 0"));
    EXPECT_EQ(kv.size(), 0);
  }
  auto model = load(dir, false, Device::CUDA);
  KvCache kv(*model, 16);
  Session s(model);
  EXPECT_THAT(error_of([&] { s.prefill(kv, kPrompt); }),
              AllOf(HasSubstr("non-finite logits"), HasSubstr("LoadOptions::check_finite")));
  EXPECT_EQ(kv.size(), 0);
}

}  // namespace
}  // namespace kvinfer
