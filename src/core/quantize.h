#pragma once
// f32 → ggml's Q8_0, Q4_0, Q4_1, Q4_K, Q5_K and Q6_K blocks (the inverse of kernels/core/quant.h's
// dequantisers). Q8_0/Q4_0/Q4_1 are bit-identical to ggml's reference quantisers
// (quantize_row_{q8_0,q4_0,q4_1}_ref in ggml-quants.c) and to gguf-py's gguf.quants.quantize: the
// same float32 operations in the same order, f16 fields rounded to nearest even. Per 32-value
// block x:
//
//   Q8_0  d = max|x| / 127, id = d ? 1/d : 0, q = roundf(x · id)   (round half away from zero)
//   Q4_0  max = the x of largest |x| (the first such), d = max / -8, id = d ? 1/d : 0,
//         q = min(15, trunc(x · id + 8.5)); value j is the low nibble of byte j, value j + 16
//         the high nibble
//   Q4_1  d = (max - min) / 15, id = d ? 1/d : 0, q = min(15, trunc((x - min) · id + 0.5)),
//         m = min; nibbles as Q4_0
//
// Q4_K and Q5_K follow ggml's quantize_row_q{4,5}_K_ref (gguf-py has no quantiser for them, so
// there is no fixture of their bytes): per 256-value super-block, each 32-value sub-block j gets
// a scale s_j and a minimum m_j >= 0 from make_qkx2_quants (a weighted least-squares search over
// 21 (Q4_K; 16 for Q5_K) candidate scales, weights sqrt(mean x²) + |x|, codes 0..15 (0..31));
// those are quantised to 6 bits against d = max s / 63 and dmin = max m / 63 (f16), and every
// value is coded again against the rounded d·sc and dmin·m: q = clamp(nearest((x + dmin·m) /
// (d·sc))). ggml's nearest_int rounds half to even (its 1.5·2^23 addition, used here too).
// Q6_K follows quantize_row_q6_K_ref: each 16-value sub-block gets a signed scale from
// make_qx_quants (weights x², codes -32..31, the best of 19 candidate scales), quantised to 8 bits
// against d = -max / 128 (f16, max the scale of largest magnitude), every value coded again as
// clamp(nearest(x / (d·sc)), -32, 31). A super-block whose scales are all under 1e-15 is zeros.
// The float32 operations are ggml's in its order, uncontracted; a ggml build that contracts
// multiply-adds into FMAs may pick other codes for a few values.
//
// Where ggml and gguf-py differ, this follows ggml: a Q4_0 block of zeros only whose first value
// is -0.0 gets d = -0.0 (f16 0x8000; gguf-py's argmax picks the -0.0 and stores +0.0), and a Q4_1
// block whose minimum is a zero of both signs takes the first one as m (numpy's min of mixed
// signed zeros depends on its SIMD path). Both dequantise to zeros, and neither occurs in real
// weights.
//
// Inputs are meant to be finite. ggml's C is undefined behaviour where a code overflows (a NaN or
// an infinity in the block, or a block of f32 subnormals whose 1/d overflows); here such a code
// is clamped to the format's range and a NaN code becomes 0, so the result is defined.
// Host only; no SIMD: it builds synthetic models and test data, not a hot path.
#include <cstddef>
#include <cstdint>

#include "kvinfer/dtype.h"

namespace kvinfer {

// Quantises n values (a multiple of the block size: 32, or 256 for the K-quants) into
// n / block blocks of type t at dst. Throws kvinfer::Error naming the dtype for any t but Q8_0,
// Q4_0, Q4_1, Q4_K, Q5_K and Q6_K, and for n not a whole number of blocks.
void quantize_row(DType t, const float* src, std::byte* dst, int64_t n);

// The types quantize_row writes.
constexpr bool can_quantize(DType t) {
  return t == DType::Q8_0 || t == DType::Q4_0 || t == DType::Q4_1 || t == DType::Q4_K || t == DType::Q5_K ||
         t == DType::Q6_K;
}

}  // namespace kvinfer
