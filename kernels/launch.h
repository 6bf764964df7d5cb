#pragma once
// launch(): the one way every kernel of kernels/*.cu is started, on a GPU (cudaLaunchKernelEx)
// and in the simulation build (sim/, the same call run on the CPU). A bad configuration throws
// kvinfer::Error naming the kernel and its grid, block and shared memory. With
// $KVINFER_CUDA_SYNC=1 every launch is followed by a synchronisation and a check, so that a
// fault is reported by the kernel that caused it rather than by a later call.
//
// dynamic_shared<T>(): the block's dynamic shared memory (the launch's `smem` bytes, 16-byte
// aligned). One declaration for every kernel: extern __shared__ arrays alias each other anyway.
#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

namespace kvinfer::cuda {

// $KVINFER_CUDA_SYNC is "1" (read once per process).
bool sync_after_launch();
// Throws kvinfer::Error: "<kernel> (grid x×y×z, block x×y×z, N B dynamic shared memory): <stage> failed: <error>".
[[noreturn]] void throw_launch_error(cudaError_t err, const char* kernel, dim3 grid, dim3 block, size_t smem,
                                     const char* stage);

template <typename... Params, typename... Args>
void launch(const char* name, void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
            Args&&... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
#if defined(KVINFER_CUDA_SIM)
  kvi_sim::name_next_launch(name);  // the simulation's profiles name launches as errors do
#endif
  cudaError_t err = cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
  if (err != cudaSuccess) {
    cudaGetLastError();  // a configuration error is not sticky: clear it for the next call
    throw_launch_error(err, name, grid, block, smem, "launch");
  }
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  if (sync_after_launch() && cudaStreamIsCapturing(stream, &capturing) == cudaSuccess &&
      capturing == cudaStreamCaptureStatusNone) {  // a capture runs nothing to check yet
    err = cudaStreamSynchronize(stream);
    if (err == cudaSuccess) err = cudaGetLastError();
    if (err != cudaSuccess) throw_launch_error(err, name, grid, block, smem, "run (KVINFER_CUDA_SYNC=1)");
  }
}

#if defined(KVINFER_CUDA_SIM)
template <typename T>
inline T* dynamic_shared() {
  return reinterpret_cast<T*>(kvi_sim::dynamic_shared_memory());
}
#else
template <typename T>
__device__ __forceinline__ T* dynamic_shared() {
  extern __shared__ __align__(16) unsigned char kvi_dynamic_shared[];
  return reinterpret_cast<T*>(kvi_dynamic_shared);
}
#endif

// The current device's largest dynamic shared memory a block may opt in to
// (cudaDevAttrMaxSharedMemoryPerBlockOptin), read once per device.
int max_shared_bytes_optin();
// The current device's multiprocessor count, read once per device.
int multiprocessor_count();

// Lets `kernel` use max_shared_bytes_optin() of dynamic shared memory on the current device. The
// attribute is the device's: set once per (device, kernel), before the kernel's first launch there.
void allow_max_shared(const void* kernel);
template <typename... Params>
void allow_max_shared(void (*kernel)(Params...)) {
  allow_max_shared(reinterpret_cast<const void*>(kernel));
}

}  // namespace kvinfer::cuda
