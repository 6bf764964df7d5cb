#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <fmt/std.h>

#include "core/input_file.h"
#include "kvinfer/error.h"

namespace kvinfer {

namespace {

// The current size of the open file, or -1 when fstat fails.
int64_t current_size(int fd) {
  struct stat st {};
  return ::fstat(fd, &st) == 0 ? static_cast<int64_t>(st.st_size) : -1;
}

}  // namespace

MappedFile::MappedFile(const std::filesystem::path& path) : path_(path) {
  check_input_file(path, kMappedModelLimit);  // before open: opening a FIFO waits for a writer
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd_ < 0) throw Error(ErrorKind::BadFile, fmt::format("{}: {}", path, errno_text(errno)));
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd_);
    throw Error(ErrorKind::BadFile, fmt::format("{}: not a regular file", path));
  }
  size_ = static_cast<size_t>(st.st_size);
  mtime_ = st.st_mtim;
  if (size_ > 0) {
    data_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd_, 0);
    if (data_ == MAP_FAILED) {
      int err = errno;
      ::close(fd_);
      data_ = nullptr;
      throw Error(ErrorKind::BadFile, fmt::format("{}: cannot map {} bytes: {}", path, size_, errno_text(err)));
    }
  }
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(data_, size_);
  ::close(fd_);
}

bool MappedFile::contains(const std::byte* p, uint64_t n) const {
  const auto* begin = static_cast<const std::byte*>(data_);
  return data_ && p >= begin && p <= begin + size_ && n <= static_cast<uint64_t>(begin + size_ - p);
}

void MappedFile::read_at(uint64_t offset, uint64_t n, std::byte* out) const {
  if (offset > size_ || n > size_ - offset)  // a caller's bug: the mapping bounds every tensor
    throw Error(ErrorKind::BadFile, fmt::format("{}: cannot read {} bytes at offset {} of a {}-byte file", path_, n, offset, size_));
  // Linux moves at most 0x7ffff000 bytes a call; whole GiB keep each call large.
  constexpr uint64_t kMaxCall = uint64_t{1} << 30;
  while (n > 0) {
    const ssize_t got = ::pread(fd_, out, std::min(n, kMaxCall), static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0)
      throw Error(ErrorKind::BadFile, fmt::format("{}: cannot read {} bytes at offset {}: {}", path_, n, offset, errno_text(errno)));
    if (got == 0)
      throw Error(ErrorKind::BadFile, fmt::format("{}: the file changed while being loaded: it shrank from {} bytes to {} (needed {} "
                              "bytes at offset {})",
                              path_, size_, current_size(fd_), n, offset));
    out += got;
    offset += static_cast<uint64_t>(got);
    n -= static_cast<uint64_t>(got);
  }
}

void MappedFile::read(const std::byte* p, uint64_t n, std::byte* out) const {
  if (!contains(p, n)) throw Error(ErrorKind::BadFile, fmt::format("{}: a read of {} bytes outside the file's mapping", path_, n));
  read_at(static_cast<uint64_t>(p - static_cast<const std::byte*>(data_)), n, out);
}

void MappedFile::check_unchanged() const {
  struct stat st {};
  if (::fstat(fd_, &st) != 0)
    throw Error(ErrorKind::BadFile, fmt::format("{}: cannot stat the open file: {}", path_, errno_text(errno)));
  if (static_cast<uint64_t>(st.st_size) != size_ || st.st_mtim.tv_sec != mtime_.tv_sec ||
      st.st_mtim.tv_nsec != mtime_.tv_nsec)
    throw Error(ErrorKind::BadFile, fmt::format("{}: the file changed while being loaded (it was {} bytes when opened, is {} now, and "
                            "was modified since); load it again once it is complete",
                            path_, size_, st.st_size));
}

}  // namespace kvinfer
