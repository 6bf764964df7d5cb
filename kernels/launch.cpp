// The host side of kernels/launch.h.
#include "launch.h"

#include <cstdlib>
#include <string>
#include <string_view>

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
int device_attribute(cudaDeviceAttr attr) {
  int device = 0, value = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&value, attr, device));
  return value;
}
}  // namespace

int max_shared_bytes_optin() {
  static const int bytes = device_attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin);
  return bytes;
}

int multiprocessor_count() {
  static const int sms = device_attribute(cudaDevAttrMultiProcessorCount);
  return sms;
}

}  // namespace kvinfer::cuda
