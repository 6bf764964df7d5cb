#pragma once
// Device memory for the CUDA tests: owned, poisoned with 0xFF bytes at birth (NaN in f32, f16 and
// bf16, -1 in int32). The poison and every upload go through the legacy stream, which does not
// order the backend's non-blocking streams: each is waited for before the buffer is used.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

#include "cuda_check.h"

namespace kvinfer_test {

struct DeviceBuffer {
  void* ptr = nullptr;
  size_t bytes = 0;
  explicit DeviceBuffer(size_t b) : bytes(b) {
    CUDA_CHECK(cudaMalloc(&ptr, b));
    CUDA_CHECK(cudaMemset(ptr, 0xFF, b));
    CUDA_CHECK(cudaDeviceSynchronize());
  }
  template <typename T>
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size() * sizeof(T)) {
    upload(host);
  }
  ~DeviceBuffer() { cudaFree(ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  template <typename T>
  void upload(const std::vector<T>& host) {
    ASSERT_EQ(host.size() * sizeof(T), bytes);
    CUDA_CHECK(cudaMemcpy(ptr, host.data(), bytes, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaDeviceSynchronize());
  }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr);
  }
  template <typename T>
  std::vector<T> to_host() const {
    std::vector<T> h(bytes / sizeof(T));
    CUDA_CHECK(cudaMemcpy(h.data(), ptr, bytes, cudaMemcpyDeviceToHost));
    return h;
  }
};

}  // namespace kvinfer_test
