// SafetensorsFile: reads real HF-written files (weights and references), and refuses every
// malformed file with a kvinfer::Error naming the file and, where there is one, the tensor.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "formats/safetensors.h"
#include "kvinfer/error.h"
#include "test_files.h"

namespace kvinfer {
namespace {

using test::error_of;
using test::fixture_dir;
using test::TempDir;
using ::testing::AllOf;
using ::testing::HasSubstr;
using json = nlohmann::json;

// Bytes from the end of the header to the end of the file.
uint64_t data_section_bytes(const std::filesystem::path& path) {
  auto parts = test::SafetensorsParts::read(path);
  return parts.data.size();
}

// Every tensor's bytes agree with its dtype and shape, and its data is aligned.
void expect_consistent(const TensorView& t) {
  SCOPED_TRACE(t.name);
  int64_t numel = 1;
  for (int64_t d : t.shape) numel *= d;
  EXPECT_EQ(t.numel(), numel);
  EXPECT_EQ(t.bytes, static_cast<uint64_t>(numel) * t.element_size);
  ASSERT_NE(t.data, nullptr);
  ASSERT_GT(t.element_size, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % t.element_size, 0u);
  ASSERT_NE(t.file, nullptr);
}

TEST(Safetensors, ReadsEveryTensorOfARealWeightFile) {
  const auto path = fixture_dir("llama_mha") / "model.safetensors";
  SafetensorsFile f(path);
  EXPECT_EQ(f.path(), path);
  // embed, final norm, lm_head + 2 layers × (2 norms + q/k/v/o + gate/up/down).
  ASSERT_EQ(f.tensors().size(), 3u + 2u * 9u);
  EXPECT_EQ(f.find("__metadata__"), nullptr);

  uint64_t total = 0;
  for (const auto& [name, t] : f.tensors()) {
    EXPECT_EQ(name, t.name);
    EXPECT_EQ(t.dtype, "F32") << name;
    EXPECT_EQ(t.element_size, 4u) << name;
    EXPECT_EQ(t.float_dtype(), DType::F32) << name;
    EXPECT_EQ(*t.file, path) << name;
    expect_consistent(t);
    total += t.bytes;
  }
  // The tensors tile the data section exactly (they never overlap, see the overlap test).
  EXPECT_EQ(total, data_section_bytes(path));

  const TensorView& embed = f.get("model.embed_tokens.weight");
  EXPECT_EQ(embed.shape, (std::vector<int64_t>{128, 64}));
  EXPECT_EQ(f.get("model.layers.1.self_attn.k_proj.weight").shape, (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(f.get("model.norm.weight").shape, (std::vector<int64_t>{64}));
}

TEST(Safetensors, ReadsI32AndF32ReferenceTensors) {
  const auto path = fixture_dir("llama_mha") / "reference.safetensors";
  SafetensorsFile f(path);
  ASSERT_EQ(f.tensors().size(), 4u);
  for (const auto& [name, t] : f.tensors()) expect_consistent(t);

  const TensorView& ids = f.get("prompt_ids");
  EXPECT_EQ(ids.dtype, "I32");
  EXPECT_EQ(ids.element_size, 4u);
  EXPECT_EQ(ids.shape, (std::vector<int64_t>{7}));
  const TensorView& greedy_ids = f.get("greedy_ids");
  EXPECT_EQ(greedy_ids.shape, (std::vector<int64_t>{32}));
  for (const TensorView* t : {&ids, &greedy_ids}) {
    std::vector<int32_t> v(static_cast<size_t>(t->numel()));
    std::memcpy(v.data(), t->data, t->bytes);
    for (int32_t id : v) EXPECT_TRUE(id >= 0 && id < 128) << t->name << " holds " << id;
  }

  const TensorView& prompt = f.get("prompt_logits");
  const TensorView& greedy = f.get("greedy_logits");
  EXPECT_EQ(prompt.dtype, "F32");
  EXPECT_EQ(prompt.shape, (std::vector<int64_t>{7, 128}));
  EXPECT_EQ(greedy.shape, (std::vector<int64_t>{32, 128}));
  // PROVENANCE.md: greedy_logits[0] == prompt_logits[T-1], bit for bit.
  const size_t row = 128 * sizeof(float);
  EXPECT_EQ(std::memcmp(greedy.data, prompt.data + 6 * row, row), 0);

  // An integer tensor is not a weight: the error names file, tensor and dtype.
  EXPECT_THAT(error_of([&] { (void)ids.float_dtype(); }),
              AllOf(HasSubstr(path.string()), HasSubstr("'prompt_ids'"), HasSubstr("I32")));
}

TEST(Safetensors, MissingTensorIsNamed) {
  const auto path = fixture_dir("llama_mha") / "reference.safetensors";
  SafetensorsFile f(path);
  EXPECT_EQ(f.find("no_such_tensor"), nullptr);
  EXPECT_THAT(error_of([&] { (void)f.get("no_such_tensor"); }),
              AllOf(HasSubstr(path.string()), HasSubstr("no_such_tensor")));
}

TEST(Safetensors, MissingFileIsNamed) {
  TempDir tmp;
  const auto path = tmp / "absent.safetensors";
  EXPECT_THAT(error_of([&] { SafetensorsFile f(path); }), HasSubstr(path.string()));
}

// ---- hostile files, each built in a fresh temporary directory ----

// Writes a file with `header` (one entry per tensor) and `data_bytes` zero bytes of data, and
// returns the message of the error that opening it throws.
std::string open_error(const TempDir& tmp, const json& header, size_t data_bytes, std::string* path_out) {
  const auto path = tmp / "bad.safetensors";
  test::write_safetensors(path, header.dump(), std::string(data_bytes, '\0'));
  *path_out = path.string();
  return error_of([&] { SafetensorsFile f(path); });
}

json entry(const std::string& dtype, const json& shape, const json& offsets) {
  return {{"dtype", dtype}, {"shape", shape}, {"data_offsets", offsets}};
}

TEST(SafetensorsHostile, EntryThatIsNotAnObject) {
  TempDir tmp;
  std::string path;
  auto msg = open_error(tmp, {{"weird", json::array({1, 2})}}, 8, &path);
  EXPECT_THAT(msg, AllOf(HasSubstr(path), HasSubstr("'weird'")));
}

TEST(SafetensorsHostile, EntryWithoutDataOffsets) {
  TempDir tmp;
  std::string path;
  auto msg = open_error(tmp, {{"w", {{"dtype", "F32"}, {"shape", {2}}}}}, 8, &path);
  EXPECT_THAT(msg, AllOf(HasSubstr(path), HasSubstr("'w'"), HasSubstr("data_offsets")));
}

TEST(SafetensorsHostile, NegativeShape) {
  TempDir tmp;
  std::string path;
  auto msg = open_error(tmp, {{"w", entry("F32", {-1, 2}, {0, 8})}}, 8, &path);
  EXPECT_THAT(msg, AllOf(HasSubstr(path), HasSubstr("'w'"), HasSubstr("shape")));
}

TEST(SafetensorsHostile, FloatShape) {
  TempDir tmp;
  std::string path;
  auto msg = open_error(tmp, {{"w", entry("F32", {2.5}, {0, 8})}}, 8, &path);
  EXPECT_THAT(msg, AllOf(HasSubstr(path), HasSubstr("'w'"), HasSubstr("shape")));
}

TEST(SafetensorsHostile, ShapeWhoseProductOverflows64Bits) {
  TempDir tmp;
  std::string path;
  const uint64_t big = uint64_t{1} << 32;
  auto msg = open_error(tmp, {{"w", entry("F32", {big, big, 2}, {0, 8})}}, 8, &path);
  EXPECT_THAT(msg, AllOf(HasSubstr(path), HasSubstr("'w'"), HasSubstr("overflow")));
}

TEST(SafetensorsHostile, ShapeDimensionBeyondInt64) {
  TempDir tmp;
  std::string path;
  auto msg = open_error(tmp, {{"w", entry("U8", {uint64_t{1} << 63}, {0, 8})}}, 8, &path);
  EXPECT_THAT(msg, AllOf(HasSubstr(path), HasSubstr("'w'")));
}

TEST(SafetensorsHostile, OffsetsBeginAfterEnd) {
  TempDir tmp;
  std::string path;
  auto msg = open_error(tmp, {{"w", entry("F32", {1}, {8, 4})}}, 16, &path);
  EXPECT_THAT(msg, AllOf(HasSubstr(path), HasSubstr("'w'"), HasSubstr("[8, 4)")));
}

TEST(SafetensorsHostile, NegativeOffset) {
  TempDir tmp;
  std::string path;
  auto msg = open_error(tmp, {{"w", entry("F32", {1}, {-4, 0})}}, 16, &path);
  EXPECT_THAT(msg, AllOf(HasSubstr(path), HasSubstr("'w'"), HasSubstr("data_offsets")));
}

TEST(SafetensorsHostile, OffsetsBeyondTheDataSection) {
  TempDir tmp;
  std::string path;
  auto msg = open_error(tmp, {{"w", entry("F32", {4}, {0, 16})}}, 8, &path);
  EXPECT_THAT(msg, AllOf(HasSubstr(path), HasSubstr("'w'"), HasSubstr("8-byte data section")));
}

TEST(SafetensorsHostile, SizeDisagreesWithShape) {
  TempDir tmp;
  std::string path;
  auto msg = open_error(tmp, {{"w", entry("F32", {3}, {0, 8})}}, 16, &path);
  EXPECT_THAT(msg, AllOf(HasSubstr(path), HasSubstr("'w'"), HasSubstr("holds 8 bytes"), HasSubstr("need 12")));
}

TEST(SafetensorsHostile, UnknownDtype) {
  TempDir tmp;
  std::string path;
  auto msg = open_error(tmp, {{"w", entry("Q4_K", {2}, {0, 2})}}, 8, &path);
  EXPECT_THAT(msg, AllOf(HasSubstr(path), HasSubstr("'w'"), HasSubstr("Q4_K")));
}

TEST(SafetensorsHostile, MisalignedF32Data) {
  TempDir tmp;
  std::string path;
  auto msg = open_error(tmp, {{"w", entry("F32", {1}, {1, 5})}}, 8, &path);
  EXPECT_THAT(msg, AllOf(HasSubstr(path), HasSubstr("'w'"), HasSubstr("aligned")));
}

TEST(SafetensorsHostile, OverlappingTensors) {
  TempDir tmp;
  std::string path;
  json header = {{"a", entry("F32", {2}, {0, 8})}, {"b", entry("F32", {2}, {4, 12})}};
  auto msg = open_error(tmp, header, 16, &path);
  EXPECT_THAT(msg, AllOf(HasSubstr(path), HasSubstr("'a'"), HasSubstr("'b'"), HasSubstr("overlap")));
}

TEST(SafetensorsHostile, ZeroLengthFile) {
  TempDir tmp;
  const auto path = tmp / "empty.safetensors";
  test::write_bytes(path, "");
  EXPECT_THAT(error_of([&] { SafetensorsFile f(path); }), AllOf(HasSubstr(path.string()), HasSubstr("0 bytes")));
}

TEST(SafetensorsHostile, SevenByteFile) {
  TempDir tmp;
  const auto path = tmp / "seven.safetensors";
  test::write_bytes(path, std::string(7, '\x02'));
  EXPECT_THAT(error_of([&] { SafetensorsFile f(path); }), AllOf(HasSubstr(path.string()), HasSubstr("7 bytes")));
}

TEST(SafetensorsHostile, HeaderLengthTwoToThe63) {
  TempDir tmp;
  const auto path = tmp / "huge.safetensors";
  std::string bytes(8, '\0');
  bytes[7] = '\x80';  // little-endian 2^63
  test::write_bytes(path, bytes + "{}      ");
  EXPECT_THAT(error_of([&] { SafetensorsFile f(path); }),
              AllOf(HasSubstr(path.string()), HasSubstr("9223372036854775808")));
}

TEST(SafetensorsHostile, HeaderLengthOneBeyondTheFile) {
  TempDir tmp;
  const auto path = tmp / "long.safetensors";
  std::string bytes = test::safetensors_bytes("{}", "");
  bytes[0] = static_cast<char>(bytes[0] + 1);
  test::write_bytes(path, bytes);
  EXPECT_THAT(error_of([&] { SafetensorsFile f(path); }),
              AllOf(HasSubstr(path.string()), HasSubstr("beyond the end")));
}

TEST(SafetensorsHostile, InvalidHeaderJson) {
  TempDir tmp;
  const auto path = tmp / "json.safetensors";
  test::write_safetensors(path, R"({"w": {"dtype": "F32",)", "");
  EXPECT_THAT(error_of([&] { SafetensorsFile f(path); }),
              AllOf(HasSubstr(path.string()), HasSubstr("invalid header JSON")));
}

TEST(SafetensorsHostile, HeaderThatIsNotAnObject) {
  TempDir tmp;
  const auto path = tmp / "array.safetensors";
  test::write_safetensors(path, "[1, 2, 3]", "");
  EXPECT_THAT(error_of([&] { SafetensorsFile f(path); }),
              AllOf(HasSubstr(path.string()), HasSubstr("not an object")));
}

TEST(Safetensors, EmptyHeaderLoadsWithNoTensors) {
  TempDir tmp;
  const auto path = tmp / "none.safetensors";
  test::write_safetensors(path, "{}", "");
  SafetensorsFile f(path);
  EXPECT_TRUE(f.tensors().empty());

  // __metadata__ alone is not a tensor either.
  test::write_safetensors(path, R"({"__metadata__": {"format": "pt"}})", "");
  SafetensorsFile g(path);
  EXPECT_TRUE(g.tensors().empty());
}

// The safetensors library puts an empty tensor at the offset where the next one starts; it
// shares no bytes with it. (Names chosen so that the empty one sorts after its neighbour.)
TEST(Safetensors, EmptyTensorsAtAnotherTensorsOffsetAreAccepted) {
  TempDir tmp;
  const auto path = tmp / "zero.safetensors";
  json header = {{"a", entry("F32", {2}, {0, 8})},
                 {"b", entry("F32", {2}, {8, 16})},
                 {"c_empty", entry("F32", {0, 4}, {8, 8})},
                 {"d_empty", entry("I64", {0}, {16, 16})}};
  test::write_safetensors(path, header.dump(), std::string(16, '\0'));
  SafetensorsFile f(path);
  ASSERT_EQ(f.tensors().size(), 4u);
  EXPECT_EQ(f.get("c_empty").numel(), 0);
  EXPECT_EQ(f.get("c_empty").bytes, 0u);
  EXPECT_EQ(f.get("d_empty").bytes, 0u);
  EXPECT_EQ(f.get("b").bytes, 8u);
}

}  // namespace
}  // namespace kvinfer
