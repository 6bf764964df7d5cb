// The cuBLAS stand-in: cublasGemmEx with cuBLAS's documented argument rules and results computed
// on the CPU in f32 (or the compute type's precision), in the order of the handle's stream.
#include <cublas_v2.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "../../kernels/core/convert.h"
#include "internal.h"

struct cublasContext {
  cudaStream_t stream = nullptr;
  cublasPointerMode_t pointer_mode = CUBLAS_POINTER_MODE_HOST;
  cublasMath_t math = CUBLAS_DEFAULT_MATH;
};

namespace {

bool valid(cublasHandle_t h) { return h != nullptr; }

size_t type_size(cudaDataType_t t) {
  switch (t) {
    case CUDA_R_32F: return 4;
    case CUDA_R_16F: case CUDA_R_16BF: return 2;
    default: return 0;
  }
}

float load(cudaDataType_t t, const unsigned char* p) {
  switch (t) {
    case CUDA_R_16F: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return kvinfer::core::f16_to_f32(h);
    }
    case CUDA_R_16BF: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return kvinfer::core::bf16_to_f32(h);
    }
    default: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
  }
}

void store(cudaDataType_t t, unsigned char* p, float v) {
  if (t == CUDA_R_32F) {
    std::memcpy(p, &v, 4);
    return;
  }
  const uint16_t h = t == CUDA_R_16F ? kvinfer::core::f32_to_f16(v) : kvinfer::core::f32_to_bf16(v);
  std::memcpy(p, &h, 2);
}

// The (A, B, C) type combinations cublasGemmEx documents for these compute types; the stand-in
// runs the real-valued f32/f16/bf16 ones (kvinfer uses no others) and answers NOT_SUPPORTED for
// the rest, as cuBLAS does for a combination it does not have.
bool supported(cublasComputeType_t c, cudaDataType_t a, cudaDataType_t b, cudaDataType_t ct) {
  if (a != b) return false;
  switch (c) {
    case CUBLAS_COMPUTE_32F:
    case CUBLAS_COMPUTE_32F_PEDANTIC:
      return (a == CUDA_R_32F && ct == CUDA_R_32F) || (a == CUDA_R_16F && (ct == CUDA_R_16F || ct == CUDA_R_32F)) ||
             (a == CUDA_R_16BF && (ct == CUDA_R_16BF || ct == CUDA_R_32F));
    case CUBLAS_COMPUTE_32F_FAST_16F:
    case CUBLAS_COMPUTE_32F_FAST_16BF:
    case CUBLAS_COMPUTE_32F_FAST_TF32:
      return a == CUDA_R_32F && ct == CUDA_R_32F;
    default: return false;
  }
}

// Rounds an f32 operand as the reduced-precision compute types do (round to nearest even).
float reduce(cublasComputeType_t c, float x) {
  switch (c) {
    case CUBLAS_COMPUTE_32F_FAST_16F: return kvinfer::core::f16_to_f32(kvinfer::core::f32_to_f16(x));
    case CUBLAS_COMPUTE_32F_FAST_16BF: return kvinfer::core::bf16_to_f32(kvinfer::core::f32_to_bf16(x));
    case CUBLAS_COMPUTE_32F_FAST_TF32: {
      uint32_t u;
      std::memcpy(&u, &x, 4);
      if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0xfffu + ((u >> 13) & 1u)) & ~0x1fffu;
      std::memcpy(&x, &u, 4);
      return x;
    }
    default: return x;
  }
}

}  // namespace

cublasStatus_t cublasCreate(cublasHandle_t* handle) {
  if (handle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  if (kvi_sim::device() == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  *handle = new cublasContext;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  if (!valid(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  cudaDeviceSynchronize();  // as cuBLAS does: pending work that uses the handle finishes first
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
  if (!valid(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetStream(cublasHandle_t handle, cudaStream_t* stream) {
  if (!valid(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (stream == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *stream = handle->stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetPointerMode(cublasHandle_t handle, cublasPointerMode_t mode) {
  if (!valid(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (mode != CUBLAS_POINTER_MODE_HOST && mode != CUBLAS_POINTER_MODE_DEVICE) return CUBLAS_STATUS_INVALID_VALUE;
  handle->pointer_mode = mode;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  if (!valid(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->math = mode;
  return CUBLAS_STATUS_SUCCESS;
}

// The stand-in needs no workspace; it checks what cuBLAS requires of one (256-byte alignment).
cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void* workspace, size_t bytes) {
  if (!valid(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (workspace == nullptr ? bytes != 0 : reinterpret_cast<uintptr_t>(workspace) % 256 != 0)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (workspace != nullptr && !kvi_sim::is_device_range(workspace, bytes)) return CUBLAS_STATUS_INVALID_VALUE;
  return CUBLAS_STATUS_SUCCESS;
}

const char* cublasGetStatusName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

const char* cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "an absent device architectural feature is required";
    case CUBLAS_STATUS_MAPPING_ERROR: return "an access to GPU memory space failed";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
  }
  return "unknown error";
}

// C (m, n) = alpha · op(A) (m, k) · op(B) (k, n) + beta · C, all column-major. C is not read when
// beta is 0 (cuBLAS: C need not hold valid values then).
cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void* alpha, const void* A, cudaDataType_t Atype, int lda, const void* B,
                            cudaDataType_t Btype, int ldb, const void* beta, void* C, cudaDataType_t Ctype, int ldc,
                            cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
  if (!valid(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  const bool ta = transa != CUBLAS_OP_N, tb = transb != CUBLAS_OP_N;
  if (transa > CUBLAS_OP_C || transb > CUBLAS_OP_C || m < 0 || n < 0 || k < 0) return CUBLAS_STATUS_INVALID_VALUE;
  if (lda < std::max(1, ta ? k : m) || ldb < std::max(1, tb ? n : k) || ldc < std::max(1, m))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (alpha == nullptr || beta == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  if (algo != CUBLAS_GEMM_DEFAULT && algo != CUBLAS_GEMM_DEFAULT_TENSOR_OP && (algo < 0 || algo > 23))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (!supported(computeType, Atype, Btype, Ctype)) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
  // The operands' extents, so that a wrong leading dimension reads outside them and is refused
  // (a GPU would read garbage or fault).
  const size_t a_cols = static_cast<size_t>(ta ? m : k), b_cols = static_cast<size_t>(tb ? k : n);
  const size_t a_bytes = k == 0 ? 0 : ((a_cols - 1) * static_cast<size_t>(lda) + (ta ? k : m)) * type_size(Atype);
  const size_t b_bytes = k == 0 ? 0 : ((b_cols - 1) * static_cast<size_t>(ldb) + (tb ? n : k)) * type_size(Btype);
  const size_t c_bytes = ((static_cast<size_t>(n) - 1) * static_cast<size_t>(ldc) + m) * type_size(Ctype);
  if ((a_bytes && !kvi_sim::is_device_range(A, a_bytes)) || (b_bytes && !kvi_sim::is_device_range(B, b_bytes)) ||
      !kvi_sim::is_device_range(C, c_bytes)) {
    std::fprintf(stderr,
                 "kvinfer CUDA simulation: cublasGemmEx(m %d, n %d, k %d, lda %d, ldb %d, ldc %d) would read or write "
                 "outside its operands' device allocations\n",
                 m, n, k, lda, ldb, ldc);
    return CUBLAS_STATUS_EXECUTION_FAILED;
  }
  float host_alpha = 0, host_beta = 0;
  const bool host_scalars = handle->pointer_mode == CUBLAS_POINTER_MODE_HOST;
  if (host_scalars) {
    std::memcpy(&host_alpha, alpha, 4);
    std::memcpy(&host_beta, beta, 4);
  }
  auto op = [=] {
    const float al = host_scalars ? host_alpha : *static_cast<const float*>(alpha);
    const float be = host_scalars ? host_beta : *static_cast<const float*>(beta);
    const auto* a = static_cast<const unsigned char*>(A);
    const auto* b = static_cast<const unsigned char*>(B);
    auto* c = static_cast<unsigned char*>(C);
    const size_t as = type_size(Atype), bs = type_size(Btype), cs = type_size(Ctype);
    // op(A) row i and op(B) column j, widened once, contiguous along k.
    std::vector<float> arows(static_cast<size_t>(m) * k), bcols(static_cast<size_t>(k) * n);
    for (int i = 0; i < m; ++i)
      for (int p = 0; p < k; ++p) {
        const size_t at = ta ? static_cast<size_t>(i) * lda + p : static_cast<size_t>(p) * lda + i;
        arows[static_cast<size_t>(i) * k + p] = reduce(computeType, load(Atype, a + at * as));
      }
    for (int j = 0; j < n; ++j)
      for (int p = 0; p < k; ++p) {
        const size_t at = tb ? static_cast<size_t>(p) * ldb + j : static_cast<size_t>(j) * ldb + p;
        bcols[static_cast<size_t>(j) * k + p] = reduce(computeType, load(Btype, b + at * bs));
      }
    // Eight interleaved f32 partial sums, then a fixed tree: one order, whatever m, n, k.
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < m; ++i) {
        const float* x = arows.data() + static_cast<size_t>(i) * k;
        const float* y = bcols.data() + static_cast<size_t>(j) * k;
        float acc[8] = {};
        int p = 0;
        for (; p + 8 <= k; p += 8)
          for (int l = 0; l < 8; ++l) acc[l] += x[p + l] * y[p + l];
        for (int l = 0; p < k; ++p, ++l) acc[l] += x[p] * y[p];
        const float dot = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
        unsigned char* cij = c + (static_cast<size_t>(j) * ldc + i) * cs;
        float v = al * dot;
        if (be != 0.0f) v += be * load(Ctype, cij);
        store(Ctype, cij, v);
      }
  };
  return kvi_sim::enqueue(handle->stream, std::move(op)) == cudaSuccess ? CUBLAS_STATUS_SUCCESS
                                                                        : CUBLAS_STATUS_EXECUTION_FAILED;
}
