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
#include <cstddef>
#include <cstdint>

#include "cpu/prefetch.h"
#include "kvinfer/dtype.h"

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

// A block of weight rows as stored, narrower than f32, for block_products_widening.
struct StoredBlock {
  DType dtype;             // F16, BF16 (widened in the pair order) or a ggml block type
  const std::byte* data;   // the block's first row
  size_t row_bytes;        // row-major rows this far apart
  bool packed;             // a packed block of 16 rows (packed_rows.h; Q8_0, Q4_0, Q4_1 only)
};

// The most input rows block_products_widening takes: one group of the tiles, which then widen
// each run of weight rows once.
inline constexpr int64_t kWideningRows = 48;
// Runs of block_products_widening start at multiples of this many values of type t: its block
// (32 or 256 values), and at least 16 (bf16's pair order).
int64_t widening_align(DType t);

// block_products for a small batch (n <= kWideningRows: decode of a few sequences together) of
// weights stored narrower: instead of the whole block widened first (16 rows, in L2 once in
// exceeds 768), each run of 8 rows is widened into wbuf (8 · min(in, ~768) floats) right before
// its tiles read it, from L1. rows: a multiple of 8; in: a multiple of widening_align(dtype).
// The same products, so the same bits, as block_products on the block widened whole.
void block_products_widening(const float* xi, const float* x, int64_t n, const StoredBlock& w, int64_t rows,
                             int64_t in, float* y, int64_t ldy, float* scratch, float* wbuf,
                             Prefetcher* next = nullptr);

}  // namespace kvinfer::cpu::avx512
