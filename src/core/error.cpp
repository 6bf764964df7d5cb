#include "kvinfer/error.h"

namespace kvinfer {

std::string_view error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::InvalidArgument: return "invalid argument";
    case ErrorKind::BadFile: return "bad file";
    case ErrorKind::Unsupported: return "unsupported";
    case ErrorKind::OutOfMemory: return "out of memory";
    case ErrorKind::ContextFull: return "context full";
    case ErrorKind::Cancelled: return "cancelled";
    case ErrorKind::Device: return "device";
    case ErrorKind::Busy: return "busy";
  }
  return "?";
}

}  // namespace kvinfer
