#include "kvinfer/device.h"

namespace kvinfer {

#if !defined(KVINFER_WITH_CUDA)
int cuda_device_count() noexcept { return 0; }
#endif

std::string_view device_name(Device d) {
  switch (d) {
    case Device::Auto: return "auto";
    case Device::CPU: return "cpu";
    case Device::CUDA: return "cuda";
  }
  return "?";
}

}  // namespace kvinfer
