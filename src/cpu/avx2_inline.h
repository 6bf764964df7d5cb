#pragma once
// Small AVX2/F16C helpers shared by the AVX2 and AVX-512 kernel files. Include it only after those
// files' KVINFER_AVX2_BEGIN or KVINFER_AVX512_BEGIN (cpu/avx2_target.h, cpu/avx512_target.h), and
// only from them: every function here has internal linkage, so each file gets its own copy and no
// portable code can ever pick one up. The includes below must already have been included before
// the BEGIN (here they are no-ops), so that nothing from a standard header is compiled for AVX2.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace kvinfer::cpu::avx2 {
namespace {

// The f16 at p (a block's scale; any alignment), widened with F16C. F16C quiets a signalling
// NaN; a NaN scale gives NaN products either way.
inline float half_at(const std::byte* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof h);
  return _cvtsh_ss(h);
}

// The 8 lanes of a dot product's accumulator combined in the one fixed order every kernel uses
// (linear_avx2.h): ((0 + 4) + (1 + 5)) + ((2 + 6) + (3 + 7)).
inline float lanes_tree(const float l[8]) { return ((l[0] + l[4]) + (l[1] + l[5])) + ((l[2] + l[6]) + (l[3] + l[7])); }

inline float lanes_sum(__m256 acc) {
  alignas(32) float l[8];
  _mm256_store_ps(l, acc);
  return lanes_tree(l);
}

// The 16 bytes at p in both 128-bit lanes (an input block's half, against two weight rows).
inline __m256i both_lanes(const int8_t* p) {
  return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// Signed bytes w times signed bytes q, summed by fours into 8 exact 32-bit lanes: |w| · (±q)
// (vpmaddubsw takes one unsigned operand; a pair reaches 2 · 128 · 127 < 2¹⁵), then vpmaddwd.
inline __m256i signed_dot4(__m256i w, __m256i q) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(q, w)), _mm256_set1_epi16(1));
}

// Byte j (0..31) = 0x10 where bit j of bits is set, else 0 (Q5_0/Q5_1's fifth bit).
inline __m256i bit4_from_bits32(uint32_t bits) {
  __m256i t = _mm256_set1_epi32(static_cast<int>(bits));
  t = _mm256_shuffle_epi8(t, _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
  t = _mm256_or_si256(t, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));  // all bits but bit j % 8
  t = _mm256_cmpeq_epi8(t, _mm256_set1_epi8(-1));
  return _mm256_and_si256(t, _mm256_set1_epi8(0x10));
}

// The largest of 8 lanes (none NaN): exact, in any order.
inline float lanes_max(__m256 v) {
  const __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 m2 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  return _mm_cvtss_f32(_mm_max_ss(m2, _mm_shuffle_ps(m2, m2, 1)));
}

}  // namespace
}  // namespace kvinfer::cpu::avx2
