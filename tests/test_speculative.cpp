// Speculative decoding (docs/speculative.md). Greedy with speculation gives the same ids, the same
// logits at every step and the same cache, bit for bit, as plain greedy: on every HF fixture, on
// random and repetitive prompts, with prompt lookup and with draft models (itself: every draft
// accepted; another model: rejections), whatever ends generation (an end id inside an accepted
// draft, max_new_tokens, a full cache, a callback, a cancel, a stop string). With a deterministic
// drafter sampling gives the same ids as plain sampling with the same seed; with a sampling draft
// model the rejection rule gives the target's distribution (checked by chi-square). Prompt
// lookup, the adaptive k and the bad combinations are checked on their own.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "generate/speculative.h"
#include "kvinfer/kvinfer.h"
#include "reference.h"
#include "test_files.h"

namespace kvinfer {
namespace {

namespace fs = std::filesystem;
using test::error_of;

std::shared_ptr<const Model> load(const std::string& fixture) {
  return Model::load(test::model_dir(fixture),
                     {.device = Device::CPU, .context_length = test::fixture_context_length(fixture)});
}

// What one generation did, as a caller sees it.
struct Trace {
  GenerateResult result;
  std::vector<int32_t> seen;                // ids the callback got
  std::vector<std::vector<float>> logits;   // (steps) (vocab): the logits it got with them
  std::vector<int32_t> kv_tokens;           // what the cache holds afterwards
  std::vector<float> next;                  // (vocab) decode of the last id over that cache: its K/V bits
};

struct Run {
  int64_t capacity = 0;  // 0: prompt + max_new_tokens
  DType dtype = DType::F32;
  int stop_after = -1;    // the callback returns false on this many-th id (1-based); -1: never
  int cancel_after = -1;  // options.cancel says stop once this many ids were seen; -1: never
};

Trace generate(const std::shared_ptr<const Model>& model, std::span<const int32_t> prompt, GenerateOptions opt,
               const Run& run = {}) {
  const int64_t capacity = run.capacity > 0 ? run.capacity
                                            : std::min(static_cast<int64_t>(prompt.size()) + opt.max_new_tokens,
                                                       model->context_length());
  KvCache kv(*model, capacity, run.dtype);
  Session s(model);
  Trace t;
  if (run.cancel_after >= 0) opt.cancel = [&] { return static_cast<int>(t.seen.size()) >= run.cancel_after; };
  t.result = generate_tokens(s, kv, prompt, opt, [&](int32_t id, std::span<const float> l) {
    t.seen.push_back(id);
    t.logits.emplace_back(l.begin(), l.end());
    return static_cast<int>(t.seen.size()) != run.stop_after;
  });
  t.kv_tokens.assign(kv.tokens().begin(), kv.tokens().end());
  if (!t.result.tokens.empty() && kv.remaining() > 0) {
    const std::span<const float> l = s.decode(kv, t.result.tokens.back());
    t.next.assign(l.begin(), l.end());
  }
  return t;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  // memcmp must not see the null data() of an empty vector.
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// Speculation changed nothing a caller can see: ids, logits, stop, the cache's tokens and K/V.
void expect_same(const Trace& plain, const Trace& spec) {
  ASSERT_EQ(spec.result.tokens, plain.result.tokens);
  EXPECT_EQ(spec.result.stop, plain.result.stop);
  ASSERT_EQ(spec.seen, plain.seen);
  ASSERT_EQ(spec.logits.size(), plain.logits.size());
  for (size_t i = 0; i < plain.logits.size(); ++i)
    ASSERT_TRUE(same_bits(spec.logits[i], plain.logits[i])) << "the logits of step " << i << " differ";
  EXPECT_EQ(spec.kv_tokens, plain.kv_tokens);
  EXPECT_TRUE(same_bits(spec.next, plain.next)) << "the cache's K/V differ after generation";
  EXPECT_EQ(spec.result.stats.generated_tokens, plain.result.stats.generated_tokens);
  EXPECT_EQ(spec.result.stats.kv_tokens, plain.result.stats.kv_tokens);
}

// Plain, then speculative with `spec`, compared; returns the speculative run's stats.
GenerationStats expect_exact(const std::shared_ptr<const Model>& model, std::span<const int32_t> prompt,
                             GenerateOptions opt, const SpeculativeOptions& spec, const Run& run = {}) {
  opt.speculative = {};
  const Trace plain = generate(model, prompt, opt, run);
  opt.speculative = spec;
  const Trace fast = generate(model, prompt, opt, run);
  expect_same(plain, fast);
  return fast.result.stats;
}

std::vector<int32_t> random_ids(std::mt19937_64& rng, int64_t vocab, size_t n) {
  std::vector<int32_t> ids(n);
  for (int32_t& id : ids) id = static_cast<int32_t>(std::uniform_int_distribution<int64_t>(0, vocab - 1)(rng));
  return ids;
}

// A segment repeated: prompt lookup finds matches in it.
std::vector<int32_t> repetitive_ids(std::mt19937_64& rng, int64_t vocab, size_t segment, int times) {
  const std::vector<int32_t> seg = random_ids(rng, vocab, segment);
  std::vector<int32_t> ids;
  for (int i = 0; i < times; ++i) ids.insert(ids.end(), seg.begin(), seg.end());
  ids.push_back(seg[0]);
  return ids;
}

SpeculativeOptions lookup(int32_t n, int32_t k = 8, bool adaptive = true) {
  return {.lookup_ngram = n, .draft_model = nullptr, .max_draft_tokens = k, .adaptive = adaptive};
}
SpeculativeOptions drafted(DraftModel& d, int32_t k = 8, bool adaptive = true) {
  return {.lookup_ngram = 0, .draft_model = &d, .max_draft_tokens = k, .adaptive = adaptive};
}

GenerateOptions greedy(int64_t n, bool ignore_eos = true) {
  GenerateOptions o;
  o.max_new_tokens = n;
  o.ignore_eos = ignore_eos;
  return o;
}

// ---- the parts ----

TEST(PromptLookup, ProposesWhatFollowedTheMostRecentLongestMatch) {
  using detail::prompt_lookup;
  using V = std::vector<int32_t>;
  const V h = {1, 2, 3, 9, 1, 2, 3, 7, 5, 1, 2, 3};
  EXPECT_EQ(prompt_lookup(h, 3, 4), (V{7, 5, 1, 2}));  // the most recent of the two earlier [1 2 3]
  EXPECT_EQ(prompt_lookup(h, 3, 2), (V{7, 5}));
  // The longest n-gram wins over a more recent shorter one: [7 2 3] at 0, [2 3] last at 4.
  const V g = {7, 2, 3, 5, 2, 3, 6, 7, 2, 3};
  EXPECT_EQ(prompt_lookup(g, 3, 4), (V{5, 2, 3, 6}));
  EXPECT_EQ(prompt_lookup(g, 2, 4), (V{6, 7, 2, 3}));
  // A pattern repeating up to the end is proposed k long, as if its proposals were accepted.
  EXPECT_EQ(prompt_lookup(V{4, 4, 4, 4}, 3, 5), (V{4, 4, 4, 4, 4}));
  EXPECT_EQ(prompt_lookup(V{1, 2, 1, 2, 1}, 2, 4), (V{2, 1, 2, 1}));
  // No earlier occurrence of any n-gram, too short a history, n or k of 0: nothing.
  EXPECT_TRUE(prompt_lookup(V{1, 2, 3, 4}, 3, 4).empty());
  EXPECT_TRUE(prompt_lookup(V{1}, 3, 4).empty());
  EXPECT_TRUE(prompt_lookup(h, 0, 4).empty());
  EXPECT_TRUE(prompt_lookup(h, 3, 0).empty());
  // n falls back to 1: [3] never recurs in [5 6 3], but [6] ... does not either; [8 6] -> 6 recurs.
  EXPECT_EQ(prompt_lookup(V{6, 9, 8, 6}, 3, 2), (V{9, 8}));
}

TEST(DraftLength, StartsAtFourGrowsByTwoShrinksByOneBacksOffAtOne) {
  detail::DraftLength k(8, true);
  EXPECT_EQ(k.k(), 4);
  k.update(4, 4);  // everything accepted
  EXPECT_EQ(k.k(), 6);
  k.update(6, 6);
  EXPECT_EQ(k.k(), 8);
  k.update(8, 8);
  EXPECT_EQ(k.k(), 8);  // at most max
  k.update(3, 3);       // the drafter offered fewer than k: no evidence for more
  EXPECT_EQ(k.k(), 8);
  k.update(8, 2);  // a rejection
  EXPECT_EQ(k.k(), 7);
  k.update(0, 0);  // nothing drafted: no change
  EXPECT_EQ(k.k(), 7);
  for (int i = 0; i < 6; ++i) k.update(k.k(), 0);
  EXPECT_EQ(k.k(), 1);  // at least 1
  // At k = 1 a pass that accepts nothing backs off: 1, 2, 4, 8, 16, 16 passes without drafting.
  for (int wait : {1, 2, 4, 8, 16, 16}) {
    k.update(1, 0);
    for (int i = 0; i < wait; ++i) {
      EXPECT_EQ(k.k(), 0) << wait;
      k.update(0, 0);
    }
    EXPECT_EQ(k.k(), 1) << wait;
  }
  k.update(1, 1);  // an accepted draft: k grows, and the next back-off is 1 pass again
  EXPECT_EQ(k.k(), 3);
  k.update(3, 0);
  k.update(2, 0);
  k.update(1, 0);
  EXPECT_EQ(k.k(), 0);
  k.update(0, 0);
  EXPECT_EQ(k.k(), 1);
  EXPECT_EQ(detail::DraftLength(2, true).k(), 2);
  detail::DraftLength fixed(5, false);
  fixed.update(5, 0);
  fixed.update(1, 1);
  EXPECT_EQ(fixed.k(), 5);
}

// Chi-square of `count` (draws) against probabilities `prob`, bins with an expectation of 5 or
// more, the rest pooled; the bound is the statistic's 1e-6 upper quantile (Wilson–Hilferty), as in
// test_sampler.cpp. Every count is within 5 sigma (+1) of its expectation, and a token of
// probability 0 is never drawn.
void expect_distribution(const std::vector<int64_t>& count, const std::vector<double>& prob, int64_t draws) {
  double chi2 = 0.0, pooled_expected = 0.0, pooled_seen = 0.0;
  int bins = 0;
  for (size_t i = 0; i < prob.size(); ++i) {
    const double expected = static_cast<double>(draws) * prob[i];
    if (prob[i] == 0.0) {
      EXPECT_EQ(count[i], 0) << "cell " << i;
    }
    EXPECT_LE(std::abs(static_cast<double>(count[i]) - expected), 5.0 * std::sqrt(expected * (1.0 - prob[i])) + 1.0)
        << "cell " << i;
    if (expected >= 5.0) {
      chi2 += (static_cast<double>(count[i]) - expected) * (static_cast<double>(count[i]) - expected) / expected;
      ++bins;
    } else {
      pooled_expected += expected;
      pooled_seen += static_cast<double>(count[i]);
    }
  }
  if (pooled_expected >= 5.0) {
    chi2 += (pooled_seen - pooled_expected) * (pooled_seen - pooled_expected) / pooled_expected;
    ++bins;
  }
  const double dof = bins - 1, z = 4.753;  // z: the standard normal's 1e-6 upper quantile
  ASSERT_GE(dof, 3.0);
  EXPECT_LT(chi2, dof * std::pow(1.0 - 2.0 / (9.0 * dof) + z * std::sqrt(2.0 / (9.0 * dof)), 3.0));
}

// The rule alone: d drawn from q, then accept_or_resample, gives p; and the acceptance rate is
// sum_x min(p(x), q(x)) (Leviathan et al., Theorem 3.5), within 5 sigma. 200k draws per pair.
TEST(RejectionRule, EmitsTheTargetDistributionForAnyDraftDistribution) {
  constexpr int64_t kDraws = 200000;
  constexpr int32_t kVocab = 12;
  using P = std::vector<std::pair<int32_t, float>>;
  // p sorted as Sampler::last_candidates() (descending, ties by id); q in any order, its support
  // overlapping p's partly (ids 9..11 only in q, 0 only in p), and a point mass.
  const P p = {{3, 0.3f}, {0, 0.2f}, {5, 0.15f}, {1, 0.1f}, {2, 0.1f}, {7, 0.08f}, {4, 0.07f}};
  const std::vector<P> qs = {{{3, 0.1f}, {5, 0.4f}, {9, 0.2f}, {11, 0.1f}, {1, 0.2f}},
                             {{3, 0.3f}, {0, 0.2f}, {5, 0.15f}, {1, 0.1f}, {2, 0.1f}, {7, 0.08f}, {4, 0.07f}},
                             {{10, 1.0f}},
                             {{0, 1.0f}},
                             {{4, 0.5f}, {7, 0.25f}, {2, 0.25f}}};
  std::vector<double> prob(kVocab, 0.0);
  for (auto [id, x] : p) prob[static_cast<size_t>(id)] = x;
  std::vector<float> q_dense(kVocab, 0.0f);
  for (size_t c = 0; c < qs.size(); ++c) {
    SCOPED_TRACE("q #" + std::to_string(c));
    const P& q = qs[c];
    std::mt19937_64 rng(100 + c);
    std::vector<int64_t> count(kVocab, 0);
    int64_t accepted = 0;
    for (int64_t i = 0; i < kDraws; ++i) {
      // d ~ q by inverse CDF
      const double u = detail::uniform(rng);
      double sum = 0.0;
      int32_t d = q.back().first;
      for (auto [id, x] : q) {
        sum += x;
        if (u < sum) {
          d = id;
          break;
        }
      }
      const int32_t x =
          detail::accept_or_resample(p, q, d, detail::uniform(rng), detail::uniform(rng), /*fallback=*/-1, q_dense);
      ASSERT_GE(x, 0);
      ++count[static_cast<size_t>(x)];
      accepted += x == d;
    }
    ASSERT_TRUE(std::all_of(q_dense.begin(), q_dense.end(), [](float v) { return v == 0.0f; }));
    expect_distribution(count, prob, kDraws);
    double overlap = 0.0;
    for (auto [id, x] : q) overlap += std::min(static_cast<double>(x), prob[static_cast<size_t>(id)]);
    overlap = std::min(overlap, 1.0);  // the float probabilities may sum to 1 + an ulp
    EXPECT_NEAR(static_cast<double>(accepted) / kDraws, overlap, 5.0 * std::sqrt(overlap * (1 - overlap) / kDraws) + 1e-6);
  }
}

// ---- greedy: bit for bit on every fixture ----

class SpeculativeFixture : public ::testing::TestWithParam<const char*> {};

// Random prompts, a repetitive one and the fixture's reference prompt, with prompt lookup (n 1
// and 3, adaptive and fixed k), the model as its own draft (every draft accepted) and another
// fixture as the draft (rejections); greedy, 40 tokens, with and without end ids.
TEST_P(SpeculativeFixture, GreedyEqualsPlainGreedyBitForBit) {
  const auto model = load(GetParam());
  const int64_t vocab = model->config().vocab_size;
  const std::string other = std::string(GetParam()) == "llama_mha" ? "llama_gqa4" : "llama_mha";
  DraftModel self(load(GetParam()), *model, model->context_length());
  DraftModel foreign(load(other), *model, 64);
  std::mt19937_64 rng(std::hash<std::string>{}(GetParam()));
  std::vector<std::vector<int32_t>> prompts = {test::Reference(GetParam()).prompt_ids, repetitive_ids(rng, vocab, 6, 4)};
  for (int i = 0; i < 3; ++i)
    prompts.push_back(random_ids(rng, vocab, std::uniform_int_distribution<size_t>(1, 20)(rng)));
  const std::vector<SpeculativeOptions> drafters = {lookup(3), lookup(1, 4, false), lookup(2, 16), drafted(self),
                                                    drafted(foreign), drafted(foreign, 3, false)};
  GenerationStats lookup_total, self_total, foreign_total;
  for (size_t p = 0; p < prompts.size(); ++p) {
    for (size_t d = 0; d < drafters.size(); ++d) {
      for (bool ignore_eos : {true, false}) {
        SCOPED_TRACE(testing::Message() << "prompt " << p << ", drafter " << d << ", ignore_eos " << ignore_eos);
        const GenerationStats s = expect_exact(model, prompts[p], greedy(40, ignore_eos), drafters[d]);
        GenerationStats& total = d < 3 ? lookup_total : d == 3 ? self_total : foreign_total;
        total.drafted_tokens += s.drafted_tokens;
        total.accepted_tokens += s.accepted_tokens;
        EXPECT_GE(s.drafted_tokens, s.accepted_tokens);
      }
    }
  }
  // The cases exercised what they mean to: the self-draft accepts every draft, the foreign one
  // rejects some, and prompt lookup accepts some (the repetitive prompt; the tiny random models
  // also repeat themselves).
  EXPECT_GT(self_total.drafted_tokens, 0);
  EXPECT_EQ(self_total.accepted_tokens, self_total.drafted_tokens);
  EXPECT_LT(foreign_total.accepted_tokens, foreign_total.drafted_tokens);
  EXPECT_GT(lookup_total.accepted_tokens, 0);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, SpeculativeFixture, ::testing::ValuesIn(test::kFixtures),
                         [](const auto& p) { return std::string(p.param); });

// Every KV dtype: truncate keeps an 8-bit cache's scales with its rows.
TEST(Speculative, EveryKvDtypeBitForBit) {
  const auto model = load("llama_gqa4");
  DraftModel foreign(load("llama_mha"), *model, 128);
  std::mt19937_64 rng(5);
  const std::vector<int32_t> prompt = repetitive_ids(rng, 128, 5, 3);
  for (DType dtype : {DType::F32, DType::F16, DType::BF16, DType::I8, DType::FP8}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    expect_exact(model, prompt, greedy(48), lookup(3), {.dtype = dtype});
    expect_exact(model, prompt, greedy(48), drafted(foreign), {.dtype = dtype});
  }
}

// A target with 8-bit activations (not exact, but batch-invariant as well), drafted by prompt
// lookup and by the same file with exact products.
TEST(Speculative, Int8ActivationTargetBitForBit) {
  const fs::path file = fs::path(KVINFER_TEST_DATA) / "gguf" / "models" / "llama_gqa4.q8_0.gguf";
  const auto fast = Model::load(file, {.device = Device::CPU, .activations = ActivationMode::Int8});
  DraftModel exact(Model::load(file, {.device = Device::CPU}), *fast, 128);
  std::mt19937_64 rng(6);
  const std::vector<int32_t> prompt = repetitive_ids(rng, 128, 7, 3);
  expect_exact(fast, prompt, greedy(48), lookup(3), {.dtype = DType::F16});
  const GenerationStats s = expect_exact(fast, prompt, greedy(48), drafted(exact), {.dtype = DType::F16});
  EXPECT_GT(s.accepted_tokens, 0);
}

// ---- where generation ends, inside a verified draft ----

class SpeculativeStops : public ::testing::Test {
 protected:
  std::shared_ptr<const Model> model_ = load("llama_gqa4");
  DraftModel self_{load("llama_gqa4"), *model_, 128};
  std::vector<int32_t> prompt_ = test::Reference("llama_gqa4").prompt_ids;
  // The model as its own draft with a fixed k of 8: every draft is accepted, so a stop falls
  // inside a verified draft wherever it is; and prompt lookup on a repetitive prompt.
  std::vector<SpeculativeOptions> drafters() {
    return {drafted(self_, 8, false), drafted(self_), lookup(3, 8, false), lookup(3)};
  }
};

TEST_F(SpeculativeStops, EndIdInsideAnAcceptedDraft) {
  const std::vector<int32_t> plain = generate(model_, prompt_, greedy(32)).result.tokens;
  for (size_t at : {1u, 2u, 5u, 9u, 13u}) {
    const int32_t stop = plain[at];
    if (std::find(plain.begin(), plain.begin() + static_cast<ptrdiff_t>(at), stop) != plain.begin() + static_cast<ptrdiff_t>(at)) continue;
    GenerateOptions opt = greedy(32);
    opt.stop_ids = {stop};
    for (const SpeculativeOptions& spec : drafters()) {
      SCOPED_TRACE(testing::Message() << "stop id at " << at << ", k " << spec.max_draft_tokens);
      const GenerationStats s = expect_exact(model_, prompt_, opt, spec);
      if (spec.draft_model != nullptr && at >= 2) {
        EXPECT_GT(s.accepted_tokens, 0);
      }
    }
  }
}

TEST_F(SpeculativeStops, MaxNewTokensAtEveryOffset) {
  for (int64_t n = 1; n <= 24; ++n)
    for (const SpeculativeOptions& spec : drafters()) {
      SCOPED_TRACE(testing::Message() << "max_new_tokens " << n << ", k " << spec.max_draft_tokens);
      const GenerationStats s = expect_exact(model_, prompt_, greedy(n), spec);
      // Each pass emits its accepted drafts and one id of the target's own.
      if (spec.draft_model != nullptr) {
        EXPECT_EQ(s.generated_tokens, 1 + s.verify_passes + s.accepted_tokens);
      }
    }
}

TEST_F(SpeculativeStops, FullCacheAtEveryOffset) {
  const auto T = static_cast<int64_t>(prompt_.size());
  for (int64_t room = 0; room <= 20; ++room)
    for (const SpeculativeOptions& spec : drafters()) {
      SCOPED_TRACE(testing::Message() << "room " << room << ", k " << spec.max_draft_tokens);
      expect_exact(model_, prompt_, greedy(100), spec, {.capacity = T + room});
    }
}

TEST_F(SpeculativeStops, CallbackAndCancelAtEveryOffset) {
  for (int m = 1; m <= 14; ++m)
    for (const SpeculativeOptions& spec : drafters()) {
      SCOPED_TRACE(testing::Message() << "after " << m << " ids, k " << spec.max_draft_tokens);
      expect_exact(model_, prompt_, greedy(32), spec, {.stop_after = m});
      expect_exact(model_, prompt_, greedy(32), spec, {.cancel_after = m});
    }
  expect_exact(model_, prompt_, greedy(32), lookup(3), {.cancel_after = 0});
}

// A conversation over one cache: the second call's prompt is the first's last id and more; the
// draft's cache keeps what it already holds of the history.
TEST_F(SpeculativeStops, ContinuingACachedSequence) {
  DraftModel foreign(load("llama_mha"), *model_, 128);
  for (DraftModel* d : {&self_, &foreign}) {
    std::vector<int32_t> out[2];
    std::vector<float> last[2];
    for (int spec = 0; spec < 2; ++spec) {
      KvCache kv(*model_, 128, DType::F32);
      Session s(model_);
      GenerateOptions opt = greedy(20);
      if (spec == 1) opt.speculative = drafted(*d);
      std::vector<int32_t> prompt = prompt_;
      for (int turn = 0; turn < 3; ++turn) {
        const GenerateResult r = generate_tokens(s, kv, prompt, opt, [&](int32_t, std::span<const float> l) {
          last[spec].assign(l.begin(), l.end());
          return true;
        });
        out[spec].insert(out[spec].end(), r.tokens.begin(), r.tokens.end());
        prompt = {r.tokens.back(), 7, 8, 9};
      }
      // Each turn leaves its prompt and all but its last id; the next prompt starts with that id.
      EXPECT_EQ(kv.size(), static_cast<int64_t>(prompt_.size()) + 3 * 19 + 2 * 4);
    }
    EXPECT_EQ(out[0], out[1]);
    EXPECT_TRUE(same_bits(last[0], last[1]));
  }
}

// Text generation with a real tokenizer: the same streamed pieces, text and stop string cut.
TEST(Speculative, StopStringsAndStreamedTextUnchanged) {
  const auto model = load("chatml_tiny");
  const Tokenizer& tok = model->tokenizer();
  DraftModel self(load("chatml_tiny"), *model, model->context_length());
  const std::vector<int32_t> prompt = tok.encode("The cat sat on the mat. The cat sat on the mat. The cat");
  auto text_run = [&](GenerateOptions opt) {
    KvCache kv(*model, model->context_length(), DType::F32);
    Session s(model);
    std::vector<std::pair<int32_t, std::string>> pieces;
    GenerateResult r = generate(s, kv, tok, prompt, opt, [&](int32_t id, std::string_view piece) {
      pieces.emplace_back(id, std::string(piece));
      return true;
    });
    return std::tuple{r, pieces, kv.size()};
  };
  GenerateOptions opt = greedy(48);
  const auto [plain, plain_pieces, plain_kv] = text_run(opt);
  ASSERT_GT(plain.text.size(), 12u);
  for (const std::vector<std::string>& stops :
       {std::vector<std::string>{}, {plain.text.substr(plain.text.size() / 2, 3)}, {plain.text.substr(4, 2)}}) {
    opt.stop_strings = stops;
    const auto [want, want_pieces, want_kv] = text_run([&] {
      GenerateOptions o = opt;
      return o;
    }());
    for (const SpeculativeOptions& spec : {lookup(3), drafted(self), drafted(self, 8, false)}) {
      GenerateOptions o = opt;
      o.speculative = spec;
      const auto [got, got_pieces, got_kv] = text_run(o);
      EXPECT_EQ(got.text, want.text);
      EXPECT_EQ(got.tokens, want.tokens);
      EXPECT_EQ(got.stop, want.stop);
      EXPECT_EQ(got_pieces, want_pieces);
      EXPECT_EQ(got_kv, want_kv);
      if (!stops.empty()) {
        EXPECT_EQ(got.stop, StopReason::StopString);
      }
    }
  }
}

// ---- sampling ----

// With a deterministic drafter each emitted id is one Sampler draw from the logits of its own
// position, in order, with the penalty history up to it: the same ids as plain sampling with the
// same seed, for any parameters (penalties and bias included), and the same logits.
TEST(Speculative, DeterministicDrafterSamplesTheSameIdsAsPlainSampling) {
  const auto model = load("llama_gqa4");
  DraftModel self(load("llama_gqa4"), *model, 128);
  std::mt19937_64 rng(7);
  const std::vector<int32_t> prompt = repetitive_ids(rng, 128, 6, 4);
  SamplingParams base;
  base.temperature = 0.9f;
  std::vector<SamplingParams> configs(5, base);
  configs[1].top_k = 5;
  configs[1].top_p = 0.9f;
  configs[2].min_p = 0.1f;
  configs[2].repetition_penalty = 1.3f;
  configs[2].presence_penalty = 0.5f;
  configs[2].frequency_penalty = 0.2f;
  configs[3].logit_bias = {{3, 2.0f}, {5, -INFINITY}};
  configs[3].temperature = 0.3f;
  configs[4].temperature = 0.0f;  // greedy with penalties: the draft model then drafts deterministically
  configs[4].repetition_penalty = 1.5f;
  int64_t accepted = 0;
  for (size_t c = 0; c < configs.size(); ++c)
    for (uint64_t seed : {1u, 2u, 3u}) {
      SCOPED_TRACE(testing::Message() << "config " << c << ", seed " << seed);
      GenerateOptions opt = greedy(40);
      opt.sampling = configs[c];
      opt.sampling.seed = seed;
      accepted += expect_exact(model, prompt, opt, lookup(3)).accepted_tokens;
      if (configs[c].temperature == 0.0f) expect_exact(model, prompt, opt, drafted(self));
    }
  EXPECT_GT(accepted, 0);
}

// A sampling draft model (the rejection rule with the draft's q): the joint distribution of the
// first four ids over many seeds equals the target's, computed exactly from its logits with the
// Sampler's own candidates. The first pass drafts two ids, so ids 2 and 3 are decided by the rule
// (the 4th by the target alone), with a repetition penalty whose history includes the drafted
// ids. Two drafts: another model (mostly rejections: the residual max(0, p - q)) and the same
// weights quantised to Q8_0 (mostly acceptances, so the second drafted position is reached).
TEST(Speculative, SamplingDraftModelKeepsTheTargetDistribution) {
  const auto model = load("llama_gqa4");
  const fs::path q8 = fs::path(KVINFER_TEST_DATA) / "gguf" / "models" / "llama_gqa4.q8_0.gguf";
  const std::vector<int32_t> prompt = {5, 17, 99};
  SamplingParams params;
  params.temperature = 1.5f;
  params.top_k = 3;
  params.repetition_penalty = 1.3f;

  // The exact joint: p(a) p(b | a) p(c | a b) p(e | a b c) from the target's logits, each the
  // Sampler's candidates with the penalty history of its position.
  constexpr int64_t V = 128;
  Session s(model);
  auto candidates = [&](const std::vector<int32_t>& seq) {
    KvCache kv(*model, 16, DType::F32);
    const std::span<const float> l = s.prefill(kv, seq);
    Sampler sampler(params, V);
    sampler.accept(seq);
    sampler.sample(l);
    const auto c = sampler.last_candidates();
    return std::vector<std::pair<int32_t, float>>(c.begin(), c.end());
  };
  std::map<std::vector<int32_t>, double> exact;
  std::function<void(std::vector<int32_t>, double)> expand = [&](std::vector<int32_t> seq, double p) {
    if (seq.size() == prompt.size() + 4) {
      exact[std::vector<int32_t>(seq.begin() + static_cast<ptrdiff_t>(prompt.size()), seq.end())] = p;
      return;
    }
    for (auto [id, q] : candidates(seq)) {
      std::vector<int32_t> next = seq;
      next.push_back(id);
      expand(next, p * q);
    }
  };
  expand(prompt, 1.0);
  std::vector<std::vector<int32_t>> cells;
  std::vector<double> prob;
  for (const auto& [ids, p] : exact) {
    cells.push_back(ids);
    prob.push_back(p);
  }

  for (const auto& [name, draft_model] :
       {std::pair{"llama_mha", load("llama_mha")}, std::pair{"llama_gqa4.q8_0", Model::load(q8, {.device = Device::CPU})}}) {
    SCOPED_TRACE(name);
    DraftModel draft(draft_model, *model, 16);
    constexpr int64_t kRuns = 20000;
    std::vector<int64_t> count(cells.size(), 0);
    KvCache kv(*model, 16, DType::F32);
    GenerateOptions opt;
    opt.max_new_tokens = 4;
    opt.ignore_eos = true;
    opt.sampling = params;
    opt.speculative = drafted(draft, 2, false);
    GenerationStats total;
    for (int64_t run = 0; run < kRuns; ++run) {
      kv.clear();
      opt.sampling.seed = static_cast<uint64_t>(run);
      const GenerateResult r = generate_tokens(s, kv, prompt, opt);
      const auto at = std::find(cells.begin(), cells.end(), r.tokens);
      ASSERT_NE(at, cells.end()) << "an id sequence of probability 0";
      ++count[static_cast<size_t>(at - cells.begin())];
      total.drafted_tokens += r.stats.drafted_tokens;
      total.accepted_tokens += r.stats.accepted_tokens;
    }
    expect_distribution(count, prob, kRuns);
    // Both outcomes of the rule happened hundreds of times at least.
    std::cout << name << ": accepted " << total.accepted_tokens << " of " << total.drafted_tokens << " drafted\n";
    EXPECT_GT(total.accepted_tokens, total.drafted_tokens / 100);
    EXPECT_LT(total.accepted_tokens, total.drafted_tokens * 99 / 100);
  }
}

// The same seed gives the same ids with a sampling draft model too.
TEST(Speculative, SamplingDraftModelIsReproducible) {
  const auto model = load("llama_gqa4");
  DraftModel foreign(load("llama_mha"), *model, 128);
  GenerateOptions opt = greedy(40);
  opt.sampling.temperature = 1.0f;
  opt.sampling.seed = 11;
  opt.speculative = drafted(foreign, 4);
  const std::vector<int32_t> prompt = {1, 2, 3, 4};
  const Trace a = generate(model, prompt, opt), b = generate(model, prompt, opt);
  EXPECT_EQ(a.result.tokens, b.result.tokens);
  opt.sampling.seed = 12;
  EXPECT_NE(generate(model, prompt, opt).result.tokens, a.result.tokens);
}

// ---- the default model ----

fs::path default_model() {
  const char* env = std::getenv("KVINFER_MODEL");
  return env != nullptr && *env != '\0' ? fs::path(env) : fs::path(KVINFER_DEFAULT_MODEL);
}

// SmolLM2-135M-Instruct Q4_1: prompt lookup on a copy task accepts most of the reply; on a free
// prompt it accepts little; the same file with 8-bit activations as the draft; all bit for bit.
TEST(SpeculativeDefaultModel, GreedyEqualsPlainGreedyBitForBit) {
  if (!fs::exists(default_model())) GTEST_SKIP() << default_model() << " is absent (tools/fetch_model.sh)";
  const auto model = Model::load(default_model(), {.device = Device::CPU});
  const Tokenizer& tok = model->tokenizer();
  const ChatTemplate tmpl(tok.chat_template(), tok.bos_text(), tok.eos_text());
  auto chat = [&](const std::string& text) {
    return tok.encode(tmpl.render(std::vector<ChatMessage>{{"user", text}}, true), {.add_special = false, .parse_special = true});
  };
  const std::vector<int32_t> copy = chat(
      "Repeat this sentence exactly: The quick brown fox jumps over the lazy dog while the cat sleeps on the warm "
      "windowsill.");
  const std::vector<int32_t> free_form = chat("Write a short poem about the sea.");
  DraftModel int8(Model::load(default_model(), {.device = Device::CPU, .activations = ActivationMode::Int8}), *model, 512);
  const GenerationStats s = expect_exact(model, copy, greedy(48, false), lookup(3), {.dtype = DType::F16});
  EXPECT_GE(s.accepted_tokens * 2, s.generated_tokens) << "the copy task should accept most of its reply";
  expect_exact(model, free_form, greedy(32, false), lookup(3), {.dtype = DType::F16});
  const GenerationStats d = expect_exact(model, free_form, greedy(32, false), drafted(int8), {.dtype = DType::F16});
  EXPECT_GT(d.accepted_tokens, 0);
  std::mt19937_64 rng(9);
  expect_exact(model, random_ids(rng, model->config().vocab_size, 12), greedy(24), lookup(2), {.dtype = DType::F16});
}

// ---- bad combinations ----

TEST(Speculative, BadOptionsAreErrorsNamingThem) {
  const auto model = load("llama_gqa4");
  DraftModel self(load("llama_gqa4"), *model, 64);
  KvCache kv(*model, 64);
  Session s(model);
  const std::vector<int32_t> prompt = {1, 2, 3};
  auto error = [&](SpeculativeOptions spec, bool cache = true) {
    GenerateOptions opt = greedy(4);
    opt.speculative = spec;
    opt.use_kv_cache = cache;
    return error_of([&] { generate_tokens(s, kv, prompt, opt); });
  };
  SpeculativeOptions both = lookup(3);
  both.draft_model = &self;
  EXPECT_THAT(error(both), ::testing::HasSubstr("lookup_ngram or draft_model, not both"));
  EXPECT_THAT(error(lookup(3), false), ::testing::HasSubstr("use_kv_cache"));
  EXPECT_THAT(error(lookup(3, 0)), ::testing::HasSubstr("max_draft_tokens must be 1 to 256, got 0"));
  EXPECT_THAT(error(lookup(3, 257)), ::testing::HasSubstr("max_draft_tokens must be 1 to 256, got 257"));
  EXPECT_THAT(error(lookup(-1)), ::testing::HasSubstr("lookup_ngram must be >= 0"));
  EXPECT_EQ(kv.size(), 0);  // refused before anything ran
  // Speculation off: the cache may be off.
  GenerateOptions off = greedy(4);
  off.use_kv_cache = false;
  EXPECT_NO_THROW(generate_tokens(s, kv, prompt, off));
}

// The scheduler does not speculate: a request asking for it is refused, not silently run plain.
TEST(Speculative, SchedulerRefusesASpeculativeRequest) {
  const auto model = load("llama_gqa4");
  Scheduler scheduler(model, {});
  SchedulerRequest request;
  request.prompt = {1, 2, 3};
  request.options.speculative = lookup(3);
  EXPECT_THAT(error_of(ErrorKind::InvalidArgument, [&] { scheduler.submit(request, {}, {}); }),
              ::testing::HasSubstr("does not decode speculatively"));
}

TEST(Speculative, DraftModelWithAnotherVocabularyIsRefusedNamingTheDifference) {
  const auto chatml = load("chatml_tiny");
  EXPECT_THAT(error_of(ErrorKind::InvalidArgument, [&] { DraftModel(load("gpt2_tiny"), *chatml, 16); }),
              ::testing::HasSubstr("draft model: its vocabulary has 128 tokens, the target's 384"));
  EXPECT_THAT(error_of([&] { DraftModel(nullptr, *chatml, 16); }), ::testing::HasSubstr("draft model"));
  // The same shape with one token's string changed in tokenizer.json.
  const fs::path dir = fs::temp_directory_path() / ("kvinfer_spec_vocab_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::copy(test::model_dir("chatml_tiny"), dir);
  std::ifstream in(dir / "tokenizer.json");
  nlohmann::json j = nlohmann::json::parse(in);
  in.close();
  // A special token renamed (in the vocabulary and the added tokens): no merge reads it, and the
  // tokenizer stays valid.
  ASSERT_EQ(j["model"]["vocab"]["<|im_start|>"], 1);
  j["model"]["vocab"].erase("<|im_start|>");
  j["model"]["vocab"]["<|im_begin|>"] = 1;
  for (auto& t : j["added_tokens"])
    if (t["id"] == 1) t["content"] = "<|im_begin|>";
  std::ofstream(dir / "tokenizer.json") << j.dump();
  const std::string e = error_of(ErrorKind::InvalidArgument,
                                 [&] { DraftModel(Model::load(dir, {.device = Device::CPU}), *chatml, 16); });
  fs::remove_all(dir);
  EXPECT_THAT(e, ::testing::HasSubstr("draft model: token 1 is \"<|im_begin|>\" in it, \"<|im_start|>\" in the target"));
}

}  // namespace
}  // namespace kvinfer
