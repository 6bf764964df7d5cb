#pragma once
// The f32 products of prefill on AVX-512 (linear_avx512.cpp), called only when cpu_has_avx512().
//
// They keep the one order of linear_avx2.h: every product is 8 lanes of fused multiply-adds
// (lane l takes k ≡ l mod 8, in increasing k), the tail into lanes 0, 1, ..., and the lanes'
// fixed tree, so each result has the bits avx2::dot gives it. A 512-bit register holds two such
// 8-lane accumulators, those of two input rows against one weight row: the input rows come
// interleaved in pairs, 8 values of one then 8 of the other (interleave_rows), each weight row's
// 8 values are broadcast to both halves, and one fused multiply-add advances both products.
// Twice the multiply-adds an instruction of the AVX2 tiles, the same bits.
#include <cstdint>

#include "cpu/prefetch.h"

namespace kvinfer::cpu::avx512 {

// The number of floats interleave_rows writes for n rows of `in` values: ⌈n/2⌉ pairs of 2·8·⌊in/8⌋.
int64_t interleaved_size(int64_t n, int64_t in);

// xi (⌈n/2⌉, ⌊in/8⌋, 2, 8) = x (n, in) interleaved in pairs of rows: for pair p and each whole 8
// values j, row 2p's values 8j .. 8j+7, then row 2p+1's (zeros when n is odd and 2p+1 = n). The
// last in mod 8 values of each row are left out; the products read them from x.
void interleave_rows(const float* x, int64_t n, int64_t in, float* xi);

// The floats of scratch block_products needs for `rows` weight rows.
int64_t block_scratch_size(int64_t rows);

// y[t · ldy + c] = dot(x + t · in, w + c · in, in), with avx2::dot's bits, for t < n and c < rows
// (a multiple of 8). x (n, in): input rows, xi: the same interleaved (interleave_rows), w (rows,
// in): f32 weight rows, 32-byte aligned with in a multiple of 8 for full speed (any alignment is
// correct). Tiles of 6 input rows × 8 weight rows; the values go in runs of equal length, at most
// 576 (512 for in = 1024, 2048, 4096; 576 in one), each run of a block's weight rows (16 to
// 18 KiB for 8 rows) reused from L1 by 48 input rows, the tiles' accumulators kept in `scratch`
// (block_scratch_size(rows) floats) between runs: f32 in memory, so the bits do not depend on
// where the runs split. `next` (when not null) is fetched into L2 over the
// tiles' steps, an equal share at each step of 8 values (up to a line; any more after each tile),
// so its region is fetched by the time the last tile ends.
void block_products(const float* xi, const float* x, int64_t n, const float* w, int64_t rows, int64_t in, float* y,
                    int64_t ldy, float* scratch, Prefetcher* next = nullptr);

}  // namespace kvinfer::cpu::avx512
