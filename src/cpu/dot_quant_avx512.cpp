// Q8_0, Q4_0 and Q4_1 decode products on AVX-512 (dot_quant_avx512.h). Compiled for AVX-512 function by
// function (avx512_target.h), like linear_avx512.cpp.
//
// A decode step reads each weight once and is bound, on one core, by the instructions that decode
// it (an exact Q4_1 row reads at about 7 GB/s in L2 with the AVX2 kernel). Here a 512-bit register
// holds two rows' 8-lane accumulators, as the prefill tiles do (linear_avx512.h): rows 2p and
// 2p + 1's codes side by side give both rows' values with the instructions the AVX2 kernel spends
// on one, and x's 8 values are broadcast to both halves. Each value is still (f32)q · d (+ m as one
// fused multiply-add: one rounding, as core::dequantize_group), each product in dot()'s order, and
// finish8's tree is dot()'s: the bits of dot_quant_avx2.cpp.
#include "cpu/dot_quant_avx512.h"

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/quant.h"
#include "cpu/linear_avx2.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "cpu/avx512_target.h"

KVINFER_AVX512_BEGIN

#include "cpu/avx512_inline.h"

namespace kvinfer::cpu::avx512 {

namespace {

// GCC 12's AVX-512 cast, widening and permute intrinsics start from an undefined register they
// then warn about.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

// Both blocks' f16 scales at offset `at`, each spread over its row's half of a register.
inline __m512 pair_scales(const std::byte* a, const std::byte* b, size_t at) {
  uint16_t ha, hb;
  std::memcpy(&ha, a + at, sizeof ha);
  std::memcpy(&hb, b + at, sizeof hb);
  const __m512 dd = _mm512_castps128_ps512(_mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(ha | (hb << 16)))));
  return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1), dd);
}

// Values 0..31 of the blocks at a and b, 8 at a time: v[i] holds a's values 8i .. 8i + 7 in its
// low half and b's in its high half, each (f32)q · d (+ m), as core::dequantize_group computes it.
template <DType T>
inline void pair_values(const std::byte* a, const std::byte* b, __m512 v[4]) {
  using B = typename core::BlockOf<T>::type;
  if constexpr (T == DType::Q8_0) {
    const __m512 d = pair_scales(a, b, offsetof(B, d));
    for (int h = 0; h < 2; ++h) {  // bytes 16h .. 16h + 15 of both blocks: values 16h .. 16h + 15
      const __m128i qa = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a + offsetof(B, qs) + 16 * h));
      const __m128i qb = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + offsetof(B, qs) + 16 * h));
      const __m512i q[2] = {_mm512_cvtepi8_epi32(_mm_unpacklo_epi64(qa, qb)),
                            _mm512_cvtepi8_epi32(_mm_unpackhi_epi64(qa, qb))};
      for (int i = 0; i < 2; ++i) v[2 * h + i] = _mm512_mul_ps(_mm512_cvtepi32_ps(q[i]), d);
    }
    return;
  }
  constexpr bool kHasMin = T == DType::Q4_1;
  // The f16 scales (and minima) of both blocks in one conversion: lanes dA, mA, dB, mB (Q4_1) or
  // dA, dB (Q4_0), then each spread over its row's half.
  __m512 d, m = _mm512_setzero_ps();
  if constexpr (kHasMin) {
    static_assert(offsetof(B, m) == offsetof(B, d) + 2);
    int32_t da, db;
    std::memcpy(&da, a + offsetof(B, d), sizeof da);
    std::memcpy(&db, b + offsetof(B, d), sizeof db);
    const __m512 dm = _mm512_castps128_ps512(_mm_cvtph_ps(_mm_insert_epi32(_mm_cvtsi32_si128(da), db, 1)));
    d = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2), dm);
    m = _mm512_permutexvar_ps(_mm512_setr_epi32(1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 3, 3, 3, 3, 3, 3), dm);
  } else {
    d = pair_scales(a, b, offsetof(B, d));
  }
  // Code bytes 0..7 of both blocks, then 8..15, one to a 32-bit lane (a's in the low 8 lanes):
  // byte j holds value j (low nibble) and value j + 16 (high nibble).
  const __m128i qa = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a + offsetof(B, qs)));
  const __m128i qb = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + offsetof(B, qs)));
  const __m512i bytes[2] = {_mm512_cvtepu8_epi32(_mm_unpacklo_epi64(qa, qb)),
                            _mm512_cvtepu8_epi32(_mm_unpackhi_epi64(qa, qb))};
  const __m512i low4 = _mm512_set1_epi32(0x0F);
  __m512i q[4] = {_mm512_and_si512(bytes[0], low4), _mm512_and_si512(bytes[1], low4), _mm512_srli_epi32(bytes[0], 4),
                  _mm512_srli_epi32(bytes[1], 4)};
  for (int i = 0; i < 4; ++i) {
    if constexpr (!kHasMin) q[i] = _mm512_sub_epi32(q[i], _mm512_set1_epi32(8));
    const __m512 f = _mm512_cvtepi32_ps(q[i]);
    v[i] = kHasMin ? _mm512_fmadd_ps(f, d, m) : _mm512_mul_ps(f, d);  // q·d exact: one rounding, as q·d + m
  }
}

// y[r] = dot(x, row r) for rows 0..7 from w: 4 registers of two rows each share each block's 4
// broadcast input vectors.
template <DType T>
void rows8(const float* x, const std::byte* w, size_t row_bytes, int64_t n, float* y, Prefetcher& pf) {
  constexpr int64_t kElems = dtype_block(T).elements, kBytes = dtype_block(T).bytes;
  __m512 acc[4];
  for (int p = 0; p < 4; ++p) acc[p] = _mm512_setzero_ps();
  for (int64_t blk = 0; blk < n / kElems; ++blk) {
    pf.advance(8 * kBytes);
    const float* xb = x + blk * kElems;
    const __m512 xv[4] = {broadcast8(xb), broadcast8(xb + 8), broadcast8(xb + 16), broadcast8(xb + 24)};
    for (int p = 0; p < 4; ++p) {
      const std::byte* a = w + static_cast<size_t>(2 * p) * row_bytes + static_cast<size_t>(blk * kBytes);
      __m512 v[4];
      pair_values<T>(a, a + row_bytes, v);
      for (int i = 0; i < 4; ++i) acc[p] = _mm512_fmadd_ps(xv[i], v[i], acc[p]);
    }
  }
  __m256 lanes[8];  // rows 0..7: the low and high halves of the 4 registers, in turn
  for (int p = 0; p < 4; ++p) {
    lanes[2 * p] = low8(acc[p]);
    lanes[2 * p + 1] = high8(acc[p]);
  }
  finish8(lanes, y);
}

template <DType T>
void rows_of(const float* x, const std::byte* w, int64_t rows, int64_t n, float* y, Prefetcher& pf) {
  const size_t row_bytes = dtype_row_bytes(T, n);
  const int64_t whole = rows / 8 * 8;
  for (int64_t r = 0; r < whole; r += 8) rows8<T>(x, w + static_cast<size_t>(r) * row_bytes, row_bytes, n, y + r, pf);
  if (whole < rows)
    avx2::dot_quant_rows(T, x, w + static_cast<size_t>(whole) * row_bytes, rows - whole, n, y + whole, pf);
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace

bool dot_quant_rows(DType t, const float* x, const std::byte* w, int64_t rows, int64_t n, float* y, Prefetcher& pf) {
  switch (t) {
    case DType::Q8_0: rows_of<DType::Q8_0>(x, w, rows, n, y, pf); return true;
    case DType::Q4_0: rows_of<DType::Q4_0>(x, w, rows, n, y, pf); return true;
    case DType::Q4_1: rows_of<DType::Q4_1>(x, w, rows, n, y, pf); return true;
    default: return false;
  }
}

}  // namespace kvinfer::cpu::avx512

KVINFER_AVX512_END

#else  // not x86: cpu_has_avx512() is false, so this is never called

namespace kvinfer::cpu::avx512 {
bool dot_quant_rows(DType, const float*, const std::byte*, int64_t, int64_t, float*, Prefetcher&) { return false; }
}  // namespace kvinfer::cpu::avx512

#endif
