// AVX2/FMA attention loops (attention_avx2.h). Compiled for AVX2 function by function (the pragma
// below), like linear_avx2.cpp.
#include "cpu/attention_avx2.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/kv_quant.h"
#include "cpu/avx2_target.h"

KVINFER_AVX2_BEGIN

#include "cpu/avx2_inline.h"
#include "cpu/kv_value_inline.h"
#include "cpu/values_tiles_inline.h"

namespace kvinfer::cpu::avx2 {

namespace {

// 8 values of a K or V row from p, widened to f32 (exactly; F16C quiets a signalling NaN).
template <DType T>
inline __m256 load8(const std::byte* p) {
  if constexpr (T == DType::F32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
  } else if constexpr (T == DType::I8) {
    return widen8_i8(p);
  } else if constexpr (T == DType::FP8) {
    return widen8_e4m3(p);
  } else {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    if constexpr (T == DType::BF16) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    return _mm256_cvtph_ps(h);
  }
}

// dot()'s finish: the tail's fused multiply-adds into lanes 0, 1, ..., then the fixed tree.
template <DType T>
inline float finish(__m256 acc, const float* q, const std::byte* row, int64_t body, int64_t hd) {
  alignas(32) float l[8];
  _mm256_store_ps(l, acc);
  for (int64_t k = body, i = 0; k < hd; ++k, ++i) l[i] = std::fma(q[k], kv_value<T>(row, k), l[i]);
  return lanes_tree(l);
}

// The fixed tree ((0 + 4) + (1 + 5)) + ((2 + 6) + (3 + 7)) of 4 accumulators at once: lane r of
// the result is lanes_tree() of a[r], bit for bit (the same additions, transposed).
inline __m128 lanes_tree4(const __m256 a[4]) {
  __m128 h[4];  // h[r] = (0 + 4, 1 + 5, 2 + 6, 3 + 7) of a[r]
  for (int r = 0; r < 4; ++r) h[r] = _mm_add_ps(_mm256_castps256_ps128(a[r]), _mm256_extractf128_ps(a[r], 1));
  _MM_TRANSPOSE4_PS(h[0], h[1], h[2], h[3]);  // now lane r of h[i] is term i of row r
  return _mm_add_ps(_mm_add_ps(h[0], h[1]), _mm_add_ps(h[2], h[3]));
}

// Scores of R consecutive positions from j, their rows from `rows` on: R accumulators share q's
// vectors (8 chains of fused multiply-adds hide their latency).
template <DType T, int R>
inline void scores_of(const float* q, const std::byte* rows, size_t row_bytes, int64_t j, int64_t hd, float scale,
                      float* s) {
  constexpr size_t kSize = dtype_size(T);
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  const int64_t body = hd / 8 * 8;
  for (int64_t d = 0; d < body; d += 8) {
    const __m256 qv = _mm256_loadu_ps(q + d);
    for (int r = 0; r < R; ++r)
      acc[r] = _mm256_fmadd_ps(qv, load8<T>(rows + static_cast<size_t>(r) * row_bytes + static_cast<size_t>(d) * kSize),
                               acc[r]);
  }
  if (R % 4 == 0 && body == hd) {  // no tail: the trees of 4 rows at a time
    for (int r = 0; r < R; r += 4)
      _mm_storeu_ps(s + j + r, _mm_mul_ps(lanes_tree4(acc + r), _mm_set1_ps(scale)));
    return;
  }
  for (int r = 0; r < R; ++r) s[j + r] = finish<T>(acc[r], q, rows + static_cast<size_t>(r) * row_bytes, body, hd) * scale;
}

template <DType T>
void scores(const float* q, const std::byte* k, int64_t first, int64_t last, int64_t hd, float scale, float* s) {
  const size_t row_bytes = static_cast<size_t>(hd) * dtype_size(T);
  auto row = [&](int64_t j) { return k + static_cast<size_t>(j - first) * row_bytes; };
  int64_t j = first;
  for (; j + 8 <= last + 1; j += 8) scores_of<T, 8>(q, row(j), row_bytes, j, hd, scale, s);
  for (; j + 4 <= last + 1; j += 4) scores_of<T, 4>(q, row(j), row_bytes, j, hd, scale, s);
  for (; j <= last; ++j) scores_of<T, 1>(q, row(j), row_bytes, j, hd, scale, s);
}

// Columns [d0, d0 + 8·C) of o, accumulated over every position in C registers (from o's values
// when `more`, else from 0).
template <DType T, int C>
inline void values_of(const float* p, const std::byte* v, size_t row_bytes, int64_t first, int64_t last, int64_t d0,
                      float* o, bool more) {
  constexpr size_t kSize = dtype_size(T);
  __m256 acc[C];
  for (int c = 0; c < C; ++c) acc[c] = more ? _mm256_loadu_ps(o + d0 + 8 * c) : _mm256_setzero_ps();
  for (int64_t j = first; j <= last; ++j) {
    const __m256 pj = _mm256_set1_ps(p[j]);
    const std::byte* row = v + static_cast<size_t>(j - first) * row_bytes + static_cast<size_t>(d0) * kSize;
    for (int c = 0; c < C; ++c) acc[c] = _mm256_add_ps(acc[c], _mm256_mul_ps(pj, load8<T>(row + 8 * kSize * c)));
  }
  for (int c = 0; c < C; ++c) _mm256_storeu_ps(o + d0 + 8 * c, acc[c]);
}

template <DType T>
void values(const float* p, const std::byte* v, int64_t first, int64_t last, int64_t hd, float* o, bool more) {
  const size_t row_bytes = static_cast<size_t>(hd) * dtype_size(T);
  int64_t d = 0;
  for (; d + 64 <= hd; d += 64) values_of<T, 8>(p, v, row_bytes, first, last, d, o, more);
  for (; d + 8 <= hd; d += 8) values_of<T, 1>(p, v, row_bytes, first, last, d, o, more);
  for (; d < hd; ++d) {  // the last hd % 8 columns, one at a time, the same operations
    float acc = more ? o[d] : 0.0f;
    for (int64_t j = first; j <= last; ++j)
      acc += p[j] * kv_value<T>(v + static_cast<size_t>(j - first) * row_bytes, d);
    o[d] = acc;
  }
}

// 8-lane registers for values_tiles_inline.h: tiles of 4 queries × 16 columns.
struct Ymm {
  using Reg = __m256;
  static constexpr int kLanes = 8, kWide = 2, kQueries = 4;
  static Reg zero() { return _mm256_setzero_ps(); }
  static Reg load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, Reg r) { _mm256_storeu_ps(p, r); }
  static Reg set1(float f) { return _mm256_set1_ps(f); }
  static Reg add(Reg a, Reg b) { return _mm256_add_ps(a, b); }
  static Reg mul(Reg a, Reg b) { return _mm256_mul_ps(a, b); }
};

}  // namespace

void values_tiles(const float* const* p, float* const* o, int64_t nq, const float* v, int64_t count,
                  int64_t hd, bool first) {
  values_tiles_all<Ymm>(p, o, nq, v, count, hd, first);
}

void attention_scores(DType t, const float* q, const std::byte* k, int64_t first, int64_t last, int64_t hd,
                      float scale, float* s) {
  switch (t) {
    case DType::F16: return scores<DType::F16>(q, k, first, last, hd, scale, s);
    case DType::BF16: return scores<DType::BF16>(q, k, first, last, hd, scale, s);
    case DType::I8: return scores<DType::I8>(q, k, first, last, hd, scale, s);
    case DType::FP8: return scores<DType::FP8>(q, k, first, last, hd, scale, s);
    default: return scores<DType::F32>(q, k, first, last, hd, scale, s);
  }
}

void attention_values(DType t, const float* p, const std::byte* v, int64_t first, int64_t last, int64_t hd, float* o,
                      bool more) {
  switch (t) {
    case DType::F16: return values<DType::F16>(p, v, first, last, hd, o, more);
    case DType::BF16: return values<DType::BF16>(p, v, first, last, hd, o, more);
    case DType::I8: return values<DType::I8>(p, v, first, last, hd, o, more);
    case DType::FP8: return values<DType::FP8>(p, v, first, last, hd, o, more);
    default: return values<DType::F32>(p, v, first, last, hd, o, more);
  }
}

}  // namespace kvinfer::cpu::avx2

KVINFER_AVX2_END

#else  // not x86: cpu_has_avx2_fma_f16c() is false, so these are never called

#include <cstdlib>

namespace kvinfer::cpu::avx2 {
void attention_scores(DType, const float*, const std::byte*, int64_t, int64_t, int64_t, float, float*) { std::abort(); }
void attention_values(DType, const float*, const std::byte*, int64_t, int64_t, int64_t, float*) { std::abort(); }
void values_tiles(const float* const*, float* const*, int64_t, const float*, int64_t, int64_t, bool) {
  std::abort();
}
}  // namespace kvinfer::cpu::avx2

#endif
