#pragma once
// CUDA_CHECK: throws kvinfer::Error naming the file, line and failing call.
#include <cuda_runtime_api.h>

#include <string>

#include "kvinfer/error.h"

namespace kvinfer::cuda {

[[noreturn]] inline void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line) {
  throw Error(ErrorKind::Device, std::string(file) + ":" + std::to_string(line) + ": " + call + " failed: " + cudaGetErrorName(err) +
              " (" + cudaGetErrorString(err) + ")");
}

}  // namespace kvinfer::cuda

#define CUDA_CHECK(call)                                                              \
  do {                                                                                \
    cudaError_t kvinfer_err_ = (call);                                                \
    if (kvinfer_err_ != cudaSuccess) ::kvinfer::cuda::throw_cuda_error(kvinfer_err_, #call, __FILE__, __LINE__); \
  } while (0)
