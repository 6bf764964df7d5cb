// Session::batch: many sequences in one forward pass, each over its own cache, with every
// sequence's logits bit-identical to its solo run (batch_invariance.h), on the HF fixtures and
// the default model; and the checks and undo of a batch.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "batch_invariance.h"
#include "kvinfer/kvinfer.h"

namespace kvinfer {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

const fs::path kModels = fs::path(KVINFER_TEST_DATA) / "models";

class BatchInvariance : public ::testing::TestWithParam<const char*> {};

TEST_P(BatchInvariance, EverySequenceMatchesItsSoloRun) {
  const auto model = Model::load(kModels / GetParam(), {.device = Device::CPU, .threads = 1});
  for (uint64_t seed : {1u, 2u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    // Up to 24 sequences, prompts of 1..20 tokens, 6 decode steps each.
    EXPECT_GE(test::expect_batch_invariant(model, 24, 20, 6, seed), 8u);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, BatchInvariance,
                         ::testing::Values("llama_gqa4", "llama_mqa", "gpt2_tiny", "qwen2_bias", "mistral_window",
                                           "llama_bf16", "chatml_tiny", "qwen3_tiny", "gemma2_tiny", "gemma3_tiny",
                                           "qwen2_window", "mixtral_tiny", "qwen2_moe_tiny", "llama_yarn",
                                           "phi3_longrope", "phi4_partial_rotary", "qwen3_moe_tiny"),
                         [](const ::testing::TestParamInfo<const char*>& p) { return std::string(p.param); });

TEST(BatchInvarianceThreads, ResultsDoNotDependOnTheThreadCounts) {
  const auto model = Model::load(kModels / "llama_gqa4", {.device = Device::CPU, .threads = 1});
  Session solo(model, {.threads = 1}), batched(model, {.threads = 2});
  test::expect_batch_invariant(model, 12, 16, 4, 7, &batched, &solo);
}

TEST(BatchInvarianceDefaultModel, ThirtyTwoSequencesMatchTheirSoloRuns) {
  const char* env = std::getenv("KVINFER_MODEL");
  const fs::path file = env != nullptr && *env != '\0' ? fs::path(env) : fs::path(KVINFER_DEFAULT_MODEL);
  if (!fs::exists(file))
    GTEST_SKIP() << file.string() << " is absent: run tools/fetch_model.sh (or set $KVINFER_MODEL) to test the default model";
  const auto model = Model::load(file, {.device = Device::CPU, .threads = 2});
  EXPECT_GE(test::expect_batch_invariant(model, 32, 24, 3, 11), 16u);
}

class BatchErrors : public ::testing::Test {
 protected:
  std::shared_ptr<const Model> model_ = Model::load(kModels / "llama_gqa4", {.device = Device::CPU, .threads = 1});
  Session session_{model_};

  std::string error_of(ErrorKind kind, const std::vector<BatchItem>& items) {
    try {
      session_.batch(items);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), kind) << e.what();
      return e.what();
    }
    ADD_FAILURE() << "no error";
    return "";
  }
};

TEST_F(BatchErrors, EachItemIsCheckedAndNothingRuns) {
  KvCache a(*model_, 16), b(*model_, 4);
  const std::vector<int32_t> ok{1, 2, 3}, bad{1, 200}, five{1, 2, 3, 4, 5};
  session_.prefill(a, ok);
  EXPECT_THAT(error_of(ErrorKind::InvalidArgument, {}), HasSubstr("no items"));
  EXPECT_THAT(error_of(ErrorKind::InvalidArgument, {{&a, ok}, {&a, ok}}),
              HasSubstr("batch item 1: the same KV cache as item 0"));
  EXPECT_THAT(error_of(ErrorKind::InvalidArgument, {{&a, ok}, {&b, bad}}),
              HasSubstr("batch item 1: token id 200 at index 1 is outside the vocabulary (size 128)"));
  EXPECT_THAT(error_of(ErrorKind::ContextFull, {{&a, ok}, {&b, five}}),
              HasSubstr("batch item 1: 5 tokens do not fit in the KV cache: 4 of 4 positions are free"));
  EXPECT_THAT(error_of(ErrorKind::InvalidArgument, {{&a, ok}, {nullptr, ok}}), HasSubstr("batch item 1: no KV cache"));
  EXPECT_THAT(error_of(ErrorKind::InvalidArgument, {{&a, {}}}), HasSubstr("batch item 0: forward pass over an empty"));
  EXPECT_EQ(a.size(), 3);
  EXPECT_EQ(b.size(), 0);
}

TEST_F(BatchErrors, LogitRowsComeItemAfterItem) {
  KvCache a(*model_, 16), b(*model_, 16), c(*model_, 16);
  const std::vector<int32_t> p{5, 6, 7, 8}, q{9}, r{10, 11};
  const int64_t vocab = model_->config().vocab_size;
  const std::vector<float> logits = [&] {
    const auto l = session_.batch(std::vector<BatchItem>{{&a, p, Logits::All}, {&b, q}, {&c, r}});
    return std::vector<float>(l.begin(), l.end());
  }();
  ASSERT_EQ(static_cast<int64_t>(logits.size()), (4 + 1 + 1) * vocab);  // a's 4 rows, b's and c's last
  EXPECT_EQ(a.size(), 4);
  EXPECT_EQ(b.size(), 1);
  EXPECT_EQ(c.size(), 2);
  EXPECT_THAT(std::vector<int32_t>(c.tokens().begin(), c.tokens().end()), ::testing::ElementsAre(10, 11));
  KvCache alone(*model_, 16);
  const auto want = session_.prefill(alone, r);
  EXPECT_TRUE(test::same_bits(std::span<const float>(logits).last(static_cast<size_t>(vocab)), want));
}

}  // namespace
}  // namespace kvinfer
