#pragma once
// cuBLAS, loaded at run time: libkvinfer has no link-time dependency on libcublas, so a program
// that never touches the GPU neither needs nor loads it. The first CUDA context (and cuda::gemm)
// calls cublas(), which dlopens libcublas.so.<major of the toolkit kvinfer was built with> and
// resolves the few functions kvinfer calls. The simulation build (KVINFER_CUDA_SIM) fills the
// table with sim/'s functions instead.
#include <cublas_v2.h>

namespace kvinfer::cuda {

struct CublasApi {
  cublasStatus_t (*create)(cublasHandle_t*);
  cublasStatus_t (*destroy)(cublasHandle_t);
  cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t);
  cublasStatus_t (*set_workspace)(cublasHandle_t, void*, size_t);
  cublasStatus_t (*set_pointer_mode)(cublasHandle_t, cublasPointerMode_t);
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                            const void*, cudaDataType_t, int, const void*, cudaDataType_t, int, const void*, void*,
                            cudaDataType_t, int, cublasComputeType_t, cublasGemmAlgo_t);
  const char* (*get_status_name)(cublasStatus_t);
  const char* (*get_status_string)(cublasStatus_t);
};

// The resolved functions; loads cuBLAS on the first call (thread-safe). Throws kvinfer::Error
// naming the library and dlerror()'s reason when it cannot be loaded or lacks a function (every
// call then throws again).
const CublasApi& cublas();

}  // namespace kvinfer::cuda
