// The AVX-512 weighted sums of V rows (attention_avx512.h). Compiled for AVX-512 function by
// function (avx512_target.h), like linear_avx512.cpp.
#include "cpu/attention_avx512.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "cpu/avx512_target.h"

KVINFER_AVX512_BEGIN

namespace kvinfer::cpu::avx512 {

namespace {

constexpr int kQueries = 6;  // queries of a tile: 6 × 4 registers of sums, 4 for a V row's 64 values

// Columns [d0, d0 + 16·C) of the R queries' outputs, over positions [j0, j1): R·C registers of
// sums; per position, C loads of the V row and R broadcasts of a probability.
template <int R, int C>
void tile(const float* const* p, float* const* o, const float* v, int64_t j0, int64_t j1, int64_t hd, int64_t d0,
          bool first) {
  __m512 acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(o[r] + d0 + 16 * c);
  for (int64_t j = j0; j < j1; ++j) {
    const float* row = v + j * hd + d0;
    __m512 vv[C];
    for (int c = 0; c < C; ++c) vv[c] = _mm512_loadu_ps(row + 16 * c);
    for (int r = 0; r < R; ++r) {
      const __m512 pj = _mm512_set1_ps(p[r][j]);
      for (int c = 0; c < C; ++c) acc[r][c] = _mm512_add_ps(acc[r][c], _mm512_mul_ps(pj, vv[c]));
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) _mm512_storeu_ps(o[r] + d0 + 16 * c, acc[r][c]);
}

template <int R>
void tiles(const float* const* p, float* const* o, const float* v, int64_t j0, int64_t j1, int64_t hd, bool first) {
  int64_t d = 0;
  for (; d + 64 <= hd; d += 64) tile<R, 4>(p, o, v, j0, j1, hd, d, first);
  for (; d + 16 <= hd; d += 16) tile<R, 1>(p, o, v, j0, j1, hd, d, first);
  for (; d < hd; ++d)  // the last hd mod 16 columns, one at a time, the same operations
    for (int r = 0; r < R; ++r) {
      float acc = first ? 0.0f : o[r][d];
      for (int64_t j = j0; j < j1; ++j) acc += p[r][j] * v[j * hd + d];
      o[r][d] = acc;
    }
}

}  // namespace

void values_tiles(const float* const* p, float* const* o, int64_t nq, const float* v, int64_t j0, int64_t j1,
                  int64_t hd, bool first) {
  for (int64_t i = 0; i < nq; i += kQueries) {
    switch (std::min<int64_t>(kQueries, nq - i)) {
      case 1: tiles<1>(p + i, o + i, v, j0, j1, hd, first); break;
      case 2: tiles<2>(p + i, o + i, v, j0, j1, hd, first); break;
      case 3: tiles<3>(p + i, o + i, v, j0, j1, hd, first); break;
      case 4: tiles<4>(p + i, o + i, v, j0, j1, hd, first); break;
      case 5: tiles<5>(p + i, o + i, v, j0, j1, hd, first); break;
      default: tiles<6>(p + i, o + i, v, j0, j1, hd, first); break;
    }
  }
}

}  // namespace kvinfer::cpu::avx512

KVINFER_AVX512_END

#else  // not x86: cpu_has_avx512() is false, so this is never called

#include <cstdlib>

namespace kvinfer::cpu::avx512 {
void values_tiles(const float* const*, float* const*, int64_t, const float*, int64_t, int64_t, int64_t, bool) {
  std::abort();
}
}  // namespace kvinfer::cpu::avx512

#endif
