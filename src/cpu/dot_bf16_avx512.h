#pragma once
// Decode products with bf16 weights on AVX-512 (dot_bf16_avx512.cpp), called only when
// cpu_has_avx512(): avx2::dot_bf16_rows (linear_avx2.h) two weight rows a 512-bit register.
#include <cstdint>

#include "cpu/prefetch.h"

namespace kvinfer::cpu::avx512 {

// y[c] = dot(xs, row c of w widened) for `rows` consecutive bf16 rows of n values, xs being x in
// the pair order (split_pairs): avx2::dot_bf16_rows' bits. Rows go 8 at a time, a register
// holding two rows' 8-lane accumulators against xs's 8 values broadcast to both halves; the last
// rows mod 8, and rows whose n is not a whole number of 16s, go to avx2::dot_bf16_rows.
void dot_bf16_rows(const float* xs, const uint16_t* w, int64_t rows, int64_t n, float* y, Prefetcher& pf);
// The same for one packed block of 16 rows (packed_rows.h), n a multiple of 16: y[0 .. 16), the
// bits dot_bf16_rows gives the rows unpacked.
void dot_bf16_packed(const float* xs, const uint16_t* w, int64_t n, float* y, Prefetcher& pf);
// Prefill's widening of one packed block: its 16 rows of n values (a multiple of 16) into dst
// (16, n), each row in the pair order, as widen_bf16_pairs gives it.
void widen_bf16_packed(const uint16_t* w, int64_t n, float* dst);

}  // namespace kvinfer::cpu::avx512
