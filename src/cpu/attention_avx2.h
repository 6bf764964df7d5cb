#pragma once
// The AVX2/FMA inner loops of CPU attention (attention_avx2.cpp), called only when the CPU has
// AVX2, FMA and F16C (cpu/cpu_features.h). K and V rows are read in the cache's dtype (f32, f16,
// bf16, or an 8-bit type's codes, whose row scales the caller applies) and widened in registers.
#include <cstddef>
#include <cstdint>

#include "kvinfer/dtype.h"

namespace kvinfer::cpu::avx2 {

// s[j] = dot(q, K row j) · scale for j in [first, last]: K row j (hd values of dtype t) starts at
// k + (j − first) · hd · dtype_size(t) (k: the row of position `first`). Each product in dot()'s
// order (linear_avx2.h), so the scores are the bits of widening the row and calling dot(), and
// none depends on the range it was computed in.
void attention_scores(DType t, const float* q, const std::byte* k, int64_t first, int64_t last, int64_t hd,
                      float scale, float* s);

// o[d] = Σ p[j] · (V row j)[d] over j = first, ..., last in that order, each term a product
// rounded and then added (no fused multiply-add: the portable loop's bits); V row j at
// v + (j − first) · hd · dtype_size(t). o (hd) is overwritten, or when `more` added to: a range
// split in two calls gives the bits of one call.
void attention_values(DType t, const float* p, const std::byte* v, int64_t first, int64_t last, int64_t hd, float* o,
                      bool more = false);

// avx512::values_tiles (attention_avx512.h) with 8-lane registers, the same bits: o[i][d] =
// o[i][d] + p[i][j] · v[j · hd + d] for j = 0 .. count − 1 in order (from 0 when `first`), for
// every query i < nq and column d < hd, in tiles of 4 queries × 16 columns.
void values_tiles(const float* const* p, float* const* o, int64_t nq, const float* v, int64_t count,
                  int64_t hd, bool first);

}  // namespace kvinfer::cpu::avx2
