// Text in, text out on a model with a real tokenizer: HF's greedy text, streaming that never
// breaks a UTF-8 character, stop strings, statistics, and a chat that prefills only new turns.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "generate/stop_strings.h"
#include "test_files.h"
#include "kvinfer/kvinfer.h"
#include "reference.h"
#include "sampling_presets.h"

namespace kvinfer {
namespace {

namespace fs = std::filesystem;

bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    i += n;
  }
  return true;
}

class TextGeneration : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = Model::load(test::model_dir("chatml_tiny"), {.device = Device::CPU});
    std::ifstream in(test::model_dir("chatml_tiny") / "text_reference.json");
    ref_ = nlohmann::json::parse(in);
  }
  static void TearDownTestSuite() { model_.reset(); }

  static GenerateOptions greedy(int64_t n) {
    GenerateOptions o;
    o.max_new_tokens = n;
    o.ignore_eos = true;
    return o;
  }

  static inline std::shared_ptr<const Model> model_;
  static inline nlohmann::json ref_;
};

TEST_F(TextGeneration, GreedyTextEqualsHfStreamedInWholeCharacters) {
  const Tokenizer& tok = model_->tokenizer();
  for (const auto& p : ref_["prompts"]) {
    SCOPED_TRACE(p["text"].get<std::string>());
    const auto ids = tok.encode(p["text"].get<std::string>());
    ASSERT_EQ(ids, p["ids"].get<std::vector<int32_t>>());
    for (bool cached : {true, false}) {
      KvCache kv(*model_, 64);
      Session s(model_);
      GenerateOptions o = greedy(ref_["max_new_tokens"]);
      o.use_kv_cache = cached;
      std::string streamed;
      int calls = 0;
      auto r = generate(s, kv, tok, ids, o, [&](int32_t, std::string_view piece) {
        EXPECT_TRUE(valid_utf8(piece)) << "piece " << calls;
        streamed += piece;
        ++calls;
        return true;
      });
      EXPECT_EQ(r.tokens, p["greedy_ids"].get<std::vector<int32_t>>());
      EXPECT_EQ(r.text, p["greedy_text"].get<std::string>());
      EXPECT_EQ(streamed, r.text);
      EXPECT_EQ(calls, static_cast<int>(r.tokens.size()));
      EXPECT_EQ(r.stop, StopReason::MaxTokens);
    }
  }
}

TEST_F(TextGeneration, StopStringCutsTheTextAndIsNeverStreamed) {
  const Tokenizer& tok = model_->tokenizer();
  const auto& p = ref_["prompts"][2];
  const std::string full = p["greedy_text"];
  // A stop string from the middle of HF's continuation: 3 whole characters from the 6th on.
  auto next_char = [&](size_t i) {
    const auto c = static_cast<unsigned char>(full[i]);
    return i + (c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : 4);
  };
  size_t begin = 0;
  for (int c = 0; c < 5; ++c) begin = next_char(begin);
  size_t end = begin;
  for (int c = 0; c < 3; ++c) end = next_char(end);
  const std::string stop = full.substr(begin, end - begin);
  ASSERT_TRUE(valid_utf8(stop));
  const size_t cut = full.find(stop);

  KvCache kv(*model_, 64);
  Session s(model_);
  GenerateOptions o = greedy(ref_["max_new_tokens"]);
  o.stop_strings = {"never appears", stop};
  std::string streamed;
  auto r = generate(s, kv, tok, p["ids"].get<std::vector<int32_t>>(), o, [&](int32_t, std::string_view piece) {
    streamed += piece;
    return true;
  });
  EXPECT_EQ(r.stop, StopReason::StopString);
  EXPECT_EQ(r.text, full.substr(0, cut));
  EXPECT_EQ(streamed, r.text);
  EXPECT_LT(r.tokens.size(), p["greedy_ids"].size());
}

TEST_F(TextGeneration, StatsCountTokensTimesAndCacheBytes) {
  const Tokenizer& tok = model_->tokenizer();
  const auto& p = ref_["prompts"][0];
  KvCache kv(*model_, 100);
  Session s(model_);
  auto r = generate(s, kv, tok, p["ids"].get<std::vector<int32_t>>(), greedy(10));
  const auto prompt = static_cast<int64_t>(p["ids"].size());
  EXPECT_EQ(r.stats.prompt_tokens, prompt);
  EXPECT_EQ(r.stats.generated_tokens, 10);
  EXPECT_EQ(r.stats.kv_tokens, prompt + 9);  // the last token is sampled, never fed back
  EXPECT_EQ(r.stats.kv_bytes, kv.bytes());
  EXPECT_EQ(r.stats.kv_bytes, plan_kv_bytes(model_->config(), 100, kv.dtype()));
  EXPECT_GT(r.stats.prefill_seconds, 0.0);
  EXPECT_GE(r.stats.ttft_seconds, r.stats.prefill_seconds);
  EXPECT_GT(r.stats.prefill_tokens_per_second(), 0.0);
  EXPECT_GT(r.stats.decode_tokens_per_second(), 0.0);
}

TEST_F(TextGeneration, SeededSamplingIsReproducibleAndSeedsDiffer) {
  const Tokenizer& tok = model_->tokenizer();
  const auto ids = ref_["prompts"][0]["ids"].get<std::vector<int32_t>>();
  auto run = [&](uint64_t seed) {
    KvCache kv(*model_, 64);
    Session s(model_);
    GenerateOptions o = greedy(20);
    o.sampling = test::llama_cpp_sampling();  // llama.cpp's defaults
    o.sampling.temperature = 1.5f;
    o.sampling.seed = seed;
    return generate(s, kv, tok, ids, o).tokens;
  };
  EXPECT_EQ(run(7), run(7));
  EXPECT_NE(run(7), run(8));
}

TEST_F(TextGeneration, ChatPrefillsOnlyEachNewTurn) {
  GenerateOptions o = greedy(ref_["max_new_tokens"]);
  for (int32_t id : ref_["chat_banned_ids"].get<std::vector<int32_t>>())
    o.sampling.logit_bias.emplace_back(id, -INFINITY);
  Chat chat(model_, 256);
  for (const auto& turn : ref_["chat"]) {
    SCOPED_TRACE(turn["user"].get<std::string>());
    ChatTurn t = chat.send(turn["user"].get<std::string>(), o);
    EXPECT_EQ(t.reused_tokens, turn["reused"].get<int64_t>());
    EXPECT_EQ(t.prefilled_tokens, static_cast<int64_t>(turn["prefill_ids"].size()));
    EXPECT_EQ(t.reply.stats.prompt_tokens, t.prefilled_tokens);
    EXPECT_EQ(t.reply.tokens, turn["greedy_ids"].get<std::vector<int32_t>>());
    EXPECT_EQ(t.reply.text, turn["greedy_text"].get<std::string>());
    EXPECT_EQ(chat.kv().size(), t.reused_tokens + t.prefilled_tokens + static_cast<int64_t>(t.reply.tokens.size()) - 1);
  }
  ASSERT_EQ(chat.messages().size(), 4u);
  EXPECT_EQ(chat.messages()[3].role, "assistant");
  chat.reset();
  EXPECT_EQ(chat.kv().size(), 0);
  EXPECT_TRUE(chat.messages().empty());
  // After a reset the first turn is prefilled in full again, with the same reply.
  ChatTurn again = chat.send(ref_["chat"][0]["user"].get<std::string>(), o);
  EXPECT_EQ(again.reused_tokens, 0);
  EXPECT_EQ(again.reply.tokens, ref_["chat"][0]["greedy_ids"].get<std::vector<int32_t>>());
}

TEST_F(TextGeneration, ChatTurnThatDoesNotFitChangesNothing) {
  Chat chat(model_, 120);
  GenerateOptions o = greedy(8);
  ChatTurn first = chat.send("Hello! What is a KV cache?", o);
  const int64_t used = chat.kv().size();
  const std::string long_message(400, 'x');
  try {
    chat.send(long_message, o);
    FAIL() << "a turn larger than the free cache was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("context full"), std::string::npos) << e.what();
  }
  EXPECT_EQ(chat.kv().size(), used);
  EXPECT_EQ(chat.messages().size(), 2u);
  EXPECT_EQ(first.reused_tokens, 0);
}

// A sliding-window model (chatml_tiny as a Mistral of window 4: rings of 7 rows) whose template
// renders a reply otherwise than it prompted for it, so the next turn keeps only the first
// message's ids: far behind what the rings still hold. The cache is computed again from there,
// and the reply is the one a fresh cache gives for the whole rendering.
TEST(ChatRings, AHistoryRewriteBehindTheRingIsComputedAgain) {
  test::TempDir tmp;
  const fs::path dir = test::copy_fixture("chatml_tiny", tmp, "windowed");
  nlohmann::json config = nlohmann::json::parse(std::ifstream(dir / "config.json"));
  config["architectures"] = {"MistralForCausalLM"};
  config["model_type"] = "mistral";
  config["sliding_window"] = 4;
  std::ofstream(dir / "config.json", std::ios::trunc) << config.dump();
  const auto model = Model::load(dir, {.device = Device::CPU});
  ASSERT_EQ(model->config().layer_window(0), 4);
  const std::string source =
      "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}{% if add_generation_prompt %}<go>{% endif %}";
  GenerateOptions o;
  o.max_new_tokens = 12;
  o.ignore_eos = true;
  Chat chat(model, ChatTemplate(source), 200);
  const ChatTurn first = chat.send("Hello there", o);
  ASSERT_GT(chat.kv().earliest_rewind(), 8);  // the rings dropped the first message's window
  std::vector<ChatMessage> next = chat.messages();
  next.push_back({"user", "and again"});
  const ChatTurn second = chat.send("and again", o);
  EXPECT_EQ(second.reused_tokens, 0);
  const Tokenizer& tok = model->tokenizer();
  const std::vector<int32_t> ids =
      tok.encode(ChatTemplate(source).render(next, true), {.add_special = false, .parse_special = true});
  EXPECT_EQ(second.prefilled_tokens, static_cast<int64_t>(ids.size()));
  Session s(model);
  KvCache fresh(*model, 200);
  EXPECT_EQ(second.reply.tokens, generate(s, fresh, tok, ids, o).tokens);
  EXPECT_EQ(chat.kv().size(), static_cast<int64_t>(ids.size() + second.reply.tokens.size()) - 1);
  EXPECT_FALSE(first.reply.tokens.empty());
}

TEST(StopStringFilter, HoldsBackPossibleStartsAndCutsAtTheFirstMatch) {
  StopStringFilter f({"</s>", "STOP"});
  EXPECT_EQ(f.push("Hello <", false), "Hello ");  // "<" may start "</s>"
  EXPECT_EQ(f.push("/", false), "");
  EXPECT_EQ(f.push("b> and ST", false), "</b> and ");
  EXPECT_EQ(f.push("OP here", false), "");
  EXPECT_TRUE(f.matched());
  EXPECT_EQ(f.push("more", false), "");

  StopStringFilter g({"ab"});
  EXPECT_EQ(g.push("xa", false), "x");
  EXPECT_EQ(g.push("a", true), "aa");  // final: nothing is held back
  EXPECT_FALSE(g.matched());
  EXPECT_THROW(StopStringFilter({""}), Error);
}

}  // namespace
}  // namespace kvinfer
