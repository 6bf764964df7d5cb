#include "kvinfer/dtype.h"

#include <fmt/format.h>

#include "kvinfer/error.h"

namespace kvinfer {

DType parse_dtype(std::string_view name) {
  if (name == "f32" || name == "float32") return DType::F32;
  if (name == "f16" || name == "float16" || name == "half") return DType::F16;
  if (name == "bf16" || name == "bfloat16") return DType::BF16;
  if (name == "int8" || name == "i8") return DType::I8;
  if (name == "fp8" || name == "fp8_e4m3" || name == "e4m3") return DType::FP8;
  throw Error(ErrorKind::InvalidArgument,
              fmt::format("unknown dtype '{}' (expected f32, f16, bf16, int8 or fp8)", name));
}

}  // namespace kvinfer
