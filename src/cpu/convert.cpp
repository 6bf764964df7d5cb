#include "core/convert.h"
#include "cpu/cpu_ops.h"

namespace kvinfer::cpu {

void to_f32(DType t, const std::byte* src, float* dst, int64_t n) {
  switch (t) {
    case DType::F32: {
      const auto* s = reinterpret_cast<const float*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = s[i];
      return;
    }
    case DType::F16: {
      const auto* s = reinterpret_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = core::f16_to_f32(s[i]);
      return;
    }
    case DType::BF16: {
      const auto* s = reinterpret_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = core::bf16_to_f32(s[i]);
      return;
    }
  }
}

void from_f32(DType t, const float* src, std::byte* dst, int64_t n) {
  switch (t) {
    case DType::F32: {
      auto* d = reinterpret_cast<float*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = src[i];
      return;
    }
    case DType::F16: {
      auto* d = reinterpret_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = core::f32_to_f16(src[i]);
      return;
    }
    case DType::BF16: {
      auto* d = reinterpret_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = core::f32_to_bf16(src[i]);
      return;
    }
  }
}

}  // namespace kvinfer::cpu
