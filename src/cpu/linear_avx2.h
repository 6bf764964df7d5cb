#pragma once
// The AVX2/FMA dot products of the CPU backend (linear_avx2.cpp), called only when the CPU has
// AVX2, FMA and F16C (cpu/cpu_features.h).
//
// One order of operations for every product, which keeps batch invariance: lane l of an 8-lane
// accumulator takes the fused multiply-adds of the elements k ≡ l (mod 8) in increasing k; the
// tail (k ≥ 8·⌊n/8⌋) goes to lanes 0, 1, ... in order, fused too; the lanes are combined as
// ((0 + 4) + (1 + 5)) + ((2 + 6) + (3 + 7)). dot() and every entry of dot_tile() follow it, so a
// product gives the same bits whichever kernel computes it. bf16 products follow it on rows in
// the pair order (split_pairs below, cpu_ops.h).
#include <cstddef>
#include <cstdint>

#include "cpu/linear_int8.h"
#include "cpu/prefetch.h"
#include "kvinfer/dtype.h"

namespace kvinfer::cpu::avx2 {

float dot(const float* a, const float* b, int64_t n);

// y[c] = dot(x, row c of w widened to f32) for `rows` consecutive f16 weight rows of n values,
// widened in registers (exactly: the same bits as dot() on the widened rows). Decode reads each
// weight once, at 2 bytes a value; pf fetches the next rows meanwhile (prefetch.h).
void dot_f16_rows(const float* x, const uint16_t* w, int64_t rows, int64_t n, float* y, Prefetcher& pf);
// The same for bf16 rows, whose products take the pair order: y[c] = dot(xs, split(row c widened))
// where xs = split(x). split (cpu::split_pairs of cpu_ops.h) puts each whole 16 values' 8 at even
// places before their 8 at odd places, and leaves the last n mod 16 in place: a 32-byte load of
// bf16 is then 8 even values (shifted up by 16 bits) and 8 odd ones (masked), one load, a shift
// and a mask for 16 values instead of two widening loads and two shifts.
void dot_bf16_rows(const float* xs, const uint16_t* w, int64_t rows, int64_t n, float* y, Prefetcher& pf);

// cpu::split_pairs, bit for bit; and n bf16 values widened to f32 in the pair order (the split of
// their widening), the widening of a bf16 weight row for prefill.
void split_pairs(const float* src, float* dst, int64_t n);
void widen_bf16_pairs(const uint16_t* src, float* dst, int64_t n);

// y[c] = dot(x, row c of w widened to f32) for `rows` consecutive rows of n values in the
// ggml-quantised type t (Q8_0, Q4_0/1, Q5_0/1, Q4_K, Q5_K, Q6_K), decoded in registers with the
// bits cpu::to_f32 gives (dot_quant_avx2.cpp). Returns false, doing nothing, for any other type.
bool dot_quant_rows(DType t, const float* x, const std::byte* w, int64_t rows, int64_t n, float* y, Prefetcher& pf);

// int8_rows_product of linear_int8.h (t is Q8_0, Q4_0 or Q4_1), bit for bit, with AVX2 integer
// dot products (linear_int8_avx2.cpp).
void int8_rows_product(DType t, const Int8Block* blocks, const int8_t* q, const std::byte* w, int64_t rows, int64_t n,
                       float* y, Prefetcher& pf);

// Prefill's 8-bit products (t is Q8_0, Q4_0 or Q4_1), where the CPU has no AVX-512 VNNI
// (linear_int8_prepared_avx2.cpp): int8_prepare unpacks `rows` (1 to 16) weight rows at w into
// prep (int8_prepared.h: int8_prepared_bytes(t, in), 64-byte aligned); int8_prepared_products
// then gives y[r · ldy + c] = int8_rows_product's row c for input row r (blocks (n, in / 32),
// codes q (n, in)), for r < n and c < rows, bit for bit.
void int8_prepare(DType t, const std::byte* w, int64_t rows, int64_t in, std::byte* prep);
void int8_prepared_products(DType t, const std::byte* prep, int64_t rows, int64_t in, const Int8Block* blocks,
                            const int8_t* q, int64_t n, float* y, int64_t ldy);
// The same for 15-bit activations (linear_int15.h; Q8_0, Q4_0, Q4_1) from int8_prepare's records:
// y[r · ldy + c] = int15_rows_product's row c for input row r (codes h and l (n, in)).
void int15_prepared_products(DType t, const std::byte* prep, int64_t rows, int64_t in, const Int8Block* blocks,
                             const int8_t* h, const int8_t* l, int64_t n, float* y, int64_t ldy);

// The same three for Q5_0 and Q5_1 (linear_int8_blocks_avx2.cpp; prep holds Int8BlockPrepared
// records): the one-row kernels and the tiles of every x86 machine with AVX2.
void int8_block_rows_product(DType t, const Int8Block* blocks, const int8_t* q, const std::byte* w, int64_t rows,
                             int64_t n, float* y, Prefetcher& pf);
void int8_block_prepare(DType t, const std::byte* w, int64_t rows, int64_t in, std::byte* prep);
void int8_block_prepared_products(DType t, const std::byte* prep, int64_t rows, int64_t in, const Int8Block* blocks,
                                  const int8_t* q, int64_t n, float* y, int64_t ldy);

// The K-quants' (Q4_K, Q5_K, Q6_K) with super-block inputs (linear_int8k_avx2.cpp; prep holds
// Int8SuperPrepared records), and quantize_int8_super, bit for bit.
void int8_super_rows_product(DType t, const Int8Super* supers, const int8_t* q, const std::byte* w, int64_t rows,
                             int64_t n, float* y, Prefetcher& pf);
void int8_super_prepare(DType t, const std::byte* w, int64_t rows, int64_t in, std::byte* prep);
void int8_super_prepared_products(DType t, const std::byte* prep, int64_t rows, int64_t in, const Int8Super* supers,
                                  const int8_t* q, int64_t n, float* y, int64_t ldy);
void quantize_int8_super(const float* x, int64_t n, Int8Super* supers, int8_t* q);

// int15_rows_product of linear_int15.h (Q8_0, Q4_0, Q4_1), bit for bit: the 8-bit kernels with
// two passes over each unpacked weight block (linear_int8_avx2.cpp).
void int15_rows_product(DType t, const Int8Block* blocks, const int8_t* h, const int8_t* l, const std::byte* w,
                        int64_t rows, int64_t n, float* y, Prefetcher& pf);

// quantize_int8 of linear_int8.h, bit for bit.
void quantize_int8(const float* x, int64_t n, Int8Block* blocks, int8_t* q);

// y[t · ldy + c] = dot(x + t · n, w + c · n, n) for t < rows and c < 4; rows is 1, 2 or 3.
// x: (rows, n) input rows, w: (4, n) weight rows, both f32.
void dot_tile(const float* x, int64_t rows, const float* w, int64_t n, float* y, int64_t ldy);

}  // namespace kvinfer::cpu::avx2
