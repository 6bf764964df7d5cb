#pragma once
// The kind of a file's error from what is wrong with it: a well-formed file asking for what
// kvinfer does not do ("... is not supported", "unsupported ...") is Unsupported; anything else
// wrong with it is BadFile.
#include <string_view>

#include "kvinfer/error.h"

namespace kvinfer {

inline ErrorKind file_error_kind(std::string_view why) {
  return why.find("unsupported") != std::string_view::npos || why.find("not supported") != std::string_view::npos
             ? ErrorKind::Unsupported
             : ErrorKind::BadFile;
}

}  // namespace kvinfer
