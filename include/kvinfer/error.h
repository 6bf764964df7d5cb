#pragma once
// kvinfer::Error: every failure the library reports. The message names the file, tensor or
// value at fault; the library never exits or aborts on bad input.
#include <stdexcept>
#include <string>

#include "kvinfer/export.h"

KVINFER_PUBLIC_BEGIN
namespace kvinfer {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace kvinfer
KVINFER_PUBLIC_END
