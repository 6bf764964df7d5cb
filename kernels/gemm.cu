// The projections through cublasGemmEx. cuBLAS is column-major; a row-major (rows, cols) matrix
// is the column-major (cols, rows) one, so row-major y (n, out) = x (n, in) · Wᵀ is, in
// column-major terms, y' (out, n) = W' ᵀ · x' with W' = W as (in, out), lda = in; x' (in, n),
// ldb = in; y' (out, n), ldc = out (ldy for a tile of y's columns: y' (ldy, n), the tile's
// first row at y).
#include <cublas_v2.h>

#include <limits>
#include <string>

#include "cuda/cublas_loader.h"
#include "cuda_check.h"
#include "cuda_gemm.h"
#include "cuda_ops.h"

// CUBLAS_CHECK: throws kvinfer::Error naming the file, line, failing call and cuBLAS status.
namespace kvinfer::cuda {
[[noreturn]] inline void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line) {
  throw Error(ErrorKind::Device, std::string(file) + ":" + std::to_string(line) + ": " + call + " failed: " +
              cublas().get_status_name(status) + " (" + cublas().get_status_string(status) + ")");
}
}  // namespace kvinfer::cuda
#define CUBLAS_CHECK(call)                                                                            \
  do {                                                                                                \
    cublasStatus_t kvinfer_status_ = (call);                                                          \
    if (kvinfer_status_ != CUBLAS_STATUS_SUCCESS)                                                     \
      ::kvinfer::cuda::throw_cublas_error(kvinfer_status_, #call, __FILE__, __LINE__);                \
  } while (0)

namespace kvinfer::cuda {
namespace {

[[noreturn]] void fail(const std::string& what) { throw Error(ErrorKind::InvalidArgument, "cuda::gemm: " + what); }

int checked_int(int64_t v, const char* name) {
  if (v <= 0 || v > std::numeric_limits<int>::max())
    fail(std::string(name) + " must be in 1 .. 2^31 - 1 (cuBLAS takes int), got " + std::to_string(v));
  return static_cast<int>(v);
}

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::F32: return CUDA_R_32F;
    case DType::F16: return CUDA_R_16F;
    case DType::BF16: return CUDA_R_16BF;
    default: break;
  }
  throw Error(ErrorKind::InvalidArgument, std::string("cuda::gemm: no cuBLAS type for dtype ") + std::string(dtype_name(t)) +
              " (quantised weights are dequantised to f16 first)");
}

}  // namespace

void gemm(cublasHandle_t handle, DType w_dtype, const void* w, int64_t out, int64_t in, const float* x, int64_t n,
          float* y, void* x_lowp, cudaStream_t stream) {
  if (x == nullptr) fail("x is a null pointer");
  (void)cuda_type(w_dtype);  // a quantised dtype is refused before anything is enqueued
  const void* x_w = x;  // (n, in) of w_dtype
  if (w_dtype != DType::F32) {
    if (x_lowp == nullptr)
      fail(std::string("x_lowp is a null pointer (needed for ") + std::string(dtype_name(w_dtype)) + " weights)");
    convert_from_f32(w_dtype, x, x_lowp, n * in, stream);
    x_w = x_lowp;
  }
  gemm_into(handle, w_dtype, w, out, in, x_w, n, y, out);
}

void gemm_into(cublasHandle_t handle, DType w_dtype, const void* w, int64_t out, int64_t in, const void* x_w,
               int64_t n, float* y, int64_t ldy) {
  if (handle == nullptr) fail("handle is null");
  if (w == nullptr || x_w == nullptr || y == nullptr) fail("w, x and y must be non-null device pointers");
  const int m_out = checked_int(out, "out"), k_in = checked_int(in, "in"), n_rows = checked_int(n, "n");
  const int ld_y = checked_int(ldy, "ldy");
  if (ld_y < m_out) fail("ldy (" + std::to_string(ldy) + ") must be at least out (" + std::to_string(out) + ")");
  const cudaDataType_t ab_type = cuda_type(w_dtype);
  // alpha/beta on the host: the handle's pointer mode, set once at its creation.
  const float alpha = 1.0f, beta = 0.0f;
  // f32 accumulation. f32 weights use the pedantic mode: true fp32, never TF32, whatever the
  // handle's math mode or NVIDIA_TF32_OVERRIDE say (the f32 fixtures are held to 1e-4 of HF).
  const cublasComputeType_t compute = w_dtype == DType::F32 ? CUBLAS_COMPUTE_32F_PEDANTIC : CUBLAS_COMPUTE_32F;
  CUBLAS_CHECK(cublas().gemm_ex(handle, CUBLAS_OP_T, CUBLAS_OP_N, m_out, n_rows, k_in, &alpha, w, ab_type, k_in,
                                x_w, ab_type, k_in, &beta, y, CUDA_R_32F, ld_y, compute, CUBLAS_GEMM_DEFAULT));
}

}  // namespace kvinfer::cuda
