// Constrained sampling end to end: a Sampler with a grammar picks exactly what a plain sampler
// picks from logits with every disallowed token at -inf (the same id, the same draw), for every
// sampler setting; generation stops when the output is complete; prompt lookup and a draft model
// give the same tokens as plain constrained decoding; the Scheduler's sequences each keep their
// own parse and equal generation alone; the C API takes grammars. On the chatml_tiny fixture
// (random weights: only the grammar makes the output JSON) and the default model when present.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/matcher.h"
#include "grammar/token_matcher.h"
#include "kvinfer/kvinfer.h"
#include "kvinfer/kvinfer_c.h"
#include "reference.h"
#include "sampling_presets.h"
#include "test_files.h"

namespace kvinfer {
namespace {

using test::error_of;
using ::testing::HasSubstr;
constexpr float kInf = std::numeric_limits<float>::infinity();

std::shared_ptr<const Model> tiny() {
  static const auto m = Model::load(test::model_dir("chatml_tiny"), {.device = Device::CPU});
  return m;
}

const char* kSchema = R"({"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 12}, "age": {"type": "integer", "minimum": 0, "maximum": 120},
    "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3}, "ok": {"type": "boolean"}},
  "required": ["name", "age"], "additionalProperties": false})";

std::vector<SamplingParams> settings() {
  std::vector<SamplingParams> out;
  out.push_back(SamplingParams::greedy());
  out.push_back(test::llama_cpp_sampling());
  SamplingParams hot;
  hot.temperature = 1.5f;
  out.push_back(hot);
  SamplingParams pen = test::llama_cpp_sampling();
  pen.repetition_penalty = 1.3f;
  pen.presence_penalty = 0.5f;
  pen.frequency_penalty = 0.2f;
  pen.logit_bias = {{10, 5.0f}, {11, -kInf}};
  out.push_back(pen);
  SamplingParams nucleus;
  nucleus.temperature = 0.9f;
  nucleus.top_p = 0.5f;
  out.push_back(nucleus);
  return out;
}

// Parses the generated text as JSON and checks it against kSchema's rules by hand.
void expect_person(const std::string& text) {
  const auto j = nlohmann::json::parse(text, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << text;
  ASSERT_TRUE(j.is_object()) << text;
  ASSERT_TRUE(j.contains("name") && j["name"].is_string()) << text;
  ASSERT_TRUE(j.contains("age") && j["age"].is_number_integer()) << text;
  EXPECT_GE(j["age"].get<int>(), 0);
  EXPECT_LE(j["age"].get<int>(), 120);
  for (const auto& [k, v] : j.items()) EXPECT_TRUE(k == "name" || k == "age" || k == "tags" || k == "ok") << text;
}

TEST(StructuredSampler, PicksWhatAPlainSamplerPicksFromTheMaskedLogits) {
  const auto model = tiny();
  const auto grammar = Grammar::from_json_schema(kSchema, model->grammar_vocabulary());
  const int32_t vocab = static_cast<int32_t>(model->config().vocab_size);
  std::mt19937_64 rng(3);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (SamplingParams p : settings()) {
    for (uint64_t seed : {1ull, 2ull, 99ull}) {
      p.seed = seed;
      SamplingParams constrained = p;
      constrained.grammar = grammar;
      Sampler s(constrained, vocab), plain(p, vocab);
      grammar::TokenMatcher reference(grammar);
      const std::vector<int32_t> prompt = {5, 6, 7};
      s.accept(prompt);  // before the first sample: the prompt, which the grammar ignores
      plain.accept(prompt);
      for (int step = 0; step < 200 && !s.grammar_finished(); ++step) {
        std::vector<float> logits(vocab);
        for (float& l : logits) l = normal(rng);
        std::vector<float> masked = logits;
        for (int32_t t = 0; t < vocab; ++t)
          if (!reference.allows(t)) masked[t] = -kInf;
        const int32_t a = s.sample(logits), b = plain.sample(masked);
        ASSERT_EQ(a, b) << "step " << step << " seed " << seed;
        ASSERT_EQ(std::vector(s.last_candidates().begin(), s.last_candidates().end()),
                  std::vector(plain.last_candidates().begin(), plain.last_candidates().end()));
        s.accept(a);
        plain.accept(b);
        ASSERT_TRUE(reference.accept(a));
      }
      EXPECT_TRUE(s.grammar_finished() || !reference.complete());
    }
  }
}

TEST(StructuredSampler, AcceptChecksTheGrammarAndResetStartsOver) {
  const auto model = tiny();
  SamplingParams p;
  p.grammar = Grammar::from_gbnf(R"(root ::= "ab")", model->grammar_vocabulary());
  const int32_t vocab = static_cast<int32_t>(model->config().vocab_size);
  Sampler s(p, vocab);
  const Tokenizer& tok = model->tokenizer();
  const int32_t a = tok.encode("a", {.add_special = false})[0], b = tok.encode("b", {.add_special = false})[0];
  s.accept(b);  // the prompt: anything
  std::vector<float> logits(vocab, 0.0f);
  logits[b] = 10.0f;  // the model wants "b"; the grammar says "a" first
  EXPECT_EQ(s.sample(logits), a);
  EXPECT_THAT(error_of([&] { s.accept(b); }), HasSubstr("not allowed by the grammar"));
  s.accept(a);
  EXPECT_EQ(s.sample(logits), b);
  s.accept(b);
  EXPECT_TRUE(s.grammar_finished());
  // Copies keep their own parse.
  Sampler copy = s;
  copy.reset();
  EXPECT_FALSE(copy.grammar_finished());
  EXPECT_TRUE(s.grammar_finished());
  EXPECT_THAT(error_of([&] { s.sample_top_k(std::vector<std::pair<int32_t, float>>{{a, 1.0f}}); }), HasSubstr("sample_top_k"));
  // Finished with no end id set: nothing may be sampled.
  s.set_end_ids({});
  EXPECT_THAT(error_of([&] { s.sample(logits); }), HasSubstr("the grammar allows no token"));
}

TEST(StructuredGeneration, EverySettingGivesValidJson) {
  const auto model = tiny();
  const auto grammar = Grammar::from_json_schema(kSchema, model->grammar_vocabulary());
  Session session(model);
  int n = 0;
  for (SamplingParams p : settings()) {
    for (uint64_t seed = 0; seed < 6; ++seed) {
      KvCache kv(*model, 256);
      GenerateOptions o;
      o.max_new_tokens = 200;
      o.sampling = p;
      o.sampling.seed = seed;
      o.sampling.grammar = grammar;
      const auto r = generate(session, kv, model->tokenizer(), model->tokenizer().encode("Person:"), o);
      ASSERT_EQ(r.stop, StopReason::Eos) << r.text;
      expect_person(r.text);
      ++n;
    }
  }
  EXPECT_EQ(n, 30);
}

TEST(StructuredGeneration, SpeculativeDecodingGivesTheSameTokens) {
  const auto model = tiny();
  const auto grammar = Grammar::from_json_schema(kSchema, model->grammar_vocabulary());
  Session session(model);
  // A prompt that repeats JSON, so that prompt lookup drafts (some of its drafts the grammar refuses).
  const auto prompt = model->tokenizer().encode(R"({"name": "ab", "age": 3} {"name": "ab", "age": 3} {"name": ")");
  for (SamplingParams p : {SamplingParams::greedy(), test::llama_cpp_sampling()}) {
    p.seed = 5;
    p.grammar = grammar;
    GenerateOptions plain;
    plain.max_new_tokens = 120;
    plain.sampling = p;
    KvCache kv0(*model, 256);
    const auto base = generate_tokens(session, kv0, prompt, plain);
    GenerateOptions lookup = plain;
    lookup.speculative.lookup_ngram = 3;
    KvCache kv1(*model, 256);
    const auto a = generate_tokens(session, kv1, prompt, lookup);
    EXPECT_EQ(a.tokens, base.tokens);
    EXPECT_GT(a.stats.drafted_tokens, 0);
    if (p.temperature == 0.0f) {  // a draft model: the same ids for a deterministic drafter
      DraftModel draft(Model::load(test::model_dir("chatml_tiny"), {.device = Device::CPU}), *model, 256);
      GenerateOptions drafted = plain;
      drafted.speculative.draft_model = &draft;
      KvCache kv2(*model, 256);
      const auto b = generate_tokens(session, kv2, prompt, drafted);
      EXPECT_EQ(b.tokens, base.tokens);
      EXPECT_GT(b.stats.accepted_tokens, 0);  // the draft follows the grammar too
    }
  }
}

TEST(StructuredGeneration, SchedulerSequencesKeepTheirOwnParse) {
  const auto model = tiny();
  const auto vocab = model->grammar_vocabulary();
  const std::vector<std::shared_ptr<const Grammar>> grammars = {
      Grammar::from_json_schema(kSchema, vocab), Grammar::any_json(vocab),
      Grammar::from_gbnf(R"(root ::= "yes" | "no" | [0-9]{3})", vocab), nullptr};
  Scheduler scheduler(model, {.step_tokens = 64, .max_sequences = 8});
  std::vector<GenerateResult> alone;
  std::vector<SequenceResult> batched(8);
  Session session(model);
  for (int i = 0; i < 8; ++i) {
    SchedulerRequest req;
    req.prompt = model->tokenizer().encode(std::string(i + 1, 'x'));
    req.text = true;
    req.options.max_new_tokens = 60;
    req.options.sampling = i % 2 ? test::llama_cpp_sampling() : SamplingParams::greedy();
    req.options.sampling.seed = static_cast<uint64_t>(i);
    req.options.sampling.grammar = grammars[static_cast<size_t>(i) % grammars.size()];
    KvCache kv(*model, 128);
    alone.push_back(generate(session, kv, model->tokenizer(), req.prompt, req.options));
    scheduler.submit(req, {}, [&, i](const SequenceResult& r) { batched[static_cast<size_t>(i)] = r; });
  }
  scheduler.run_until_idle();
  for (int i = 0; i < 8; ++i) {
    EXPECT_FALSE(batched[i].error.has_value());
    EXPECT_EQ(batched[i].result.tokens, alone[i].tokens) << i;
    EXPECT_EQ(batched[i].result.text, alone[i].text) << i;
    EXPECT_EQ(batched[i].result.stop, alone[i].stop) << i;
  }
  expect_person(alone[0].text);
  EXPECT_THAT(alone[2].text, ::testing::MatchesRegex("yes|no|[0-9][0-9][0-9]"));
}

TEST(StructuredGeneration, IgnoreEosStopsWhenNothingCanFollow) {
  const auto model = tiny();
  GenerateOptions o;
  o.ignore_eos = true;
  o.max_new_tokens = 50;
  o.sampling.grammar = Grammar::from_gbnf(R"(root ::= "[" [0-9] "]")", model->grammar_vocabulary());
  Session session(model);
  KvCache kv(*model, 128);
  const auto r = generate(session, kv, model->tokenizer(), model->tokenizer().encode("hi"), o);
  EXPECT_EQ(r.stop, StopReason::Eos);
  EXPECT_THAT(r.text, ::testing::MatchesRegex("\\[[0-9]\\]"));
}

TEST(StructuredGeneration, CApiTakesGrammars) {
  kvinfer_model* m = nullptr;
  ASSERT_EQ(kvinfer_model_load(test::model_dir("chatml_tiny").c_str(), nullptr, &m), KVINFER_OK) << kvinfer_last_error();
  kvinfer_grammar* g = nullptr;
  EXPECT_EQ(kvinfer_grammar_from_json_schema(m, "{\"type\": \"object\", \"multipleOf\": 2}", 1, &g), KVINFER_ERR_UNSUPPORTED);
  EXPECT_THAT(kvinfer_last_error(), HasSubstr("kvinfer_grammar_from_json_schema: JSON schema (root): 'multipleOf'"));
  EXPECT_EQ(g, nullptr);
  EXPECT_EQ(kvinfer_grammar_from_gbnf(m, "root ::= (", &g), KVINFER_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvinfer_grammar_from_gbnf(nullptr, "root ::= \"a\"", &g), KVINFER_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(kvinfer_grammar_from_json_schema(m, kSchema, 0, &g), KVINFER_OK) << kvinfer_last_error();
  kvinfer_kv* kv = nullptr;
  kvinfer_session* s = nullptr;
  ASSERT_EQ(kvinfer_kv_new(m, 256, KVINFER_DTYPE_DEFAULT, &kv), KVINFER_OK);
  ASSERT_EQ(kvinfer_session_new(m, nullptr, &s), KVINFER_OK);
  kvinfer_generate_options o = kvinfer_generate_options_default();
  o.max_new_tokens = 200;
  o.sampling.grammar = g;
  std::string text;
  kvinfer_generate_result r{};
  const int32_t prompt[] = {5, 6, 7};
  ASSERT_EQ(kvinfer_generate(s, kv, prompt, 3, &o,
                             [](int32_t, const char* piece, size_t len, void* user) {
                               static_cast<std::string*>(user)->append(piece, len);
                               return true;
                             },
                             &text, &r),
            KVINFER_OK)
      << kvinfer_last_error();
  EXPECT_EQ(r.stop, KVINFER_STOP_EOS);
  expect_person(text);
  kvinfer_sampler* sampler = nullptr;
  kvinfer_sampling_params p = kvinfer_sampling_default();
  p.grammar = g;
  ASSERT_EQ(kvinfer_sampler_new(&p, 384, &sampler), KVINFER_OK);
  kvinfer_grammar_free(g);  // the sampler keeps the grammar alive
  std::vector<float> logits(384, 0.0f);
  int32_t id = -1;
  EXPECT_EQ(kvinfer_sampler_sample_logits(sampler, logits.data(), logits.size(), &id), KVINFER_OK);
  EXPECT_EQ(kvinfer_sampler_grammar_finished(sampler), 0);
  EXPECT_EQ(kvinfer_sampler_grammar_finished(nullptr), 0);
  kvinfer_sampler_free(sampler);
  kvinfer_session_free(s);
  kvinfer_kv_free(kv);
  kvinfer_model_free(m);
}

}  // namespace
}  // namespace kvinfer
