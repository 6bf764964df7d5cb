// Speculative decoding and beam search with the model and its caches on the CUDA device: the
// verification pass (a multi-row prefill), KvCache::truncate, a draft model's own device cache,
// and the beams' batched steps and cache copies. On the GPU the verification pass sums in the
// prefill kernels' order, not decode's (docs/speculative.md), so the promise checked here is the
// tokens: HF's greedy ids and HF's beam hypotheses on f32 fixtures, whose greedy picks are far from
// ties (tools/make_fixtures.py's MIN_MARGIN). Skips with a message where no CUDA device exists.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvinfer/kvinfer.h"
#include "reference.h"

namespace kvinfer {
namespace {

#define SKIP_WITHOUT_DEVICE()                                                        \
  do {                                                                               \
    if (cuda_device_count() == 0) {                                                  \
      GTEST_SKIP() << "no CUDA device: the GPU decoding-strategy tests need one";    \
    }                                                                                \
  } while (0)

// f32 weights, so that the device's logits are HF's within 1e-4 (test_cuda_e2e.cpp).
const char* const kFixtures[] = {"llama_gqa4", "llama_mha", "qwen2_bias", "mistral_window", "gpt2_tiny"};

std::vector<int32_t> cache_tokens(const KvCache& kv) { return {kv.tokens().begin(), kv.tokens().end()}; }

class CudaSpeculative : public ::testing::TestWithParam<const char*> {};

// Prompt lookup (adaptive k, and k = 4 fixed) and the model as its own draft, both on the device:
// HF's 32 greedy ids, the plain device loop's ids, and a cache holding the same positions.
TEST_P(CudaSpeculative, GreedyTokensAreHfsAndThePlainLoops) {
  SKIP_WITHOUT_DEVICE();
  auto gpu = Model::load(test::model_dir(GetParam()), {.device = Device::CUDA});
  ASSERT_EQ(gpu->device(), Device::CUDA);
  ASSERT_EQ(gpu->weight_dtype(), DType::F32);
  const test::Reference ref(GetParam());
  const auto n = static_cast<int64_t>(ref.greedy_ids.size());
  const int64_t capacity = static_cast<int64_t>(ref.prompt_ids.size()) + n;

  GenerateOptions opt;
  opt.max_new_tokens = n;
  opt.ignore_eos = true;
  KvCache plain_kv(*gpu, capacity, DType::F32);
  Session plain_session(gpu);
  const GenerateResult plain = generate_greedy(plain_session, plain_kv, ref.prompt_ids, opt);
  ASSERT_EQ(plain.tokens, ref.greedy_ids);

  DraftModel self(gpu, *gpu, capacity, DType::F32);
  struct Mode {
    const char* name;
    SpeculativeOptions spec;
  };
  const Mode modes[] = {{"lookup 3", {.lookup_ngram = 3}},
                        {"lookup 2, k 4 fixed", {.lookup_ngram = 2, .max_draft_tokens = 4, .adaptive = false}},
                        {"self-draft", {.draft_model = &self, .max_draft_tokens = 6}}};
  for (const Mode& m : modes) {
    SCOPED_TRACE(m.name);
    KvCache kv(*gpu, capacity, DType::F32);
    Session s(gpu);
    GenerateOptions o = opt;
    o.speculative = m.spec;
    const GenerateResult r = generate_greedy(s, kv, ref.prompt_ids, o);
    EXPECT_EQ(r.tokens, ref.greedy_ids);
    EXPECT_EQ(cache_tokens(kv), cache_tokens(plain_kv));
    EXPECT_GT(r.stats.verify_passes, 0);
    EXPECT_LT(r.stats.verify_passes, n);  // fewer passes than tokens: drafts were accepted
    if (m.spec.draft_model != nullptr) {
      EXPECT_EQ(r.stats.accepted_tokens, r.stats.drafted_tokens);  // the model agrees with itself
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaSpeculative, ::testing::ValuesIn(kFixtures),
                         [](const auto& p) { return std::string(p.param); });

// Every recorded HF beam search on these fixtures, run on the device: HF's hypotheses and scores.
TEST(CudaBeamSearch, HypothesesAreTransformers) {
  SKIP_WITHOUT_DEVICE();
  std::ifstream f(std::filesystem::path(KVINFER_TEST_DATA) / "beam" / "references.json");
  const nlohmann::json refs = nlohmann::json::parse(f);
  int checked = 0;
  for (const char* fixture : kFixtures) {
    auto gpu = Model::load(test::model_dir(fixture), {.device = Device::CUDA});
    for (const nlohmann::json& c : refs["cases"]) {
      if (c["fixture"] != fixture) continue;
      SCOPED_TRACE(c["name"].get<std::string>());
      const auto prompt = c["prompt_ids"].get<std::vector<int32_t>>();
      BeamSearchOptions o;
      o.num_beams = c["num_beams"];
      o.max_new_tokens = c["max_new_tokens"];
      o.length_penalty = c["length_penalty"];
      const std::string es = c["early_stopping"];
      o.early_stopping = es == "true" ? EarlyStopping::Immediate : es == "never" ? EarlyStopping::Never : EarlyStopping::Heuristic;
      o.no_repeat_ngram_size = c["no_repeat_ngram_size"];
      o.num_return_sequences = c["num_return_sequences"];
      o.eos_ids = c["eos_token_id"].get<std::vector<int32_t>>();
      KvCache kv(*gpu, static_cast<int64_t>(prompt.size()) + o.max_new_tokens, DType::F32);
      Session s(gpu);
      const BeamSearchResult r = beam_search(s, kv, prompt, o);
      const nlohmann::json& want = c["sequences"];
      ASSERT_EQ(r.sequences.size(), want.size());
      for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_EQ(r.sequences[i].tokens, want[i]["tokens"].get<std::vector<int32_t>>()) << "hypothesis " << i;
        const float score = want[i]["score"];
        // The device's logits are HF's within 1e-4 (not the CPU's 1e-6): a sum of up to 40
        // log-probs, so 1e-3 of the score's magnitude.
        EXPECT_NEAR(r.sequences[i].score, score, 1e-3f * std::max(1.0f, std::fabs(score))) << "hypothesis " << i;
      }
      EXPECT_EQ(cache_tokens(kv), prompt);
      ++checked;
    }
  }
  EXPECT_GE(checked, 30);
}

}  // namespace
}  // namespace kvinfer
