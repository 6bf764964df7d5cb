// Host memory read bandwidth (read_bandwidth.h).
#include "read_bandwidth.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <new>
#include <optional>
#include <string>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include <fmt/format.h>

#include "core/large_buffer.h"
#include "kvinfer/error.h"

namespace bench {

namespace {

// "32768K", "32M", "1024" (bytes) as sysfs writes cache sizes.
uint64_t parse_size(const std::string& s) {
  size_t used = 0;
  uint64_t v = 0;
  try {
    v = std::stoull(s, &used);
  } catch (const std::exception&) {
    return 0;
  }
  const char unit = used < s.size() ? s[used] : ' ';
  if (unit == 'K') return v << 10;
  if (unit == 'M') return v << 20;
  if (unit == 'G') return v << 30;
  return v;
}

// Sums n floats with 16 independent partial sums, so the compiler vectorises it without
// reassociating a single sum.
float sum_floats(const float* x, size_t n) {
  float acc[16] = {};
  size_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (size_t l = 0; l < 16; ++l) acc[l] += x[i + l];
  for (; i < n; ++i) acc[0] += x[i];
  float s = 0;
  for (float a : acc) s += a;
  return s;
}

}  // namespace

uint64_t last_level_cache_bytes() {
  namespace fs = std::filesystem;
  uint64_t best = 0;
  int best_level = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/sys/devices/system/cpu/cpu0/cache", ec)) {
    if (e.path().filename().string().rfind("index", 0) != 0) continue;
    std::ifstream level_file(e.path() / "level"), size_file(e.path() / "size");
    int level = 0;
    std::string size;
    if (!(level_file >> level) || !(size_file >> size)) continue;
    const uint64_t bytes = parse_size(size);
    if (level > best_level || (level == best_level && bytes > best)) {
      best_level = level;
      best = bytes;
    }
  }
  if (best > 0) return best;
#ifdef _SC_LEVEL3_CACHE_SIZE
  const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (l3 > 0) return static_cast<uint64_t>(l3);
#endif
  return 0;
}

Bandwidth measure_read_bandwidth(int threads, int passes) {
  using Clock = std::chrono::steady_clock;
  Bandwidth b;
  b.llc_bytes = last_level_cache_bytes();
  b.buffer_bytes = std::min<uint64_t>(std::max<uint64_t>(uint64_t{256} << 20, 4 * b.llc_bytes), uint64_t{1} << 30);
  b.passes = std::max(passes, 5);
  b.threads = std::max(threads, 1);
  const size_t n = b.buffer_bytes / sizeof(float);
  // On 2 MiB pages where the kernel allows, as the matrices a model makes at load: with 4 KiB
  // pages the same passes read 22-24 GB/s on a 2-core Xeon VM where they read 34-36 on huge
  // pages (docs/benchmarks-history.md), and the probe is the ceiling, not the page size's toll.
  std::optional<kvinfer::LargeBuffer> buf;
  try {
    buf.emplace(n * sizeof(float));
  } catch (const std::bad_alloc&) {
    throw kvinfer::Error(kvinfer::ErrorKind::OutOfMemory, fmt::format("bandwidth probe: cannot allocate {} bytes", b.buffer_bytes));
  }
  auto* x = reinterpret_cast<float*>(buf->data());
  const auto chunk = static_cast<int64_t>(n / static_cast<size_t>(b.threads));
  // Touch every page from the thread that will read it (first touch), with small values.
#pragma omp parallel for num_threads(b.threads) schedule(static)
  for (int64_t t = 0; t < b.threads; ++t) {
    const size_t begin = static_cast<size_t>(t * chunk),
                 end = t == b.threads - 1 ? n : begin + static_cast<size_t>(chunk);
    for (size_t i = begin; i < end; ++i) x[i] = static_cast<float>(i & 7) * 0.125f;
  }
  std::vector<double> seconds;
  volatile float sink = 0;  // keeps the sums alive
  for (int p = 0; p < b.passes; ++p) {
    std::vector<float> partial(static_cast<size_t>(b.threads));
    const auto start = Clock::now();
#pragma omp parallel for num_threads(b.threads) schedule(static)
    for (int64_t t = 0; t < b.threads; ++t) {
      const size_t begin = static_cast<size_t>(t * chunk),
                   end = t == b.threads - 1 ? n : begin + static_cast<size_t>(chunk);
      partial[static_cast<size_t>(t)] = sum_floats(x + begin, end - begin);
    }
    seconds.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    for (float s : partial) sink = sink + s;
  }
  std::sort(seconds.begin(), seconds.end());
  const double bytes = static_cast<double>(n * sizeof(float));
  b.gb_per_s = bytes / seconds.front() / 1e9;
  b.median_gb_per_s = bytes / seconds[seconds.size() / 2] / 1e9;
  return b;
}

}  // namespace bench
