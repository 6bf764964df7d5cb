// The host side of kernels/launch.h.
#include "launch.h"

#include <array>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "cuda_check.h"

namespace kvinfer::cuda {

bool sync_after_launch() {
  static const bool on = [] {
    const char* v = std::getenv("KVINFER_CUDA_SYNC");
    return v != nullptr && std::string_view(v) == "1";
  }();
  return on;
}

void throw_launch_error(cudaError_t err, const char* kernel, dim3 grid, dim3 block, size_t smem, const char* stage) {
  const auto dims = [](dim3 d) {
    return std::to_string(d.x) + "×" + std::to_string(d.y) + "×" + std::to_string(d.z);
  };
  throw Error(ErrorKind::Device, std::string(kernel) + " (grid " + dims(grid) + ", block " + dims(block) + ", " + std::to_string(smem) +
              " B dynamic shared memory): " + stage + " failed: " + cudaGetErrorName(err) + " (" +
              cudaGetErrorString(err) + ")");
}

namespace {
int current_device() {
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  return device;
}

// An attribute of the current device, read at its first use there (0: not read yet; every
// attribute asked here is positive). Devices past kDevices are read every time.
constexpr size_t kDevices = 64;
int device_attribute(std::array<std::atomic<int>, kDevices>& cache, cudaDeviceAttr attr) {
  const int device = current_device();
  const auto d = static_cast<size_t>(device);
  if (d < kDevices)
    if (const int v = cache[d].load(std::memory_order_relaxed); v > 0) return v;
  int value = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&value, attr, device));
  if (d < kDevices) cache[d].store(value, std::memory_order_relaxed);
  return value;
}
}  // namespace

int max_shared_bytes_optin() {
  static std::array<std::atomic<int>, kDevices> bytes{};
  return device_attribute(bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin);
}

int multiprocessor_count() {
  static std::array<std::atomic<int>, kDevices> sms{};
  return device_attribute(sms, cudaDevAttrMultiProcessorCount);
}

void allow_max_shared(const void* kernel) {
  static std::mutex mu;
  static std::set<std::pair<int, const void*>> done;  // (device, kernel) pairs already raised
  const int device = current_device();
  std::lock_guard lock(mu);
  if (done.count({device, kernel})) return;
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, max_shared_bytes_optin()));
  done.insert({device, kernel});
}

}  // namespace kvinfer::cuda
