#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <fmt/std.h>

#include "core/input_file.h"
#include "kvinfer/error.h"

namespace kvinfer {

MappedFile::MappedFile(const std::filesystem::path& path) : path_(path) {
  check_input_file(path, kMappedModelLimit);  // before open: opening a FIFO waits for a writer
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw Error(fmt::format("{}: {}", path, errno_text(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(fmt::format("{}: not a regular file", path));
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    data_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (data_ == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      data_ = nullptr;
      throw Error(fmt::format("{}: cannot map {} bytes: {}", path, size_, std::strerror(err)));
    }
  }
  ::close(fd);
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(data_, size_);
}

}  // namespace kvinfer
