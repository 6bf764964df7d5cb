// Tokenizer::from_hf against HF `tokenizers` 0.23.3 (tests/data/tokenizers/expected/*.json, from
// tools/make_tokenizer_fixtures.py): for GPT-2, Llama-2, Llama-3 and Qwen2.5 and every corpus
// string, the ids with and without special tokens, decode with and without skip_special, the
// round trip wherever HF's own is lossless, and the stream decoder (same text, valid UTF-8 in
// every chunk).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvinfer/error.h"
#include "kvinfer/tokenizer.h"
#include "test_files.h"

namespace kvinfer {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using test::TempDir;
using ::testing::HasSubstr;

const fs::path kTokenizers = fs::path(KVINFER_TOKENIZER_DATA);

// A UTF-8 validator of the test's own (Unicode Table 3-7), so the library does not grade itself.
bool valid_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto b = [&](size_t k) { return static_cast<unsigned>(static_cast<unsigned char>(s[i + k])); };
    const unsigned c = b(0);
    size_t n = 0;
    unsigned lo = 0x80, hi = 0xBF;
    if (c < 0x80) n = 1;
    else if (c >= 0xC2 && c <= 0xDF) n = 2;
    else if (c == 0xE0) n = 3, lo = 0xA0;
    else if (c == 0xED) n = 3, hi = 0x9F;
    else if (c >= 0xE1 && c <= 0xEF) n = 3;
    else if (c == 0xF0) n = 4, lo = 0x90;
    else if (c == 0xF4) n = 4, hi = 0x8F;
    else if (c >= 0xF1 && c <= 0xF3) n = 4;
    else return false;
    if (i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      const unsigned min = k == 1 ? lo : 0x80, max = k == 1 ? hi : 0xBF;
      if (b(k) < min || b(k) > max) return false;
    }
    i += n;
  }
  return true;
}

TEST(Utf8Validator, AcceptsAndRejects) {
  EXPECT_TRUE(valid_utf8("a é 中 🦙"));
  EXPECT_FALSE(valid_utf8("\xE4\xB8"));      // truncated
  EXPECT_FALSE(valid_utf8("\xC0\xAF"));      // overlong
  EXPECT_FALSE(valid_utf8("\xED\xA0\x80"));  // surrogate
  EXPECT_FALSE(valid_utf8("\xF4\x90\x80\x80"));  // above U+10FFFF
}

// Pushes `ids` through a StreamDecoder; checks every chunk and returns the whole text.
std::string stream(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip_special) {
  StreamDecoder decoder(tok, skip_special);
  std::string all;
  for (int32_t id : ids) {
    const std::string chunk = decoder.push(id);
    EXPECT_TRUE(valid_utf8(chunk)) << "chunk after id " << id;
    all += chunk;
  }
  const std::string rest = decoder.flush();
  EXPECT_TRUE(valid_utf8(rest));
  return all + rest;
}

class HfTokenizer : public ::testing::TestWithParam<const char*> {
 protected:
  static json expected(const std::string& name) {
    return json::parse(test::read_bytes(kTokenizers / "expected" / (name + ".json")));
  }
};

// The real tokenizers are model directories; the synthetic ones (trained by the fixture script
// to use the components the real ones do not) are single tokenizer.json files.
fs::path tokenizer_path(const std::string& name) {
  if (name.starts_with("synthetic_")) return kTokenizers / "expected" / (name + ".tokenizer.json");
  return kTokenizers / "hf" / name;
}

TEST_P(HfTokenizer, MatchesTokenizersOnTheCorpus) {
  const Tokenizer tok = Tokenizer::from_hf(tokenizer_path(GetParam()));
  const json cases = expected(GetParam())["cases"];
  ASSERT_GE(cases.size(), 40u);
  size_t round_trips = 0;
  for (const json& c : cases) {
    const std::string text = c["text"];
    SCOPED_TRACE(text.substr(0, 60));
    const auto ids = c["ids"].get<std::vector<int32_t>>();
    const auto plain = c["ids_no_special"].get<std::vector<int32_t>>();
    EXPECT_EQ(tok.encode(text), ids);
    EXPECT_EQ(tok.encode(text, {.add_special = false}), plain);
    EXPECT_EQ(tok.decode(ids), c["decoded"].get<std::string>());
    EXPECT_EQ(tok.decode(ids, /*skip_special=*/true), c["decoded_skip_special"].get<std::string>());
    if (c["round_trip"].get<bool>()) {
      EXPECT_EQ(tok.decode(tok.encode(text, {.add_special = false})), text);
      ++round_trips;
    }
    EXPECT_EQ(stream(tok, ids, false), c["decoded"].get<std::string>());
    EXPECT_EQ(stream(tok, ids, true), c["decoded_skip_special"].get<std::string>());
    EXPECT_EQ(stream(tok, plain, false), tok.decode(plain));
  }
  // HF round-trips nearly every string through the real tokenizers (not Qwen's NFC-changed
  // one, nor Llama-2's "<s>" in text); the synthetic ones lowercase and drop characters.
  if (!tokenizer_path(GetParam()).string().ends_with(".tokenizer.json")) {
    EXPECT_GE(round_trips, cases.size() - 2);
  }
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, HfTokenizer,
                         ::testing::Values("gpt2", "llama2", "llama3", "qwen2_5", "synthetic_metaspace", "synthetic_splits"),
                         [](const ::testing::TestParamInfo<const char*>& param) { return std::string(param.param); });

TEST(HfTokenizer, SpecialTokensAndTemplatesFromTheConfig) {
  const Tokenizer llama2 = Tokenizer::from_hf(kTokenizers / "hf" / "llama2");
  EXPECT_EQ(llama2.bos_id(), 1);
  EXPECT_EQ(llama2.bos_text(), "<s>");
  EXPECT_EQ(llama2.eos_text(), "</s>");
  EXPECT_EQ(llama2.unk_id(), 0);
  EXPECT_EQ(llama2.eos_ids(), std::vector<int32_t>{2});
  EXPECT_TRUE(llama2.is_special(1));
  const int32_t space = llama2.token_id("\xE2\x96\x81").value();  // "▁"
  EXPECT_EQ(llama2.token_text(space), "\xE2\x96\x81");
  EXPECT_EQ(llama2.token_bytes(space), " ");
  EXPECT_EQ(llama2.token_bytes(llama2.token_id("<0xE4>").value()), "\xE4");
  EXPECT_EQ(llama2.chat_template(), "");

  const Tokenizer qwen = Tokenizer::from_hf(kTokenizers / "hf" / "qwen2_5");
  EXPECT_FALSE(qwen.bos_id().has_value());
  EXPECT_EQ(qwen.eos_text(), "<|im_end|>");
  const auto im_end = qwen.token_id("<|im_end|>").value();
  const auto endoftext = qwen.token_id("<|endoftext|>").value();
  EXPECT_EQ(qwen.eos_ids(), (std::vector<int32_t>{im_end, endoftext}));  // declared eos first
  EXPECT_EQ(qwen.pad_id(), endoftext);
  EXPECT_THAT(qwen.chat_template(), HasSubstr("<|im_start|>"));

  const Tokenizer llama3 = Tokenizer::from_hf(kTokenizers / "hf" / "llama3");
  EXPECT_EQ(llama3.bos_text(), "<|begin_of_text|>");
  const auto eos = llama3.eos_ids();
  EXPECT_EQ(eos.front(), llama3.token_id("<|end_of_text|>").value());
  EXPECT_THAT(eos, ::testing::Contains(llama3.token_id("<|eot_id|>").value()));
  EXPECT_THAT(llama3.chat_template(), HasSubstr("start_header_id"));
}

// A copy of a fixture tokenizer directory, to edit.
fs::path copy_tokenizer(const std::string& name, const TempDir& tmp) {
  fs::path dst = tmp / name;
  fs::copy(kTokenizers / "hf" / name, dst, fs::copy_options::recursive);
  return dst;
}

TEST(HfTokenizer, ChatTemplateJinjaFileWinsOverTheConfig) {
  TempDir tmp;
  const fs::path dir = copy_tokenizer("qwen2_5", tmp);
  test::write_bytes(dir / "chat_template.jinja", "{{ messages[0]['content'] }}");
  EXPECT_EQ(Tokenizer::from_hf(dir).chat_template(), "{{ messages[0]['content'] }}");
}

TEST(HfTokenizer, ChatTemplateListTakesDefault) {
  TempDir tmp;
  const fs::path dir = copy_tokenizer("qwen2_5", tmp);
  test::edit_json_file(dir / "tokenizer_config.json", [](json& j) {
    j["chat_template"] = json::array({{{"name", "tool_use"}, {"template", "tools"}}, {{"name", "default"}, {"template", "plain"}}});
  });
  EXPECT_EQ(Tokenizer::from_hf(dir / "tokenizer.json").chat_template(), "plain");
}

TEST(HfTokenizer, AddBosAndEosFlagsReplaceThePostProcessor) {
  TempDir tmp;
  const fs::path dir = copy_tokenizer("llama2", tmp);
  test::edit_json_file(dir / "tokenizer_config.json", [](json& j) {
    j["add_bos_token"] = false;
    j["add_eos_token"] = true;
  });
  const Tokenizer tok = Tokenizer::from_hf(dir);
  const auto ids = tok.encode("Hello");
  ASSERT_FALSE(ids.empty());
  EXPECT_NE(ids.front(), 1);
  EXPECT_EQ(ids.back(), 2);
  EXPECT_EQ(tok.encode("Hello", {.add_special = false}), std::vector<int32_t>(ids.begin(), ids.end() - 1));
}

TEST(HfTokenizer, WithoutAConfigTheTemplateGivesTheBos) {
  TempDir tmp;
  const fs::path dir = copy_tokenizer("llama2", tmp);
  fs::remove(dir / "tokenizer_config.json");
  const Tokenizer tok = Tokenizer::from_hf(dir);
  EXPECT_EQ(tok.bos_id(), 1);
  EXPECT_EQ(tok.encode("Hi").front(), 1);
}

// encode is const and shares one tokenizer between threads: each call has its own regex match
// data and merge scratch.
TEST(HfTokenizer, ConcurrentEncodesAgree) {
  const Tokenizer tok = Tokenizer::from_hf(kTokenizers / "hf" / "qwen2_5");
  std::vector<std::string> texts;
  const json fixture = json::parse(test::read_bytes(kTokenizers / "expected" / "qwen2_5.json"));
  for (const json& c : fixture["cases"]) texts.push_back(c["text"]);
  std::vector<std::vector<int32_t>> reference;
  for (const std::string& t : texts) reference.push_back(tok.encode(t));
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (size_t k = 0; k < mismatches.size(); ++k)
    threads.emplace_back([&, k] {
      for (int round = 0; round < 5; ++round)
        for (size_t i = 0; i < texts.size(); ++i) mismatches[k] += tok.encode(texts[i]) != reference[i];
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

// A long generation streams in constant work per token: the decoder keeps only a short window.
// GPT-2 spells rare CJK characters with tokens that end inside one character and start inside
// the next, so a run of them holds bytes at every step.
TEST(HfTokenizer, StreamingALongTextMatchesDecode) {
  for (const char* name : {"gpt2", "llama2", "llama3"}) {
    const Tokenizer tok = Tokenizer::from_hf(kTokenizers / "hf" / name);
    std::string text;
    for (int k = 0; k < 300; ++k) text += "Zażółć gęślą jaźń 🦙 中文 鬱蠶龘齉靐 line " + std::to_string(k) + "\n";
    const auto ids = tok.encode(text);
    EXPECT_EQ(stream(tok, ids, true), tok.decode(ids, true)) << name;
  }
}

}  // namespace
}  // namespace kvinfer
