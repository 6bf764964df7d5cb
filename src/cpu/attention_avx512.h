#pragma once
// The AVX-512 weighted sums of V rows for a prefill's tiled attention (attention_avx512.cpp),
// called only when cpu_has_avx512().
#include <cstdint>

namespace kvinfer::cpu::avx512 {

// o[i][d] = o[i][d] + p[i][j] · v[j · hd + d] for j = 0, ..., count − 1 in that order, each term a
// product rounded and then added (no fused multiply-add), for every query i < nq and column
// d < hd; when `first`, o[i][d] starts from 0 instead (p and v then begin at its first position).
// So each o[i][d] gets the additions of the portable loop in attention.cpp, in its order, however
// the positions are split between calls. p[i] and o[i]: query i's probabilities (indexed by
// position) and output row; v: f32 V rows, row j at v + j · hd. Tiles of 6 queries × 64 columns
// keep their sums in registers across the positions, each V row loaded once for the 6.
void values_tiles(const float* const* p, float* const* o, int64_t nq, const float* v, int64_t count,
                  int64_t hd, bool first);

}  // namespace kvinfer::cpu::avx512
