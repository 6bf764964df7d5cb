// GgufFile: reads llama.cpp's vocab-only GGUF files and a fixture written by the gguf Python
// package (checked value by value against what gguf.GGUFReader reports), and refuses every
// malformed file with a kvinfer::Error naming the file and, where there is one, the key or tensor.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "formats/gguf.h"
#include "kvinfer/error.h"
#include "test_files.h"

namespace kvinfer {
namespace {

namespace fs = std::filesystem;
using test::error_of;
using test::TempDir;
using ::testing::AllOf;
using ::testing::AnyOf;
using ::testing::HasSubstr;
using json = nlohmann::json;

const fs::path kVocabDir = fs::path(KVINFER_TOKENIZER_DATA) / "gguf-vocab";
const fs::path kTypesGguf = fs::path(KVINFER_TEST_DATA) / "gguf" / "types.gguf";
const fs::path kTypesJson = fs::path(KVINFER_TEST_DATA) / "gguf" / "types.json";

constexpr uint32_t kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7, kString = 8, kArray = 9, kU64 = 10;
constexpr uint32_t kTypeF32 = 0, kTypeQ8_0 = 8;

// A GGUF file written byte by byte, little-endian, for hand-made valid and hostile files.
class Bytes {
 public:
  template <typename T>
  Bytes& put(T v) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    out_.append(b, sizeof(T));
    return *this;
  }
  Bytes& u8(uint8_t v) { return put(v); }
  Bytes& u32(uint32_t v) { return put(v); }
  Bytes& u64(uint64_t v) { return put(v); }
  Bytes& raw(std::string_view s) { out_.append(s); return *this; }
  Bytes& str(std::string_view s) { return u64(s.size()).raw(s); }
  Bytes& zeros(size_t n) { out_.append(n, '\0'); return *this; }
  Bytes& pad_to(size_t alignment) { return zeros((alignment - out_.size() % alignment) % alignment); }

  Bytes& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    return raw("GGUF").u32(version).u64(n_tensors).u64(n_kv);
  }
  Bytes& kv_u32(std::string_view key, uint32_t v) { return str(key).u32(kU32).u32(v); }
  Bytes& kv_str(std::string_view key, std::string_view v) { return str(key).u32(kString).str(v); }
  // The key and the array's type and length; the caller appends the elements.
  Bytes& kv_array(std::string_view key, uint32_t element, uint64_t n) {
    return str(key).u32(kArray).u32(element).u64(n);
  }
  Bytes& tensor(std::string_view name, const std::vector<uint64_t>& dims, uint32_t type, uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(dims.size()));
    for (uint64_t d : dims) u64(d);
    return u32(type).u64(offset);
  }

  const std::string& str() const { return out_; }
  size_t size() const { return out_.size(); }

 private:
  std::string out_;
};

// A valid v3 file with metadata of three kinds (two of them empty arrays) and two tensors; it
// ends exactly where the last tensor does, so every shorter prefix must be refused.
Bytes small_file(uint32_t version = 3) {
  Bytes b;
  b.header(2, 4, version);
  b.kv_str("general.name", "small");
  b.kv_array("empty.i32", kI32, 0);
  b.kv_array("empty.strings", kString, 0);
  b.kv_array("ids", kI32, 3).put<int32_t>(-1).put<int32_t>(0).put<int32_t>(7);
  b.tensor("a", {4}, kTypeF32, 0);          // 16 bytes
  b.tensor("b", {32, 2}, kTypeQ8_0, 32);    // 2 blocks × 34 bytes
  b.pad_to(32);
  for (int i = 0; i < 4; ++i) b.put<float>(static_cast<float>(i) + 0.5f);
  b.pad_to(32);
  for (int i = 0; i < 68; ++i) b.u8(static_cast<uint8_t>(i));
  return b;
}

std::string hex_of(const std::byte* p, uint64_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s;
  for (uint64_t i = 0; i < n; ++i) {
    auto v = static_cast<unsigned>(p[i]);
    s += kDigits[v >> 4];
    s += kDigits[v & 15];
  }
  return s;
}

// The variant alternative each stored type must widen to.
size_t expected_alternative(GgufType t, bool array) {
  switch (t) {
    case GgufType::U8: case GgufType::U16: case GgufType::U32: case GgufType::U64: return array ? 7 : 2;
    case GgufType::I8: case GgufType::I16: case GgufType::I32: case GgufType::I64: return array ? 6 : 1;
    case GgufType::F32: case GgufType::F64: return array ? 8 : 3;
    case GgufType::Bool: return array ? 9 : 4;
    case GgufType::String: return array ? 10 : 5;
    case GgufType::Array: break;
  }
  return 0;
}

// Compares one metadata value with its entry in types.json ({"type", "element", "value"}).
void expect_value(const std::string& key, const GgufValue& v, const json& want) {
  SCOPED_TRACE(key);
  ASSERT_EQ(gguf_type_name(v.type), want.at("type").get<std::string>());
  const bool array = v.type == GgufType::Array;
  if (array) {
    EXPECT_EQ(gguf_type_name(v.element), want.at("element").get<std::string>());
  }
  EXPECT_EQ(v.value.index(), expected_alternative(array ? v.element : v.type, array));
  const json& w = want.at("value");
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::monostate>) {
          ADD_FAILURE() << "no value";
        } else {
          EXPECT_EQ(x, w.get<T>());
        }
      },
      v.value);
}

void expect_matches_reader(const GgufFile& f, const json& want) {
  EXPECT_EQ(f.alignment(), want.at("alignment").get<uint64_t>());
  EXPECT_EQ(f.data_offset(), want.at("data_offset").get<uint64_t>());
  const json& md = want.at("metadata");
  EXPECT_EQ(f.metadata().size(), md.size());
  for (const auto& [key, entry] : md.items()) {
    const GgufValue* v = f.find(key);
    ASSERT_NE(v, nullptr) << key;
    expect_value(key, *v, entry);
  }
  const json& tensors = want.at("tensors");
  ASSERT_EQ(f.tensors().size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const GgufTensorInfo& t = f.tensors()[i];
    const json& w = tensors[i];
    SCOPED_TRACE(t.name);
    EXPECT_EQ(t.name, w.at("name").get<std::string>());
    EXPECT_EQ(&f.tensor(t.name), &t);
    EXPECT_EQ(t.dims, w.at("dims").get<std::vector<int64_t>>());
    EXPECT_EQ(static_cast<uint32_t>(t.type), w.at("type").get<uint32_t>());
    EXPECT_EQ(t.offset, w.at("offset").get<uint64_t>());
    EXPECT_EQ(t.bytes, w.at("bytes").get<uint64_t>());
    int64_t numel = 1;
    for (int64_t d : w.at("dims")) numel *= d;
    EXPECT_EQ(t.numel(), numel);
    ASSERT_NE(t.data, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % f.alignment(), 0u);
    EXPECT_EQ(hex_of(t.data, t.bytes), w.at("hex").get<std::string>());
  }
}

json types_json() { return json::parse(test::read_bytes(kTypesJson)); }

TEST(GgufTypes, BlockLayoutsMatchGgml) {
  struct Want { GgmlType type; int64_t elements, bytes; };
  // ggml-common.h block structs (gguf-py's GGML_QUANT_SIZES agrees except Q8_1, see gguf.cpp).
  const Want wants[] = {
      {GgmlType::F32, 1, 4},     {GgmlType::F16, 1, 2},     {GgmlType::Q4_0, 32, 18},  {GgmlType::Q4_1, 32, 20},
      {GgmlType::Q5_0, 32, 22},  {GgmlType::Q5_1, 32, 24},  {GgmlType::Q8_0, 32, 34},  {GgmlType::Q8_1, 32, 36},
      {GgmlType::Q2_K, 256, 84}, {GgmlType::Q3_K, 256, 110}, {GgmlType::Q4_K, 256, 144}, {GgmlType::Q5_K, 256, 176},
      {GgmlType::Q6_K, 256, 210}, {GgmlType::Q8_K, 256, 292}, {GgmlType::I8, 1, 1},      {GgmlType::I16, 1, 2},
      {GgmlType::I32, 1, 4},     {GgmlType::I64, 1, 8},     {GgmlType::F64, 1, 8},     {GgmlType::BF16, 1, 2},
  };
  for (const Want& w : wants) {
    const GgmlTypeInfo& info = ggml_type_info(w.type);
    EXPECT_EQ(info.block_elements, w.elements) << info.name;
    EXPECT_EQ(info.block_bytes, w.bytes) << info.name;
  }
  EXPECT_EQ(ggml_type_info(GgmlType::Q4_K).name, "q4_K");
  EXPECT_THAT(error_of([] { ggml_type_info(static_cast<GgmlType>(4)); }), HasSubstr("unknown ggml tensor type 4"));
  EXPECT_THAT(error_of([] { ggml_type_info(static_cast<GgmlType>(99)); }), HasSubstr("unknown ggml tensor type 99"));
  EXPECT_EQ(gguf_type_name(GgufType::F64), "f64");
  EXPECT_EQ(gguf_type_name(GgufType::Array), "array");
}

TEST(GgufVocab, ReadsGpt2) {
  GgufFile f(kVocabDir / "ggml-vocab-gpt-2.gguf");
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_TRUE(f.tensors().empty());
  EXPECT_EQ(f.metadata().size(), 16u);
  EXPECT_EQ(f.string("general.architecture"), "gpt2");
  EXPECT_EQ(f.string("tokenizer.ggml.model"), "gpt2");
  const auto& tokens = f.strings("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens.size(), 50257u);
  EXPECT_EQ(tokens[0], "!");
  EXPECT_EQ(tokens[50256], "<|endoftext|>");
  const auto& merges = f.strings("tokenizer.ggml.merges");
  ASSERT_EQ(merges.size(), 50000u);
  EXPECT_EQ(merges[0], "\xc4\xa0 t");  // "Ġ t"
  EXPECT_EQ(f.integers("tokenizer.ggml.token_type").size(), 50257u);
  EXPECT_EQ(f.integer("tokenizer.ggml.bos_token_id"), 50256);
  EXPECT_EQ(f.find("tokenizer.ggml.bos_token_id")->type, GgufType::U32);
  EXPECT_EQ(f.integer("gpt2.context_length"), 1024);
  EXPECT_FLOAT_EQ(static_cast<float>(f.number("gpt2.attention.layer_norm_epsilon")), 1e-5f);
  EXPECT_FALSE(f.has("tokenizer.ggml.scores"));
}

TEST(GgufVocab, ReadsLlamaSpm) {
  GgufFile f(kVocabDir / "ggml-vocab-llama-spm.gguf");
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(f.strings("tokenizer.ggml.tokens").size(), 32000u);
  EXPECT_EQ(f.strings("tokenizer.ggml.tokens")[1], "<s>");
  EXPECT_EQ(f.find("tokenizer.ggml.scores")->element, GgufType::F32);
  const std::vector<double> scores = f.numbers("tokenizer.ggml.scores");
  ASSERT_EQ(scores.size(), 32000u);
  EXPECT_EQ(scores[0], 0.0);
  const std::vector<int64_t> types = f.integers("tokenizer.ggml.token_type");
  ASSERT_EQ(types.size(), 32000u);
  EXPECT_EQ(types[0], 2);  // unknown
  EXPECT_EQ(types[1], 3);  // control
  EXPECT_EQ(f.integer("tokenizer.ggml.bos_token_id"), 1);
  EXPECT_EQ(f.integer("tokenizer.ggml.eos_token_id"), 2);
  EXPECT_TRUE(f.boolean("tokenizer.ggml.add_bos_token"));
  EXPECT_FALSE(f.boolean("tokenizer.ggml.add_eos_token"));
}

TEST(GgufVocab, ReadsEveryVocabFile) {
  int n = 0;
  for (const auto& entry : fs::directory_iterator(kVocabDir)) {
    if (entry.path().extension() != ".gguf") continue;
    SCOPED_TRACE(entry.path());
    GgufFile f(entry.path());
    EXPECT_EQ(f.version(), 3u);
    EXPECT_EQ(f.strings("tokenizer.ggml.tokens").size(), f.integers("tokenizer.ggml.token_type").size());
    ++n;
  }
  EXPECT_EQ(n, 5);
}

TEST(GgufFixture, MatchesTheGgufPackagesReader) {
  const json want = types_json();
  GgufFile f(kTypesGguf);
  EXPECT_EQ(f.version(), want.at("version").get<uint32_t>());
  EXPECT_EQ(f.path(), kTypesGguf);
  EXPECT_EQ(fs::file_size(kTypesGguf), want.at("file_size").get<uint64_t>());
  expect_matches_reader(f, want);
  EXPECT_EQ(f.alignment(), 64u);
  EXPECT_EQ(f.tensors().size(), 12u);
  EXPECT_GE(f.metadata().size(), 30u);
}

TEST(GgufFixture, TypedGetters) {
  GgufFile f(kTypesGguf);
  EXPECT_EQ(f.integer("test.u8"), 200);
  EXPECT_EQ(f.integer("test.i8"), -100);
  EXPECT_EQ(f.integer("test.u32"), 4'000'000'000);
  EXPECT_EQ(f.integer("test.i64"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(f.integer("test.u64_small"), 12345);
  EXPECT_EQ(f.number("test.i16"), -30000.0);
  EXPECT_EQ(f.number("test.f32"), static_cast<double>(3.14159f));
  EXPECT_EQ(f.number("test.f64"), 2.718281828459045);
  EXPECT_TRUE(f.boolean("test.bool_true"));
  EXPECT_FALSE(f.boolean("test.bool_false"));
  EXPECT_EQ(f.string("test.string_empty"), "");
  EXPECT_EQ(f.string("test.unicode"),
            "h\xc3\xa9llo w\xc3\xb6rld \xe2\x80\x94 \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xf0\x9f\x99\x82");
  EXPECT_EQ(f.strings("test.arr_str"), (std::vector<std::string>{"a", "", "\xc3\xbcn\xc3\xaf", "\xc4\xa0t h"}));
  EXPECT_EQ(f.integers("test.arr_u16"), (std::vector<int64_t>{0, 65535}));
  EXPECT_EQ(f.integers("test.arr_u64"), (std::vector<int64_t>{0, std::numeric_limits<int64_t>::max()}));
  EXPECT_EQ(f.numbers("test.arr_i8"), (std::vector<double>{-128, 0, 127}));
  EXPECT_EQ(f.numbers("test.arr_f32"), (std::vector<double>{0.5, -1.25, static_cast<double>(1e-7f), 65504.0}));
  EXPECT_EQ(f.tensor("mat.q8_0").bytes, 4u * 2u * 34u);
}

TEST(GgufFixture, TypedGettersNameKeyWantedAndStoredType) {
  GgufFile f(kTypesGguf);
  const std::string file = kTypesGguf.string();
  EXPECT_THAT(error_of([&] { f.string("test.u32"); }),
              AllOf(HasSubstr(file), HasSubstr("key 'test.u32': wanted string, stored u32")));
  EXPECT_THAT(error_of([&] { f.integer("test.string"); }),
              HasSubstr("key 'test.string': wanted an integer, stored string"));
  EXPECT_THAT(error_of([&] { f.integer("test.f32"); }), HasSubstr("key 'test.f32': wanted an integer, stored f32"));
  EXPECT_THAT(error_of([&] { f.integer("test.bool_true"); }), HasSubstr("wanted an integer, stored bool"));
  EXPECT_THAT(error_of([&] { f.number("test.arr_f32"); }),
              HasSubstr("key 'test.arr_f32': wanted a number, stored array of f32"));
  EXPECT_THAT(error_of([&] { f.boolean("test.u8"); }), HasSubstr("key 'test.u8': wanted bool, stored u8"));
  EXPECT_THAT(error_of([&] { f.strings("test.arr_i32"); }),
              HasSubstr("key 'test.arr_i32': wanted array of string, stored array of i32"));
  EXPECT_THAT(error_of([&] { f.strings("test.string"); }), HasSubstr("wanted array of string, stored string"));
  EXPECT_THAT(error_of([&] { f.integers("test.arr_f64"); }),
              HasSubstr("key 'test.arr_f64': wanted array of integers, stored array of f64"));
  EXPECT_THAT(error_of([&] { f.numbers("test.arr_bool"); }),
              HasSubstr("key 'test.arr_bool': wanted array of numbers, stored array of bool"));
  EXPECT_THAT(error_of([&] { f.integer("test.u64"); }),
              AllOf(HasSubstr(file), HasSubstr("key 'test.u64': value 18446744073709551615 does not fit int64")));
  EXPECT_THAT(error_of([&] { f.integers("test.arr_u64_big"); }),
              HasSubstr("key 'test.arr_u64_big': value 18446744073709551615 does not fit int64"));
  EXPECT_THAT(error_of([&] { f.string("no.such.key"); }),
              AllOf(HasSubstr(file), HasSubstr("missing key 'no.such.key'")));
  EXPECT_THAT(error_of([&] { f.tensor("no.such.tensor"); }),
              AllOf(HasSubstr(file), HasSubstr("missing tensor 'no.such.tensor'")));
  EXPECT_EQ(f.find("no.such.key"), nullptr);
  EXPECT_EQ(f.find_tensor("no.such.tensor"), nullptr);
}

// The hand-made and hostile files, each written into a fresh temporary directory.
class GgufFiles : public ::testing::Test {
 protected:
  fs::path write(const std::string& bytes, const std::string& name = "hostile.gguf") {
    fs::path path = tmp_ / name;
    test::write_bytes(path, bytes);
    return path;
  }
  // The message of the Error that opening `bytes` throws; it must name the file.
  std::string error_opening(const std::string& bytes, const std::string& name = "hostile.gguf") {
    fs::path path = write(bytes, name);
    std::string message = error_of([&] { GgufFile f(path); });
    EXPECT_THAT(message, HasSubstr(path.string()));
    return message;
  }
  std::string error_opening(const Bytes& b) { return error_opening(b.str()); }

  TempDir tmp_;
};

TEST_F(GgufFiles, ReadsVersion2) {
  // v2 and v3 share the layout (64-bit counts and lengths); v3 only added big-endian files.
  std::string bytes = test::read_bytes(kTypesGguf);
  bytes[4] = 2;
  GgufFile f(write(bytes, "types-v2.gguf"));
  EXPECT_EQ(f.version(), 2u);
  expect_matches_reader(f, types_json());

  GgufFile small(write(small_file(2).str(), "small-v2.gguf"));
  EXPECT_EQ(small.version(), 2u);
  EXPECT_EQ(small.string("general.name"), "small");
}

TEST_F(GgufFiles, ReadsAHandMadeFileWithEmptyArrays) {
  GgufFile f(write(small_file().str()));
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.find("empty.i32")->element, GgufType::I32);
  EXPECT_TRUE(f.integers("empty.i32").empty());
  EXPECT_TRUE(f.numbers("empty.i32").empty());
  EXPECT_EQ(f.find("empty.strings")->element, GgufType::String);
  EXPECT_TRUE(f.strings("empty.strings").empty());
  EXPECT_EQ(f.integers("ids"), (std::vector<int64_t>{-1, 0, 7}));
  const GgufTensorInfo& a = f.tensor("a");
  EXPECT_EQ(a.bytes, 16u);
  float a2 = 0;
  std::memcpy(&a2, a.data + 8, sizeof(float));
  EXPECT_EQ(a2, 2.5f);
  const GgufTensorInfo& b = f.tensor("b");
  EXPECT_EQ(b.numel(), 64);
  EXPECT_EQ(b.bytes, 68u);
  EXPECT_EQ(static_cast<int>(b.data[67]), 67);
  EXPECT_EQ(f.data_offset() + b.offset + b.bytes, fs::file_size(tmp_ / "hostile.gguf"));
}

TEST_F(GgufFiles, ATensorWithoutDimensionsHoldsOneElement) {
  // llama.cpp reads n_dims = 0 as a scalar; so does this reader.
  Bytes b;
  b.header(1, 0).tensor("scalar", {}, kTypeF32, 0).pad_to(32).put<float>(1.0f);
  GgufFile f(write(b.str()));
  EXPECT_EQ(f.tensor("scalar").numel(), 1);
  EXPECT_EQ(f.tensor("scalar").bytes, 4u);
}

TEST_F(GgufFiles, RefusesEveryTruncation) {
  const std::string full = small_file().str();
  ASSERT_NO_THROW({ GgufFile f(write(full)); });
  for (size_t n = 0; n < full.size(); ++n) {
    SCOPED_TRACE(n);
    EXPECT_THAT(error_opening(full.substr(0, n)),
                AnyOf(HasSubstr("truncated file"), HasSubstr("exceeds the"), HasSubstr("is impossible"),
                      HasSubstr("needs at least"), HasSubstr("run past the end of the file")));
  }
}

TEST_F(GgufFiles, RefusesEveryTruncationOfTheFixtureBeforeItsLastTensorEnds) {
  const std::string full = test::read_bytes(kTypesGguf);
  const json want = types_json();
  const json& last = want.at("tensors").back();
  const uint64_t end = want.at("data_offset").get<uint64_t>() + last.at("offset").get<uint64_t>() +
                       last.at("bytes").get<uint64_t>();
  ASSERT_LT(end, full.size());  // the writer pads after the last tensor too
  for (size_t n = 0; n < end; ++n) {
    SCOPED_TRACE(n);
    error_opening(full.substr(0, n));
  }
  // The trailing padding holds no tensor bytes, so a file cut inside it is still whole.
  EXPECT_EQ(GgufFile(write(full.substr(0, end))).tensors().size(), 12u);
}

TEST_F(GgufFiles, RefusesABadMagic) {
  Bytes b;
  b.raw("GGML").u32(3).u64(0).u64(0);
  EXPECT_THAT(error_opening(b), HasSubstr("not a GGUF file: bad magic"));
  EXPECT_THAT(error_opening(std::string()), HasSubstr("header: truncated file"));
}

TEST_F(GgufFiles, RefusesUnsupportedVersions) {
  EXPECT_THAT(error_opening(Bytes().header(0, 0, 1)), HasSubstr("unsupported GGUF version 1"));
  EXPECT_THAT(error_opening(Bytes().header(0, 0, 4)), HasSubstr("unsupported GGUF version 4"));
  EXPECT_THAT(error_opening(Bytes().header(0, 0, 0x03000000)), HasSubstr("big-endian"));
}

TEST_F(GgufFiles, RefusesTruncationInsideEachPart) {
  // Inside the header's counts.
  EXPECT_THAT(error_opening(Bytes().raw("GGUF").u32(3).u32(0).str()), HasSubstr("header: truncated file"));
  // Inside a key name: its length says 100, 13 bytes follow.
  EXPECT_THAT(error_opening(Bytes().header(0, 1).u64(100).raw("gen").zeros(10)),
              HasSubstr("metadata key 0: string length 100 at offset 24 exceeds the 13 bytes left"));
  // Inside a string value.
  EXPECT_THAT(error_opening(Bytes().header(0, 1).str("general.name").u32(kString).u64(20).raw("abc")),
              HasSubstr("key 'general.name': string length 20"));
  // Inside an array: 4 u32 elements promised, 2 present.
  Bytes arr;
  arr.header(0, 1).kv_array("ids", kU32, 4).u32(1).u32(2);
  EXPECT_THAT(error_opening(arr), HasSubstr("array of 4 u32 elements needs at least 4 bytes each"));
  Bytes str_arr;
  str_arr.header(0, 1).kv_array("toks", kString, 2).str("a").u64(11).raw("bc").zeros(8);
  EXPECT_THAT(error_opening(str_arr), HasSubstr("key 'toks', element 1: string length 11"));
  // Inside a tensor info: cut after n_dims.
  EXPECT_THAT(error_opening(Bytes().header(1, 0).str("w").u32(2).u64(8).zeros(3)),
              HasSubstr("tensor 'w': truncated file: needs 8 bytes"));
  // The data section is shorter than a tensor.
  Bytes short_data;
  short_data.header(1, 0).tensor("w", {8}, kTypeF32, 0).pad_to(32).zeros(31);
  EXPECT_THAT(error_opening(short_data),
              HasSubstr("tensor 'w': 32 bytes at offset 0 of the data section (which starts at 64) run past the "
                        "end of the file (95 bytes)"));
  // A file that ends before its data section starts, although it lists a tensor.
  Bytes no_data;
  no_data.header(1, 0).tensor("w", {8}, kTypeF32, 0);
  EXPECT_THAT(error_opening(no_data),
              HasSubstr("tensor 'w': 32 bytes at offset 0 of the data section (which starts at 64)"));
}

TEST_F(GgufFiles, RefusesAbsurdCounts) {
  const uint64_t huge = uint64_t{1} << 60;
  EXPECT_THAT(error_opening(Bytes().header(huge, 0).zeros(64)),
              HasSubstr("header: tensor count 1152921504606846976 is impossible: each needs at least 24 bytes"));
  EXPECT_THAT(error_opening(Bytes().header(0, huge).zeros(64)),
              HasSubstr("header: metadata count 1152921504606846976 is impossible: each needs at least 13 bytes"));
  EXPECT_THAT(error_opening(Bytes().header(0, ~uint64_t{0}).zeros(64)),
              HasSubstr("metadata count 18446744073709551615"));
  // The tensor count fits the file only before the metadata has used up its bytes.
  Bytes b;
  b.header(2, 1).kv_str("general.name", std::string(40, 'x')).tensor("w", {1}, kTypeF32, 0);
  EXPECT_THAT(error_opening(b), HasSubstr("tensor count 2 is impossible"));
}

TEST_F(GgufFiles, RefusesStringsLongerThanTheFile) {
  EXPECT_THAT(error_opening(Bytes().header(0, 1).u64(uint64_t{1} << 63).zeros(16)),
              HasSubstr("metadata key 0: string length 9223372036854775808"));
  EXPECT_THAT(error_opening(Bytes().header(0, 1).str("k").u32(kString).u64(~uint64_t{0}).zeros(8)),
              HasSubstr("key 'k': string length 18446744073709551615 at offset 37 exceeds the 8 bytes left"));
  EXPECT_THAT(error_opening(Bytes().header(1, 0).u64(1000).raw("w").zeros(32)),
              HasSubstr("tensor info 0: string length 1000"));
}

TEST_F(GgufFiles, RefusesArraysLongerThanTheFile) {
  EXPECT_THAT(error_opening(Bytes().header(0, 1).kv_array("big", kU64, uint64_t{1} << 61).zeros(64)),
              HasSubstr("key 'big': array of 2305843009213693952 u64 elements needs at least 8 bytes each, but "
                        "only 64 bytes remain"));
  EXPECT_THAT(error_opening(Bytes().header(0, 1).kv_array("toks", kString, 9).zeros(64)),
              HasSubstr("key 'toks': array of 9 string elements needs at least 8 bytes each"));
  EXPECT_THAT(error_opening(Bytes().header(0, 1).kv_array("n", kF32, ~uint64_t{0}).zeros(8)),
              HasSubstr("array of 18446744073709551615 f32 elements"));
}

TEST_F(GgufFiles, RefusesUnknownMetadataTypes) {
  EXPECT_THAT(error_opening(Bytes().header(0, 1).str("k").u32(13).u32(0)),
              HasSubstr("key 'k': unknown metadata type 13"));
  EXPECT_THAT(error_opening(Bytes().header(0, 1).kv_array("k", 99, 1).u32(0)),
              HasSubstr("key 'k': unknown array element type 99"));
  EXPECT_THAT(error_opening(Bytes().header(0, 1).kv_array("nested", kArray, 1).u32(kU32).u64(1).u32(5)),
              HasSubstr("key 'nested': arrays of arrays are not supported"));
  EXPECT_THAT(error_opening(Bytes().header(0, 1).str("flag").u32(kBool).u8(2)),
              HasSubstr("key 'flag': bool value 2 is neither 0 nor 1"));
  EXPECT_THAT(error_opening(Bytes().header(0, 1).kv_array("flags", kBool, 2).u8(1).u8(7)),
              HasSubstr("key 'flags', element 1: bool value 7 is neither 0 nor 1"));
}

TEST_F(GgufFiles, RefusesUnknownTensorTypes) {
  for (uint32_t type : {4u, 16u, 31u, 1000u}) {
    Bytes b;
    b.header(1, 0).tensor("blk.0.w", {32}, type, 0).pad_to(32).zeros(64);
    EXPECT_THAT(error_opening(b), HasSubstr("tensor 'blk.0.w': unknown ggml tensor type " + std::to_string(type)));
  }
}

TEST_F(GgufFiles, RefusesBadDimensions) {
  auto with_dims = [](const std::vector<uint64_t>& dims) {
    Bytes b;
    return b.header(1, 0).tensor("w", dims, kTypeF32, 0).pad_to(32).zeros(64);
  };
  EXPECT_THAT(error_opening(with_dims({4, 0})), HasSubstr("tensor 'w': dimension 1 is 0; dimensions must be positive"));
  EXPECT_THAT(error_opening(with_dims({~uint64_t{0}})), HasSubstr("tensor 'w': dimension 0 is -1"));
  EXPECT_THAT(error_opening(with_dims({1, 1, 1, 1, 1})),
              HasSubstr("tensor 'w': 5 dimensions; at most 4 are supported"));
  EXPECT_THAT(error_opening(with_dims({uint64_t{1} << 32, uint64_t{1} << 32})),
              HasSubstr("tensor 'w': element count of dims [4294967296, 4294967296] overflows int64"));
  // The element count fits int64 but not the file: the extent check catches it.
  EXPECT_THAT(error_opening(with_dims({uint64_t{1} << 30, uint64_t{1} << 30})),
              HasSubstr("run past the end of the file"));
  Bytes f64;  // 2^62 elements of 8 bytes
  f64.header(1, 0).tensor("w", {uint64_t{1} << 31, uint64_t{1} << 31}, 28, 0).pad_to(32).zeros(64);
  EXPECT_THAT(error_opening(f64), HasSubstr("tensor 'w': byte size of 4611686018427387904 f64 elements overflows"));
}

TEST_F(GgufFiles, RefusesRowsThatAreNotWholeBlocks) {
  Bytes b;
  b.header(1, 0).tensor("q", {33, 2}, kTypeQ8_0, 0).pad_to(32).zeros(256);
  EXPECT_THAT(error_opening(b),
              HasSubstr("tensor 'q': row of 33 elements is not a multiple of the q8_0 block size 32"));
}

TEST_F(GgufFiles, RefusesMisalignedOffsetsAndBadAlignments) {
  Bytes b;
  b.header(1, 0).tensor("w", {4}, kTypeF32, 16).pad_to(32).zeros(64);
  EXPECT_THAT(error_opening(b), HasSubstr("tensor 'w': data offset 16 is not a multiple of the alignment 32"));
  Bytes custom;
  custom.header(1, 1).kv_u32("general.alignment", 64).tensor("w", {4}, kTypeF32, 32).pad_to(64).zeros(128);
  EXPECT_THAT(error_opening(custom), HasSubstr("tensor 'w': data offset 32 is not a multiple of the alignment 64"));
  for (uint32_t alignment : {0u, 48u, 0x80000001u})
    EXPECT_THAT(error_opening(Bytes().header(0, 1).kv_u32("general.alignment", alignment)),
                HasSubstr("key 'general.alignment': " + std::to_string(alignment) + " is not a nonzero power of two"));
  EXPECT_THAT(error_opening(Bytes().header(0, 1).str("general.alignment").u32(kU64).u64(32)),
              HasSubstr("key 'general.alignment': wanted u32, stored u64"));
}

TEST_F(GgufFiles, RefusesOverlappingTensors) {
  Bytes b;
  b.header(2, 0).tensor("a", {16}, kTypeF32, 0).tensor("b", {4}, kTypeF32, 32).pad_to(32).zeros(64);
  EXPECT_THAT(error_opening(b), HasSubstr("tensors 'a' and 'b' overlap in the data section"));
  Bytes same;  // listed out of data order
  same.header(2, 0).tensor("late", {8}, kTypeF32, 32).tensor("early", {16}, kTypeF32, 0).pad_to(32).zeros(96);
  EXPECT_THAT(error_opening(same), HasSubstr("tensors 'early' and 'late' overlap"));
}

TEST_F(GgufFiles, RefusesDuplicates) {
  Bytes keys;
  keys.header(0, 2).kv_u32("k", 1).kv_str("k", "again");
  EXPECT_THAT(error_opening(keys), HasSubstr("key 'k': duplicate key"));
  Bytes tensors;
  tensors.header(2, 0).tensor("w", {4}, kTypeF32, 0).tensor("w", {4}, kTypeF32, 32).pad_to(32).zeros(64);
  EXPECT_THAT(error_opening(tensors), HasSubstr("duplicate tensor name 'w'"));
}

}  // namespace
}  // namespace kvinfer
