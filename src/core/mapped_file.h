#pragma once
// A read-only memory map of a whole file, and its open descriptor. LoadOptions::weights_in_place
// uses weights in place from the mapping; every other read of the file goes through read_at()
// (pread), which turns a file that shrank under the process into an Error where a read of the
// mapping beyond the file's new end would be SIGBUS.
#include <cstddef>
#include <cstdint>
#include <ctime>
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

  // Whether [p, p + n) lies inside the mapping.
  bool contains(const std::byte* p, uint64_t n) const;
  // Bytes [offset, offset + n) of the file into `out`, read with pread (large calls, short reads
  // and EINTR retried). Throws naming the file when it ends before them: it shrank since mapped.
  void read_at(uint64_t offset, uint64_t n, std::byte* out) const;
  // The file's bytes behind [p, p + n) of the mapping (contains(p, n)), read as above.
  void read(const std::byte* p, uint64_t n, std::byte* out) const;
  // Throws naming the file when its size or modification time is not what it was when mapped:
  // bytes read before and after a rewrite would mix two files. A rewrite within one tick of the
  // file system's clock keeps the time, so this is a best effort, as any such check is.
  void check_unchanged() const;

 private:
  std::filesystem::path path_;
  int fd_ = -1;  // open for the mapping's life: the same inode whatever is renamed over the path
  void* data_ = nullptr;
  size_t size_ = 0;
  timespec mtime_{};  // when mapped
};

}  // namespace kvinfer
