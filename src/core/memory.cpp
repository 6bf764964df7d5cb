#include "core/memory.h"

#include <unistd.h>

#include <cctype>
#include <charconv>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "cuda/device_memory.h"
#include "kvinfer/error.h"
#include "kvinfer/kv_plan.h"

namespace kvinfer {

namespace {

// MemAvailable (kB) from /proc/meminfo: the kernel's estimate of what can be allocated without
// swapping, reclaimable page cache included.
bool read_mem_available(uint64_t& bytes) {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string key, unit;
    uint64_t value = 0;
    if (!(fields >> key >> value)) continue;
    if (key != "MemAvailable:") continue;
    fields >> unit;
    if (unit != "kB" || value > MemoryBudget::kUnknown / 1024) return false;
    bytes = value * 1024;
    return true;
  }
  return false;
}

// A cgroup file holding one number ("max": no limit).
std::optional<uint64_t> read_cgroup_number(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::string text;
  if (!(in >> text) || text == "max") return std::nullopt;
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

// A counter of a cgroup's memory.stat ("inactive_file 123").
uint64_t read_cgroup_stat(const std::filesystem::path& file, std::string_view key) {
  std::ifstream in(file);
  std::string k;
  uint64_t v = 0;
  while (in >> k >> v)
    if (k == key) return v;
  return 0;
}

}  // namespace

std::optional<CgroupMemory> cgroup_memory_left(const std::filesystem::path& proc_self_cgroup,
                                               const std::filesystem::path& cgroup_root) {
  std::ifstream in(proc_self_cgroup);
  std::string line;
  std::optional<CgroupMemory> best;
  // Every level from the process's cgroup up to the root: the tightest limit wins.
  const auto consider = [&](const std::filesystem::path& dir, const char* limit_file, const char* usage_file,
                            const char* stat_key) {
    for (std::filesystem::path d = dir;; d = d.parent_path()) {
      const std::optional<uint64_t> limit = read_cgroup_number(d / limit_file);
      const std::optional<uint64_t> usage = read_cgroup_number(d / usage_file);
      // v1 reports "no limit" as a huge number: anything beyond 2^60 bytes is none.
      if (limit && usage && *limit < (uint64_t{1} << 60)) {
        // Page cache the cgroup can reclaim counts as free, as MemAvailable counts it.
        const uint64_t reclaimable = read_cgroup_stat(d / "memory.stat", stat_key);
        const uint64_t used = *usage > reclaimable ? *usage - reclaimable : 0;
        const uint64_t left = *limit > used ? *limit - used : 0;
        if (!best || left < best->bytes) best = CgroupMemory{left, (d / limit_file).string()};
      }
      if (d == cgroup_root || !d.has_relative_path() || d == d.parent_path()) break;
    }
  };
  while (std::getline(in, line)) {
    // "0::/path" (v2) or "4:memory:/path" (v1).
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    const std::filesystem::path rel = std::filesystem::path(line.substr(b + 1)).relative_path();
    if (line.compare(0, a, "0") == 0 && controllers.empty())
      consider(cgroup_root / rel, "memory.max", "memory.current", "inactive_file");
    else if (("," + controllers + ",").find(",memory,") != std::string::npos)
      consider(cgroup_root / "memory" / rel, "memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file");
  }
  return best;
}

namespace {

MemoryBudget detect_host() {
  MemoryBudget b;
  b.device = Device::CPU;
  if (read_mem_available(b.bytes)) {
    b.source = "MemAvailable in /proc/meminfo";
  } else if (const long pages = ::sysconf(_SC_AVPHYS_PAGES), page = ::sysconf(_SC_PAGESIZE); pages > 0 && page > 0) {
    b.bytes = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
    b.source = "sysconf(_SC_AVPHYS_PAGES)";
  } else {
    b.bytes = MemoryBudget::kUnknown;
    b.source = "unknown: neither /proc/meminfo nor sysconf reports it";
  }
  // A container's memory limit: what the process can really use may be far less than the host has.
  if (const auto cg = cgroup_memory_left("/proc/self/cgroup", "/sys/fs/cgroup"); cg && cg->bytes < b.bytes) {
    b.bytes = cg->bytes;
    b.source = fmt::format("the cgroup limit {} less the cgroup's use", cg->limit_file);
  }
  return b;
}

}  // namespace

uint64_t parse_byte_count(std::string_view text, std::string_view what) {
  const auto bad = [&](std::string_view why) {
    return Error(ErrorKind::InvalidArgument, fmt::format("{}: '{}' {}; expected a byte count such as 1073741824, 512M or 8G", what, text, why));
  };
  size_t i = 0;
  uint64_t value = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    const auto digit = static_cast<uint64_t>(text[i] - '0');
    if (__builtin_mul_overflow(value, uint64_t{10}, &value) || __builtin_add_overflow(value, digit, &value))
      throw bad("overflows 64 bits");
    ++i;
  }
  if (i == 0) throw bad("does not start with a number");
  std::string_view suffix = text.substr(i);
  unsigned shift = 0;
  if (!suffix.empty()) {
    switch (std::toupper(static_cast<unsigned char>(suffix[0]))) {
      case 'K': shift = 10; break;
      case 'M': shift = 20; break;
      case 'G': shift = 30; break;
      case 'T': shift = 40; break;
      case 'B': shift = 0; break;
      default: throw bad("has an unknown unit");
    }
    if (shift != 0) suffix.remove_prefix(1);
    if (suffix != "" && suffix != "B" && suffix != "iB") throw bad("has an unknown unit");
  }
  if (shift != 0 && value > (MemoryBudget::kUnknown >> shift)) throw bad("overflows 64 bits");
  return value << shift;
}

MemoryBudget memory_budget(Device device, uint64_t explicit_limit) {
  MemoryBudget b;
  b.device = device;
  if (explicit_limit != 0) {
    b.bytes = explicit_limit;
    b.source = "LoadOptions::memory_limit";
    return b;
  }
  if (const char* env = std::getenv(kMemoryLimitEnv); env != nullptr && *env != '\0') {
    b.bytes = parse_byte_count(env, fmt::format("${}", kMemoryLimitEnv));
    b.source = fmt::format("${}", kMemoryLimitEnv);
    return b;
  }
  if (device == Device::CUDA) {
    b.bytes = cuda_backend::device_free_bytes();
    b.source = "free CUDA device memory (cudaMemGetInfo)";
    return b;
  }
  return detect_host();
}

std::string bytes_text(uint64_t bytes) {
  if (bytes < 1024) return format_bytes(bytes);
  return fmt::format("{} ({} bytes)", format_bytes(bytes), bytes);
}

void require_memory(const MemoryBudget& budget, uint64_t bytes, std::string_view what) {
  if (budget.bytes != MemoryBudget::kUnknown && bytes > budget.bytes)
    throw Error(ErrorKind::OutOfMemory, fmt::format("{} needs {} but only {} of {} memory is available ({})", what, bytes_text(bytes),
                            bytes_text(budget.bytes), device_name(budget.device), budget.source));
}

void MemoryAccount::reserve(uint64_t bytes, std::string_view what) {
  std::lock_guard lock(mu_);
  if (budget_.bytes == MemoryBudget::kUnknown) {
    reserved_ += bytes;
    return;
  }
  const uint64_t used = weights_ + reserved_;
  const uint64_t left = used < budget_.bytes ? budget_.bytes - used : 0;
  if (bytes > left)
    throw Error(ErrorKind::OutOfMemory, fmt::format("{} needs {} but only {} of {} memory is available: {} ({}) less the model's weights "
                            "({}) and its other KV caches ({})",
                            what, bytes_text(bytes), bytes_text(left), device_name(budget_.device),
                            bytes_text(budget_.bytes), budget_.source, bytes_text(weights_), bytes_text(reserved_)));
  reserved_ += bytes;
}

uint64_t MemoryAccount::available() const {
  std::lock_guard lock(mu_);
  if (budget_.bytes == MemoryBudget::kUnknown) return MemoryBudget::kUnknown;
  const uint64_t used = weights_ + reserved_;
  return used < budget_.bytes ? budget_.bytes - used : 0;
}

void MemoryAccount::release(uint64_t bytes) noexcept {
  std::lock_guard lock(mu_);
  reserved_ -= bytes < reserved_ ? bytes : reserved_;
}

}  // namespace kvinfer
