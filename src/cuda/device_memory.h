#pragma once
// Device memory without CUDA headers, so host code that is built either way can hold it.
// Implemented in device_memory.cpp with CUDA, in stubs.cpp without (where every call throws).
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

namespace kvinfer::cuda_backend {

// Makes CUDA device `index` the calling thread's current device while it lives (CUDA's current
// device is per host thread: allocations, streams and launches go to it), then puts back the one
// before. index < 0 changes nothing (a CPU model's calls).
class DeviceScope {
 public:
  explicit DeviceScope(int index);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = -1;
};

// Allocates `bytes` of device memory on the current device. When they do not fit, throws
// kvinfer::Error naming `what`, the bytes needed and the bytes free on the device.
void* device_alloc(size_t bytes, std::string_view what);
void device_free(void* p) noexcept;  // on the device that holds p
// The bytes of the current device's memory free now (cudaMemGetInfo).
size_t device_free_bytes();
// Synchronous, and ordered with every stream of the device that holds the device memory: the
// bytes are in place for any stream's later work (copy_to_device), or every stream's earlier work
// is done before they are read (copy_to_host).
void copy_to_device(void* dst, const void* src, size_t bytes);
void copy_to_host(void* dst, const void* src, size_t bytes);
// Device to device (on the device that holds src), ordered the same way: every stream's earlier
// work is done before the bytes are read, and they are in place for any stream's later work.
void copy_on_device(void* dst, const void* src, size_t bytes);

// The device's copy bandwidth, the ceiling of memory-bound kernels (the benchmarks' reference):
// a device-to-device cudaMemcpyAsync of `bytes` on the legacy stream, one warm-up copy, then
// `reps` copies each timed with CUDA events; bytes read + bytes written (2 × bytes) over the
// median time. Allocates 2 × bytes of device memory for the call; throws kvinfer::Error when
// they do not fit, or in a build without CUDA.
struct CopyBandwidth {
  double bytes_per_s = 0;
  size_t bytes = 0;  // one copy's size
  int reps = 0;
};
CopyBandwidth measure_copy_bandwidth(size_t bytes = size_t{1} << 30, int reps = 10);
// CUDA device `index`'s name (cudaGetDeviceProperties).
std::string device_description(int index = 0);

// The CUDA simulation build (-DKVINFER_CUDA_SIM=ON, sim/): its "device" runs every GPU thread on
// the CPU, so its timings and bandwidths measure nothing about a GPU.
#if defined(KVINFER_CUDA_SIM)
inline constexpr bool kSimulatedDevice = true;
#else
inline constexpr bool kSimulatedDevice = false;
#endif

}  // namespace kvinfer::cuda_backend

namespace kvinfer {

// An owned block of device memory.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(size_t bytes, std::string_view what) : p_(cuda_backend::device_alloc(bytes, what)), bytes_(bytes) {}
  ~DeviceBuffer() { cuda_backend::device_free(p_); }
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return p_; }
  size_t bytes() const { return bytes_; }
  template <typename T>
  T* as() const { return static_cast<T*>(p_); }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace kvinfer
