// Tokenizer::from_gguf against llama.cpp's tokenizer test data: for each vocab-only GGUF file
// (gpt-2, llama-spm, llama-bpe, qwen2, phi-3), every string of X.gguf.inp encodes (no BOS/EOS,
// special tokens parsed) to exactly the ids on the matching line of X.gguf.out, which HF's
// reference tokenizers produced. The files are read as llama.cpp's test-tokenizer-0 reads them.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "formats/gguf.h"
#include "kvinfer/tokenizer.h"
#include "test_files.h"

namespace kvinfer {
namespace {

namespace fs = std::filesystem;

const fs::path kVocabDir = fs::path(KVINFER_TOKENIZER_DATA) / "gguf-vocab";

struct VocabCase {
  std::string text;
  std::vector<int32_t> ids;
};

// test-tokenizer-0.cpp: the strings are the text between separators "\n__ggml_vocab_test__\n"
// (so the newline before a separator is not part of a string); each .out line holds one
// string's ids, separated by spaces.
std::vector<VocabCase> read_cases(const fs::path& gguf) {
  const std::string inp = test::read_bytes(fs::path(gguf.string() + ".inp"));
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  for (size_t pos = 0; pos < inp.size();) {
    const size_t next = inp.find(sep, pos);
    if (next == std::string::npos) {
      texts.push_back(inp.substr(pos));
      break;
    }
    texts.push_back(inp.substr(pos, next - pos));
    pos = next + sep.size();
  }
  std::ifstream out(gguf.string() + ".out");
  std::vector<VocabCase> cases;
  size_t k = 0;
  for (std::string line; std::getline(out, line); ++k) {
    VocabCase c;
    c.text = k < texts.size() ? texts[k] : "";
    std::istringstream ids(line);
    for (int32_t id; ids >> id;) c.ids.push_back(id);
    cases.push_back(std::move(c));
  }
  EXPECT_EQ(texts.size(), cases.size()) << gguf;
  return cases;
}

// The text with control characters spelt out, for failure messages.
std::string visible(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else out.push_back(c);
  }
  return out;
}

class VocabFile : public ::testing::TestWithParam<const char*> {};

TEST_P(VocabFile, EveryTestStringEncodesToTheReferenceIds) {
  const fs::path path = kVocabDir / fmt::format("ggml-vocab-{}.gguf", GetParam());
  const Tokenizer tok = Tokenizer::from_gguf(path);
  const auto cases = read_cases(path);
  ASSERT_EQ(cases.size(), 46u);  // llama.cpp's 46 lines (45 distinct strings)
  size_t passed = 0;
  for (size_t k = 0; k < cases.size(); ++k) {
    const auto ids = tok.encode(cases[k].text, {.add_special = false, .parse_special = true});
    EXPECT_EQ(ids, cases[k].ids) << GetParam() << " case " << k << ": '" << visible(cases[k].text) << "'";
    passed += ids == cases[k].ids;
  }
  EXPECT_EQ(passed, cases.size());
}

// The strings hold no special tokens, so parse_special must not matter; llama.cpp's own test
// runs with it off.
TEST_P(VocabFile, ParseSpecialOffGivesTheSameIds) {
  const fs::path path = kVocabDir / fmt::format("ggml-vocab-{}.gguf", GetParam());
  const Tokenizer tok = Tokenizer::from_gguf(path);
  for (const VocabCase& c : read_cases(path))
    EXPECT_EQ(tok.encode(c.text, {.add_special = false, .parse_special = false}), c.ids) << visible(c.text);
}

INSTANTIATE_TEST_SUITE_P(LlamaCppVocabs, VocabFile, ::testing::Values("gpt-2", "llama-spm", "llama-bpe", "qwen2", "phi-3"),
                         [](const ::testing::TestParamInfo<const char*>& param) {
                           std::string name = param.param;
                           for (char& c : name)
                             if (c == '-') c = '_';
                           return name;
                         });

// What the GGUF metadata says about special tokens and templates.
TEST(VocabFile, SpecialTokensFromMetadata) {
  const Tokenizer spm = Tokenizer::from_gguf(kVocabDir / "ggml-vocab-llama-spm.gguf");
  EXPECT_EQ(spm.bos_id(), 1);
  EXPECT_EQ(spm.bos_text(), "<s>");
  EXPECT_EQ(spm.eos_text(), "</s>");
  EXPECT_EQ(spm.unk_id(), 0);
  EXPECT_TRUE(spm.is_special(1));
  EXPECT_FALSE(spm.is_special(100));
  // add_bos_token is true: BOS first; the text gets SentencePiece's leading "▁".
  EXPECT_EQ(spm.encode("Hello"), (std::vector<int32_t>{1, 15043}));
  EXPECT_EQ(spm.decode(spm.encode("Hello")), "<s> Hello");
  EXPECT_EQ(spm.decode(spm.encode("Hello"), /*skip_special=*/true), "Hello");

  const Tokenizer qwen = Tokenizer::from_gguf(kVocabDir / "ggml-vocab-qwen2.gguf");
  EXPECT_NE(qwen.chat_template().find("<|im_start|>"), std::string::npos);
  const auto im_end = qwen.token_id("<|im_end|>");
  ASSERT_TRUE(im_end.has_value());
  const auto eos = qwen.eos_ids();
  EXPECT_NE(std::find(eos.begin(), eos.end(), *im_end), eos.end());
  EXPECT_EQ(qwen.encode("<|im_end|>", {.add_special = false}), (std::vector<int32_t>{*im_end}));
  EXPECT_GT(qwen.encode("<|im_end|>", {.add_special = false, .parse_special = false}).size(), 1u);

  const Tokenizer llama3 = Tokenizer::from_gguf(kVocabDir / "ggml-vocab-llama-bpe.gguf");
  // llama-bpe: llama.cpp adds BOS by default for the Llama-3 pre-tokenizer.
  EXPECT_EQ(llama3.encode("Hello").front(), 128000);
  const auto eot = llama3.token_id("<|eot_id|>");
  ASSERT_TRUE(eot.has_value());
  const auto llama3_eos = llama3.eos_ids();
  EXPECT_EQ(llama3_eos.front(), 128001);
  EXPECT_NE(std::find(llama3_eos.begin(), llama3_eos.end(), *eot), llama3_eos.end());
}

}  // namespace
}  // namespace kvinfer
