#pragma once
// Products with 8-bit activations (llama.cpp's approach) for every ggml weight type kvinfer reads
// (unless LoadOptions::exact): each 32-value block of an input row (256-value super-block for the K-quants) is quantised to
// int8 with one f32 scale, and a weight block times an input block is an exact integer dot
// product times the two scales. Fewer instructions per weight byte than widening to f32, at the
// price of the activations' rounding (about 0.4 % of a block's largest value): results are close
// to the exact products, not equal to them.
//
// Batch invariance holds all the same: every output element is computed by the same function of
// its input row and weight row, in one fixed order, whatever n and the thread count.
#include <cstdint>

#include "cpu/prefetch.h"
#include "kvinfer/dtype.h"

namespace kvinfer::cpu {

// One input row quantised per 32-value block: block b is d · q[32b .. 32b + 31] with codes in
// [-127, 127], and ds = d · Σ q (Q4_1's offset term needs it). In f32: d = max|x| / 127,
// q = x · (1 / d) rounded to nearest even (all 0 when d is 0), ds = d · (float) Σ q. A block holding a NaN or an infinity gets NaN for both, so every product it takes
// part in is NaN.
struct Int8Block {
  float d;
  float ds;
};

// The arithmetic, the same on every path (AVX2 and portable give the same bits). For weight row
// c and input block b, with weight codes w (Q8_0: the signed bytes; Q4_0 and Q4_1: the nibbles,
// 0..15), 4 exact integer partial sums
//   I_m = Σ_{j = 4m}^{4m+3} w_j · q_j + Σ_{j = 16+4m}^{16+4m+3} w_j · q_j  (m = 0..3)
// (a Q4 byte packs values j and j + 16, so the kernels sum a byte's two values in one partial;
// Q8_0 takes the same partials, so that its rows pair up in the same registers), then
//   p = d_w · d_x (f32);  acc_m = acc_m + p · I_m  (a product, then a sum: no fused multiply-add)
//   Q4_1 also: off = off + m_w · ds;  Q4_0 also: off = off + d_w · ds
// over the blocks in order, and
//   Q8_0: y[c] = (acc_0 + acc_2) + (acc_1 + acc_3)
//   Q4_1: y[c] = ((acc_0 + acc_2) + (acc_1 + acc_3)) + off
//   Q4_0: y[c] = ((acc_0 + acc_2) + (acc_1 + acc_3)) − 8 · off
// (Q4_0's value is d_w · (w − 8): its offset, −8 · d_w per block, is taken out of the sum and
// applied once, which is exact since 8 is a power of two).
//
// Q5_0 and Q5_1: block b of a weight row is read as int8_blocks.h says, codes u_j (0..31), scale s,
// offset factor f (Q5_0 d, Q5_1 m). For input block b, 8 exact integer partials
// J_l = Σ_{j = 4l}^{4l+3} u_j · q_j, then
//   p = s · d_x (f32);   acc_l = fma(p, J_l, acc_l);   off_{b mod 8} = fma(f, ds_x, off_{b mod 8})
// over the blocks in order, and with tree(v) = ((v_0 + v_4) + (v_1 + v_5)) + ((v_2 + v_6) + (v_3 + v_7)):
//   Q5_0: y[c] = tree(acc) − 16 · tree(off);   Q5_1: y[c] = tree(acc) + tree(off).
//
// The K-quants (Q4_K, Q5_K, Q6_K) take their input per 256-value super-block instead
// (Int8Super, llama.cpp's q8_K), so that a super-block's groups add up in integers. Super-block s
// of a weight row is read as int8_blocks.h says (KSuper): codes u (Q4_K 0..15, Q5_K 0..31, Q6_K
// 0..63), 16-bit multipliers m_{k,i} for chunk k (values 32k .. 32k + 31) and lane i (Q4_K/Q5_K:
// the group's 6-bit scale; Q6_K: the signed scale of the 16 values lane i covers), offset
// multipliers n_i (Q4_K/Q5_K: the min of group i / 2; Q6_K: scale i), d and dmin. With the
// input's codes q and 16-value sums S_i:
//   I_l = Σ_k m_{k,⌊l/4⌋} · Σ_{j = 4l}^{4l+3} u_{32k+j} · q_{32k+j}   (vpmaddubsw, then vpmaddwd by
//         m_k, in integers);   M_l = n_{2l} · S_{2l} + n_{2l+1} · S_{2l+1}
//   p = d · d_x, pm = dmin · d_x (Q6_K: pm = p);
//   acc_l = fma(p, I_l, acc_l) once a super-block (Q6_K: once for each 128-value half, chunks
//   0..3 then 4..7);   moff_l = fma(pm, M_l, moff_l)
//   y[c] = tree(acc) − tree(moff) (Q4_K, Q5_K);   y[c] = tree(acc) − 32 · tree(moff) (Q6_K).
// |I_l| < 2²⁴ (a Q6_K half at most 16,388,096) and |M_l| ≤ 520,192: both exact in f32.
// Q5 and K products take the AVX2 kernels on every x86 machine with AVX2 (AVX-512 ones too),
// so that every machine gives the same bits.

// One input row quantised per 256-value super-block for the K-quants: d = max|x| / 127 over the
// 256 values, codes as Int8Block's, S_i = the sum of codes 16i .. 16i + 15. NaN or infinity: d
// NaN, codes 0.
struct Int8Super {
  float d;
  int16_t sums[16];
};

// Quantises n values (a multiple of 256) of x: super-blocks (n / 256) and codes q (n).
void quantize_int8_super(const float* x, int64_t n, Int8Super* supers, int8_t* q);

// The K-quants' products, as int8_rows_product's (t is Q4_K, Q5_K or Q6_K).
void int8_super_rows_product(DType t, const Int8Super* supers, const int8_t* q, const std::byte* w, int64_t rows,
                             int64_t n, float* y, Prefetcher& pf);

constexpr bool int8_super_type(DType t) { return t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K; }

// Quantises n values (a multiple of 32) of x: blocks (n / 32) and codes q (n).
void quantize_int8(const float* x, int64_t n, Int8Block* blocks, int8_t* q);

// True for the weight types the int8 products take: every ggml type.
constexpr bool int8_product_supported(DType t) {
  return t == DType::Q8_0 || t == DType::Q4_0 || t == DType::Q4_1 || t == DType::Q5_0 || t == DType::Q5_1 ||
         t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K;
}

// y[c] = Σ_b (weight block b of row c) · (input block b), for `rows` consecutive weight rows of n
// values of type t (int8_product_supported), stored one after another at w. pf (prefetch.h)
// fetches the next rows meanwhile; the portable loops leave it be.
void int8_rows_product(DType t, const Int8Block* blocks, const int8_t* q, const std::byte* w, int64_t rows, int64_t n,
                       float* y, Prefetcher& pf);

}  // namespace kvinfer::cpu
