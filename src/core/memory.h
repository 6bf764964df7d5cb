#pragma once
// Memory checked before it is spent. A model's weights (plus the KV cache it is told to plan
// for) are compared with the memory available on its device when it loads, and every KV cache
// with what is left of that figure, before any of those bytes is touched. Errors name what was
// being allocated, the bytes needed and the bytes available.
//
// The available figure, in order of precedence:
//   1. LoadOptions::memory_limit, when nonzero;
//   2. $KVINFER_MEMORY_LIMIT (bytes, or with a binary suffix: "512M", "8G", "1T"), on every device;
//   3. detected: CPU — MemAvailable in /proc/meminfo, else sysconf(_SC_AVPHYS_PAGES) × page size,
//      or less when the process's cgroup (v1 or v2, every level up) has a memory limit: the limit
//      less the cgroup's use (its reclaimable page cache counted free); CUDA — the free bytes
//      cudaMemGetInfo reports.
// When nothing can be detected the figure is unknown and nothing is refused.
#include <cstdint>
#include <filesystem>
#include <limits>
#include <optional>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "kvinfer/device.h"

namespace kvinfer {

inline constexpr const char* kMemoryLimitEnv = "KVINFER_MEMORY_LIMIT";

struct MemoryBudget {
  static constexpr uint64_t kUnknown = std::numeric_limits<uint64_t>::max();
  uint64_t bytes = kUnknown;
  std::string source;  // where the figure came from, for messages
  Device device = Device::CPU;
};

// The memory left under the tightest cgroup limit of the process (/proc/self/cgroup, read under
// cgroup_root, e.g. /sys/fs/cgroup): limit − (usage − reclaimable page cache); nullopt without a
// limit. Arguments for tests.
struct CgroupMemory {
  uint64_t bytes = 0;
  std::string limit_file;  // the limit's file, for messages
};
std::optional<CgroupMemory> cgroup_memory_left(const std::filesystem::path& proc_self_cgroup,
                                               const std::filesystem::path& cgroup_root);

// "123", "64K", "512M", "8G", "1T" (binary multiples; "KiB"/"KB"/"k" spellings too). Throws
// kvinfer::Error naming `what` and the text for anything else, or on overflow.
uint64_t parse_byte_count(std::string_view text, std::string_view what);

// The figure for `device` (CPU or CUDA): explicit_limit when nonzero, else $KVINFER_MEMORY_LIMIT,
// else detected now.
MemoryBudget memory_budget(Device device, uint64_t explicit_limit = 0);

// "512 B", or "1.5 KiB (1536 bytes)": human-readable, and exact.
std::string bytes_text(uint64_t bytes);

// Throws kvinfer::Error naming `what`, the bytes needed and the figure when bytes > budget.bytes.
void require_memory(const MemoryBudget& budget, uint64_t bytes, std::string_view what);

// One model's memory: the figure it was loaded against, its weights, and the KV caches made for
// it while they live. Shared by the model and its caches; thread-safe.
class MemoryAccount {
 public:
  MemoryAccount(MemoryBudget budget, uint64_t weight_bytes) : budget_(std::move(budget)), weights_(weight_bytes) {}

  // Takes `bytes` for `what` (e.g. "KV cache of 4096 tokens (f16)"), or throws kvinfer::Error
  // naming what, the bytes needed and what is left after the weights and the other reservations.
  void reserve(uint64_t bytes, std::string_view what);
  void release(uint64_t bytes) noexcept;

  const MemoryBudget& budget() const { return budget_; }
  uint64_t weight_bytes() const { return weights_; }
  // What reserve() could still take: the figure less the weights and the reservations;
  // MemoryBudget::kUnknown when the figure is unknown.
  uint64_t available() const;

 private:
  MemoryBudget budget_;
  uint64_t weights_;
  mutable std::mutex mu_;
  uint64_t reserved_ = 0;
};

}  // namespace kvinfer
