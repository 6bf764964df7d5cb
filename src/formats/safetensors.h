#pragma once
// The safetensors format: an 8-byte little-endian header length N, N bytes of JSON naming each
// tensor's dtype, shape and [begin, end) byte offsets into the data section that follows.
// Every offset, size and overlap is checked against the file before any tensor is used.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "kvinfer/dtype.h"

namespace kvinfer {

struct TensorView {
  std::string name;
  std::string dtype;  // as the file spells it: "F32", "BF16", "I32", ...
  size_t element_size = 0;
  std::vector<int64_t> shape;
  const std::byte* data = nullptr;  // into the mapping, aligned to element_size (the header is read with pread)
  uint64_t bytes = 0;
  const std::filesystem::path* file = nullptr;

  int64_t numel() const;
  // The floating-point dtype of this tensor; throws naming file and tensor for any other.
  DType float_dtype() const;
};

class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::filesystem::path& path);  // throws kvinfer::Error naming the file

  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  const TensorView* find(const std::string& name) const;
  const TensorView& get(const std::string& name) const;  // throws naming the missing tensor
  const std::filesystem::path& path() const { return map_.path(); }
  std::span<const std::byte> mapped() const { return map_.bytes(); }  // the whole file, mapped
  const MappedFile& file() const { return map_; }

 private:
  MappedFile map_;
  std::map<std::string, TensorView> tensors_;
};

}  // namespace kvinfer
