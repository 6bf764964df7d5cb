#pragma once
// The GGUF format (v2 and v3): a little-endian header (magic "GGUF", version, tensor count,
// metadata count), typed key/value metadata, tensor infos (name, dims in ggml order, type,
// offset), then the tensor data section at the next multiple of `general.alignment` (default 32).
// Every count, length and offset the file states is checked against the file size before
// anything of that size is allocated or read; errors name the file and the key or tensor.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/mapped_file.h"

namespace kvinfer {

// Metadata value types, numbered as in the file.
enum class GgufType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, Bool = 7,
  String = 8, Array = 9, U64 = 10, I64 = 11, F64 = 12,
};
std::string_view gguf_type_name(GgufType t);

// One metadata value. Scalars are widened (integers to int64/uint64, floats to double); arrays
// keep one vector of the widened element type. Arrays of arrays are rejected as unsupported.
struct GgufValue {
  GgufType type = GgufType::U8;       // the stored type
  GgufType element = GgufType::U8;    // for arrays: the element type
  std::variant<std::monostate, int64_t, uint64_t, double, bool, std::string,
               std::vector<int64_t>, std::vector<uint64_t>, std::vector<double>,
               std::vector<bool>, std::vector<std::string>>
      value;
};

// ggml tensor types, numbered as in ggml.h. Only the ones with a known block layout are listed;
// any other number in a file is an error naming the tensor.
enum class GgmlType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, BF16 = 30,
};
struct GgmlTypeInfo {
  std::string_view name;
  int64_t block_elements;  // elements per block (1 for plain types)
  int64_t block_bytes;     // bytes per block
};
// Throws kvinfer::Error for an unknown type number.
const GgmlTypeInfo& ggml_type_info(GgmlType t);

struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> dims;  // ggml order: dims[0] is the contiguous (row) dimension
  GgmlType type = GgmlType::F32;
  uint64_t offset = 0;        // relative to the data section
  uint64_t bytes = 0;
  const std::byte* data = nullptr;  // into the mapping (the header itself is read with pread)
  int64_t numel() const;
};

class GgufFile {
 public:
  explicit GgufFile(const std::filesystem::path& path);  // throws kvinfer::Error naming the file

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // file offset of the data section
  const std::filesystem::path& path() const { return map_.path(); }
  std::span<const std::byte> mapped() const { return map_.bytes(); }  // the whole file, mapped
  const MappedFile& file() const { return map_; }

  const std::map<std::string, GgufValue, std::less<>>& metadata() const { return metadata_; }
  const GgufValue* find(std::string_view key) const;  // nullptr when absent
  bool has(std::string_view key) const { return find(key) != nullptr; }

  // Typed getters: throw kvinfer::Error naming the file and key when the key is absent or has
  // another type. integer() accepts any integer type and checks the value fits int64.
  const std::string& string(std::string_view key) const;
  int64_t integer(std::string_view key) const;
  double number(std::string_view key) const;  // any integer or float type
  bool boolean(std::string_view key) const;
  const std::vector<std::string>& strings(std::string_view key) const;
  std::vector<int64_t> integers(std::string_view key) const;  // any integer element type
  std::vector<double> numbers(std::string_view key) const;    // any integer or float element type

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(std::string_view name) const;
  const GgufTensorInfo& tensor(std::string_view name) const;  // throws naming the missing tensor

 private:
  const GgufValue& require(std::string_view key) const;  // throws naming the missing key
  [[noreturn]] void wrong_type(std::string_view key, std::string_view wanted, const GgufValue& v) const;

  MappedFile map_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::map<std::string, GgufValue, std::less<>> metadata_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

}  // namespace kvinfer
