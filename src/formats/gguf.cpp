#include "formats/gguf.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fmt/std.h>

#include "core/escape.h"
#include "core/file_error.h"
#include "kvinfer/error.h"

namespace kvinfer {

namespace fs = std::filesystem;

// The file is little-endian and values are copied out with memcpy.
static_assert(std::endian::native == std::endian::little, "the GGUF reader assumes a little-endian host");

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr uint32_t kMaxDims = 4;         // GGML_MAX_DIMS
constexpr uint64_t kNoElement = std::numeric_limits<uint64_t>::max();
// The smallest encodings, which bound a count before anything of that count is reserved: a
// key/value is a key length (8), a type (4) and at least one value byte; a tensor info is a name
// length (8), n_dims (4), a type (4) and an offset (8).
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;

// What is being read, for error messages: "key 'x'" and, inside an array, the element index.
struct Context {
  std::string_view what;
  uint64_t element = kNoElement;
};

// Reads the file front to back with pread (MappedFile::read_at), a window of at least kWindow
// bytes at a time, never through the mapping: a file that shrinks while its header is parsed
// gives an Error, not SIGBUS.
class Cursor {
 public:
  Cursor(const MappedFile& file, const fs::path& path) : file_(file), path_(path) {}

  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return file_.size() - pos_; }

  [[noreturn]] void fail(const Context& ctx, const std::string& why) const {
    if (ctx.element == kNoElement) throw Error(file_error_kind(why), fmt::format("{}: {}: {}", path_, ctx.what, why));
    throw Error(file_error_kind(why), fmt::format("{}: {}, element {}: {}", path_, ctx.what, ctx.element, why));
  }

  void need(uint64_t n, const Context& ctx) const {
    if (n > remaining())
      fail(ctx, fmt::format("truncated file: needs {} bytes at offset {}, only {} remain", n, pos_, remaining()));
  }

  template <typename T>
  T read(const Context& ctx) {
    need(sizeof(T), ctx);
    T v;
    std::memcpy(&v, at(sizeof(T)), sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  std::string read_string(const Context& ctx) {
    uint64_t len = read<uint64_t>(ctx);
    if (len > remaining())
      fail(ctx, fmt::format("string length {} at offset {} exceeds the {} bytes left in the file", len, pos_ - 8,
                            remaining()));
    std::string s(reinterpret_cast<const char*>(at(len)), len);
    pos_ += len;
    return s;
  }

 private:
  static constexpr uint64_t kWindow = uint64_t{1} << 20;
  // The next n bytes of the file (n <= remaining()), read into the window as needed.
  const std::byte* at(uint64_t n) {
    if (pos_ + n > begin_ + window_.size()) {
      window_.resize(std::min(remaining(), std::max(n, kWindow)));  // (bytes) the file from pos_
      file_.read_at(pos_, window_.size(), window_.data());
      begin_ = pos_;
    }
    return window_.data() + (pos_ - begin_);
  }

  const MappedFile& file_;
  const fs::path& path_;
  uint64_t pos_ = 0;
  std::vector<std::byte> window_;  // the file's bytes from begin_
  uint64_t begin_ = 0;
};

enum class Kind { Unsigned, Signed, Float, Bool, String, Array };

Kind kind_of(GgufType t) {
  switch (t) {
    case GgufType::U8: case GgufType::U16: case GgufType::U32: case GgufType::U64: return Kind::Unsigned;
    case GgufType::I8: case GgufType::I16: case GgufType::I32: case GgufType::I64: return Kind::Signed;
    case GgufType::F32: case GgufType::F64: return Kind::Float;
    case GgufType::Bool: return Kind::Bool;
    case GgufType::String: return Kind::String;
    case GgufType::Array: break;
  }
  return Kind::Array;
}

// Bytes of one scalar; for a string, its length prefix (the least it can take).
uint64_t min_encoded_size(GgufType t) {
  switch (t) {
    case GgufType::U8: case GgufType::I8: case GgufType::Bool: return 1;
    case GgufType::U16: case GgufType::I16: return 2;
    case GgufType::U32: case GgufType::I32: case GgufType::F32: return 4;
    case GgufType::U64: case GgufType::I64: case GgufType::F64: case GgufType::String: return 8;
    case GgufType::Array: break;
  }
  return 8 + 4;  // element type + length
}

GgufType checked_type(const Cursor& c, uint32_t raw, const Context& ctx, std::string_view role) {
  if (raw > static_cast<uint32_t>(GgufType::F64)) c.fail(ctx, fmt::format("unknown {} type {}", role, raw));
  return static_cast<GgufType>(raw);
}

uint64_t read_unsigned(Cursor& c, GgufType t, const Context& ctx) {
  switch (t) {
    case GgufType::U8: return c.read<uint8_t>(ctx);
    case GgufType::U16: return c.read<uint16_t>(ctx);
    case GgufType::U32: return c.read<uint32_t>(ctx);
    default: return c.read<uint64_t>(ctx);
  }
}

int64_t read_signed(Cursor& c, GgufType t, const Context& ctx) {
  switch (t) {
    case GgufType::I8: return c.read<int8_t>(ctx);
    case GgufType::I16: return c.read<int16_t>(ctx);
    case GgufType::I32: return c.read<int32_t>(ctx);
    default: return c.read<int64_t>(ctx);
  }
}

double read_float(Cursor& c, GgufType t, const Context& ctx) {
  if (t == GgufType::F32) return c.read<float>(ctx);
  return c.read<double>(ctx);
}

// The spec makes any byte other than 0 and 1 invalid.
bool read_bool(Cursor& c, const Context& ctx) {
  uint8_t b = c.read<uint8_t>(ctx);
  if (b > 1) c.fail(ctx, fmt::format("bool value {} is neither 0 nor 1", b));
  return b == 1;
}

template <typename T, typename ReadOne>
std::vector<T> read_elements(uint64_t n, const Context& key, ReadOne&& read_one) {
  std::vector<T> v;
  v.reserve(n);  // n was checked against the bytes left
  for (uint64_t i = 0; i < n; ++i) v.push_back(read_one(Context{key.what, i}));
  return v;
}

GgufValue read_array(Cursor& c, const Context& ctx) {
  GgufValue v;
  v.type = GgufType::Array;
  v.element = checked_type(c, c.read<uint32_t>(ctx), ctx, "array element");
  if (v.element == GgufType::Array) c.fail(ctx, "arrays of arrays are not supported");
  uint64_t n = c.read<uint64_t>(ctx);
  const uint64_t size = min_encoded_size(v.element);
  if (n > c.remaining() / size)
    c.fail(ctx, fmt::format("array of {} {} elements needs at least {} bytes each, but only {} bytes remain", n,
                            gguf_type_name(v.element), size, c.remaining()));
  const GgufType e = v.element;
  switch (kind_of(e)) {
    case Kind::Unsigned:
      v.value = read_elements<uint64_t>(n, ctx, [&](const Context& x) { return read_unsigned(c, e, x); });
      break;
    case Kind::Signed:
      v.value = read_elements<int64_t>(n, ctx, [&](const Context& x) { return read_signed(c, e, x); });
      break;
    case Kind::Float:
      v.value = read_elements<double>(n, ctx, [&](const Context& x) { return read_float(c, e, x); });
      break;
    case Kind::Bool:
      v.value = read_elements<bool>(n, ctx, [&](const Context& x) { return read_bool(c, x); });
      break;
    case Kind::String:
      v.value = read_elements<std::string>(n, ctx, [&](const Context& x) { return c.read_string(x); });
      break;
    case Kind::Array: break;
  }
  return v;
}

GgufValue read_value(Cursor& c, GgufType t, const Context& ctx) {
  GgufValue v;
  v.type = t;
  v.element = t;
  switch (kind_of(t)) {
    case Kind::Unsigned: v.value = read_unsigned(c, t, ctx); break;
    case Kind::Signed: v.value = read_signed(c, t, ctx); break;
    case Kind::Float: v.value = read_float(c, t, ctx); break;
    case Kind::Bool: v.value = read_bool(c, ctx); break;
    case Kind::String: v.value = c.read_string(ctx); break;
    case Kind::Array: return read_array(c, ctx);
  }
  return v;
}

// Block layouts from ggml (ggml-common.h, ggml.c type_traits), indexed by type number; zero
// block_elements marks a number this reader does not know. Checked against gguf-py's
// GGML_QUANT_SIZES, except Q8_1: gguf-py 0.19 still lists 40 bytes (two f32 scales), while ggml
// stores two f16 scales and static_asserts sizeof(block_q8_1) == 36.
constexpr std::array<GgmlTypeInfo, 31> kGgmlTypes = [] {
  std::array<GgmlTypeInfo, 31> t{};
  t[0] = {"f32", 1, 4};
  t[1] = {"f16", 1, 2};
  t[2] = {"q4_0", 32, 18};
  t[3] = {"q4_1", 32, 20};
  t[6] = {"q5_0", 32, 22};
  t[7] = {"q5_1", 32, 24};
  t[8] = {"q8_0", 32, 34};
  t[9] = {"q8_1", 32, 36};
  t[10] = {"q2_K", 256, 84};
  t[11] = {"q3_K", 256, 110};
  t[12] = {"q4_K", 256, 144};
  t[13] = {"q5_K", 256, 176};
  t[14] = {"q6_K", 256, 210};
  t[15] = {"q8_K", 256, 292};
  t[24] = {"i8", 1, 1};
  t[25] = {"i16", 1, 2};
  t[26] = {"i32", 1, 4};
  t[27] = {"i64", 1, 8};
  t[28] = {"f64", 1, 8};
  t[30] = {"bf16", 1, 2};
  return t;
}();

const GgmlTypeInfo* find_ggml_type(uint32_t raw) {
  if (raw >= kGgmlTypes.size() || kGgmlTypes[raw].block_elements == 0) return nullptr;
  return &kGgmlTypes[raw];
}

// Reads one tensor info up to (not including) the data pointer, which needs the data section.
GgufTensorInfo read_tensor_info(Cursor& c, uint64_t index, uint64_t alignment) {
  GgufTensorInfo t;
  const std::string name_what = fmt::format("tensor info {}", index);
  t.name = c.read_string(Context{name_what});
  const std::string what = fmt::format("tensor '{}'", escape_name(t.name));
  const Context ctx{what};
  uint32_t n_dims = c.read<uint32_t>(ctx);
  if (n_dims > kMaxDims) c.fail(ctx, fmt::format("{} dimensions; at most {} are supported", n_dims, kMaxDims));
  int64_t numel = 1;
  for (uint32_t j = 0; j < n_dims; ++j) {
    const auto d = static_cast<int64_t>(c.read<uint64_t>(ctx));
    if (d <= 0) c.fail(ctx, fmt::format("dimension {} is {}; dimensions must be positive", j, d));
    t.dims.push_back(d);
    if (__builtin_mul_overflow(numel, d, &numel))
      c.fail(ctx, fmt::format("element count of dims [{}] overflows int64", fmt::join(t.dims, ", ")));
  }
  uint32_t raw_type = c.read<uint32_t>(ctx);
  const GgmlTypeInfo* info = find_ggml_type(raw_type);
  if (!info) c.fail(ctx, fmt::format("unknown ggml tensor type {}", raw_type));
  t.type = static_cast<GgmlType>(raw_type);
  const int64_t row = t.dims.empty() ? 1 : t.dims[0];
  if (row % info->block_elements != 0)
    c.fail(ctx, fmt::format("row of {} elements is not a multiple of the {} block size {}", row, info->name,
                            info->block_elements));
  if (__builtin_mul_overflow(static_cast<uint64_t>(numel / info->block_elements),
                             static_cast<uint64_t>(info->block_bytes), &t.bytes))
    c.fail(ctx, fmt::format("byte size of {} {} elements overflows", numel, info->name));
  t.offset = c.read<uint64_t>(ctx);
  if (t.offset % alignment != 0)
    c.fail(ctx, fmt::format("data offset {} is not a multiple of the alignment {}", t.offset, alignment));
  return t;
}

}  // namespace

std::string_view gguf_type_name(GgufType t) {
  static constexpr std::array<std::string_view, 13> kNames = {
      "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"};
  auto i = static_cast<uint32_t>(t);
  return i < kNames.size() ? kNames[i] : "unknown";
}

const GgmlTypeInfo& ggml_type_info(GgmlType t) {
  if (const GgmlTypeInfo* info = find_ggml_type(static_cast<uint32_t>(t))) return *info;
  throw Error(ErrorKind::Unsupported, fmt::format("unknown ggml tensor type {}", static_cast<uint32_t>(t)));
}

int64_t GgufTensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

GgufFile::GgufFile(const fs::path& path) : map_(path) {
  Cursor c(map_, path);
  const uint32_t magic = c.read<uint32_t>(Context{"header"});
  if (magic != kMagic)
    throw Error(ErrorKind::BadFile, fmt::format("{}: not a GGUF file: bad magic {:#010x} (expected \"GGUF\", {:#010x})", path, magic,
                            kMagic));
  version_ = c.read<uint32_t>(Context{"header"});
  if (version_ != 2 && version_ != 3) {
    // A big-endian file stores 2 or 3 in its high bytes.
    if ((version_ & 0xffff) == 0 && version_ != 0)
      throw Error(ErrorKind::Unsupported, fmt::format("{}: unsupported GGUF version field {:#x}: a big-endian file; only little-endian "
                              "GGUF is supported", path, version_));
    throw Error(ErrorKind::Unsupported, fmt::format("{}: unsupported GGUF version {} (versions 2 and 3 are supported)", path, version_));
  }
  const uint64_t n_tensors = c.read<uint64_t>(Context{"header"});
  const uint64_t n_kv = c.read<uint64_t>(Context{"header"});
  auto check_count = [&](uint64_t n, uint64_t min_bytes, std::string_view what) {
    if (n > c.remaining() / min_bytes)
      throw Error(ErrorKind::BadFile, fmt::format("{}: header: {} count {} is impossible: each needs at least {} bytes, and only {} "
                              "bytes remain after offset {}", path, what, n, min_bytes, c.remaining(), c.pos()));
  };
  check_count(n_kv, kMinKvBytes, "metadata");
  check_count(n_tensors, kMinTensorInfoBytes, "tensor");

  for (uint64_t i = 0; i < n_kv; ++i) {
    const std::string key_what = fmt::format("metadata key {}", i);
    std::string key = c.read_string(Context{key_what});
    const std::string what = fmt::format("key '{}'", escape_name(key));
    const Context ctx{what};
    const GgufType type = checked_type(c, c.read<uint32_t>(ctx), ctx, "metadata");
    GgufValue value = read_value(c, type, ctx);
    if (!metadata_.emplace(std::move(key), std::move(value)).second) c.fail(ctx, "duplicate key");
  }

  if (const GgufValue* a = find("general.alignment")) {
    if (a->type != GgufType::U32)
      throw Error(ErrorKind::BadFile, fmt::format("{}: key 'general.alignment': wanted u32, stored {}", path, gguf_type_name(a->type)));
    alignment_ = std::get<uint64_t>(a->value);
    if (alignment_ == 0 || !std::has_single_bit(alignment_))
      throw Error(ErrorKind::BadFile, fmt::format("{}: key 'general.alignment': {} is not a nonzero power of two", path, alignment_));
  }

  check_count(n_tensors, kMinTensorInfoBytes, "tensor");  // again: the metadata used up bytes
  tensors_.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo t = read_tensor_info(c, i, alignment_);
    if (!tensor_index_.emplace(t.name, tensors_.size()).second)
      throw Error(ErrorKind::BadFile, fmt::format("{}: duplicate tensor name '{}'", path, escape_name(t.name)));
    tensors_.push_back(std::move(t));
  }

  // The data section starts at the next multiple of the alignment. A file without tensors may end
  // before it (llama.cpp's vocab-only files do).
  data_offset_ = (c.pos() + alignment_ - 1) / alignment_ * alignment_;
  const uint64_t file_size = map_.size();
  const uint64_t data_size = data_offset_ <= file_size ? file_size - data_offset_ : 0;
  for (GgufTensorInfo& t : tensors_) {
    if (t.offset > data_size || t.bytes > data_size - t.offset)
      throw Error(ErrorKind::BadFile, fmt::format("{}: tensor '{}': {} bytes at offset {} of the data section (which starts at {}) run "
                              "past the end of the file ({} bytes)", path, escape_name(t.name), t.bytes, t.offset, data_offset_,
                              file_size));
    t.data = map_.bytes().data() + data_offset_ + t.offset;
  }

  std::vector<const GgufTensorInfo*> by_offset;
  for (const GgufTensorInfo& t : tensors_) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const GgufTensorInfo* prev = by_offset[i - 1];
    if (by_offset[i]->offset < prev->offset + prev->bytes)
      throw Error(ErrorKind::BadFile, fmt::format("{}: tensors '{}' and '{}' overlap in the data section", path, escape_name(prev->name),
                              escape_name(by_offset[i]->name)));
  }
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

namespace {

std::string stored_type(const GgufValue& v) {
  if (v.type != GgufType::Array) return std::string(gguf_type_name(v.type));
  return fmt::format("array of {}", gguf_type_name(v.element));
}

int64_t to_int64(uint64_t u, const fs::path& path, std::string_view key) {
  if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    throw Error(ErrorKind::BadFile, fmt::format("{}: key '{}': value {} does not fit int64", path, key, u));
  return static_cast<int64_t>(u);
}

}  // namespace

const GgufValue& GgufFile::require(std::string_view key) const {
  if (const GgufValue* v = find(key)) return *v;
  throw Error(ErrorKind::BadFile, fmt::format("{}: missing key '{}'", path(), escape_name(key)));
}

void GgufFile::wrong_type(std::string_view key, std::string_view wanted, const GgufValue& v) const {
  throw Error(ErrorKind::BadFile, fmt::format("{}: key '{}': wanted {}, stored {}", path(), key, wanted, stored_type(v)));
}

const std::string& GgufFile::string(std::string_view key) const {
  const GgufValue& v = require(key);
  if (const auto* s = std::get_if<std::string>(&v.value)) return *s;
  wrong_type(key, "string", v);
}

int64_t GgufFile::integer(std::string_view key) const {
  const GgufValue& v = require(key);
  if (const auto* i = std::get_if<int64_t>(&v.value)) return *i;
  if (const auto* u = std::get_if<uint64_t>(&v.value)) return to_int64(*u, path(), key);
  wrong_type(key, "an integer", v);
}

double GgufFile::number(std::string_view key) const {
  const GgufValue& v = require(key);
  if (const auto* i = std::get_if<int64_t>(&v.value)) return static_cast<double>(*i);
  if (const auto* u = std::get_if<uint64_t>(&v.value)) return static_cast<double>(*u);
  if (const auto* d = std::get_if<double>(&v.value)) return *d;
  wrong_type(key, "a number", v);
}

bool GgufFile::boolean(std::string_view key) const {
  const GgufValue& v = require(key);
  if (const auto* b = std::get_if<bool>(&v.value)) return *b;
  wrong_type(key, "bool", v);
}

const std::vector<std::string>& GgufFile::strings(std::string_view key) const {
  const GgufValue& v = require(key);
  if (const auto* s = std::get_if<std::vector<std::string>>(&v.value)) return *s;
  wrong_type(key, "array of string", v);
}

std::vector<int64_t> GgufFile::integers(std::string_view key) const {
  const GgufValue& v = require(key);
  if (const auto* i = std::get_if<std::vector<int64_t>>(&v.value)) return *i;
  if (const auto* u = std::get_if<std::vector<uint64_t>>(&v.value)) {
    std::vector<int64_t> out;
    out.reserve(u->size());
    for (uint64_t x : *u) out.push_back(to_int64(x, path(), key));
    return out;
  }
  wrong_type(key, "array of integers", v);
}

std::vector<double> GgufFile::numbers(std::string_view key) const {
  const GgufValue& v = require(key);
  if (const auto* d = std::get_if<std::vector<double>>(&v.value)) return *d;
  auto widen = [](const auto& xs) { return std::vector<double>(xs.begin(), xs.end()); };
  if (const auto* i = std::get_if<std::vector<int64_t>>(&v.value)) return widen(*i);
  if (const auto* u = std::get_if<std::vector<uint64_t>>(&v.value)) return widen(*u);
  wrong_type(key, "array of numbers", v);
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const GgufTensorInfo& GgufFile::tensor(std::string_view name) const {
  if (const GgufTensorInfo* t = find_tensor(name)) return *t;
  throw Error(ErrorKind::BadFile, fmt::format("{}: missing tensor '{}'", path(), escape_name(name)));
}

}  // namespace kvinfer
