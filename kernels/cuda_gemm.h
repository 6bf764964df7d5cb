#pragma once
// The projections through cuBLAS (cublasGemmEx), fp32 accumulation.
#include <cublas_v2.h>

#include <cstdint>

#include "kvinfer/dtype.h"

namespace kvinfer::cuda {

// The handle must already be bound to `stream` (cublasSetStream) with CUBLAS_POINTER_MODE_HOST,
// once at its creation: neither is set per call (cublasSetStream would also drop the handle's
// own workspace for cuBLAS's default pool).
//
// y (n, out) = x (n, in) · Wᵀ with W (out, in) row-major of w_dtype (HF Linear layout).
// For f16/bf16 weights x is first narrowed to w_dtype into x_lowp, (n, in) elements of w_dtype;
// for f32 weights x_lowp is unused (may be null). Accumulates in f32 (CUBLAS_COMPUTE_32F).
void gemm(cublasHandle_t handle, DType w_dtype, const void* w, int64_t out, int64_t in, const float* x, int64_t n,
          float* y, void* x_lowp, cudaStream_t stream);
// Columns [0, out) of y (n, ldy) row-major = x_w (n, in) · Wᵀ, x_w already of w_dtype (f32, f16
// or bf16): a tile of a wider product, y pointing at the tile's first column. ldy >= out.
void gemm_into(cublasHandle_t handle, DType w_dtype, const void* w, int64_t out, int64_t in, const void* x_w,
               int64_t n, float* y, int64_t ldy);

}  // namespace kvinfer::cuda
