#pragma once
// Element types of weights and KV caches.
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace kvinfer {

enum class DType : uint8_t { F32, F16, BF16 };

constexpr size_t dtype_size(DType t) { return t == DType::F32 ? 4 : 2; }

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
  }
  return "?";
}

// Parses "f32"/"float32", "f16"/"float16"/"half", "bf16"/"bfloat16"; throws kvinfer::Error otherwise.
DType parse_dtype(std::string_view name);

}  // namespace kvinfer
