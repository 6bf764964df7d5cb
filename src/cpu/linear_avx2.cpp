// AVX2/FMA dot products (linear_avx2.h). Compiled for AVX2 function by function (the pragma
// below), not with file-wide flags, so that nothing instantiated from a shared header here can
// replace the portable copy other files use. Everything inside is intrinsics and plain loops.
#include "cpu/linear_avx2.h"

#include <immintrin.h>

#include <cmath>

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace kvinfer::cpu::avx2 {

namespace {

// The fixed combination of the 8 lanes, after the tail's fused multiply-adds into lanes 0, 1, ...
inline float finish(__m256 acc, const float* a, const float* b, int64_t tail_from, int64_t n) {
  alignas(32) float l[8];
  _mm256_store_ps(l, acc);
  for (int64_t k = tail_from, i = 0; k < n; ++k, ++i) l[i] = std::fma(a[k], b[k], l[i]);
  return ((l[0] + l[4]) + (l[1] + l[5])) + ((l[2] + l[6]) + (l[3] + l[7]));
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

void dot_tile(const float* x, int64_t rows, const float* w, int64_t n, float* y, int64_t ldy) {
  switch (rows) {
    case 1: return tile<1>(x, w, n, y, ldy);
    case 2: return tile<2>(x, w, n, y, ldy);
    default: return tile<3>(x, w, n, y, ldy);
  }
}

}  // namespace kvinfer::cpu::avx2

#pragma GCC pop_options
