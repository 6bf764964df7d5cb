#pragma once
// Matrix-vector products for small batches (kernels/gemv.cu): the weights are read once, in
// their stored format (quantised blocks decoded in registers, never into a dequantised copy).
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kvinfer/dtype.h"

namespace kvinfer::cuda {

// The largest n gemv() takes: one kernel instance per n, each keeping n partial sums a thread.
constexpr int64_t kGemvMaxRows = 8;

// y (n, rows) = x (n, cols) · Wᵀ (+ bias), n in 1 .. kGemvMaxRows. W (rows, cols) row-major of
// w_dtype: F32, F16, BF16 (any cols) or a quantised type (cols a multiple of its block size,
// rows dtype_row_bytes(w_dtype, cols) apart; values as cpu::to_f32's, bit for bit). x f32;
// bias (rows) f32 or null. f32 accumulation in an order that depends only on the shape: the
// same inputs give the same bits on every call. y must not overlap x.
void gemv(DType w_dtype, const void* w, int64_t rows, int64_t cols, const float* x, int64_t n, const float* bias,
          float* y, cudaStream_t stream);

}  // namespace kvinfer::cuda
