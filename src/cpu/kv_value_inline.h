#pragma once
// One value of a K or V row in the cache's dtype, widened, for the attention kernel files
// (attention_avx2.cpp, attention_avx512.cpp). Include it only after their KVINFER_AVX2_BEGIN or
// KVINFER_AVX512_BEGIN, like avx2_inline.h, with kvinfer/dtype.h and <immintrin.h> included
// before the BEGIN: it has internal linkage, so each file gets its own copy.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kvinfer/dtype.h"

namespace kvinfer::cpu {
namespace {

// Value i of a row stored as T (f32, f16 or bf16), widened as the kernels' vector loads widen it
// (F16C quiets a signalling NaN).
template <DType T>
inline float kv_value(const std::byte* p, int64_t i) {
  if constexpr (T == DType::F32) {
    return reinterpret_cast<const float*>(p)[i];
  } else {
    const uint16_t h = reinterpret_cast<const uint16_t*>(p)[i];
    if constexpr (T == DType::BF16)
      return _mm_cvtss_f32(_mm_castsi128_ps(_mm_cvtsi32_si128(static_cast<int>(h) << 16)));
    return _cvtsh_ss(h);
  }
}

}  // namespace
}  // namespace kvinfer::cpu
