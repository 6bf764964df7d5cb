#pragma once
// Products with 15-bit activations: the 8-bit products of linear_int8.h with finer input codes,
// for Q8_0, Q4_0 and Q4_1 weights. 8-bit codes round an activation to 1/254 of its block's
// largest value, which on models with outlier channels moves the next-token distribution
// measurably (docs/benchmarks.md); 15-bit codes are 128 times finer. A block's codes a
// (|a| ≤ 16,256) are split as a = 128 · h + l with |h| ≤ 127 and |l| ≤ 64, so that a weight block
// takes two 8-bit integer passes (h, then l) over its codes unpacked once, and
// Σ w · a = 128 · Σ w · h + Σ w · l exactly in 32-bit integers.
//
// Input block b of a row (32 values): d = max|x| / 16256, a = x / d rounded to nearest even and
// clamped to ±16,256 (all 0 when d is 0; a division, not a product with 1 / d, which overflows when
// d is subnormal), h = a / 128 rounded to nearest even, l = a − 128 · h, ds = d · (float) Σ a.
// A block holding a NaN or an infinity gets NaN for d and ds and codes 0, so every product it
// takes part in is NaN. The products are linear_int8.h's for Q8_0/Q4_0/Q4_1 with
//   I_m = 128 · Σ w_j · h_j + Σ w_j · l_j   over the same j (|I_m| ≤ 8 · 128 · 16256 < 2²⁴: exact in f32)
// and everything after I_m the same. Batch invariance holds as for the 8-bit products.
// Implemented beside the 8-bit products (linear_int8.cpp, the AVX2 kernels' files).
#include <cstdint>

#include "cpu/linear_int8.h"
#include "cpu/prefetch.h"
#include "kvinfer/dtype.h"

namespace kvinfer::cpu {

// The weight types the 15-bit products take.
constexpr bool int15_product_supported(DType t) { return t == DType::Q8_0 || t == DType::Q4_0 || t == DType::Q4_1; }

// Quantises n values (a multiple of 32) of x: blocks (n / 32) and codes h, l (n each). One
// portable loop on every machine (its cost is one pass over a row, against a pass over a matrix).
void quantize_int15(const float* x, int64_t n, Int8Block* blocks, int8_t* h, int8_t* l);

// y[c] = Σ_b (weight block b of row c) · (input block b) for `rows` consecutive weight rows of n
// values of type t (int15_product_supported) at w; pf fetches the next rows meanwhile.
void int15_rows_product(DType t, const Int8Block* blocks, const int8_t* h, const int8_t* l, const std::byte* w,
                        int64_t rows, int64_t n, float* y, Prefetcher& pf);

}  // namespace kvinfer::cpu
