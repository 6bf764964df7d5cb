#pragma once
// Writing the files kvinfer makes (KV state files, saved logits, benchmark reports), the one way:
// whole, through a temporary file beside the target, synced and renamed over it, so that a run
// that fails or is killed leaves an existing file as it was. Only a regular file (or a new path) is
// ever replaced: a target that is a device, FIFO, socket or directory is refused before anything
// is written, since a rename would put a regular file in its place (docs/reliability.md).
//
// The temporary file is "<target>.tmp-XXXXXX", locked (flock) while it is written. SIGINT, SIGTERM
// and SIGHUP remove the ones still open when the tools' handler is installed
// (remove_temporaries_on_signal); a later successful write to the same target removes those left
// by a process that died without that chance (SIGKILL, a crash): the ones nobody holds locked.
#include <cstdint>
#include <filesystem>
#include <string_view>

namespace kvinfer {

// The path a write to `target` replaces: `target` itself, or the regular file a symbolic link
// leads to. Throws Error(BadFile) naming the path when it exists and is not a regular file, or is a
// link that leads nowhere or to something else.
std::filesystem::path output_path(const std::filesystem::path& target);

class OutputFile {
 public:
  // Checks the target (output_path) and creates the temporary file, readable as umask allows.
  explicit OutputFile(const std::filesystem::path& target);
  ~OutputFile();  // removes the temporary file unless commit() succeeded
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  // Every write is checked: a full disk is Error(BadFile) naming the target.
  void write(const void* p, size_t n);  // at the end of what was written
  void write_at(uint64_t offset, const void* p, size_t n);
  // fsync, close, check the target again, rename over it, remove stale temporaries of the target.
  void commit();

  const std::filesystem::path& target() const { return target_; }

 private:
  std::filesystem::path target_;  // as the caller named it, for messages
  std::filesystem::path final_;   // what is replaced (output_path)
  std::filesystem::path temp_;
  int fd_ = -1;
  int slot_ = -1;  // the signal handler's registration
  uint64_t end_ = 0;
  bool committed_ = false;
};

// Writes `bytes` to `target` as a whole (OutputFile).
void write_output_file(const std::filesystem::path& target, std::string_view bytes);

// Installs handlers for SIGINT, SIGTERM and SIGHUP that remove the open OutputFiles' temporary
// files, then end the process as the signal would have. For command-line tools; a program with
// handlers of its own leaves them in place (only SIG_DFL dispositions are replaced).
void remove_temporaries_on_signal();

}  // namespace kvinfer
