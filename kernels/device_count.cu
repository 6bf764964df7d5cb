// CUDA device discovery. Any failure of the runtime (no driver at all, an insufficient driver,
// no device) means "no device": a machine without a GPU is a normal place to run kvinfer.
#include <cuda_runtime.h>

#include "kvinfer/device.h"

namespace kvinfer {

int cuda_device_count() noexcept {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error so later runtime calls start clean
    return 0;
  }
  return count;
}

}  // namespace kvinfer
