#pragma once
// The AVX-512 loops of CPU attention (attention_avx512.cpp), called only when cpu_has_avx512():
// a prefill's weighted sums of V rows in tiles, and a decode step's scores and sums for the query
// heads of one KV head, which share its K and V rows. Each result has the bits of the AVX2
// per-pair loops (attention_avx2.h). The rows of an 8-bit cache are read as codes: the caller
// applies their scales.
#include <cstddef>
#include <cstdint>

#include "cpu/prefetch.h"
#include "kvinfer/dtype.h"

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


// s[r · lds + j] = dot(q_r, K row j) · scale for r < nq and j < ⌊rows/16⌋·16 (the last rows mod 16
// are left to the caller): avx2::attention_scores' bits. q (nq, hd) queries, hd a multiple of 8;
// K row j (hd values of dtype t) at k + j · hd · dtype_size(t), widened in registers once for all
// the queries. Tiles of up to 3 queries × 16 rows, two rows to a register. With pf, each 16 rows
// advance it by their bytes.
void decode_scores(DType t, const float* q, int64_t nq, int64_t hd, const std::byte* k, int64_t rows, float scale,
                   float* s, int64_t lds, ChainedPrefetcher* pf = nullptr);

// o[r][d] = Σ p[r][j] · (V row j)[d] over j = 0 .. count − 1 in order, each term rounded then added,
// for r < nq and the columns [d0, d1): avx2::attention_values' bits, column by column. V row j at
// v + j · hd · dtype_size(t), widened in registers once for all the queries. With pf, each 16
// rows advance it by the bytes of theirs that were read. `more`: the sums start from o's values
// (positions split over two calls add up to the bits of one).
void decode_values(DType t, const float* const* p, float* const* o, int64_t nq, const std::byte* v, int64_t count,
                   int64_t hd, int64_t d0, int64_t d1, ChainedPrefetcher* pf = nullptr, bool more = false);

}  // namespace kvinfer::cpu::avx512
