#include "core/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <fmt/std.h>

#include "kvinfer/error.h"
#include "kvinfer/kv_plan.h"

namespace kvinfer {

namespace {

// size: the file's, or empty for a stream cut off at the limit.
std::string too_large(std::string_view name, std::string_view size, const InputLimit& limit) {
  if (size.empty())
    return fmt::format("{}: longer than the {} {} may be (docs/reliability.md)", name, format_bytes(limit.bytes),
                       limit.kind);
  return fmt::format("{}: {}, more than the {} {} may be (docs/reliability.md)", name, size,
                     format_bytes(limit.bytes), limit.kind);
}

// stat() of a path, with the errors worded as the tools word them.
struct stat stat_or_throw(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw Error(ErrorKind::BadFile, fmt::format("{}: {}", path, errno_text(errno)));
  return st;
}

void check_regular(const std::filesystem::path& path, const struct stat& st, const InputLimit& limit) {
  if (!S_ISREG(st.st_mode))
    throw Error(ErrorKind::BadFile, fmt::format("{}: not a regular file ({}); {} must be one", path, file_type_text(st.st_mode),
                            limit.kind));
  if (static_cast<uint64_t>(st.st_size) > limit.bytes)
    throw Error(ErrorKind::BadFile, too_large(fmt::format("{}", path), format_bytes(static_cast<uint64_t>(st.st_size)), limit));
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

std::string errno_text(int err) {
  switch (err) {
    case ENOENT: return "no such file or directory";
    case EACCES: return "permission denied";
    case ENOTDIR: return "a path component is not a directory";
    case EISDIR: return "is a directory";
    case ELOOP: return "too many levels of symbolic links";
    case ENAMETOOLONG: return "file name too long";
    default: {
      std::string s = std::strerror(err);
      if (!s.empty()) s[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(s[0])));
      return s;
    }
  }
}

std::string file_type_text(unsigned mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a file";
}

std::string read_input_fd(int fd, std::string_view name, const InputLimit& limit) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw Error(ErrorKind::BadFile, fmt::format("{}: {}", name, errno_text(errno)));
  if (S_ISDIR(st.st_mode)) throw Error(ErrorKind::BadFile, fmt::format("{}: is a directory", name));
  if (S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) > limit.bytes)
    throw Error(ErrorKind::BadFile, too_large(name, format_bytes(static_cast<uint64_t>(st.st_size)), limit));
  std::string out;
  out.reserve(S_ISREG(st.st_mode) ? static_cast<size_t>(st.st_size) : 0);
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error(ErrorKind::BadFile, fmt::format("{}: cannot read: {}", name, errno_text(errno)));
    }
    if (n == 0) break;
    // One byte past the limit is enough to know: a device or a growing file is never read further.
    if (out.size() + static_cast<size_t>(n) > limit.bytes)
      throw Error(ErrorKind::BadFile, too_large(name, "", limit));
    out.append(buffer, static_cast<size_t>(n));
  }
  return out;
}

std::string read_input_file(const std::filesystem::path& path, const InputLimit& limit) {
  // Checked before opening: opening a FIFO would wait for a writer.
  check_regular(path, stat_or_throw(path), limit);
  const Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) throw Error(ErrorKind::BadFile, fmt::format("{}: {}", path, errno_text(errno)));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw Error(ErrorKind::BadFile, fmt::format("{}: {}", path, errno_text(errno)));
  check_regular(path, st, limit);  // the path may have been swapped since the stat
  return read_input_fd(fd.get(), fmt::format("{}", path), limit);
}

void check_input_file(const std::filesystem::path& path, const InputLimit& limit) {
  check_regular(path, stat_or_throw(path), limit);
}

namespace {

// The first `bytes` bytes of a regular file (fewer when it is shorter).
std::string read_head(const std::filesystem::path& path, size_t bytes, const InputLimit& limit) {
  check_input_file(path, limit);
  const Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) throw Error(ErrorKind::BadFile, fmt::format("{}: {}", path, errno_text(errno)));
  std::string head(bytes, '\0');
  size_t got = 0;
  while (got < head.size()) {
    const ssize_t n = ::read(fd.get(), head.data() + got, head.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error(ErrorKind::BadFile, fmt::format("{}: cannot read: {}", path, errno_text(errno)));
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  head.resize(got);
  return head;
}

}  // namespace

ModelFileKind model_file_kind(const std::filesystem::path& path) {
  // Enough to see past a BOM and some leading whitespace; a config.json indented further is rare
  // and still starts with '{'.
  const std::string head = read_head(path, 4096, kMappedModelLimit);
  if (head.starts_with("GGUF")) return ModelFileKind::Gguf;
  std::string_view rest = head;
  if (rest.starts_with("\xEF\xBB\xBF")) rest.remove_prefix(3);
  const size_t first = rest.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && rest[first] == '{') return ModelFileKind::ConfigJson;
  throw Error(ErrorKind::BadFile,
              fmt::format("{}: not a GGUF file (it does not start with \"GGUF\"{}) and not a config.json (no '{{' first)",
                          path, head.empty() ? ": it is empty" : ""));
}

bool input_exists(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) return true;
  if (errno == ENOENT) return false;
  throw Error(ErrorKind::BadFile, fmt::format("{}: {}", path, errno_text(errno)));
}

ModelPathKind model_path_kind(const std::filesystem::path& path) {
  if (path.empty()) throw Error(ErrorKind::InvalidArgument, "the model path is empty");
  const struct stat st = stat_or_throw(path);
  if (S_ISDIR(st.st_mode)) return ModelPathKind::Directory;
  if (S_ISREG(st.st_mode)) return ModelPathKind::File;
  throw Error(ErrorKind::BadFile, fmt::format("{}: not a model ({}): give a GGUF file or a model directory", path,
                          file_type_text(st.st_mode)));
}

}  // namespace kvinfer
