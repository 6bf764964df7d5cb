#pragma once
// The GPU benchmarks' timer: a pair of CUDA events around work enqueued on a stream (the
// legacy default stream when none is given).
#include <cuda_runtime_api.h>

#include "cuda_check.h"

namespace kvinfer::bench {

class CudaEvents {
 public:
  CudaEvents() {
    CUDA_CHECK(cudaEventCreate(&start_));
    CUDA_CHECK(cudaEventCreate(&stop_));
  }
  ~CudaEvents() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  CudaEvents(const CudaEvents&) = delete;
  CudaEvents& operator=(const CudaEvents&) = delete;

  void start(cudaStream_t s = nullptr) { CUDA_CHECK(cudaEventRecord(start_, s)); }
  // Seconds since start(), once the work enqueued on `s` before this call has finished.
  double stop_seconds(cudaStream_t s = nullptr) {
    CUDA_CHECK(cudaEventRecord(stop_, s));
    CUDA_CHECK(cudaEventSynchronize(stop_));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    return static_cast<double>(ms) * 1e-3;
  }

 private:
  cudaEvent_t start_{}, stop_{};
};

}  // namespace kvinfer::bench
