#pragma once
// kvinfer::Error: every failure the library reports. The message names the file, tensor or
// value at fault; the kind says what went wrong, so that callers can react without parsing the
// text. The library never exits or aborts on bad input.
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "kvinfer/export.h"

KVINFER_PUBLIC_BEGIN
namespace kvinfer {

enum class ErrorKind {
  InvalidArgument,  // a value the caller passed: a parameter out of range, an id outside the vocabulary
  BadFile,          // a file that is missing, unreadable, truncated or malformed
  Unsupported,      // a well-formed input kvinfer does not handle (an architecture, a dtype, a template construct)
  OutOfMemory,      // the bytes needed do not fit in the memory available (host or device)
  ContextFull,      // the tokens do not fit in the KV cache or the model's context length
  Cancelled,        // a cancel callback asked to stop (load, prefill)
  Device,           // the CUDA device or its libraries failed, or are missing
  Busy,             // the work cannot be taken now (a scheduler's full queue): try again later
};

// "invalid argument", "bad file", "unsupported", "out of memory", "context full", "cancelled", "device", "busy".
std::string_view error_kind_name(ErrorKind kind);

// Asked between units of work: tensors of a load, chunks of a prefill, decode steps. Returning
// true stops the work: a load or a prefill throws Error (kind Cancelled) and leaves nothing
// half-done (the cache as it was); generation returns with StopReason::Cancelled.
using CancelCallback = std::function<bool()>;

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(visible_nul(message)), kind_(kind) {}
  ErrorKind kind() const noexcept { return kind_; }

 private:
  // what() is a C string: a NUL byte in the message (a name read from a file) would end it there.
  static std::string visible_nul(std::string s) {
    for (size_t i = s.find('\0'); i != std::string::npos; i = s.find('\0', i + 4)) s.replace(i, 1, "\\x00");
    return s;
  }
  ErrorKind kind_;
};

}  // namespace kvinfer
KVINFER_PUBLIC_END
