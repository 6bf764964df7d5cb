#pragma once
// The register tiles of attention's weighted sums of V rows, shared by attention_avx2.cpp (8-lane
// registers) and attention_avx512.cpp (16-lane). Include it only after those files'
// KVINFER_AVX2_BEGIN or KVINFER_AVX512_BEGIN, like avx2_inline.h: everything here has internal
// linkage, so each file instantiates it for its own target. V names the register type and its
// operations: Reg, kLanes, kWide (registers a row of the wide tiles), kQueries (queries a tile),
// zero, load, store, set1, add, mul. The includes below must already have been included before
// the BEGIN (here they are no-ops), so that nothing from a standard header is compiled for the target.
#include <algorithm>
#include <cstdint>

namespace kvinfer::cpu {
namespace {

// Columns [d0, d0 + kLanes·C) of the R queries' outputs over positions [0, count): R·C registers of
// sums, from 0 when `first`, else from o; per position, C loads of the V row and R broadcasts of
// a probability, then each sum plus the product (rounded, then added: no fused multiply-add).
template <class V, int R, int C>
void values_tile(const float* const* p, float* const* o, const float* v, int64_t count, int64_t hd,
                 int64_t d0, bool first) {
  typename V::Reg acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = first ? V::zero() : V::load(o[r] + d0 + V::kLanes * c);
  for (int64_t j = 0; j < count; ++j) {
    const float* row = v + j * hd + d0;
    typename V::Reg vv[C];
    for (int c = 0; c < C; ++c) vv[c] = V::load(row + V::kLanes * c);
    for (int r = 0; r < R; ++r) {
      const typename V::Reg pj = V::set1(p[r][j]);
      for (int c = 0; c < C; ++c) acc[r][c] = V::add(acc[r][c], V::mul(pj, vv[c]));
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) V::store(o[r] + d0 + V::kLanes * c, acc[r][c]);
}

// Every column of R queries: wide tiles, then one register at a time, then the last
// hd mod kLanes columns one at a time, with the same operations.
template <class V, int R>
void values_tiles_of(const float* const* p, float* const* o, const float* v, int64_t count, int64_t hd,
                     bool first) {
  int64_t d = 0;
  for (; d + V::kLanes * V::kWide <= hd; d += V::kLanes * V::kWide)
    values_tile<V, R, V::kWide>(p, o, v, count, hd, d, first);
  for (; d + V::kLanes <= hd; d += V::kLanes) values_tile<V, R, 1>(p, o, v, count, hd, d, first);
  for (; d < hd; ++d)
    for (int r = 0; r < R; ++r) {
      float acc = first ? 0.0f : o[r][d];
      for (int64_t j = 0; j < count; ++j) acc += p[r][j] * v[j * hd + d];
      o[r][d] = acc;
    }
}

// The nq queries, V::kQueries at a time (the last R of them together).
template <class V, int R = V::kQueries>
void values_tiles_all(const float* const* p, float* const* o, int64_t nq, const float* v, int64_t count,
                      int64_t hd, bool first) {
  if constexpr (R > 0) {
    for (; nq >= R; nq -= R, p += R, o += R) values_tiles_of<V, R>(p, o, v, count, hd, first);
    values_tiles_all<V, R - 1>(p, o, nq, v, count, hd, first);
  }
}

}  // namespace
}  // namespace kvinfer::cpu
