#include "kvinfer/device.h"

#include <algorithm>
#include <thread>

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace kvinfer {

#if !defined(KVINFER_WITH_CUDA)
int cuda_device_count() noexcept { return 0; }
#endif

void set_cpu_threads(int n) {
#if defined(_OPENMP)
  omp_set_num_threads(n > 0 ? n : static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
#else
  static_cast<void>(n);
#endif
}

int cpu_threads() {
#if defined(_OPENMP)
  return omp_get_max_threads();
#else
  return 1;
#endif
}

std::string_view device_name(Device d) {
  switch (d) {
    case Device::Auto: return "auto";
    case Device::CPU: return "cpu";
    case Device::CUDA: return "cuda";
  }
  return "?";
}

}  // namespace kvinfer
