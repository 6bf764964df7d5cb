#pragma once
// The machine's memory read bandwidth, measured: the best of several timed passes of a float sum
// over a buffer much larger than the last-level cache (on transparent huge pages where the kernel
// allows, as the matrices a model makes at load: core/large_buffer.h), split across the OpenMP threads.
#include <cstdint>

namespace bench {

struct Bandwidth {
  double gb_per_s = 0;         // 1e9 bytes per second, the best pass
  double median_gb_per_s = 0;  // the median pass, for reference
  uint64_t buffer_bytes = 0;   // max(256 MiB, 4 × LLC), at most 1 GiB
  uint64_t llc_bytes = 0;      // last-level cache of cpu0; 0 when unknown
  int passes = 0;
  int threads = 1;
};

// The largest cache of cpu0 (sysfs /sys/devices/system/cpu/cpu0/cache, else
// sysconf(_SC_LEVEL3_CACHE_SIZE)); 0 when neither says.
uint64_t last_level_cache_bytes();

// Allocates and touches the buffer, then times `passes` (>= 5) read passes over it with `threads`
// threads. Throws kvinfer::Error when the buffer cannot be allocated.
Bandwidth measure_read_bandwidth(int threads, int passes = 7);

}  // namespace bench
