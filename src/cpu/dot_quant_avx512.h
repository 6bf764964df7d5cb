#pragma once
// Decode products with Q8_0, Q4_0 and Q4_1 weights on AVX-512 (dot_quant_avx512.cpp), called only
// when cpu_has_avx512(): avx2::dot_quant_rows (linear_avx2.h) two weight rows a 512-bit register.
#include <cstddef>
#include <cstdint>

#include "cpu/prefetch.h"
#include "kvinfer/dtype.h"

namespace kvinfer::cpu::avx512 {

// y[c] = dot(x, row c of w widened to f32) for `rows` consecutive Q8_0, Q4_0 or Q4_1 rows of n
// values, with avx2::dot_quant_rows' bits: each 32-value block decoded in registers as
// core::dequantize_group computes it, then dot()'s order. Rows go 8 at a time, a register holding
// the 8-lane accumulators of two rows against x's 8 values broadcast to both halves; the last
// rows mod 8 go to avx2::dot_quant_rows. Returns false, doing nothing, for any other type.
bool dot_quant_rows(DType t, const float* x, const std::byte* w, int64_t rows, int64_t n, float* y, Prefetcher& pf);
// The same for one packed block of 16 rows (packed_rows.h): y[0 .. 16), the bits dot_quant_rows
// gives the rows unpacked. Returns false, doing nothing, for any other type.
bool dot_quant_packed(DType t, const float* x, const std::byte* w, int64_t n, float* y, Prefetcher& pf);
// Prefill's widening of one packed block: its 16 rows of n values into dst (16, n), each value
// as to_f32 gives it. Returns false, doing nothing, for any other type than the three.
bool widen_quant_packed(DType t, const std::byte* w, int64_t n, float* dst);
// Part of that widening: rows [r0, r0 + 8) (r0 a multiple of 8), values [k0, k1) (multiples of
// 32), into dst (8, k1 - k0), the same values. Returns false, doing nothing, for any other type.
bool widen_quant_packed_part(DType t, const std::byte* w, int64_t r0, int64_t k0, int64_t k1, float* dst);

}  // namespace kvinfer::cpu::avx512
