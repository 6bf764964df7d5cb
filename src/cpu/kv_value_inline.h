#pragma once
// One value of a K or V row in the cache's dtype, widened, for the attention kernel files
// (attention_avx2.cpp, attention_avx512.cpp). Include it only after their KVINFER_AVX2_BEGIN or
// KVINFER_AVX512_BEGIN, like avx2_inline.h, with kvinfer/dtype.h and <immintrin.h> included
// before the BEGIN: it has internal linkage, so each file gets its own copy.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "core/kv_quant.h"
#include "kvinfer/dtype.h"

namespace kvinfer::cpu {
namespace {

// Value i of a row stored as T (f32, f16, bf16, or an 8-bit type's code before its row's scale),
// widened as the kernels' vector loads widen it (F16C quiets a signalling NaN).
template <DType T>
inline float kv_value(const std::byte* p, int64_t i) {
  if constexpr (T == DType::F32) {
    return reinterpret_cast<const float*>(p)[i];
  } else if constexpr (is_scaled_kv(T)) {
    return core::kv_code_value(static_cast<uint8_t>(p[i]), T == DType::FP8);
  } else {
    const uint16_t h = reinterpret_cast<const uint16_t*>(p)[i];
    if constexpr (T == DType::BF16)
      return _mm_cvtss_f32(_mm_castsi128_ps(_mm_cvtsi32_si128(static_cast<int>(h) << 16)));
    return _cvtsh_ss(h);
  }
}

// 8 codes of an 8-bit row as the values they stand for before the row's scale, exactly: int8
// sign-extended; E4M3 placed in the bits of an f16 (sign, then exponent and mantissa shifted
// into place), widened by F16C and times 2^8 (the exponent biases differ by 8); the NaN codes
// 0x7f and 0xff become NaN, as core::e4m3_to_f32 makes them.
inline __m256 widen8_i8(const std::byte* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
inline __m256 widen8_e4m3(const std::byte* p) {
  const __m128i c = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));  // 8 × u16
  const __m128i mag = _mm_and_si128(c, _mm_set1_epi16(0x7f));
  const __m128i sign = _mm_slli_epi16(_mm_and_si128(c, _mm_set1_epi16(0x80)), 8);
  const __m128i h = _mm_or_si128(_mm_slli_epi16(mag, 7), sign);
  __m256 f = _mm256_mul_ps(_mm256_cvtph_ps(h), _mm256_set1_ps(256.0f));
  const __m128i nan = _mm_cmpeq_epi16(mag, _mm_set1_epi16(0x7f));
  if (!_mm_testz_si128(nan, nan)) {
    const __m256i bits = _mm256_or_si256(_mm256_set1_epi32(0x7fc00000), _mm256_slli_epi32(_mm256_cvtepu16_epi32(sign), 16));
    f = _mm256_blendv_ps(f, _mm256_castsi256_ps(bits), _mm256_castsi256_ps(_mm256_cvtepi16_epi32(nan)));
  }
  return f;
}

}  // namespace
}  // namespace kvinfer::cpu
