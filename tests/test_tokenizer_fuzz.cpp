// encode() takes any bytes: 10,000 random byte strings per tokenizer (fixed seed) mixing
// invalid UTF-8 (lone continuation bytes, truncated and overlong sequences, surrogates, bytes
// F5-FF), valid multi-byte characters, whitespace and special-token text. None may throw or
// crash, decode and the stream decoder must give valid UTF-8, and what the ids stand for must
// be the input: byte-level vocabularies keep every byte (invalid ones too), SentencePiece-style
// ones give valid input back exactly.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kvinfer/error.h"
#include "kvinfer/tokenizer.h"

namespace kvinfer {
namespace {

namespace fs = std::filesystem;

const fs::path kTokenizers = fs::path(KVINFER_TOKENIZER_DATA);
constexpr int kIterations = 10000;

bool valid_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >= 0xC2 && c <= 0xDF) ? 2 : (c >= 0xE0 && c <= 0xEF) ? 3 : (c >= 0xF0 && c <= 0xF4) ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    const auto second = static_cast<unsigned char>(s[i + 1 < s.size() ? i + 1 : i]);
    if ((c == 0xE0 && second < 0xA0) || (c == 0xED && second > 0x9F) || (c == 0xF0 && second < 0x90) ||
        (c == 0xF4 && second > 0x8F))
      return false;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    i += n;
  }
  return true;
}

// Random atoms; with `invalid`, also random bytes and broken sequences, else valid UTF-8 only.
std::string random_text(std::mt19937& rng, bool invalid) {
  static const std::vector<std::string> kValid = {
      " ", "  ", "\n", "\t", "\r\n", "a", "Z", "7", "123", "'s", "é", "中", "🦙", "ı", "İ", "\xCC\x81", "٣", "½",
      "\xE2\x96\x81", "<s>", "</s>", "<|im_end|>", "<|endoftext|>", "<|begin_of_text|>", "<|eot_id|>", "<0x41>", "<unk>"};
  static const std::vector<std::string> kInvalid = {"\xE4\xB8", "\xF0\x9F", "\x80", "\xBF", "\xC0\xAF",
                                                    "\xED\xA0\x80", "\xF4\x90\x80\x80", "\xFF", "\xFE"};
  std::uniform_int_distribution<int> length(0, 40), kind(0, 3), byte(0, 255), ascii(0, 127);
  std::uniform_int_distribution<size_t> valid(0, kValid.size() - 1), broken(0, kInvalid.size() - 1);
  std::string s;
  for (int n = length(rng); n > 0; --n) {
    const int k = kind(rng);
    if (k == 0) {
      s.push_back(static_cast<char>(invalid ? byte(rng) : ascii(rng)));
    } else if (k == 1 && invalid) {
      s += kInvalid[broken(rng)];
    } else {
      s += kValid[valid(rng)];
    }
  }
  return s;
}

struct FuzzCase {
  const char* name;
  bool gguf;
  bool byte_level;  // the ids' bytes are the input's bytes
  bool round_trip;  // decode gives valid text back (no normalizer; "▁" in the text decodes as a space)
};

class TokenizerFuzz : public ::testing::TestWithParam<FuzzCase> {};

TEST_P(TokenizerFuzz, AnyBytesEncodeAndDecode) {
  const FuzzCase c = GetParam();
  const Tokenizer tok = c.gguf ? Tokenizer::from_gguf(kTokenizers / "gguf-vocab" / (std::string(c.name) + ".gguf"))
                               : Tokenizer::from_hf(kTokenizers / "hf" / c.name);
  std::mt19937 rng(20240611);
  int exact = 0;  // iterations that compared text exactly (so the test cannot pass vacuously)
  for (int it = 0; it < kIterations; ++it) {
    const std::string text = random_text(rng, /*invalid=*/it % 2 == 0);
    const EncodeOptions options{.add_special = (it / 2) % 2 == 0, .parse_special = (it / 4) % 3 != 0};
    std::vector<int32_t> ids;
    try {
      ids = tok.encode(text, options);
    } catch (const std::exception& e) {
      FAIL() << "encode threw on iteration " << it << ": " << e.what();
    }
    const std::string decoded = tok.decode(ids);
    ASSERT_TRUE(valid_utf8(decoded)) << "iteration " << it;
    StreamDecoder stream(tok);
    std::string streamed;
    for (int32_t id : ids) {
      const std::string chunk = stream.push(id);
      ASSERT_TRUE(valid_utf8(chunk)) << "iteration " << it;
      streamed += chunk;
    }
    streamed += stream.flush();
    ASSERT_TRUE(valid_utf8(streamed)) << "iteration " << it;
    if (c.byte_level) {
      if (!options.add_special) {
        std::string bytes;
        for (int32_t id : ids) bytes += tok.token_bytes(id);
        ASSERT_EQ(bytes, text) << "iteration " << it;
        ++exact;
      }
      ASSERT_EQ(streamed, decoded) << "iteration " << it;  // the same replacement of invalid bytes
    } else if (c.round_trip && valid_utf8(text) && text.find("\xE2\x96\x81") == std::string::npos &&
               !options.add_special && !options.parse_special) {
      ASSERT_EQ(decoded, text) << "iteration " << it;
      ASSERT_EQ(streamed, decoded) << "iteration " << it;
      ++exact;
    }
  }
  if (c.round_trip) {
    EXPECT_GT(exact, kIterations / 50) << "too few exact comparisons";
  }
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, TokenizerFuzz,
                         ::testing::Values(FuzzCase{"gpt2", false, true, true}, FuzzCase{"llama3", false, true, true},
                                           FuzzCase{"llama2", false, false, true},
                                           FuzzCase{"qwen2_5", false, false, false},
                                           FuzzCase{"ggml-vocab-llama-spm", true, false, true},
                                           FuzzCase{"ggml-vocab-qwen2", true, true, true}),
                         [](const ::testing::TestParamInfo<FuzzCase>& param) {
                           std::string name = param.param.name;
                           for (char& ch : name)
                             if (ch == '-') ch = '_';
                           return name;
                         });

}  // namespace
}  // namespace kvinfer
