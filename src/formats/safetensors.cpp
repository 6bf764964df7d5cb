#include "formats/safetensors.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>
#include <fmt/std.h>
#include <nlohmann/json.hpp>

#include "core/escape.h"
#include "kvinfer/error.h"

namespace kvinfer {

namespace {

// The safetensors reference implementation refuses headers above 100 MB.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

size_t element_size_of(const std::string& dtype) {
  static const std::map<std::string, size_t, std::less<>> sizes = {
      {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4}, {"I16", 2},
      {"I8", 1},  {"U64", 8}, {"U32", 4}, {"U16", 2},  {"U8", 1},  {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}};
  auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

uint64_t read_u64_le(const std::byte* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint64_t>(p[i]);
  return v;
}

// The header's length and JSON text are read with pread (MappedFile::read_at), not through the
// mapping: a file that shrinks while it is parsed gives an Error, not SIGBUS.
uint64_t header_length(const MappedFile& file) {
  std::byte length[8];
  file.read_at(0, sizeof(length), length);
  return read_u64_le(length);
}

std::string header_text(const MappedFile& file, uint64_t length) {
  std::string text(length, '\0');
  file.read_at(8, length, reinterpret_cast<std::byte*>(text.data()));
  return text;
}

}  // namespace

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

DType TensorView::float_dtype() const {
  if (dtype == "F32") return DType::F32;
  if (dtype == "F16") return DType::F16;
  if (dtype == "BF16") return DType::BF16;
  throw Error(ErrorKind::Unsupported, fmt::format("{}: tensor '{}' has dtype {}; weights must be F32, F16 or BF16", *file, escape_name(name), escape_name(dtype)));
}

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path) : map_(path) {
  auto bytes = map_.bytes();
  if (bytes.size() < 8)
    throw Error(ErrorKind::BadFile, fmt::format("{}: truncated safetensors file ({} bytes, shorter than the 8-byte header length)", path,
                            bytes.size()));
  uint64_t header_len = header_length(map_);
  if (header_len > bytes.size() - 8)
    throw Error(ErrorKind::BadFile, fmt::format("{}: header length {} runs beyond the end of the file ({} bytes)", path, header_len,
                            bytes.size()));
  if (header_len > kMaxHeaderBytes)
    throw Error(ErrorKind::BadFile, fmt::format("{}: header length {} exceeds the {}-byte limit", path, header_len, kMaxHeaderBytes));

  nlohmann::json header;
  try {
    header = nlohmann::json::parse(header_text(map_, header_len));
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorKind::BadFile, fmt::format("{}: invalid header JSON: {}", path, e.what()));
  }
  if (!header.is_object()) throw Error(ErrorKind::BadFile, fmt::format("{}: header JSON is not an object", path));

  const std::byte* data = bytes.data() + 8 + header_len;
  const uint64_t data_size = bytes.size() - 8 - header_len;
  for (const auto& item : header.items()) {
    const std::string& name = item.key();  // not a structured binding: lambdas capture it (clang 14)
    const auto& entry = item.value();
    if (name == "__metadata__") continue;
    auto bad = [&](const std::string& why) {
      return Error(ErrorKind::BadFile, fmt::format("{}: tensor '{}': {}", path, escape_name(name), why));
    };
    if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") || !entry.contains("data_offsets"))
      throw bad("entry needs dtype, shape and data_offsets");
    const auto& jdtype = entry["dtype"];
    const auto& jshape = entry["shape"];
    const auto& joffsets = entry["data_offsets"];
    if (!jdtype.is_string()) throw bad("dtype is not a string");
    if (!jshape.is_array()) throw bad("shape is not an array");
    if (!joffsets.is_array() || joffsets.size() != 2 || !joffsets[0].is_number_unsigned() ||
        !joffsets[1].is_number_unsigned())
      throw bad("data_offsets is not a pair of non-negative integers");

    TensorView t;
    t.name = name;
    t.dtype = jdtype.get<std::string>();
    t.element_size = element_size_of(t.dtype);
    if (t.element_size == 0) throw bad(fmt::format("unknown dtype {}", t.dtype));
    uint64_t expected = t.element_size;
    for (const auto& d : jshape) {
      if (!d.is_number_unsigned()) throw bad("shape holds a value that is not a non-negative integer");
      uint64_t dim = d.get<uint64_t>();
      if (dim > static_cast<uint64_t>(INT64_MAX) || __builtin_mul_overflow(expected, dim, &expected))
        throw bad("shape's element count overflows");
      t.shape.push_back(static_cast<int64_t>(dim));
    }
    uint64_t begin = joffsets[0].get<uint64_t>();
    uint64_t end = joffsets[1].get<uint64_t>();
    if (begin > end || end > data_size)
      throw bad(fmt::format("data offsets [{}, {}) lie outside the {}-byte data section", begin, end, data_size));
    if (end - begin != expected)
      throw bad(fmt::format("holds {} bytes but dtype {} and shape [{}] need {}", end - begin, t.dtype,
                            fmt::join(t.shape, ", "), expected));
    t.data = data + begin;
    t.bytes = end - begin;
    t.file = &map_.path();
    if (t.bytes > 0 && reinterpret_cast<uintptr_t>(t.data) % t.element_size != 0)
      throw bad(fmt::format("data at offset {} is not aligned to its {}-byte elements", begin, t.element_size));
    tensors_.emplace(name, std::move(t));
  }

  // Tensors must not share bytes. Empty tensors hold none: the safetensors library writes them
  // at the offset where the next tensor starts, so they are left out rather than ordered by a tie.
  std::vector<const TensorView*> by_offset;
  for (const auto& [name, t] : tensors_)
    if (t.bytes > 0) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) { return a->data < b->data; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const TensorView* prev = by_offset[i - 1];
    if (by_offset[i]->data < prev->data + prev->bytes)
      throw Error(ErrorKind::BadFile, fmt::format("{}: tensors '{}' and '{}' overlap in the data section", path, escape_name(prev->name),
                              escape_name(by_offset[i]->name)));
  }
}

const TensorView* SafetensorsFile::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

const TensorView& SafetensorsFile::get(const std::string& name) const {
  if (const TensorView* t = find(name)) return *t;
  throw Error(ErrorKind::BadFile, fmt::format("{}: missing tensor '{}'", map_.path(), name));
}

}  // namespace kvinfer
