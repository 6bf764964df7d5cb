#include "cuda/device_memory.h"

#include <cuda_runtime_api.h>

#include <fmt/format.h>

#include "cuda_check.h"

namespace kvinfer::cuda_backend {

void* device_alloc(size_t bytes, std::string_view what) {
  if (bytes == 0) return nullptr;
  size_t free_bytes = 0, total_bytes = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  void* p = nullptr;
  if (bytes > free_bytes || cudaMalloc(&p, bytes) != cudaSuccess) {
    cudaGetLastError();  // clear the allocation failure
    throw Error(fmt::format("{}: needs {} bytes of CUDA device memory but only {} of {} bytes are free", what, bytes,
                            free_bytes, total_bytes));
  }
  return p;
}

size_t device_free_bytes() {
  size_t free_bytes = 0, total_bytes = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return free_bytes;
}

void device_free(void* p) noexcept {
  if (p) cudaFree(p);
}

// cudaMemcpy from pageable memory may return before its DMA lands, and the legacy stream it runs
// on does not order the sessions' non-blocking streams: wait for it, so that every stream sees
// the bytes.
void copy_to_device(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaStreamSynchronize(nullptr));
}

// Waits for the device first: the bytes may come from any stream's work.
void copy_to_host(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  CUDA_CHECK(cudaDeviceSynchronize());
  CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}

}  // namespace kvinfer::cuda_backend
