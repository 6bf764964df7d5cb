#include "cuda/device_memory.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "cuda_check.h"

namespace kvinfer::cuda_backend {

namespace {
// The device whose memory holds p, or -1 (host memory, or not CUDA's).
int device_of(const void* p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return a.type == cudaMemoryTypeDevice ? a.device : -1;
}
}  // namespace

DeviceScope::DeviceScope(int index) {
  if (index < 0) return;
  int now = 0;
  CUDA_CHECK(cudaGetDevice(&now));
  if (now == index) return;
  CUDA_CHECK(cudaSetDevice(index));
  previous_ = now;
}

DeviceScope::~DeviceScope() {
  if (previous_ >= 0) cudaSetDevice(previous_);
}

void* device_alloc(size_t bytes, std::string_view what) {
  if (bytes == 0) return nullptr;
  size_t free_bytes = 0, total_bytes = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  void* p = nullptr;
  if (bytes > free_bytes || cudaMalloc(&p, bytes) != cudaSuccess) {
    cudaGetLastError();  // clear the allocation failure
    throw Error(ErrorKind::OutOfMemory, fmt::format("{}: needs {} bytes of CUDA device memory but only {} of {} bytes are free", what, bytes,
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
  if (!p) return;
  try {
    const DeviceScope on(device_of(p));
    cudaFree(p);
  } catch (...) {  // cudaSetDevice failed: free it from here
    cudaFree(p);
  }
}

// cudaMemcpy from pageable memory may return before its DMA lands, and the legacy stream it runs
// on does not order the sessions' non-blocking streams: wait for it, so that every stream sees
// the bytes.
void copy_to_device(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  const DeviceScope on(device_of(dst));
  CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaStreamSynchronize(nullptr));
}

// Waits for the device first: the bytes may come from any stream's work.
void copy_to_host(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  const DeviceScope on(device_of(src));
  CUDA_CHECK(cudaDeviceSynchronize());
  CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}

void copy_on_device(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  const DeviceScope on(device_of(src));
  CUDA_CHECK(cudaDeviceSynchronize());
  CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice));
  CUDA_CHECK(cudaDeviceSynchronize());
}

CopyBandwidth measure_copy_bandwidth(size_t bytes, int reps) {
  if (bytes == 0 || reps < 1) throw Error(ErrorKind::InvalidArgument, fmt::format("measure_copy_bandwidth: {} bytes, {} repetitions", bytes, reps));
  DeviceBuffer a(bytes, "copy bandwidth probe (source)"), b(bytes, "copy bandwidth probe (destination)");
  CUDA_CHECK(cudaMemset(a.get(), 1, bytes));  // not zeros: real data
  CUDA_CHECK(cudaMemcpyAsync(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice));  // warm-up
  cudaEvent_t start = nullptr, stop = nullptr;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<float> ms;
  try {
    for (int i = 0; i < reps; ++i) {
      CUDA_CHECK(cudaEventRecord(start));
      CUDA_CHECK(cudaMemcpyAsync(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice));
      CUDA_CHECK(cudaEventRecord(stop));
      CUDA_CHECK(cudaEventSynchronize(stop));
      float t = 0;
      CUDA_CHECK(cudaEventElapsedTime(&t, start, stop));
      ms.push_back(t);
    }
  } catch (...) {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    throw;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(ms.begin(), ms.end());
  const double median_s = std::max(static_cast<double>(ms[ms.size() / 2]) * 1e-3, 1e-9);
  return {2.0 * static_cast<double>(bytes) / median_s, bytes, reps};
}

std::string device_description(int index) {
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  return prop.name;
}

}  // namespace kvinfer::cuda_backend
