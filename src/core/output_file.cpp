#include "core/output_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include <fmt/format.h>
#include <fmt/std.h>

#include "core/input_file.h"
#include "kvinfer/error.h"

namespace kvinfer {

namespace {

constexpr std::string_view kTempInfix = ".tmp-";
constexpr size_t kTempRandom = 6;  // mkstemp's XXXXXX

[[noreturn]] void fail(const std::filesystem::path& target, std::string_view what, int err) {
  throw Error(ErrorKind::BadFile, fmt::format("{}: {}: {}", target, what, errno_text(err)));
}

// ---- the temporaries a signal removes ---------------------------------------------------------
// A fixed table, so that the handler only reads memory and calls unlink (async-signal-safe).
// state: 0 free, 1 being filled, 2 holds a live temporary's path.
struct Slot {
  std::atomic<int> state{0};
  char path[4096] = {};
};
constexpr int kSlots = 64;
Slot g_slots[kSlots];

int register_temporary(const std::string& path) {
  if (path.size() >= sizeof(Slot::path)) return -1;
  for (int i = 0; i < kSlots; ++i) {
    int expected = 0;
    if (!g_slots[i].state.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) continue;
    std::memcpy(g_slots[i].path, path.c_str(), path.size() + 1);
    g_slots[i].state.store(2, std::memory_order_release);
    return i;
  }
  return -1;  // more than kSlots files at once: only the cleanup on a signal is lost
}

void unregister_temporary(int slot) {
  if (slot >= 0) g_slots[slot].state.store(0, std::memory_order_release);
}

extern "C" void remove_temporaries_and_die(int sig) {
  for (Slot& s : g_slots)
    if (s.state.load(std::memory_order_acquire) == 2) ::unlink(s.path);
  // SA_RESETHAND restored the default action; the signal, blocked until we return, then ends us.
  ::raise(sig);
}

// Removes "<name>.tmp-XXXXXX" files beside `final` that nobody holds locked: left by a writer
// that died. Best effort: a file that cannot be looked at is left.
void remove_stale_temporaries(const std::filesystem::path& final) {
  const std::filesystem::path dir = final.has_parent_path() ? final.parent_path() : ".";
  const std::string prefix = final.filename().string() + std::string(kTempInfix);
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  while (const dirent* e = ::readdir(d)) {
    const std::string_view name = e->d_name;
    if (name.size() != prefix.size() + kTempRandom || !name.starts_with(prefix)) continue;
    const std::filesystem::path p = dir / std::string(name);
    const int fd = ::open(p.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat held {}, named {};
    if (::fstat(fd, &held) == 0 && S_ISREG(held.st_mode) && ::flock(fd, LOCK_EX | LOCK_NB) == 0 &&
        ::lstat(p.c_str(), &named) == 0 && named.st_ino == held.st_ino && named.st_dev == held.st_dev)
      ::unlink(p.c_str());
    ::close(fd);
  }
  ::closedir(d);
}

}  // namespace

std::filesystem::path output_path(const std::filesystem::path& target) {
  struct stat st {};
  if (::lstat(target.c_str(), &st) != 0) {
    if (errno == ENOENT) return target;  // a new file
    fail(target, "cannot write it", errno);
  }
  std::filesystem::path final = target;
  if (S_ISLNK(st.st_mode)) {
    if (::stat(target.c_str(), &st) != 0)
      throw Error(ErrorKind::BadFile, fmt::format("{}: is a symbolic link to a path that cannot be written ({}): "
                                                  "kvinfer writes only regular files",
                                                  target, errno_text(errno)));
    std::error_code ec;
    final = std::filesystem::canonical(target, ec);
    if (ec) fail(target, "cannot resolve the symbolic link", ec.value());
  }
  if (!S_ISREG(st.st_mode))
    throw Error(ErrorKind::BadFile, fmt::format("{}: is {}; kvinfer writes only regular files (or new paths), and "
                                                "will not replace it",
                                                target, file_type_text(static_cast<unsigned>(st.st_mode))));
  return final;
}

OutputFile::OutputFile(const std::filesystem::path& target) : target_(target), final_(output_path(target)) {
  std::string pattern = final_.string() + std::string(kTempInfix) + std::string(kTempRandom, 'X');
  // The handler's signals wait while the file is made and registered: one in between would leave it.
  sigset_t handled, before;
  sigemptyset(&handled);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&handled, sig);
  ::pthread_sigmask(SIG_BLOCK, &handled, &before);
  fd_ = ::mkostemp(pattern.data(), O_CLOEXEC);
  const int made = errno;
  if (fd_ >= 0) slot_ = register_temporary(pattern);
  ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
  if (fd_ < 0) fail(target_, "cannot create a temporary file beside it", made);
  temp_ = pattern;
  // Held until the file is closed: a later writer removes only temporaries nobody holds.
  ::flock(fd_, LOCK_EX | LOCK_NB);
  // mkstemp makes the file 0600; a written file is as readable as any other the user makes.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  if (::fchmod(fd_, 0666 & ~mask) != 0) {
    const int err = errno;
    ::close(std::exchange(fd_, -1));
    ::unlink(temp_.c_str());
    unregister_temporary(slot_);
    fail(temp_, "cannot set its permissions", err);
  }
}

OutputFile::~OutputFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temp_.c_str());
  unregister_temporary(slot_);
}

void OutputFile::write_at(uint64_t offset, const void* p, size_t n) {
  if (fd_ < 0) throw Error(ErrorKind::InvalidArgument, fmt::format("{}: written after it was committed", target_));
  const auto* b = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t w = ::pwrite(fd_, b, std::min<size_t>(n, size_t{1} << 30), static_cast<off_t>(offset));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) fail(target_, "cannot write", w == 0 ? ENOSPC : errno);
    b += w;
    n -= static_cast<size_t>(w);
    offset += static_cast<uint64_t>(w);
    end_ = std::max(end_, offset);
  }
}

void OutputFile::write(const void* p, size_t n) { write_at(end_, p, n); }

void OutputFile::commit() {
  if (::fsync(fd_) != 0) fail(target_, "cannot write", errno);
  if (::close(std::exchange(fd_, -1)) != 0) fail(target_, "cannot write", errno);
  // Checked again: the target may have been replaced while the file was written.
  if (output_path(target_) != final_)
    throw Error(ErrorKind::BadFile, fmt::format("{}: changed while it was written; not replaced", target_));
  if (::rename(temp_.c_str(), final_.c_str()) != 0) fail(target_, fmt::format("cannot rename {} over it", temp_), errno);
  committed_ = true;
  unregister_temporary(std::exchange(slot_, -1));
  remove_stale_temporaries(final_);
}

void write_output_file(const std::filesystem::path& target, std::string_view bytes) {
  OutputFile f(target);
  f.write(bytes.data(), bytes.size());
  f.commit();
}

void remove_temporaries_on_signal() {
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler != SIG_DFL || (old.sa_flags & SA_SIGINFO)) continue;
    struct sigaction sa {};
    sa.sa_handler = remove_temporaries_and_die;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    ::sigaction(sig, &sa, nullptr);
  }
}

}  // namespace kvinfer
