// The AVX-512 weighted sums of V rows (attention_avx512.h). Compiled for AVX-512 function by
// function (avx512_target.h), like linear_avx512.cpp.
#include "cpu/attention_avx512.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "core/kv_quant.h"
#include "cpu/avx512_target.h"

KVINFER_AVX512_BEGIN

#include "cpu/avx512_inline.h"
#include "cpu/kv_value_inline.h"
#include "cpu/values_tiles_inline.h"

namespace kvinfer::cpu::avx512 {

namespace {

// 16-lane registers for values_tiles_inline.h: tiles of 6 queries × 64 columns, 24 registers of
// sums and 4 for a V row's 64 values.
struct Zmm {
  using Reg = __m512;
  static constexpr int kLanes = 16, kWide = 4, kQueries = 6;
  static Reg zero() { return _mm512_setzero_ps(); }
  static Reg load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, Reg r) { _mm512_storeu_ps(p, r); }
  static Reg set1(float f) { return _mm512_set1_ps(f); }
  static Reg add(Reg a, Reg b) { return _mm512_add_ps(a, b); }
  static Reg mul(Reg a, Reg b) { return _mm512_mul_ps(a, b); }
};

// GCC 12's AVX-512 widening and extract intrinsics start from an undefined register they then
// warn about.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

// The bytes of one value of a K or V row in the cache's dtype.
template <DType T>
constexpr size_t kValueBytes = dtype_size(T);

// 16 codes of an 8-bit row (c: 16 bytes) as the values they stand for before the row's scale,
// exactly, as widen8_i8 and widen8_e4m3 (kv_value_inline.h) make them 8 at a time.
template <DType T>
inline __m512 widen16_codes(__m128i c) {
  if constexpr (T == DType::I8) return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(c));
  const __m256i w = _mm256_cvtepu8_epi16(c);  // 16 × u16
  const __m256i mag = _mm256_and_si256(w, _mm256_set1_epi16(0x7f));
  const __m256i sign = _mm256_slli_epi16(_mm256_and_si256(w, _mm256_set1_epi16(0x80)), 8);
  const __m512 f = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_or_si256(_mm256_slli_epi16(mag, 7), sign)), _mm512_set1_ps(256.0f));
  const __m256i nan = _mm256_cmpeq_epi16(mag, _mm256_set1_epi16(0x7f));
  if (_mm256_testz_si256(nan, nan)) return f;
  const __m512i bits = _mm512_or_si512(_mm512_set1_epi32(0x7fc00000), _mm512_slli_epi32(_mm512_cvtepu16_epi32(sign), 16));
  return _mm512_mask_mov_ps(f, _mm512_movepi32_mask(_mm512_cvtepi16_epi32(nan)), _mm512_castsi512_ps(bits));
}

// Values d .. d + 7 of the K rows at a and b, widened as avx2::attention_scores widens them (F16C
// for f16, a shift for bf16): a's in the low half, b's in the high.
template <DType T>
inline __m512 pair8(const std::byte* a, const std::byte* b) {
  if constexpr (is_scaled_kv(T)) {
    const __m128i c = _mm_unpacklo_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(a)),
                                         _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b)));
    return widen16_codes<T>(c);
  } else if constexpr (T == DType::F32) {
    return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps(reinterpret_cast<const float*>(a))),
                              _mm256_loadu_ps(reinterpret_cast<const float*>(b)), 1);
  } else {
    const __m128i ha = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a));
    const __m128i hb = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b));
    const __m256i h = _mm256_inserti128_si256(_mm256_castsi128_si256(ha), hb, 1);
    if constexpr (T == DType::BF16) return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    return _mm512_cvtph_ps(h);
  }
}

// 16 values of a V row at p, widened the same way.
template <DType T>
inline __m512 load16(const std::byte* p) {
  if constexpr (is_scaled_kv(T)) {
    return widen16_codes<T>(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  } else if constexpr (T == DType::F32) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(p));
  } else {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    if constexpr (T == DType::BF16) return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    return _mm512_cvtph_ps(h);
  }
}

// s[r · lds + i] = dot(q_r, K row i) · scale for Q queries (q_r at q + r · hd) and the 16 K rows
// from k: register i of query r holds rows i (low half) and i + 8 (high); per 8 values, Q
// broadcasts of a query's 8, 8 widened pairs of K rows and 8·Q fused multiply-adds; then
// finish8's trees, rows 0 .. 7 from the low halves.
template <DType T, int Q>
void scores16(const float* q, int64_t hd, const std::byte* k, size_t row_bytes, float scale, float* s, int64_t lds) {
  __m512 acc[Q][8];
  for (int r = 0; r < Q; ++r)
    for (int i = 0; i < 8; ++i) acc[r][i] = _mm512_setzero_ps();
  for (int64_t d = 0; d < hd; d += 8) {
    __m512 qv[Q];
    for (int r = 0; r < Q; ++r) qv[r] = broadcast8(q + r * hd + d);
    const std::byte* rows = k + static_cast<size_t>(d) * kValueBytes<T>;
    for (int i = 0; i < 8; ++i) {
      const std::byte* a = rows + static_cast<size_t>(i) * row_bytes;
      const __m512 kv = pair8<T>(a, a + 8 * row_bytes);
      for (int r = 0; r < Q; ++r) acc[r][i] = _mm512_fmadd_ps(qv[r], kv, acc[r][i]);
    }
  }
  for (int r = 0; r < Q; ++r) {
    __m256 lo[8], hi[8];
    for (int i = 0; i < 8; ++i) {
      lo[i] = low8(acc[r][i]);
      hi[i] = high8(acc[r][i]);
    }
    alignas(64) float y[16];
    finish8(lo, y);
    finish8(hi, y + 8);
    _mm512_storeu_ps(s + r * lds, _mm512_mul_ps(_mm512_load_ps(y), _mm512_set1_ps(scale)));
  }
}

template <DType T>
void decode_scores_of(const float* q, int64_t nq, int64_t hd, const std::byte* k, int64_t rows, float scale, float* s,
                      int64_t lds, ChainedPrefetcher& pf) {
  const size_t row_bytes = static_cast<size_t>(hd) * kValueBytes<T>;
  for (int64_t j = 0; j + 16 <= rows; j += 16) {
    pf.advance(16 * row_bytes);
    const std::byte* kj = k + static_cast<size_t>(j) * row_bytes;
    int64_t r = 0;
    for (; r + 3 <= nq; r += 3) scores16<T, 3>(q + r * hd, hd, kj, row_bytes, scale, s + r * lds + j, lds);
    if (nq - r == 2) scores16<T, 2>(q + r * hd, hd, kj, row_bytes, scale, s + r * lds + j, lds);
    if (nq - r == 1) scores16<T, 1>(q + r * hd, hd, kj, row_bytes, scale, s + r * lds + j, lds);
  }
}

// Columns [d0, d0 + 16·C) of R queries' weighted sums over V rows 0 .. count − 1, from 0 (from o
// when `more`): per row, C widened loads for all R queries, then each sum plus the product
// (rounded, then added).
template <DType T, int R, int C>
void sums(const float* const* p, float* const* o, const std::byte* v, size_t row_bytes, int64_t count, int64_t d0,
          ChainedPrefetcher& pf, bool more) {
  __m512 acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = more ? _mm512_loadu_ps(o[r] + d0 + 16 * c) : _mm512_setzero_ps();
  for (int64_t j = 0; j < count; ++j) {
    if (j % 16 == 0) pf.advance(16 * 16 * C * kValueBytes<T>);  // the bytes of 16 rows this pass reads
    const std::byte* row = v + static_cast<size_t>(j) * row_bytes + static_cast<size_t>(d0) * kValueBytes<T>;
    __m512 vv[C];
    for (int c = 0; c < C; ++c) vv[c] = load16<T>(row + 16 * kValueBytes<T> * c);
    for (int r = 0; r < R; ++r) {
      const __m512 pj = _mm512_set1_ps(p[r][j]);
      for (int c = 0; c < C; ++c) acc[r][c] = _mm512_add_ps(acc[r][c], _mm512_mul_ps(pj, vv[c]));
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) _mm512_storeu_ps(o[r] + d0 + 16 * c, acc[r][c]);
}

// Columns [d0, d1) of R queries: 64 at a time, then 32, then 16, then one at a time (the same
// operations).
template <DType T, int R>
void sums_of(const float* const* p, float* const* o, const std::byte* v, int64_t count, int64_t hd, int64_t d0,
             int64_t d1, ChainedPrefetcher& pf, bool more) {
  const size_t row_bytes = static_cast<size_t>(hd) * kValueBytes<T>;
  int64_t d = d0;
  for (; d + 64 <= d1; d += 64) sums<T, R, 4>(p, o, v, row_bytes, count, d, pf, more);
  for (; d + 32 <= d1; d += 32) sums<T, R, 2>(p, o, v, row_bytes, count, d, pf, more);
  for (; d + 16 <= d1; d += 16) sums<T, R, 1>(p, o, v, row_bytes, count, d, pf, more);
  for (; d < d1; ++d)
    for (int r = 0; r < R; ++r) {
      float acc = more ? o[r][d] : 0.0f;
      for (int64_t j = 0; j < count; ++j) acc += p[r][j] * kv_value<T>(v + static_cast<size_t>(j) * row_bytes, d);
      o[r][d] = acc;
    }
}

template <DType T>
void decode_values_of(const float* const* p, float* const* o, int64_t nq, const std::byte* v, int64_t count,
                      int64_t hd, int64_t d0, int64_t d1, ChainedPrefetcher& pf, bool more) {
  for (; nq >= 3; nq -= 3, p += 3, o += 3) sums_of<T, 3>(p, o, v, count, hd, d0, d1, pf, more);
  if (nq == 2) sums_of<T, 2>(p, o, v, count, hd, d0, d1, pf, more);
  if (nq == 1) sums_of<T, 1>(p, o, v, count, hd, d0, d1, pf, more);
}

}  // namespace

void decode_scores(DType t, const float* q, int64_t nq, int64_t hd, const std::byte* k, int64_t rows, float scale,
                   float* s, int64_t lds, ChainedPrefetcher* pf) {
  ChainedPrefetcher local = pf ? *pf : ChainedPrefetcher();  // its counters in registers (prefetch.h)
  switch (t) {
    case DType::F16: decode_scores_of<DType::F16>(q, nq, hd, k, rows, scale, s, lds, local); break;
    case DType::BF16: decode_scores_of<DType::BF16>(q, nq, hd, k, rows, scale, s, lds, local); break;
    case DType::I8: decode_scores_of<DType::I8>(q, nq, hd, k, rows, scale, s, lds, local); break;
    case DType::FP8: decode_scores_of<DType::FP8>(q, nq, hd, k, rows, scale, s, lds, local); break;
    default: decode_scores_of<DType::F32>(q, nq, hd, k, rows, scale, s, lds, local); break;
  }
  if (pf) *pf = local;
}

void decode_values(DType t, const float* const* p, float* const* o, int64_t nq, const std::byte* v, int64_t count,
                   int64_t hd, int64_t d0, int64_t d1, ChainedPrefetcher* pf, bool more) {
  ChainedPrefetcher local = pf ? *pf : ChainedPrefetcher();
  switch (t) {
    case DType::F16: decode_values_of<DType::F16>(p, o, nq, v, count, hd, d0, d1, local, more); break;
    case DType::BF16: decode_values_of<DType::BF16>(p, o, nq, v, count, hd, d0, d1, local, more); break;
    case DType::I8: decode_values_of<DType::I8>(p, o, nq, v, count, hd, d0, d1, local, more); break;
    case DType::FP8: decode_values_of<DType::FP8>(p, o, nq, v, count, hd, d0, d1, local, more); break;
    default: decode_values_of<DType::F32>(p, o, nq, v, count, hd, d0, d1, local, more); break;
  }
  if (pf) *pf = local;
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

void values_tiles(const float* const* p, float* const* o, int64_t nq, const float* v, int64_t count,
                  int64_t hd, bool first) {
  values_tiles_all<Zmm>(p, o, nq, v, count, hd, first);
}

}  // namespace kvinfer::cpu::avx512

KVINFER_AVX512_END

#else  // not x86: cpu_has_avx512() is false, so this is never called

#include <cstdlib>

namespace kvinfer::cpu::avx512 {
void values_tiles(const float* const*, float* const*, int64_t, const float*, int64_t, int64_t, bool) {
  std::abort();
}
void decode_scores(DType, const float*, int64_t, int64_t, const std::byte*, int64_t, float, float*, int64_t,
                   ChainedPrefetcher*) {
  std::abort();
}
void decode_values(DType, const float* const*, float* const*, int64_t, const std::byte*, int64_t, int64_t, int64_t,
                   int64_t, ChainedPrefetcher*, bool) {
  std::abort();
}
}  // namespace kvinfer::cpu::avx512

#endif
