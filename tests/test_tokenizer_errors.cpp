// Every way a tokenizer file can be wrong, and every bad id, ends in a kvinfer::Error whose
// message names the file and the component, key or value at fault. Most cases edit a tiny
// tokenizer.json written here; the GGUF ones write a tokenizer-only GGUF file byte by byte.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kvinfer/error.h"
#include "kvinfer/tokenizer.h"
#include "test_files.h"

namespace kvinfer {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using test::error_of;
using test::TempDir;
using ::testing::AllOf;
using ::testing::HasSubstr;

// A byte-level BPE tokenizer with five tokens: "a", "b", "ab", "Ġ" and the special "<|end|>".
json tiny_tokenizer() {
  return json::parse(R"({
    "version": "1.0",
    "added_tokens": [{"id": 4, "content": "<|end|>", "single_word": false, "lstrip": false,
                      "rstrip": false, "normalized": false, "special": true}],
    "normalizer": null,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
    "post_processor": null,
    "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
    "model": {"type": "BPE", "dropout": null, "unk_token": null, "fuse_unk": false, "byte_fallback": false,
              "vocab": {"a": 0, "b": 1, "ab": 2, "Ġ": 3}, "merges": ["a b"]}
  })");
}

fs::path write_tokenizer(const TempDir& tmp, const json& j) {
  const fs::path path = tmp / "tokenizer.json";
  test::write_bytes(path, j.dump(1));
  return path;
}

std::string hf_error(const TempDir& tmp, const json& j) {
  const fs::path path = write_tokenizer(tmp, j);
  return error_of([&] { Tokenizer::from_hf(path); });
}

TEST(TokenizerErrors, TinyTokenizerLoads) {  // the edits below are all that break it
  TempDir tmp;
  const Tokenizer tok = Tokenizer::from_hf(write_tokenizer(tmp, tiny_tokenizer()));
  EXPECT_EQ(tok.encode("ab a<|end|>"), (std::vector<int32_t>{2, 3, 0, 4}));
  EXPECT_EQ(tok.decode(std::vector<int32_t>{2, 3, 0, 4}), "ab a<|end|>");
  EXPECT_EQ(tok.decode(std::vector<int32_t>{2, 3, 0, 4}, true), "ab a");
}

TEST(TokenizerErrors, MissingFileOrDirectory) {
  TempDir tmp;
  EXPECT_THAT(error_of(ErrorKind::BadFile, [&] { Tokenizer::from_hf(tmp / "nowhere"); }), HasSubstr((tmp / "nowhere").string()));
  // A directory without tokenizer.json names the file it looked for.
  EXPECT_THAT(error_of(ErrorKind::BadFile, [&] { Tokenizer::from_hf(tmp.path()); }), HasSubstr((tmp / "tokenizer.json").string()));
  EXPECT_THAT(error_of(ErrorKind::BadFile, [&] { Tokenizer::from_gguf(tmp / "missing.gguf"); }), HasSubstr("missing.gguf"));
}

TEST(TokenizerErrors, MalformedJson) {
  TempDir tmp;
  test::write_bytes(tmp / "tokenizer.json", R"({"model": {"type": "BPE", "vocab": )");
  EXPECT_THAT(error_of([&] { Tokenizer::from_hf(tmp.path()); }),
              AllOf(HasSubstr((tmp / "tokenizer.json").string()), HasSubstr("malformed JSON")));
  // A broken tokenizer_config.json beside a good tokenizer.json is named too.
  write_tokenizer(tmp, tiny_tokenizer());
  test::write_bytes(tmp / "tokenizer_config.json", "{,}");
  EXPECT_THAT(error_of([&] { Tokenizer::from_hf(tmp.path()); }),
              AllOf(HasSubstr("tokenizer_config.json"), HasSubstr("malformed JSON")));
}

TEST(TokenizerErrors, UnsupportedModelTypes) {
  for (const char* type : {"WordPiece", "Unigram", "WordLevel"}) {
    TempDir tmp;
    json j = tiny_tokenizer();
    j["model"]["type"] = type;
    EXPECT_THAT(hf_error(tmp, j), AllOf(HasSubstr(fmt::format("model type '{}'", type)),
                                        HasSubstr((tmp / "tokenizer.json").string())));
  }
}

TEST(TokenizerErrors, UnknownComponentTypes) {
  struct Case {
    const char* key;
    json value;
    const char* expected;
  };
  const std::vector<Case> cases = {
      {"pre_tokenizer", {{"type", "Whitespace"}}, "pre_tokenizer: unsupported pre-tokenizer type 'Whitespace'"},
      {"normalizer", {{"type", "BertNormalizer"}}, "normalizer: unsupported normalizer type 'BertNormalizer'"},
      {"decoder", {{"type", "WordPiece"}}, "decoder: unsupported decoder type 'WordPiece'"},
      {"post_processor", {{"type", "Bogus"}}, "post_processor: unsupported post-processor type 'Bogus'"},
      {"pre_tokenizer",
       {{"type", "Sequence"}, {"pretokenizers", json::array({{{"type", "Digits"}}, {{"type", "Punctuation"}}})}},
       "pre_tokenizer.pretokenizers[1]: unsupported pre-tokenizer type 'Punctuation'"},
      {"normalizer", {{"type", "Sequence"}, {"normalizers", json::array({{{"type", "Precompiled"}}})}},
       "normalizer.normalizers[0]: unsupported normalizer type 'Precompiled'"},
  };
  for (const Case& c : cases) {
    TempDir tmp;
    json j = tiny_tokenizer();
    j[c.key] = c.value;
    EXPECT_THAT(hf_error(tmp, j), AllOf(HasSubstr(c.expected), HasSubstr((tmp / "tokenizer.json").string())));
  }
}

TEST(TokenizerErrors, BadModelFields) {
  TempDir tmp;
  json j = tiny_tokenizer();
  j["model"]["dropout"] = 0.1;
  EXPECT_THAT(hf_error(tmp, j), HasSubstr("dropout 0.1"));
  j = tiny_tokenizer();
  j["model"]["merges"] = json::array({"a c"});
  EXPECT_THAT(hf_error(tmp, j), AllOf(HasSubstr("merge 0"), HasSubstr("'c'")));
  j = tiny_tokenizer();
  j["model"]["merges"] = json::array({"a b c"});
  EXPECT_THAT(hf_error(tmp, j), HasSubstr("merge 0 'a b c'"));
  j = tiny_tokenizer();
  j["model"]["vocab"]["x"] = -3;
  EXPECT_THAT(hf_error(tmp, j), HasSubstr("'x' has id -3"));
  j = tiny_tokenizer();
  j["model"]["vocab"]["huge"] = 2000000000;
  EXPECT_THAT(hf_error(tmp, j), HasSubstr("token 'huge' has id 2000000000"));
  j = tiny_tokenizer();
  j.erase("model");
  EXPECT_THAT(hf_error(tmp, j), HasSubstr("'model'"));
}

TEST(TokenizerErrors, BadPatternsAndTemplates) {
  TempDir tmp;
  json j = tiny_tokenizer();
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}};
  EXPECT_THAT(hf_error(tmp, j), AllOf(HasSubstr("invalid regex '(unclosed'"), HasSubstr("pre_tokenizer")));
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "Sideways"}};
  EXPECT_THAT(hf_error(tmp, j), HasSubstr("unknown split behavior 'Sideways'"));
  j = tiny_tokenizer();
  j["post_processor"] = {{"type", "TemplateProcessing"},
                         {"single", json::array({{{"SpecialToken", {{"id", "<x>"}, {"type_id", 0}}}},
                                                 {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
                         {"special_tokens", json::object()}};
  EXPECT_THAT(hf_error(tmp, j), HasSubstr("special token '<x>' has no ids"));
  j = tiny_tokenizer();
  write_tokenizer(tmp, j);
  test::write_bytes(tmp / "tokenizer_config.json", R"({"chat_template": 5})");
  EXPECT_THAT(error_of([&] { Tokenizer::from_hf(tmp.path()); }),
              AllOf(HasSubstr("tokenizer_config.json"), HasSubstr("'chat_template'")));
}

TEST(TokenizerErrors, IdsOutOfRange) {
  TempDir tmp;
  const Tokenizer tok = Tokenizer::from_hf(write_tokenizer(tmp, tiny_tokenizer()));
  for (int32_t bad : {5, -1, 1 << 30}) {
    const std::vector<int32_t> ids = {0, bad};
    EXPECT_THAT(error_of([&] { tok.decode(ids); }),
                AllOf(HasSubstr(fmt::format("token id {}", bad)), HasSubstr("tokenizer.json")));
    EXPECT_THAT(error_of([&] { tok.token_text(bad); }), HasSubstr(fmt::format("token id {}", bad)));
    StreamDecoder stream(tok);
    EXPECT_THAT(error_of([&] { stream.push(bad); }), HasSubstr(fmt::format("token id {}", bad)));
    EXPECT_EQ(stream.push(2), "ab");  // a refused id leaves the stream as it was
  }
}

// A tokenizer-only GGUF file (v3, no tensors), written byte by byte.
class GgufTokenizerFile {
 public:
  GgufTokenizerFile& str(std::string_view key, std::string_view value) {
    key_(key, 8);
    string_(value);
    return *this;
  }
  GgufTokenizerFile& strings(std::string_view key, const std::vector<std::string>& values) {
    key_(key, 9);
    u32(8);
    u64(values.size());
    for (const std::string& v : values) string_(v);
    return *this;
  }
  GgufTokenizerFile& i32s(std::string_view key, const std::vector<int32_t>& values) {
    key_(key, 9);
    u32(5);
    u64(values.size());
    for (int32_t v : values) u32(static_cast<uint32_t>(v));
    return *this;
  }
  void write(const fs::path& path) const {
    std::string out = "GGUF";
    auto put = [&](auto v) {
      char b[sizeof(v)];
      std::memcpy(b, &v, sizeof(v));
      out.append(b, sizeof(v));
    };
    put(uint32_t{3});
    put(uint64_t{0});
    put(count_);
    test::write_bytes(path, out + body_);
  }

 private:
  void u32(uint32_t v) { body_.append(reinterpret_cast<const char*>(&v), 4); }
  void u64(uint64_t v) { body_.append(reinterpret_cast<const char*>(&v), 8); }
  void string_(std::string_view s) {
    u64(s.size());
    body_.append(s);
  }
  void key_(std::string_view key, uint32_t type) {
    ++count_;
    string_(key);
    u32(type);
  }
  std::string body_;
  uint64_t count_ = 0;
};

GgufTokenizerFile gguf_bpe(std::string_view model, std::string_view pre) {
  GgufTokenizerFile f;
  f.str("tokenizer.ggml.model", model).str("tokenizer.ggml.pre", pre);
  f.strings("tokenizer.ggml.tokens", {"a", "b", "ab", "Ġ"}).i32s("tokenizer.ggml.token_type", {1, 1, 1, 1});
  f.strings("tokenizer.ggml.merges", {"a b"});
  return f;
}

TEST(TokenizerErrors, GgufTokenizerFiles) {
  TempDir tmp;
  const fs::path path = tmp / "tok.gguf";
  gguf_bpe("gpt2", "gpt-2").write(path);
  const Tokenizer tok = Tokenizer::from_gguf(path);  // the pristine file loads
  EXPECT_EQ(tok.encode("ab ab"), (std::vector<int32_t>{2, 3, 2}));

  gguf_bpe("bert", "gpt-2").write(path);
  EXPECT_THAT(error_of([&] { Tokenizer::from_gguf(path); }),
              AllOf(HasSubstr(path.string()), HasSubstr("tokenizer.ggml.model 'bert'")));
  gguf_bpe("gpt2", "mystery-pre").write(path);
  EXPECT_THAT(error_of([&] { Tokenizer::from_gguf(path); }),
              AllOf(HasSubstr(path.string()), HasSubstr("tokenizer.ggml.pre 'mystery-pre'")));

  GgufTokenizerFile no_tokens;
  no_tokens.str("tokenizer.ggml.model", "gpt2").write(path);
  EXPECT_THAT(error_of([&] { Tokenizer::from_gguf(path); }), HasSubstr("tokenizer.ggml.tokens"));

  GgufTokenizerFile duplicate;
  duplicate.str("tokenizer.ggml.model", "llama").strings("tokenizer.ggml.tokens", {"a", "b", "a"}).write(path);
  EXPECT_THAT(error_of([&] { Tokenizer::from_gguf(path); }), HasSubstr("'a' is both token 0 and token 2"));

  GgufTokenizerFile short_types = gguf_bpe("gpt2", "gpt-2");
  short_types.i32s("tokenizer.ggml.scores", {0}).write(path);
  EXPECT_THAT(error_of([&] { Tokenizer::from_gguf(path); }), HasSubstr("tokenizer.ggml.scores"));
}

}  // namespace
}  // namespace kvinfer
