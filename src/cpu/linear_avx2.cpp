// AVX2/FMA dot products (linear_avx2.h). Compiled for AVX2 function by function (the pragma
// below), not with file-wide flags, so that nothing instantiated from a shared header here can
// replace the portable copy other files use. Everything inside is intrinsics and plain loops.
#include "cpu/linear_avx2.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "cpu/avx2_target.h"

KVINFER_AVX2_BEGIN

#include "cpu/avx2_inline.h"

namespace kvinfer::cpu::avx2 {

namespace {

// The fixed combination of the 8 lanes, after the tail's fused multiply-adds into lanes 0, 1, ...
inline float finish(__m256 acc, const float* a, const float* b, int64_t tail_from, int64_t n) {
  alignas(32) float l[8];
  _mm256_store_ps(l, acc);
  for (int64_t k = tail_from, i = 0; k < n; ++k, ++i) l[i] = std::fma(a[k], b[k], l[i]);
  return lanes_tree(l);
}

// 8 bf16 or f16 values widened to f32, exactly (bf16: the top half of an f32; f16: F16C).
template <bool Bf16>
inline __m256 widen8(const uint16_t* w) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w));
  if constexpr (Bf16) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  return _mm256_cvtph_ps(h);
}

// The end of `Rows` products whose vector steps reached `from`: the 8-value step at `from` if
// one is left, then finish() with each row's last n mod 8 values widened; y[c] the results.
template <bool Bf16, int Rows>
void finish_rows(__m256* acc, const float* x, const uint16_t* w, int64_t from, int64_t n, float* y, Prefetcher& pf) {
  const int64_t body = n / 8 * 8;
  if (from < body) {
    pf.advance(16 * Rows);
    const __m256 xv = _mm256_loadu_ps(x + from);
    for (int c = 0; c < Rows; ++c) acc[c] = _mm256_fmadd_ps(xv, widen8<Bf16>(w + c * n + from), acc[c]);
  }
  for (int c = 0; c < Rows; ++c) {
    alignas(32) float tail[8] = {};
    if (body < n) {
      alignas(16) uint16_t h[8] = {};
      for (int64_t k = body; k < n; ++k) h[k - body] = w[c * n + k];
      _mm256_store_ps(tail, widen8<Bf16>(h));
    }
    y[c] = finish(acc[c], x + body, tail, 0, n - body);
  }
}

// y[c] = dot(x, row c of w widened) for `Rows` (1, 4 or 8) f16 weight rows of n values: as many
// independent accumulators, so the fused multiply-adds' latency is hidden.
template <int Rows>
void dot_f16_block(const float* x, const uint16_t* w, int64_t n, float* y, Prefetcher& pf) {
  __m256 acc[Rows];
  for (int c = 0; c < Rows; ++c) acc[c] = _mm256_setzero_ps();
  const int64_t body = n / 8 * 8;
  for (int64_t k = 0; k < body; k += 8) {
    pf.advance(16 * Rows);
    const __m256 xv = _mm256_loadu_ps(x + k);
    for (int c = 0; c < Rows; ++c) acc[c] = _mm256_fmadd_ps(xv, widen8<false>(w + c * n + k), acc[c]);
  }
  finish_rows<false, Rows>(acc, x, w, body, n, y, pf);
}

// The same for bf16 rows in the pair order (linear_avx2.h): x comes split, and 16 bf16 values,
// read as 8 32-bit lanes, give the 8 at even places shifted up by 16 bits and the 8 at odd
// places masked, each exactly its f32. One load, a shift and a mask for 16 values.
template <int Rows>
void dot_bf16_block(const float* xs, const uint16_t* w, int64_t n, float* y, Prefetcher& pf) {
  __m256 acc[Rows];
  for (int c = 0; c < Rows; ++c) acc[c] = _mm256_setzero_ps();
  const __m256i high = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
  const int64_t chunks = n / 16 * 16;
  for (int64_t k = 0; k < chunks; k += 16) {
    pf.advance(32 * Rows);
    const __m256 even = _mm256_loadu_ps(xs + k), odd = _mm256_loadu_ps(xs + k + 8);
    for (int c = 0; c < Rows; ++c) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + c * n + k));
      acc[c] = _mm256_fmadd_ps(even, _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)), acc[c]);
      acc[c] = _mm256_fmadd_ps(odd, _mm256_castsi256_ps(_mm256_and_si256(v, high)), acc[c]);
    }
  }
  finish_rows<true, Rows>(acc, xs, w, chunks, n, y, pf);
}

template <bool Bf16, int Rows>
void dot_half_block(const float* x, const uint16_t* w, int64_t n, float* y, Prefetcher& pf) {
  if constexpr (Bf16)
    dot_bf16_block<Rows>(x, w, n, y, pf);
  else
    dot_f16_block<Rows>(x, w, n, y, pf);
}

template <bool Bf16>
void dot_half(const float* x, const uint16_t* w, int64_t rows, int64_t n, float* y, Prefetcher& pf) {
  int64_t c = 0;
  for (; c + 8 <= rows; c += 8) dot_half_block<Bf16, 8>(x, w + c * n, n, y + c, pf);
  for (; c + 4 <= rows; c += 4) dot_half_block<Bf16, 4>(x, w + c * n, n, y + c, pf);
  for (; c < rows; ++c) dot_half_block<Bf16, 1>(x, w + c * n, n, y + c, pf);
}

// R input rows × 4 weight rows: 4·R accumulators, each exactly the accumulator of dot().
template <int R>
void tile(const float* x, const float* w, int64_t n, float* y, int64_t ldy) {
  __m256 acc[R][4];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < 4; ++c) acc[r][c] = _mm256_setzero_ps();
  const int64_t body = n / 8 * 8;
  for (int64_t k = 0; k < body; k += 8) {
    __m256 xv[R];
    for (int r = 0; r < R; ++r) xv[r] = _mm256_loadu_ps(x + r * n + k);
    for (int c = 0; c < 4; ++c) {
      const __m256 wv = _mm256_loadu_ps(w + c * n + k);
      for (int r = 0; r < R; ++r) acc[r][c] = _mm256_fmadd_ps(xv[r], wv, acc[r][c]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < 4; ++c) y[r * ldy + c] = finish(acc[r][c], x + r * n, w + c * n, body, n);
}

}  // namespace

float dot(const float* a, const float* b, int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  const int64_t body = n / 8 * 8;
  for (int64_t k = 0; k < body; k += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + k), _mm256_loadu_ps(b + k), acc);
  return finish(acc, a, b, body, n);
}

void split_pairs(const float* src, float* dst, int64_t n) {
  const int64_t chunks = n / 16 * 16;
  for (int64_t k = 0; k < chunks; k += 16) {
    const __m256 a = _mm256_loadu_ps(src + k), b = _mm256_loadu_ps(src + k + 8);
    // Per 128-bit lane: (a0 a2 b0 b2 | a4 a6 b4 b6), then the middle 64-bit halves swapped.
    const __m256 even = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));
    const __m256 odd = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1));
    _mm256_storeu_ps(dst + k, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(even), _MM_SHUFFLE(3, 1, 2, 0))));
    _mm256_storeu_ps(dst + k + 8, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(odd), _MM_SHUFFLE(3, 1, 2, 0))));
  }
  std::copy(src + chunks, src + n, dst + chunks);  // (memcpy would take null pointers when n is 0)
}

void widen_bf16_pairs(const uint16_t* src, float* dst, int64_t n) {
  const __m256i high = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
  const int64_t chunks = n / 16 * 16;
  for (int64_t k = 0; k < chunks; k += 16) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + k));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + k), _mm256_slli_epi32(v, 16));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + k + 8), _mm256_and_si256(v, high));
  }
  for (int64_t k = chunks; k < n; ++k) {
    const uint32_t bits = static_cast<uint32_t>(src[k]) << 16;
    std::memcpy(dst + k, &bits, sizeof bits);
  }
}

void dot_bf16_rows(const float* x, const uint16_t* w, int64_t rows, int64_t n, float* y, Prefetcher& pf) {
  dot_half<true>(x, w, rows, n, y, pf);
}
void dot_f16_rows(const float* x, const uint16_t* w, int64_t rows, int64_t n, float* y, Prefetcher& pf) {
  dot_half<false>(x, w, rows, n, y, pf);
}

void dot_tile(const float* x, int64_t rows, const float* w, int64_t n, float* y, int64_t ldy) {
  switch (rows) {
    case 1: return tile<1>(x, w, n, y, ldy);
    case 2: return tile<2>(x, w, n, y, ldy);
    default: return tile<3>(x, w, n, y, ldy);
  }
}

}  // namespace kvinfer::cpu::avx2

KVINFER_AVX2_END

#else  // not x86: cpu_has_avx2_fma_f16c() is false, so these are never called

#include <cstdlib>

namespace kvinfer::cpu::avx2 {
float dot(const float*, const float*, int64_t) { std::abort(); }
void dot_bf16_rows(const float*, const uint16_t*, int64_t, int64_t, float*, Prefetcher&) { std::abort(); }
void split_pairs(const float*, float*, int64_t) { std::abort(); }
void widen_bf16_pairs(const uint16_t*, float*, int64_t) { std::abort(); }
void dot_f16_rows(const float*, const uint16_t*, int64_t, int64_t, float*, Prefetcher&) { std::abort(); }
void dot_tile(const float*, int64_t, const float*, int64_t, float*, int64_t) { std::abort(); }
}  // namespace kvinfer::cpu::avx2

#endif
