// AVX-512 widening kernels for cpu::to_f32 (convert_avx512.h), bit-identical to the scalar code
// (src/cpu/convert.cpp, kernels/core/convert.h, kernels/core/quant.h). Compiled for AVX-512
// function by function (avx512_target.h), like linear_avx512.cpp.
//
// 16 values a register, where the AVX2 kernels take 8: a block's 16 code bytes become 16 dwords
// in one instruction (vpmovzxbd / vpmovsxbd), and Q5's fifth bits are a 16-bit lane mask. Each
// value goes through the same f32 operations, in the same order, as the scalar code: (f32)q × d,
// then a separate + m for Q4_1 and Q5_1 (no FMA: the library builds with -ffp-contract=off).
// Scales are widened with F16C, which quiets a signalling-NaN scale; every scale then goes
// through an f32 multiply, which quiets the scalar code's NaN the same way.
#include "cpu/convert_avx512.h"

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/quant.h"
#include "cpu/convert_avx2.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "cpu/avx512_target.h"

KVINFER_AVX512_BEGIN

#include "cpu/avx2_inline.h"

namespace kvinfer::cpu {

namespace {

using avx2::half_at;

// GCC 12's AVX-512 conversion intrinsics start from an undefined register they then warn about.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// 16 f16 values at s into out: vcvtph2ps is exact IEEE widening but quiets a signalling NaN (sets
// bit 22); core::f16_to_f32 keeps the payload as it is, so that bit is cleared again where the half
// was an sNaN (exponent all ones, mantissa non-zero, quiet bit 9 clear).
inline void f16x16(const uint16_t* s, float* out) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s));
  __m512 f = _mm512_cvtph_ps(h);
  const __m256i a = _mm256_and_si256(h, _mm256_set1_epi16(0x7fff));
  const __m256i above_inf = _mm256_cmpgt_epi16(a, _mm256_set1_epi16(0x7c00));
  const __m256i below_quiet = _mm256_cmpgt_epi16(_mm256_set1_epi16(0x7e00), a);
  const __m256i snan = _mm256_and_si256(above_inf, below_quiet);
  if (!_mm256_testz_si256(snan, snan)) {
    const __m512i clear = _mm512_and_si512(_mm512_cvtepi16_epi32(snan), _mm512_set1_epi32(0x00400000));
    f = _mm512_castsi512_ps(_mm512_andnot_si512(clear, _mm512_castps_si512(f)));
  }
  _mm512_storeu_ps(out, f);
}

void f16_row(const std::byte* src, float* dst, int64_t n) {
  const auto* s = reinterpret_cast<const uint16_t*>(src);
  const int64_t body = n / 16 * 16;
  for (int64_t i = 0; i < body; i += 16) f16x16(s + i, dst + i);
  if (body < n) to_f32_avx2(DType::F16, src + 2 * body, dst + body, n - body);  // the last n mod 16
}

// 16 codes (dwords) times d, plus m when the format has a minimum, into out.
template <bool HasMin>
inline void emit16(__m512i q, __m512 d, __m512 m, float* out) {
  const __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(q), d);
  _mm512_storeu_ps(out, HasMin ? _mm512_add_ps(v, m) : v);
}

void q8_0_row(const std::byte* src, float* dst, int64_t blocks) {
  using B = core::BlockQ8_0;
  for (int64_t b = 0; b < blocks; ++b, src += sizeof(B), dst += 32) {
    const __m512 d = _mm512_set1_ps(half_at(src + offsetof(B, d)));
    const std::byte* qs = src + offsetof(B, qs);
    emit16<false>(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs))), d, d, dst);
    emit16<false>(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs + 16))), d, d, dst + 16);
  }
}

// Q4_0, Q4_1, Q5_0, Q5_1 (core::dequantize_small): values 0..15 from the low nibbles of qs[0..15],
// 16..31 from the high ones; Q5 adds 16 where bit j of qh is set; then less the format's offset.
template <DType T>
void small_row(const std::byte* src, float* dst, int64_t blocks) {
  using B = typename core::BlockOf<T>::type;
  constexpr bool kHasMin = T == DType::Q4_1 || T == DType::Q5_1;
  constexpr bool kFive = T == DType::Q5_0 || T == DType::Q5_1;
  constexpr int kOffset = kHasMin ? 0 : (kFive ? 16 : 8);
  const __m128i low4 = _mm_set1_epi8(0x0F);
  for (int64_t b = 0; b < blocks; ++b, src += sizeof(B), dst += 32) {
    const __m512 d = _mm512_set1_ps(half_at(src + offsetof(B, d)));
    __m512 m = _mm512_setzero_ps();
    if constexpr (kHasMin) m = _mm512_set1_ps(half_at(src + offsetof(B, m)));
    const __m128i qs = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + offsetof(B, qs)));
    __m512i q[2] = {_mm512_cvtepu8_epi32(_mm_and_si128(qs, low4)),
                    _mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(qs, 4), low4))};
    if constexpr (kFive) {
      uint32_t qh;
      std::memcpy(&qh, src + offsetof(B, qh), sizeof qh);  // little endian, as the scalar code reads it
      const __m512i sixteen = _mm512_set1_epi32(16);
      q[0] = _mm512_mask_or_epi32(q[0], static_cast<__mmask16>(qh & 0xFFFFu), q[0], sixteen);
      q[1] = _mm512_mask_or_epi32(q[1], static_cast<__mmask16>(qh >> 16), q[1], sixteen);
    }
    for (int h = 0; h < 2; ++h) {
      if constexpr (kOffset != 0) q[h] = _mm512_sub_epi32(q[h], _mm512_set1_epi32(kOffset));
      emit16<kHasMin>(q[h], d, m, dst + 16 * h);
    }
  }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace

bool to_f32_avx512(DType t, const std::byte* src, float* dst, int64_t n) {
  const int64_t blocks = n / dtype_block(t).elements;
  switch (t) {
    case DType::F16: f16_row(src, dst, n); return true;
    case DType::Q8_0: q8_0_row(src, dst, blocks); return true;
    case DType::Q4_0: small_row<DType::Q4_0>(src, dst, blocks); return true;
    case DType::Q4_1: small_row<DType::Q4_1>(src, dst, blocks); return true;
    case DType::Q5_0: small_row<DType::Q5_0>(src, dst, blocks); return true;
    case DType::Q5_1: small_row<DType::Q5_1>(src, dst, blocks); return true;
    default: return false;  // bf16 (bound by its stores), the K-quants, f32: the AVX2 or scalar code
  }
}

}  // namespace kvinfer::cpu

KVINFER_AVX512_END

#else  // no x86 kernels in this build: cpu_has_avx512() is false and this is never called

namespace kvinfer::cpu {
bool to_f32_avx512(DType, const std::byte*, float*, int64_t) { return false; }
}  // namespace kvinfer::cpu

#endif
