#pragma once
// Small AVX-512 helpers shared by the AVX-512 kernel files (linear_avx512.cpp,
// attention_avx512.cpp). Include it only after their KVINFER_AVX512_BEGIN, like avx2_inline.h:
// everything here has internal linkage, so each file gets its own copy and no portable code can
// ever pick one up. The includes below must already have been included before the BEGIN.
#include <immintrin.h>

namespace kvinfer::cpu::avx512 {
namespace {

// GCC 12's broadcast and extract intrinsics start from an undefined register they then warn about.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// 8 floats at p in both halves of a register: one broadcast load (vbroadcastf32x8).
inline __m512 broadcast8(const float* p) { return _mm512_broadcast_f32x8(_mm256_loadu_ps(p)); }
// The lower and the upper 8 lanes of v.
inline __m256 low8(__m512 v) { return _mm512_castps512_ps256(v); }
inline __m256 high8(__m512 v) { return _mm512_extractf32x8_ps(v, 1); }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// y[c] for c < 8: the 8 lanes of a[c] combined by the fixed tree ((0 + 4) + (1 + 5)) + ((2 + 6) +
// (3 + 7)) of linear_avx2.h, for 8 products at once. s: per 128-bit half, lanes j + (j + 4) of
// a[c] and of a[c + 4]; each hadd then adds neighbours, (s0 + s1) and (s2 + s3), then their sums.
inline void finish8(const __m256 a[8], float* y) {
  __m256 s[4];
  for (int c = 0; c < 4; ++c)
    s[c] = _mm256_add_ps(_mm256_permute2f128_ps(a[c], a[c + 4], 0x20), _mm256_permute2f128_ps(a[c], a[c + 4], 0x31));
  _mm256_storeu_ps(y, _mm256_hadd_ps(_mm256_hadd_ps(s[0], s[1]), _mm256_hadd_ps(s[2], s[3])));
}

// y[c] for c < R (a multiple of 8): finish8 of rows c's 8-lane accumulators, held two rows a
// register (row 2p in the low half of acc[p], row 2p + 1 in the high half), as the decode kernels
// keep them.
template <int R>
inline void finish_pairs(const __m512 acc[R / 2], float* y) {
  for (int e = 0; e < R / 8; ++e) {  // rows 8e .. 8e + 7: the low and high halves of 4 registers
    __m256 lanes[8];
    for (int p = 0; p < 4; ++p) {
      lanes[2 * p] = low8(acc[4 * e + p]);
      lanes[2 * p + 1] = high8(acc[4 * e + p]);
    }
    finish8(lanes, y + 8 * e);
  }
}

}  // namespace
}  // namespace kvinfer::cpu::avx512
