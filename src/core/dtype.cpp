#include "kvinfer/dtype.h"

#include <fmt/format.h>

#include "kvinfer/error.h"

namespace kvinfer {

DType parse_dtype(std::string_view name) {
  if (name == "f32" || name == "float32") return DType::F32;
  if (name == "f16" || name == "float16" || name == "half") return DType::F16;
  if (name == "bf16" || name == "bfloat16") return DType::BF16;
  throw Error(ErrorKind::InvalidArgument, fmt::format("unknown dtype '{}' (expected f32, f16 or bf16)", name));
}

}  // namespace kvinfer
