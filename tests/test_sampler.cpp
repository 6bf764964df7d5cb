// Sampler: greedy is argmax; seeded draws repeat; top-k/top-p/min-p keep exactly the candidates
// a double-precision reference keeps; draws follow the renormalised softmax (checked over 100k
// draws); penalties and logit bias change the logits by the documented amounts; every bad
// parameter or logit is a kvinfer::Error naming it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kvinfer/error.h"
#include "kvinfer/sampler.h"
#include "sampling_presets.h"
#include "test_files.h"

namespace kvinfer {
namespace {

using test::error_of;
using ::testing::AllOf;
using ::testing::HasSubstr;
constexpr float kInf = std::numeric_limits<float>::infinity();

// Logits like a model's: normal(0, stddev). (std::normal_distribution differs between standard
// libraries; every check below holds for any such draw.)
std::vector<float> normal_logits(int32_t vocab, uint64_t seed, float stddev = 2.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, stddev);
  std::vector<float> logits(vocab);
  for (float& l : logits) l = normal(rng);
  return logits;
}

SamplingParams params(float temperature, int32_t top_k, float top_p, float min_p, uint64_t seed = 0) {
  SamplingParams p;
  p.temperature = temperature;
  p.top_k = top_k;
  p.top_p = top_p;
  p.min_p = min_p;
  p.seed = seed;
  return p;
}
SamplingParams plain(float temperature, uint64_t seed = 0) { return params(temperature, 0, 1.0f, 0.0f, seed); }

// The filters computed directly, in double: sort by logit/T, keep k, softmax, keep the shortest
// prefix with cumulative p >= top_p, renormalise, keep p >= min_p * p_max, renormalise.
std::vector<std::pair<int32_t, double>> reference(const std::vector<float>& logits, const SamplingParams& p) {
  std::vector<std::pair<double, int32_t>> s;
  for (int32_t i = 0; i < static_cast<int32_t>(logits.size()); ++i)
    if (logits[i] != -kInf) s.emplace_back(static_cast<double>(logits[i]) / p.temperature, i);
  std::sort(s.begin(), s.end(),
            [](auto a, auto b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < s.size()) s.resize(p.top_k);
  std::vector<std::pair<int32_t, double>> out;
  double sum = 0.0;
  for (auto [si, id] : s) sum += std::exp(si - s[0].first);
  for (auto [si, id] : s) out.emplace_back(id, std::exp(si - s[0].first) / sum);
  auto renormalise = [&] {
    double total = 0.0;
    for (auto& c : out) total += c.second;
    for (auto& c : out) c.second /= total;
  };
  if (p.top_p < 1.0f) {
    double cumulative = 0.0;
    size_t keep = 0;
    while (keep < out.size() && cumulative < p.top_p) cumulative += out[keep++].second;
    out.resize(keep);
    renormalise();
  }
  if (p.min_p > 0.0f) {
    const double threshold = p.min_p * out[0].second;
    std::erase_if(out, [&](auto c) { return c.second < threshold; });
    renormalise();
  }
  return out;
}

// last_candidates: sorted by p descending then id ascending, summing to 1.
void expect_well_formed(std::span<const std::pair<int32_t, float>> c) {
  ASSERT_FALSE(c.empty());
  double sum = 0.0;
  for (size_t i = 0; i < c.size(); ++i) {
    sum += c[i].second;
    if (i == 0) continue;
    EXPECT_TRUE(c[i - 1].second > c[i].second || (c[i - 1].second == c[i].second && c[i - 1].first < c[i].first))
        << i;
  }
  EXPECT_NEAR(sum, 1.0, 1e-5);
}

bool contains(std::span<const std::pair<int32_t, float>> c, int32_t id) {
  return std::any_of(c.begin(), c.end(), [&](auto x) { return x.first == id; });
}

TEST(Sampler, GreedyIsArgmaxLowestIdOnTies) {
  for (int32_t vocab : {1, 2, 7, 1000, 50000, 151936}) {
    const auto logits = normal_logits(vocab, 7 + vocab);
    const auto expected = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    Sampler greedy(SamplingParams::greedy(), vocab);
    EXPECT_EQ(greedy.sample(logits), expected) << vocab;
    ASSERT_EQ(greedy.last_candidates().size(), 1u);
    EXPECT_EQ(greedy.last_candidates()[0], std::make_pair(expected, 1.0f));
    SamplingParams filtered = test::llama_cpp_sampling();  // the filters never drop the maximum, so they change nothing
    filtered.temperature = 0.0f;
    EXPECT_EQ(Sampler(filtered, vocab).sample(logits), expected) << vocab;
  }
  const std::vector<float> ties = {0.5f, -1.0f, 0.5f, 2.0f, 1.0f, 2.0f, 2.0f};
  EXPECT_EQ(Sampler(SamplingParams::greedy(), 7).sample(ties), 3);
}

TEST(Sampler, SameSeedSameSequenceOtherSeedAnother) {
  const auto logits = normal_logits(1000, 1);
  for (const SamplingParams& p : {plain(1.0f, 42), params(0.8f, 40, 0.95f, 0.05f, 42)}) {
    Sampler a(p, 1000), b(p, 1000);
    SamplingParams q = p;
    q.seed = 43;
    Sampler c(q, 1000);
    int differ = 0;
    for (int i = 0; i < 1000; ++i) {
      const int32_t id = a.sample(logits);
      ASSERT_EQ(b.sample(logits), id) << i;
      differ += c.sample(logits) != id;
    }
    EXPECT_GT(differ, 100);
  }
}

TEST(Sampler, ResetRestartsTheSequenceAndClearsTheHistory) {
  const auto logits = normal_logits(500, 2);
  Sampler s(plain(1.0f, 9), 500);
  std::vector<int32_t> first, second;
  for (int i = 0; i < 200; ++i) first.push_back(s.sample(logits));
  s.reset();
  EXPECT_TRUE(s.last_candidates().empty());
  for (int i = 0; i < 200; ++i) second.push_back(s.sample(logits));
  EXPECT_EQ(first, second);

  SamplingParams p = SamplingParams::greedy();
  p.repetition_penalty = 4.0f;
  Sampler g(p, 2);
  const std::vector<float> two = {1.0f, 0.9f};
  g.accept(0);
  EXPECT_EQ(g.sample(two), 1);  // 1.0 / 4 < 0.9
  g.reset();
  EXPECT_EQ(g.sample(two), 0);
}

// The documented draw, reproduced from the standard's mt19937_64: with 4 equal candidates the
// weights are exactly 1 and the pick is candidate floor(4u), u = (x >> 11) * 2^-53.
TEST(Sampler, DrawIsTheDocumentedInverseCdfOverMt19937_64) {
  std::mt19937_64 standard;
  standard.discard(9999);
  EXPECT_EQ(standard(), 9981545732273789042ull);  // [rand.predef]: fixed on every platform

  const std::vector<float> logits = {0.0f, -kInf, -kInf, 0.0f, 0.0f, -kInf, 0.0f, -kInf};
  const int32_t ids[] = {0, 3, 4, 6};
  Sampler s(plain(1.0f, 1234), 8);
  std::mt19937_64 rng(1234);
  std::vector<float> nan_logits = logits;
  nan_logits[3] = std::nanf("");
  for (int i = 0; i < 1000; ++i) {
    if (i % 100 == 50) {
      EXPECT_THROW(s.sample(nan_logits), Error);  // consumes no draw
    }
    const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;
    ASSERT_EQ(s.sample(logits), ids[static_cast<int>(u * 4)]) << i;
  }
}

TEST(Sampler, TopKNeverLeavesTheKBest) {
  const auto logits = normal_logits(1000, 3);
  std::vector<int32_t> order(1000);
  for (int32_t i = 0; i < 1000; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  const std::vector<int32_t> best(order.begin(), order.begin() + 5);
  Sampler s(params(1.5f, 5, 1.0f, 0.0f, 5), 1000);
  std::vector<int> hits(1000, 0);
  for (int i = 0; i < 10000; ++i) ++hits[s.sample(logits)];
  for (int32_t id = 0; id < 1000; ++id)
    EXPECT_EQ(hits[id] > 0, std::count(best.begin(), best.end(), id) > 0) << id;  // each of the 5 drawn

  const std::vector<float> tied = {0.0f, 1.0f, 1.0f, 1.0f, 0.0f};  // the k-th place is a tie
  Sampler t(params(1.0f, 2, 1.0f, 0.0f), 5);
  t.sample(tied);
  ASSERT_EQ(t.last_candidates().size(), 2u);
  EXPECT_EQ(t.last_candidates()[0].first, 1);  // lowest ids win the tie
  EXPECT_EQ(t.last_candidates()[1].first, 2);
}

TEST(Sampler, CandidatesEqualTheDoublePrecisionReference) {
  const SamplingParams configs[] = {params(0.8f, 40, 0.95f, 0.05f), params(1.0f, 0, 0.9f, 0.0f),
                                    params(1.5f, 0, 1.0f, 0.01f),   params(0.7f, 100, 0.5f, 0.0f),
                                    params(1.0f, 0, 1.0f, 0.0f),    params(2.0f, 5, 0.8f, 0.1f),
                                    params(3.0f, 0, 0.99f, 0.02f),  params(1.0f, 60000, 0.3f, 0.0f)};
  for (int32_t vocab : {1, 2, 7, 1000, 50000}) {
    const auto logits = normal_logits(vocab, 11 + vocab);
    for (size_t c = 0; c < std::size(configs); ++c) {
      SCOPED_TRACE(testing::Message() << "vocab " << vocab << " config " << c);
      const auto expected = reference(logits, configs[c]);
      Sampler s(configs[c], vocab);
      for (int draw = 0; draw < 20; ++draw) {
        const int32_t id = s.sample(logits);
        const auto got = s.last_candidates();
        ASSERT_EQ(got.size(), expected.size());
        EXPECT_TRUE(contains(got, id)) << id;
        expect_well_formed(got);
        std::vector<float> got_p(vocab, -1.0f);
        for (auto [gid, gp] : got) got_p[gid] = gp;
        for (auto [eid, ep] : expected) EXPECT_NEAR(got_p[eid], ep, 1e-6 * ep + 1e-12) << eid;
      }
    }
  }
}

// Over N = 100k draws each token's count is within 5 sigma (+1 for discreteness) of N p, p from
// the reference, and the pooled chi-square statistic (bins with N p >= 5, the rest pooled) stays
// below its 1e-6 upper quantile (Wilson–Hilferty). Tokens the filters drop are never drawn.
TEST(Sampler, FrequenciesMatchTheRenormalisedSoftmax) {
  constexpr int kDraws = 100000;
  const auto logits = normal_logits(64, 4, 1.5f);
  const SamplingParams configs[] = {plain(0.5f, 1), plain(1.0f, 2), plain(1.7f, 3), params(1.0f, 10, 0.9f, 0.0f, 4),
                                    params(1.2f, 20, 0.8f, 0.05f, 5)};
  for (const SamplingParams& p : configs) {
    SCOPED_TRACE(testing::Message() << "T " << p.temperature << " k " << p.top_k << " p " << p.top_p);
    std::vector<double> prob(64, 0.0);
    for (auto [id, q] : reference(logits, p)) prob[id] = q;
    std::vector<int> count(64, 0);
    Sampler s(p, 64);
    for (int i = 0; i < kDraws; ++i) ++count[s.sample(logits)];
    double chi2 = 0.0, pooled_expected = 0.0, pooled_seen = 0.0;
    int bins = 0;
    for (int id = 0; id < 64; ++id) {
      const double expected = kDraws * prob[id];
      if (prob[id] == 0.0) {
        EXPECT_EQ(count[id], 0) << id;
      }
      EXPECT_LE(std::abs(count[id] - expected), 5.0 * std::sqrt(expected * (1.0 - prob[id])) + 1.0) << id;
      if (expected >= 5.0) {
        chi2 += (count[id] - expected) * (count[id] - expected) / expected;
        ++bins;
      } else {
        pooled_expected += expected;
        pooled_seen += count[id];
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
}

// Penalised logits read back from the candidates at T = 1 with no filters: log(p_i / p_3) is
// l'_i - l'_3, and token 3 is never penalised (l'_3 = 0).
std::vector<double> adjusted(const SamplingParams& p, const std::vector<int32_t>& history) {
  const std::vector<float> logits = {2.0f, -1.0f, 0.5f, 0.0f, 1.0f};
  Sampler s(p, 5);
  s.accept(std::span<const int32_t>(history).first(1));
  for (size_t i = 1; i < history.size(); ++i) s.accept(history[i]);
  s.sample(logits);
  std::vector<double> prob(5, 0.0);
  for (auto [id, q] : s.last_candidates()) prob[id] = q;
  std::vector<double> out;
  for (double q : prob) out.push_back(std::log(q / prob[3]));
  return out;
}

MATCHER_P(LogitsNear, expected, "") {
  for (size_t i = 0; i < expected.size(); ++i)
    if (std::abs(arg[i] - expected[i]) > 1e-5) return false;
  return true;
}

TEST(Sampler, PenaltiesChangeTheLogitsByTheDocumentedAmounts) {
  const std::vector<int32_t> history = {0, 1, 1, 2};  // counts: token 0 → 1, 1 → 2, 2 → 1
  auto with = [](float rep, float presence, float frequency, int32_t last_n) {
    SamplingParams p = plain(1.0f);
    p.repetition_penalty = rep;
    p.presence_penalty = presence;
    p.frequency_penalty = frequency;
    p.penalty_last_n = last_n;
    return p;
  };
  using V = std::vector<double>;
  // Repetition: positive logits divided, negative multiplied, once per distinct token.
  EXPECT_THAT(adjusted(with(2.0f, 0, 0, 64), history), LogitsNear(V{1.0, -2.0, 0.25, 0.0, 1.0}));
  // Presence once, frequency × count: l -= count × 0.25 + 0.5.
  EXPECT_THAT(adjusted(with(1.0f, 0.5f, 0.25f, 64), history), LogitsNear(V{1.25, -2.0, -0.25, 0.0, 1.0}));
  // Repetition first, then presence and frequency.
  EXPECT_THAT(adjusted(with(2.0f, 0.5f, 0.25f, -1), history), LogitsNear(V{0.25, -3.0, -0.5, 0.0, 1.0}));
  // A window of 2 sees {1, 2}: token 0 is not penalised, token 1 counted once.
  EXPECT_THAT(adjusted(with(1.0f, 0.5f, 0.25f, 2), history), LogitsNear(V{2.0, -1.75, -0.25, 0.0, 1.0}));
  EXPECT_THAT(adjusted(with(2.0f, 0.5f, 0.25f, 0), history), LogitsNear(V{2.0, -1.0, 0.5, 0.0, 1.0}));
}

TEST(Sampler, SampleDoesNotChangeTheHistory) {
  SamplingParams p = SamplingParams::greedy();
  p.repetition_penalty = 2.0f;
  Sampler s(p, 2);
  const std::vector<float> logits = {1.0f, 0.9f};
  s.accept(0);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(s.sample(logits), 1);  // 0.5 < 0.9, and 1 is not recorded
  s.accept(1);
  EXPECT_EQ(s.sample(logits), 0);  // 0.5 > 0.45
}

TEST(Sampler, LogitBiasForcesAndBans) {
  const auto logits = normal_logits(1000, 6);
  const auto best = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  const auto worst = static_cast<int32_t>(std::min_element(logits.begin(), logits.end()) - logits.begin());
  SamplingParams force = test::llama_cpp_sampling();  // llama.cpp's defaults
  force.logit_bias = {{worst, 100.0f}};
  Sampler f(force, 1000);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(f.sample(logits), worst);

  SamplingParams ban = plain(1.0f, 3);
  ban.logit_bias = {{best, -kInf}};
  Sampler b(ban, 1000);
  for (int i = 0; i < 10000; ++i) ASSERT_NE(b.sample(logits), best);
  EXPECT_FALSE(contains(b.last_candidates(), best));
  SamplingParams greedy_ban = SamplingParams::greedy();
  greedy_ban.logit_bias = ban.logit_bias;
  std::vector<float> rest = logits;
  rest[best] = -kInf;
  EXPECT_EQ(Sampler(greedy_ban, 1000).sample(logits), std::max_element(rest.begin(), rest.end()) - rest.begin());

  SamplingParams sum = plain(1.0f);  // two entries for one id add up
  sum.logit_bias = {{4, 1.0f}, {0, -0.5f}, {4, 2.0f}};
  Sampler s(sum, 5);
  s.sample(std::vector<float>{2.0f, -1.0f, 0.5f, 0.0f, 1.0f});
  std::vector<double> prob(5);
  for (auto [id, q] : s.last_candidates()) prob[id] = q;
  EXPECT_NEAR(std::log(prob[4] / prob[3]), 4.0, 1e-5);
  EXPECT_NEAR(std::log(prob[0] / prob[3]), 1.5, 1e-5);

  SamplingParams all = plain(1.0f);
  all.logit_bias = {{0, -kInf}, {2, -kInf}};
  EXPECT_THAT(error_of(ErrorKind::InvalidArgument, [&] { Sampler(all, 3).sample(std::vector<float>{1.0f, -kInf, 2.0f}); }), HasSubstr("banned"));
}

TEST(Sampler, EveryInvalidParameterIsAnErrorNamingIt) {
  struct Case {
    void (*edit)(SamplingParams&);
    const char* name;
    const char* value;
  };
  const Case cases[] = {
      {[](SamplingParams& p) { p.temperature = -0.5f; }, "temperature", "-0.5"},
      {[](SamplingParams& p) { p.temperature = std::nanf(""); }, "temperature", "nan"},
      {[](SamplingParams& p) { p.top_k = -1; }, "top_k", "-1"},
      {[](SamplingParams& p) { p.top_p = 0.0f; }, "top_p", "0"},
      {[](SamplingParams& p) { p.top_p = 1.5f; }, "top_p", "1.5"},
      {[](SamplingParams& p) { p.top_p = std::nanf(""); }, "top_p", "nan"},
      {[](SamplingParams& p) { p.min_p = -0.25f; }, "min_p", "-0.25"},
      {[](SamplingParams& p) { p.min_p = 2.0f; }, "min_p", "2"},
      {[](SamplingParams& p) { p.repetition_penalty = 0.0f; }, "repetition_penalty", "0"},
      {[](SamplingParams& p) { p.repetition_penalty = std::nanf(""); }, "repetition_penalty", "nan"},
      {[](SamplingParams& p) { p.presence_penalty = kInf; }, "presence_penalty", "inf"},
      {[](SamplingParams& p) { p.frequency_penalty = std::nanf(""); }, "frequency_penalty", "nan"},
      {[](SamplingParams& p) { p.penalty_last_n = -2; }, "penalty_last_n", "-2"},
      {[](SamplingParams& p) { p.logit_bias = {{1, 1.0f}, {100, 1.0f}}; }, "logit_bias[1]", "100"},
      {[](SamplingParams& p) { p.logit_bias = {{-1, 1.0f}}; }, "logit_bias[0]", "-1"},
      {[](SamplingParams& p) { p.logit_bias = {{3, std::nanf("")}}; }, "logit_bias[0]", "nan"},
      {[](SamplingParams& p) { p.logit_bias = {{3, kInf}}; }, "logit_bias[0]", "inf"},
  };
  for (const Case& c : cases) {
    SamplingParams p;
    c.edit(p);
    EXPECT_THAT(error_of(ErrorKind::InvalidArgument, [&] { p.validate(100); }), AllOf(HasSubstr(c.name), HasSubstr(c.value)));
    EXPECT_THAT(error_of(ErrorKind::InvalidArgument, [&] { Sampler(p, 100); }), AllOf(HasSubstr(c.name), HasSubstr(c.value)));
  }
  EXPECT_THAT(error_of([] { Sampler(SamplingParams{}, 0); }), HasSubstr("vocab_size"));
  SamplingParams edges = params(0.0f, 0, 1.0f, 1.0f);  // the inclusive ends are valid
  edges.penalty_last_n = -1;
  edges.logit_bias = {{0, -kInf}, {99, 1e30f}};
  EXPECT_NO_THROW(edges.validate(100));
}

TEST(Sampler, BadLogitsAndIdsAreErrors) {
  Sampler s(test::llama_cpp_sampling(), 2000);
  auto logits = normal_logits(2000, 8);
  logits[1234] = std::nanf("");
  EXPECT_THAT(error_of([&] { s.sample(logits); }), AllOf(HasSubstr("1234"), HasSubstr("nan")));
  logits[1234] = 0.0f;
  logits[17] = kInf;
  EXPECT_THAT(error_of([&] { s.sample(logits); }), AllOf(HasSubstr("17"), HasSubstr("inf")));
  EXPECT_THAT(error_of([&] { s.sample(std::vector<float>(2000, -kInf)); }), HasSubstr("banned"));
  EXPECT_THAT(error_of([&] { s.sample(std::vector<float>(1999, 0.0f)); }), AllOf(HasSubstr("1999"), HasSubstr("2000")));
  EXPECT_THAT(error_of([&] { s.accept(2000); }), HasSubstr("2000"));
  EXPECT_THAT(error_of([&] { s.accept(-1); }), HasSubstr("-1"));

  SamplingParams p = SamplingParams::greedy();  // a rejected accept() records nothing
  p.repetition_penalty = 4.0f;
  Sampler g(p, 2);
  EXPECT_THAT(error_of([&] { g.accept(std::vector<int32_t>{0, 2}); }), HasSubstr("2"));
  EXPECT_EQ(g.sample(std::vector<float>{1.0f, 0.9f}), 0);
}

}  // namespace
}  // namespace kvinfer
