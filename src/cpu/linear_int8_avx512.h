#pragma once
// Prefill's 8-bit activation products on AVX-512 VNNI machines (linear_int8_avx512.cpp), called
// only when cpu_has_avx512_vnni(): the arithmetic of linear_int8.h, bit for bit, for many input
// rows against one block of up to 16 weight rows.
//
// The one-row kernels (linear_int8_avx2.cpp) unpack each weight block for every input row. Here
// a block of weight rows is unpacked once (int8_prepare), into the registers' layout, and every
// input row then takes it straight from L1:
// - Q4_0, Q4_1: a 512-bit register holds 4 rows × their 4 partial sums I_m. The rows' low and high
//   nibbles, split once, against the input's codes 0..15 and 16..31 broadcast to each 128-bit lane
//   are two vpdpbusd (unsigned nibbles × signed codes, summed by fours: the exact I_m).
// - Q8_0: a register holds 2 rows × 8 partial sums I_l. vpdpbusd takes one unsigned operand, so
//   the input's codes go in shifted by 128 (as unsigned bytes) and the sum starts from
//   −128 · Σ w over each 4 weight codes, stored with the rows: (q + 128) · w − 128 · w = q · w.
// Each integer partial is then scaled and added exactly as linear_int8.h spells out (a product,
// then a sum), so every output has the bits the other paths give it.
#include <cstddef>
#include <cstdint>

#include "cpu/int8_prepared.h"
#include "cpu/linear_int8.h"
#include "cpu/prefetch.h"
#include "kvinfer/dtype.h"

namespace kvinfer::cpu::avx512 {

// Rearranges `rows` (1 to 16) weight rows of type t (int8_product_supported), stored one after
// another at w, into prep (int8_prepared.h: int8_prepared_bytes(t, in), 64-byte aligned).
void int8_prepare(DType t, const std::byte* w, int64_t rows, int64_t in, std::byte* prep);

// y[r · ldy + c] = int8_rows_product's row c for input row r, for r < n and c < rows: the input
// rows' quantised blocks (n, in / 32) and codes q (n, in), against the prepared weight rows.
void int8_prepared_products(DType t, const std::byte* prep, int64_t rows, int64_t in, const Int8Block* blocks,
                            const int8_t* q, int64_t n, float* y, int64_t ldy);

// Decode's products: int8_rows_product of linear_int8.h, bit for bit, each weight block unpacked
// in registers as it is read, 16 rows at a time.
void int8_rows_product(DType t, const Int8Block* blocks, const int8_t* q, const std::byte* w, int64_t rows, int64_t n,
                       float* y, Prefetcher& pf);

}  // namespace kvinfer::cpu::avx512
