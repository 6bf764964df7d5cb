#pragma once
// A read-only memory map of a whole file. Weights are used in place from the mapping.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>

namespace kvinfer {

class MappedFile {
 public:
  explicit MappedFile(const std::filesystem::path& path);  // throws kvinfer::Error naming the file
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const std::byte> bytes() const { return {static_cast<const std::byte*>(data_), size_}; }
  size_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace kvinfer
