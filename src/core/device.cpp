#include "kvinfer/device.h"

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <thread>

namespace kvinfer {

#if !defined(KVINFER_WITH_CUDA)
int cuda_device_count() noexcept { return 0; }
#endif

#if defined(_OPENMP)
namespace {

// The first count of $OMP_NUM_THREADS ("4" or "4,2"), 0 when unset or not a positive number.
int omp_num_threads_env() {
  const char* env = std::getenv("OMP_NUM_THREADS");
  if (env == nullptr) return 0;
  char* end = nullptr;
  const long n = std::strtol(env, &end, 10);
  return end != env && (*end == '\0' || *end == ',') && n > 0 && n <= 4096 ? static_cast<int>(n) : 0;
}

// The cores this process may run on: its affinity mask (taskset, cgroups' cpusets).
int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// Cores kept busy by others: the 1-minute load average, rounded (0 when unreadable).
int busy_cores() {
  double load[1] = {0.0};
  if (getloadavg(load, 1) != 1 || !(load[0] > 0.0)) return 0;
  return static_cast<int>(std::lround(std::min(load[0], 4096.0)));
}

}  // namespace
#endif

int default_cpu_threads() {
#if defined(_OPENMP)
  if (const int env = omp_num_threads_env(); env > 0) return env;
  const int cores = usable_cores();
  return std::clamp(cores - busy_cores(), 1, cores);
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
