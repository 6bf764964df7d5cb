// Beam search against HF transformers' generate(num_beams=...) (tests/data/beam/references.json,
// made by tools/make_beam_fixtures.py), its errors, and its cache policy: forks copy only the
// rows a beam's cache lacks, and the copies continue bit for bit.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "generate/beam_caches.h"
#include "kvinfer/kvinfer.h"
#include "reference.h"

namespace kvinfer {
namespace {

const nlohmann::json& references() {
  static const nlohmann::json j = [] {
    std::ifstream in(std::filesystem::path(KVINFER_TEST_DATA) / "beam" / "references.json");
    return nlohmann::json::parse(in);
  }();
  return j;
}

std::shared_ptr<const Model> fixture(const std::string& name) {
  static std::map<std::string, std::shared_ptr<const Model>> models;
  auto& m = models[name];
  if (!m) m = Model::load(test::model_dir(name), {.device = Device::CPU});
  return m;
}

EarlyStopping parse_early_stopping(const std::string& s) {
  if (s == "true") return EarlyStopping::Immediate;
  if (s == "never") return EarlyStopping::Never;
  return EarlyStopping::Heuristic;
}

BeamSearchOptions options_of(const nlohmann::json& c) {
  BeamSearchOptions o;
  o.num_beams = c["num_beams"];
  o.max_new_tokens = c["max_new_tokens"];
  o.length_penalty = c["length_penalty"];
  o.early_stopping = parse_early_stopping(c["early_stopping"]);
  o.no_repeat_ngram_size = c["no_repeat_ngram_size"];
  o.num_return_sequences = c["num_return_sequences"];
  o.eos_ids = c["eos_token_id"].get<std::vector<int32_t>>();
  return o;
}

// Scores: HF's and ours come from logits within ~1e-6 of each other (PROVENANCE.md's cache on/off
// column; test_hf_parity bounds them by 1e-4), so a sum of n log-probs differs by about n·1e-6,
// and dividing by length^length_penalty scales it by at most n^|length_penalty|. 1e-4 relative to
// the sum's magnitude (at least 1) covers that with margin, and a dropped length penalty or a
// wrong length convention moves a score by far more (a factor of n^length_penalty).
float score_tolerance(float score) { return 1e-4f * std::max(1.0f, std::fabs(score)); }

class HfBeamSearch : public ::testing::TestWithParam<size_t> {};

// Tokens exactly, scores within score_tolerance, and the number of steps HF ran (which checks
// the early-stopping rules even where the output would not show them), for every recorded case.
TEST_P(HfBeamSearch, MatchesTransformers) {
  const nlohmann::json& c = references()["cases"][GetParam()];
  SCOPED_TRACE(c["name"].get<std::string>());
  auto model = fixture(c["fixture"]);
  const auto prompt = c["prompt_ids"].get<std::vector<int32_t>>();
  const BeamSearchOptions o = options_of(c);
  Session s(model);
  KvCache kv(*model, static_cast<int64_t>(prompt.size()) + o.max_new_tokens, DType::F32);
  const BeamSearchResult r = beam_search(s, kv, prompt, o);

  const nlohmann::json& want = c["sequences"];
  ASSERT_EQ(r.sequences.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE("sequence " + std::to_string(i));
    EXPECT_EQ(r.sequences[i].tokens, want[i]["tokens"].get<std::vector<int32_t>>());
    const float score = want[i]["score"];
    EXPECT_NEAR(r.sequences[i].score, score, score_tolerance(score));
  }
  EXPECT_EQ(r.stats.steps + 1, c["steps"].get<int64_t>()) << "HF ran " << c["steps"] << " steps";
  // The cache is left holding the prompt, as before the call plus the prompt.
  EXPECT_EQ(std::vector<int32_t>(kv.tokens().begin(), kv.tokens().end()), prompt);
}

// gtest names are letters, digits and '_': "lp-1.0" becomes "lpm1p0".
std::string case_name(const ::testing::TestParamInfo<size_t>& p) {
  std::string name;
  for (char ch : references()["cases"][p.param]["name"].get<std::string>())
    name += std::isalnum(static_cast<unsigned char>(ch)) ? std::string(1, ch) : ch == '.' ? "p" : ch == '-' ? "m" : "_";
  return name;
}

INSTANTIATE_TEST_SUITE_P(References, HfBeamSearch, ::testing::Range<size_t>(0, references()["cases"].size()),
                         case_name);

// The references exercise what they claim to: hypotheses that end at an eos id before
// max_new_tokens, several lengths in one result, and every option value.
TEST(HfBeamSearchReferences, CoverEosAndEveryOption) {
  int ended_by_eos = 0, mixed_lengths = 0, two_eos = 0;
  std::set<std::string> fixtures, stopping;
  std::set<double> penalties;
  std::set<int> beams, ngrams, returns;
  for (const auto& c : references()["cases"]) {
    fixtures.insert(c["fixture"].get<std::string>());
    stopping.insert(c["early_stopping"].get<std::string>());
    penalties.insert(c["length_penalty"].get<double>());
    beams.insert(c["num_beams"].get<int>());
    ngrams.insert(c["no_repeat_ngram_size"].get<int>());
    returns.insert(c["num_return_sequences"].get<int>());
    two_eos += c["eos_token_id"].size() > 1;
    std::set<size_t> lengths;
    for (const auto& s : c["sequences"]) {
      lengths.insert(s["tokens"].size());
      ended_by_eos += s["tokens"].size() < c["max_new_tokens"].get<size_t>();
    }
    mixed_lengths += lengths.size() > 1;
  }
  EXPECT_GE(ended_by_eos, 10);
  EXPECT_GE(mixed_lengths, 5);
  EXPECT_GE(two_eos, 1);
  for (const char* f : {"llama_mha", "llama_gqa4", "gpt2_tiny", "qwen2_bias"}) EXPECT_TRUE(fixtures.count(f)) << f;
  EXPECT_EQ(stopping, (std::set<std::string>{"false", "true", "never"}));
  for (double p : {0.5, 1.0, 2.0}) EXPECT_TRUE(penalties.count(p)) << p;
  for (int b : {2, 4}) EXPECT_TRUE(beams.count(b)) << b;
  for (int n : {0, 2}) EXPECT_TRUE(ngrams.count(n)) << n;
  EXPECT_GT(*returns.rbegin(), 1);
}

class BeamSearchTest : public ::testing::Test {
 protected:
  std::shared_ptr<const Model> model_ = fixture("llama_gqa4");
  test::Reference ref_{"llama_gqa4"};
};

void expect_invalid(Session& s, KvCache& kv, std::span<const int32_t> prompt, const BeamSearchOptions& o,
                    const std::string& names) {
  try {
    beam_search(s, kv, prompt, o);
    ADD_FAILURE() << "no error; expected one naming " << names;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument) << e.what();
    EXPECT_NE(std::string(e.what()).find(names), std::string::npos) << e.what();
  }
}

TEST_F(BeamSearchTest, BadOptionsAreInvalidArgumentsNamingTheOption) {
  Session s(model_);
  KvCache kv(*model_, 64);
  const auto with = [](auto change) {
    BeamSearchOptions o;
    change(o);
    return o;
  };
  expect_invalid(s, kv, ref_.prompt_ids, with([](auto& o) { o.num_beams = 0; }), "num_beams");
  expect_invalid(s, kv, ref_.prompt_ids, with([](auto& o) { o.max_new_tokens = 0; }), "max_new_tokens");
  expect_invalid(s, kv, ref_.prompt_ids, with([](auto& o) { o.num_return_sequences = 5; }), "num_return_sequences");
  expect_invalid(s, kv, ref_.prompt_ids, with([](auto& o) { o.num_return_sequences = 0; }), "num_return_sequences");
  expect_invalid(s, kv, ref_.prompt_ids, with([](auto& o) { o.no_repeat_ngram_size = -1; }), "no_repeat_ngram_size");
  expect_invalid(s, kv, ref_.prompt_ids, with([](auto& o) { o.length_penalty = NAN; }), "length_penalty");
  expect_invalid(s, kv, ref_.prompt_ids, with([](auto& o) { o.eos_ids = {128}; }), "eos id 128");
  expect_invalid(s, kv, {}, BeamSearchOptions{}, "prompt");
  EXPECT_EQ(kv.size(), 0);
}

TEST_F(BeamSearchTest, PromptAndNewTokensBeyondTheCacheAreContextFullBeforeAnyWork) {
  Session s(model_);
  const auto T = static_cast<int64_t>(ref_.prompt_ids.size());
  BeamSearchOptions o;
  o.max_new_tokens = 8;
  KvCache kv(*model_, T + 6);  // needs T + 7: the last token is never fed back
  try {
    beam_search(s, kv, ref_.prompt_ids, o);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::ContextFull) << e.what();
    EXPECT_NE(std::string(e.what()).find("max_new_tokens 8"), std::string::npos) << e.what();
  }
  EXPECT_EQ(kv.size(), 0);
  KvCache fits(*model_, T + 7);
  EXPECT_NO_THROW(beam_search(s, fits, ref_.prompt_ids, o));
  EXPECT_EQ(fits.size(), T);
}

// A cache that already holds a conversation continues it: the same result as the whole sequence
// given as the prompt to an empty cache (the n-gram ban sees the earlier positions too).
TEST_F(BeamSearchTest, ContinuesACachedSequence) {
  Session s(model_);
  BeamSearchOptions o;
  o.num_beams = 3;
  o.max_new_tokens = 10;
  o.no_repeat_ngram_size = 2;
  o.num_return_sequences = 3;
  const std::span<const int32_t> all(ref_.prompt_ids);
  KvCache whole(*model_, 64);
  const BeamSearchResult a = beam_search(s, whole, all, o);
  KvCache parts(*model_, 64);
  s.prefill(parts, all.first(4));
  const BeamSearchResult b = beam_search(s, parts, all.subspan(4), o);
  ASSERT_EQ(a.sequences.size(), b.sequences.size());
  for (size_t i = 0; i < a.sequences.size(); ++i) {
    EXPECT_EQ(a.sequences[i].tokens, b.sequences[i].tokens);
    EXPECT_EQ(a.sequences[i].score, b.sequences[i].score);  // the same logits, bit for bit
  }
  EXPECT_EQ(std::vector<int32_t>(parts.tokens().begin(), parts.tokens().end()), ref_.prompt_ids);
}

TEST_F(BeamSearchTest, CancelThrowsAndLeavesTheCacheAsBefore) {
  Session s(model_);
  KvCache kv(*model_, 64);
  s.prefill(kv, std::span<const int32_t>(ref_.prompt_ids).first(3));
  BeamSearchOptions o;
  int asked = 0;
  o.cancel = [&] { return ++asked == 3; };
  try {
    beam_search(s, kv, std::span<const int32_t>(ref_.prompt_ids).subspan(3), o);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Cancelled) << e.what();
  }
  EXPECT_EQ(kv.size(), 3);
}

// One beam never copies; more beams copy far fewer rows than forking every beam every step, and
// what is copied is counted consistently.
TEST_F(BeamSearchTest, CopiesOnlyTheRowsABeamLacks) {
  Session s(model_);
  const auto T = static_cast<int64_t>(ref_.prompt_ids.size());
  BeamSearchOptions o;
  o.max_new_tokens = 24;
  o.ignore_eos = true;
  o.num_beams = 1;
  KvCache one(*model_, 64, DType::F32);
  EXPECT_EQ(beam_search(s, one, ref_.prompt_ids, o).stats.cache_copies, 0);

  o.num_beams = 4;
  KvCache kv(*model_, 64, DType::F32);
  const BeamSearchStats st = beam_search(s, kv, ref_.prompt_ids, o).stats;
  EXPECT_EQ(st.steps, 23);
  // The three forks of the prompt, then reorders.
  EXPECT_GE(st.cache_copies, 3);
  EXPECT_GE(st.copied_rows, 3 * T);
  // Forking every beam from its parent's whole cache at every step would copy this many rows.
  int64_t naive = 3 * T;
  for (int64_t step = 1; step <= st.steps; ++step) naive += 4 * (T + step);
  EXPECT_LT(st.copied_rows, naive / 4) << st.copied_rows << " of " << naive;
  const uint64_t row_bytes = static_cast<uint64_t>(kv.num_layers() * kv.num_kv_heads() * kv.head_dim()) * 2 * 4;
  EXPECT_EQ(st.copied_bytes, static_cast<uint64_t>(st.copied_rows) * row_bytes);
  // The forks hold what the search needs: the prompt and max_new_tokens - 1 positions.
  EXPECT_EQ(st.kv_bytes, kv.bytes() + 3 * KvCache(*model_, T + 23, DType::F32).bytes());
}

// copy_rows_after_common_prefix: after it, the destination continues exactly as the source does
// (the same logits, bit for bit), having copied only the rows after the shared prefix; for every
// cache dtype (8-bit ones carry row scales that must come along).
TEST_F(BeamSearchTest, PartialCopyContinuesBitForBit) {
  Session s(model_);
  std::vector<int32_t> a = ref_.prompt_ids, b = ref_.prompt_ids;
  a.insert(a.end(), {5, 6, 7, 8, 9});
  b.insert(b.end(), {5, 6, 40, 41});
  const auto shared = static_cast<int64_t>(ref_.prompt_ids.size()) + 2;
  for (DType dtype : {DType::F32, DType::F16, DType::BF16, DType::I8, DType::FP8}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    KvCache src(*model_, 32, dtype), dst(*model_, 32, dtype);
    s.prefill(src, a);
    s.prefill(dst, b);
    uint64_t bytes = 0;
    EXPECT_EQ(copy_rows_after_common_prefix(dst, src, bytes), static_cast<int64_t>(a.size()) - shared);
    EXPECT_GT(bytes, 0u);
    EXPECT_EQ(std::vector<int32_t>(dst.tokens().begin(), dst.tokens().end()), a);
    const auto want = s.decode(src, 3);
    const std::vector<float> expected(want.begin(), want.end());
    const auto got = s.decode(dst, 3);
    ASSERT_EQ(got.size(), expected.size());
    EXPECT_EQ(0, std::memcmp(got.data(), expected.data(), expected.size() * sizeof(float)));
    // A destination that already holds the source's sequence, or more of it, copies nothing.
    EXPECT_EQ(copy_rows_after_common_prefix(src, dst, bytes), 0);
  }
}

// The copy cost on kvinfer's default model (docs/beam-search.md quotes this run): a prompt of
// about 80 tokens, 4 beams, 64 new tokens, an f16 cache. Skipped when the model is absent
// (tools/fetch_model.sh).
TEST(BeamSearchDefaultModel, CopyCost) {
  const std::filesystem::path file = KVINFER_DEFAULT_MODEL;
  if (!std::filesystem::exists(file)) GTEST_SKIP() << file << " is absent (tools/fetch_model.sh)";
  auto model = Model::load(file);
  const std::vector<int32_t> prompt = model->tokenizer().encode(
      "Johannes Gutenberg's press combined movable metal type, oil-based ink and a screw press adapted from "
      "those used to make wine. Within fifty years of his first Bible, printers in more than two hundred "
      "European towns had produced millions of books, and the price of a book fell so far that scholars, "
      "merchants and students could own them. The history of the printing press after Gutenberg begins");
  Session s(model);
  BeamSearchOptions o;
  o.num_beams = 4;
  o.max_new_tokens = 64;
  o.ignore_eos = true;
  KvCache kv(*model, static_cast<int64_t>(prompt.size()) + o.max_new_tokens);
  const BeamSearchResult r = beam_search(s, kv, prompt, o);
  const BeamSearchStats& st = r.stats;
  ASSERT_EQ(st.steps, o.max_new_tokens - 1);
  const double steps = static_cast<double>(st.steps);
  std::printf("default model, %zu prompt tokens, 4 beams, %lld steps, %s cache of %s per beam\n", prompt.size(),
              static_cast<long long>(st.steps), std::string(dtype_name(kv.dtype())).c_str(),
              format_bytes(kv.bytes()).c_str());
  std::printf("  copies: %lld caches, %lld rows, %s in all (%s per step), %.3f ms per step\n",
              static_cast<long long>(st.cache_copies), static_cast<long long>(st.copied_rows),
              format_bytes(st.copied_bytes).c_str(),
              format_bytes(static_cast<uint64_t>(static_cast<double>(st.copied_bytes) / steps)).c_str(),
              1e3 * st.copy_seconds / steps);
  // HF reorders every layer's cache with index_select: all beams' rows, every step.
  const uint64_t row_bytes = st.copied_bytes / static_cast<uint64_t>(st.copied_rows);
  int64_t reorder_rows = 0;
  for (int64_t step = 1; step <= st.steps; ++step) reorder_rows += 4 * (static_cast<int64_t>(prompt.size()) + step);
  std::printf("  (a full reorder every step, as HF's cache.reorder_cache, would copy %lld rows, %s)\n",
              static_cast<long long>(reorder_rows),
              format_bytes(row_bytes * static_cast<uint64_t>(reorder_rows)).c_str());
  std::printf("  forward: prefill %.1f ms, %.2f ms per step of 4 beams; selection %.3f ms per step\n",
              1e3 * st.prefill_seconds, 1e3 * st.decode_seconds / steps, 1e3 * st.select_seconds / steps);
  EXPECT_LT(st.copy_seconds, 0.1 * st.decode_seconds);
}

}  // namespace
}  // namespace kvinfer
