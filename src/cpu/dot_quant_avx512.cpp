// Q8_0, Q4_0 and Q4_1 decode products on AVX-512 (dot_quant_avx512.h). Compiled for AVX-512 function by
// function (avx512_target.h), like linear_avx512.cpp.
//
// A decode step reads each weight once and is bound, on one core, by the instructions that decode
// it (an exact Q4_1 row reads at about 7 GB/s in L2 with the AVX2 kernel). Here a 512-bit register
// holds two rows' 8-lane accumulators, as the prefill tiles do (linear_avx512.h): rows 2p and
// 2p + 1's codes side by side give both rows' values with the instructions the AVX2 kernel spends
// on one, and x's 8 values are broadcast to both halves. Each value is still (f32)q · d (+ m as one
// fused multiply-add: one rounding, as core::dequantize_group), each product in dot()'s order, and
// finish8's tree is dot()'s: the bits of dot_quant_avx2.cpp. Row-major rows go 8 a pass; a
// packed block (packed_rows.h) 16, its pairs' scales and codes each from one place; prefill
// widens packed blocks (widen_quant_packed, and a small batch's tiles a run at a time) one row at a
// time, with the same operations per value.
#include "cpu/dot_quant_avx512.h"

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/quant.h"
#include "cpu/linear_avx2.h"
#include "cpu/packed_rows.h"

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

// Two f16 values (row a's in the low half) spread over their rows' halves of a register.
inline __m512 spread_pair(uint32_t ab) {
  const __m512 v = _mm512_castps128_ps512(_mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(ab))));
  return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1), v);
}

inline uint32_t load32(const std::byte* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline __m128i load128(const std::byte* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }

// Two rows' blocks of 32 values as the kernel takes them: each row's f16 scale d (and Q4_1's
// minimum m) spread over its half of a register, row a's in the low half; and their code bytes:
// Q8_0's 0..15 in qa[0], 16..31 in qa[1]; Q4's 16 bytes in qa[0].
struct PairBlocks {
  __m512 d, m;
  __m128i qa[2], qb[2];
};

// From row-major blocks at a and b.
template <DType T>
inline PairBlocks pair_at(const std::byte* a, const std::byte* b) {
  using B = typename core::BlockOf<T>::type;
  PairBlocks p{};  // all set: Q4 leaves qa[1], qb[1] zero

  if constexpr (T == DType::Q4_1) {  // d and m of both blocks in one conversion: lanes dA, mA, dB, mB
    static_assert(offsetof(B, m) == offsetof(B, d) + 2);
    const __m512 dm = _mm512_castps128_ps512(_mm_cvtph_ps(
        _mm_insert_epi32(_mm_cvtsi32_si128(static_cast<int>(load32(a + offsetof(B, d)))),
                         static_cast<int>(load32(b + offsetof(B, d))), 1)));
    p.d = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2), dm);
    p.m = _mm512_permutexvar_ps(_mm512_setr_epi32(1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 3, 3, 3, 3, 3, 3), dm);
  } else {
    uint16_t ha, hb;
    std::memcpy(&ha, a + offsetof(B, d), sizeof ha);
    std::memcpy(&hb, b + offsetof(B, d), sizeof hb);
    p.d = spread_pair(static_cast<uint32_t>(ha | (hb << 16)));
  }
  for (int h = 0; h < (T == DType::Q8_0 ? 2 : 1); ++h) {
    p.qa[h] = load128(a + offsetof(B, qs) + 16 * h);
    p.qb[h] = load128(b + offsetof(B, qs) + 16 * h);
  }
  return p;
}

// From rows r and r + 1 of a packed column (packed_rows.h) at col.
template <DType T>
inline PairBlocks pair_packed(const std::byte* col, int r) {
  PairBlocks p{};  // all set: Q4 leaves qa[1], qb[1] zero
  if constexpr (T == DType::Q4_1) {  // both rows' d, then both rows' m, in one conversion
    const __m512 dm = _mm512_castps128_ps512(_mm_cvtph_ps(
        _mm_insert_epi32(_mm_cvtsi32_si128(static_cast<int>(load32(col + packed_d(r)))),
                         static_cast<int>(load32(col + packed_m(r))), 1)));
    p.d = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1), dm);
    p.m = _mm512_permutexvar_ps(_mm512_setr_epi32(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3), dm);
  } else {
    p.d = spread_pair(load32(col + packed_d(r)));  // both rows' d, side by side
  }
  // Rows r and r + 1's code bytes lie side by side: one load each for both rows.
  const __m256i codes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(col + packed_codes(T, r)));
  p.qa[0] = _mm256_castsi256_si128(codes);
  p.qb[0] = _mm256_extracti128_si256(codes, 1);
  if constexpr (T == DType::Q8_0) {
    const __m256i high = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(col + packed_high_codes(r)));
    p.qa[1] = _mm256_castsi256_si128(high);
    p.qb[1] = _mm256_extracti128_si256(high, 1);
  }
  return p;
}

// Values 0..31 of both blocks, 8 at a time: v[i] holds row a's values 8i .. 8i + 7 in its low
// half and row b's in its high half, each (f32)q · d (+ m), as core::dequantize_group computes it.
template <DType T>
inline void pair_values(const PairBlocks& p, __m512 v[4]) {
  if constexpr (T == DType::Q8_0) {
    for (int h = 0; h < 2; ++h) {  // codes 16h .. 16h + 15 of both blocks: values 16h .. 16h + 15
      const __m512i q[2] = {_mm512_cvtepi8_epi32(_mm_unpacklo_epi64(p.qa[h], p.qb[h])),
                            _mm512_cvtepi8_epi32(_mm_unpackhi_epi64(p.qa[h], p.qb[h]))};
      for (int i = 0; i < 2; ++i) v[2 * h + i] = _mm512_mul_ps(_mm512_cvtepi32_ps(q[i]), p.d);
    }
    return;
  }
  // Code bytes 0..7 of both blocks, then 8..15, one to a 32-bit lane (a's in the low 8 lanes):
  // byte j holds value j (low nibble) and value j + 16 (high nibble).
  const __m512i bytes[2] = {_mm512_cvtepu8_epi32(_mm_unpacklo_epi64(p.qa[0], p.qb[0])),
                            _mm512_cvtepu8_epi32(_mm_unpackhi_epi64(p.qa[0], p.qb[0]))};
  const __m512i low4 = _mm512_set1_epi32(0x0F);
  __m512i q[4] = {_mm512_and_si512(bytes[0], low4), _mm512_and_si512(bytes[1], low4), _mm512_srli_epi32(bytes[0], 4),
                  _mm512_srli_epi32(bytes[1], 4)};
  for (int i = 0; i < 4; ++i) {
    if constexpr (T == DType::Q4_0) q[i] = _mm512_sub_epi32(q[i], _mm512_set1_epi32(8));
    const __m512 f = _mm512_cvtepi32_ps(q[i]);
    // q·d exact: one rounding, as q·d + m
    v[i] = T == DType::Q4_1 ? _mm512_fmadd_ps(f, p.d, p.m) : _mm512_mul_ps(f, p.d);
  }
}

// y[r] = dot(x, row r) for rows 0..R-1 (R = 8 or 16) of w: row-major rows row_bytes apart, or
// (kPacked, R = 16) a packed block (packed_rows.h). R / 2 registers of two rows each share each
// block's 4 broadcast input vectors.
template <DType T, int R, bool kPacked>
void rows_at(const float* x, const std::byte* w, size_t row_bytes, int64_t n, float* y, Prefetcher& pf_out) {
  static_assert(!kPacked || R == kPackedRows);
  Prefetcher pf = pf_out;  // a local copy: its counters in registers (prefetch.h)
  constexpr int64_t kElems = dtype_block(T).elements, kBytes = dtype_block(T).bytes;
  __m512 acc[R / 2];
  for (auto& a : acc) a = _mm512_setzero_ps();
  for (int64_t blk = 0; blk < n / kElems; ++blk) {
    pf.advance(R * kBytes);
    const float* xb = x + blk * kElems;
    const __m512 xv[4] = {broadcast8(xb), broadcast8(xb + 8), broadcast8(xb + 16), broadcast8(xb + 24)};
    for (int p = 0; p < R / 2; ++p) {
      const std::byte* a = w + static_cast<size_t>(2 * p) * row_bytes + static_cast<size_t>(blk * kBytes);
      __m512 v[4];
      pair_values<T>(kPacked ? pair_packed<T>(w + static_cast<size_t>(blk * R * kBytes), 2 * p)
                             : pair_at<T>(a, a + row_bytes),
                     v);
      for (int i = 0; i < 4; ++i) acc[p] = _mm512_fmadd_ps(xv[i], v[i], acc[p]);
    }
  }
  finish_pairs<R>(acc, y);
  pf_out = pf;
}

template <DType T>
void rows_of(const float* x, const std::byte* w, int64_t rows, int64_t n, float* y, Prefetcher& pf) {
  const size_t row_bytes = dtype_row_bytes(T, n);
  const int64_t whole = rows / 8 * 8;
  for (int64_t r = 0; r < whole; r += 8)
    rows_at<T, 8, false>(x, w + static_cast<size_t>(r) * row_bytes, row_bytes, n, y + r, pf);
  if (whole < rows)
    avx2::dot_quant_rows(T, x, w + static_cast<size_t>(whole) * row_bytes, rows - whole, n, y + whole, pf);
}

template <DType T>
void packed_of(const float* x, const std::byte* w, int64_t n, float* y, Prefetcher& pf) {
  rows_at<T, kPackedRows, true>(x, w, dtype_row_bytes(T, n), n, y, pf);
}

// Rows [r0, r0 + 8) of a packed block, values [k0, k1) (multiples of 32), dequantised into dst
// (8 rows ldd apart): each value as core::dequantize_group computes it ((f32)q · d, Q4_1 + m as
// one fused multiply-add), as to_f32 gives it. A row's block at a time, 16 values a register:
// its codes widened by one load, no shuffles between rows, 512-bit stores. A column's 16 scales
// (and minima) are converted at once; a Q4 block's 16 possible values are computed first, each
// by the operations that dequantise that code, and picked by the codes (vpermps reads an index's
// low 4 bits: the low nibble needs no mask). Prefill's widening of a whole block is rows 0 and 8
// of this.
template <DType T>
void widen_packed_part(const std::byte* w, int64_t r0, int64_t k0, int64_t k1, float* dst, int64_t ldd) {
  constexpr size_t kColumn = kPackedRows * dtype_block(T).bytes;
  const std::byte* column = w + static_cast<size_t>(k0 / 32) * kColumn;
  const __m512 codes = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512 q4 = T == DType::Q4_0 ? _mm512_sub_ps(codes, _mm512_set1_ps(8)) : codes;  // (f32)q of each code
  alignas(64) float d[kPackedRows], m[kPackedRows];
  for (int64_t k = 0; k < k1 - k0; k += 32, column += kColumn) {
    _mm512_store_ps(d, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(column + packed_d(0)))));
    if constexpr (T == DType::Q4_1)
      _mm512_store_ps(m, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(column + packed_m(0)))));
    for (int r = static_cast<int>(r0); r < r0 + 8; ++r) {
      float* row = dst + (r - r0) * ldd + k;
      const __m512 dr = _mm512_set1_ps(d[r]);
      if constexpr (T == DType::Q8_0) {
        for (int i = 0; i < 2; ++i) {
          const std::byte* q = column + (i == 0 ? packed_codes(T, r) : packed_high_codes(r));
          _mm512_storeu_ps(row + 16 * i, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(load128(q))), dr));
        }
      } else {  // byte j holds value j (low nibble) and value j + 16 (high nibble)
        const __m512 values = T == DType::Q4_1 ? _mm512_fmadd_ps(q4, dr, _mm512_set1_ps(m[r])) : _mm512_mul_ps(q4, dr);
        const __m512i bytes = _mm512_cvtepu8_epi32(load128(column + packed_codes(T, r)));
        _mm512_storeu_ps(row, _mm512_permutexvar_ps(bytes, values));
        _mm512_storeu_ps(row + 16, _mm512_permutexvar_ps(_mm512_srli_epi32(bytes, 4), values));
      }
    }
  }
}

template <DType T>
void widen_packed(const std::byte* w, int64_t n, float* dst) {
  widen_packed_part<T>(w, 0, 0, n, dst, n);
  widen_packed_part<T>(w, 8, 0, n, dst + 8 * n, n);
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

bool dot_quant_packed(DType t, const float* x, const std::byte* w, int64_t n, float* y, Prefetcher& pf) {
  switch (t) {
    case DType::Q8_0: packed_of<DType::Q8_0>(x, w, n, y, pf); return true;
    case DType::Q4_0: packed_of<DType::Q4_0>(x, w, n, y, pf); return true;
    case DType::Q4_1: packed_of<DType::Q4_1>(x, w, n, y, pf); return true;
    default: return false;
  }
}

bool widen_quant_packed(DType t, const std::byte* w, int64_t n, float* dst) {
  switch (t) {
    case DType::Q8_0: widen_packed<DType::Q8_0>(w, n, dst); return true;
    case DType::Q4_0: widen_packed<DType::Q4_0>(w, n, dst); return true;
    case DType::Q4_1: widen_packed<DType::Q4_1>(w, n, dst); return true;
    default: return false;
  }
}

bool widen_quant_packed_part(DType t, const std::byte* w, int64_t r0, int64_t k0, int64_t k1, float* dst) {
  switch (t) {
    case DType::Q8_0: widen_packed_part<DType::Q8_0>(w, r0, k0, k1, dst, k1 - k0); return true;
    case DType::Q4_0: widen_packed_part<DType::Q4_0>(w, r0, k0, k1, dst, k1 - k0); return true;
    case DType::Q4_1: widen_packed_part<DType::Q4_1>(w, r0, k0, k1, dst, k1 - k0); return true;
    default: return false;
  }
}

}  // namespace kvinfer::cpu::avx512

KVINFER_AVX512_END

#else  // not x86: cpu_has_avx512() is false, so this is never called

namespace kvinfer::cpu::avx512 {
bool dot_quant_rows(DType, const float*, const std::byte*, int64_t, int64_t, float*, Prefetcher&) { return false; }
bool dot_quant_packed(DType, const float*, const std::byte*, int64_t, float*, Prefetcher&) { return false; }
bool widen_quant_packed(DType, const std::byte*, int64_t, float*) { return false; }
bool widen_quant_packed_part(DType, const std::byte*, int64_t, int64_t, int64_t, float*) { return false; }
}  // namespace kvinfer::cpu::avx512

#endif
