#pragma once
// f32 → ggml's Q8_0, Q4_0 and Q4_1 blocks (the inverse of kernels/core/quant.h's dequantisers),
// bit-identical to ggml's reference quantisers (quantize_row_{q8_0,q4_0,q4_1}_ref in
// ggml-quants.c) and to gguf-py's gguf.quants.quantize: the same float32 operations in the same
// order, f16 fields rounded to nearest even. Per 32-value block x:
//
//   Q8_0  d = max|x| / 127, id = d ? 1/d : 0, q = roundf(x · id)   (round half away from zero)
//   Q4_0  max = the x of largest |x| (the first such), d = max / -8, id = d ? 1/d : 0,
//         q = min(15, trunc(x · id + 8.5)); value j is the low nibble of byte j, value j + 16
//         the high nibble
//   Q4_1  d = (max - min) / 15, id = d ? 1/d : 0, q = min(15, trunc((x - min) · id + 0.5)),
//         m = min; nibbles as Q4_0
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

// Quantises n values (a multiple of 32) into n / 32 blocks of type t at dst. Throws
// kvinfer::Error naming the dtype for any t but Q8_0, Q4_0 and Q4_1, and for n not a whole
// number of blocks.
void quantize_row(DType t, const float* src, std::byte* dst, int64_t n);

// The types quantize_row writes.
constexpr bool can_quantize(DType t) { return t == DType::Q8_0 || t == DType::Q4_0 || t == DType::Q4_1; }

}  // namespace kvinfer
