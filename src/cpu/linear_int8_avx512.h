#pragma once
// 8-bit activation products on AVX-512 VNNI machines (linear_int8_avx512.cpp), called only when
// cpu_has_avx512_vnni(): the arithmetic of linear_int8.h, bit for bit. A 512-bit register holds 4
// weight rows × their 4 partial sums I_m, one row to a 128-bit lane; the input's codes 0..15 and
// 16..31 are broadcast to every lane, and a block is two vpdpbusd (unsigned bytes × signed bytes,
// summed by fours), which give the exact I_m:
// - Q4_0, Q4_1: the rows' low nibbles against codes 0..15, their high nibbles against 16..31.
// - Q8_0: both operands are signed and vpdpbusd takes one unsigned, so one side goes in shifted by
//   128 (as unsigned bytes) and the sum starts from −128 · the other side's sum in each partial:
//   (a + 128) · b − 128 · b = a · b.
// Each integer partial is then scaled and added as linear_int8.h spells out (a product, then a
// sum), so every output has the bits the other paths give it.
//
// Prefill (int8_prepare, int8_prepared_products): a block of up to 16 weight rows is unpacked once
// into records in the registers' layout (int8_prepared.h: nibbles split, scales spread; for Q8_0,
// the input's codes are shifted and the records hold −128 · Σ w), and every input row then takes
// them straight from L1, in tiles of 3 input rows. Decode (int8_rows_product): 16 rows against the
// one input row, each block unpacked in registers as it is read (the weights' codes shifted, the
// sum starting from −128 · Σ q).
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
// The same for one packed block of 16 rows (packed_rows.h): the records int8_prepare makes of the
// rows unpacked.
void int8_prepare_packed(DType t, const std::byte* w, int64_t in, std::byte* prep);

// y[r · ldy + c] = int8_rows_product's row c for input row r, for r < n and c < rows: the input
// rows' quantised blocks (n, in / 32) and codes q (n, in), against the prepared weight rows.
void int8_prepared_products(DType t, const std::byte* prep, int64_t rows, int64_t in, const Int8Block* blocks,
                            const int8_t* q, int64_t n, float* y, int64_t ldy);

// Decode's products: int8_rows_product of linear_int8.h, bit for bit, 16 rows at a time.
void int8_rows_product(DType t, const Int8Block* blocks, const int8_t* q, const std::byte* w, int64_t rows, int64_t n,
                       float* y, Prefetcher& pf);
// The same for one packed block of 16 rows (packed_rows.h): y[0 .. 16), the bits
// int8_rows_product gives the rows unpacked.
void int8_packed_product(DType t, const Int8Block* blocks, const int8_t* q, const std::byte* w, int64_t n, float* y,
                         Prefetcher& pf);

}  // namespace kvinfer::cpu::avx512
