// The profiler (kvi_sim.h: LaunchProfile): each access a hook reports joins its warp-level request,
// keyed by (warp, site, how many times this lane ran the site before); when a block ends, each
// request's distinct sectors (global) or its banks' distinct words (shared) are counted.
#include "profile.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "block.h"

namespace kvi_sim {

thread_local bool t_profiling __attribute__((tls_model("initial-exec"))) = false;

namespace {

struct Recorder {
  std::mutex mu;
  bool recording = false;                // profile_start() .. profile_stop()
  std::vector<LaunchProfile> launches;   // while recording
  bool print = false;                    // $KVINFER_SIM_PROFILE=1
  std::map<std::string, std::pair<uint64_t, LaunchProfile>> by_kernel;  // printed at exit: launches, sums
};

Recorder& recorder();

double as_double(uint64_t v) { return static_cast<double>(v); }
// The bytes of the sectors moved that a lane asked for, in percent.
double sector_efficiency(uint64_t used, uint64_t sectors) {
  return sectors ? 100.0 * as_double(used) / (32.0 * as_double(sectors)) : 0.0;
}

void print_table() {
  Recorder& r = recorder();
  std::lock_guard lock(r.mu);
  if (r.by_kernel.empty()) return;
  std::fprintf(stderr, "[kvi_sim profile] by kernel: launches, global load MB / sector efficiency, store MB / "
                       "efficiency, shared requests / wavefronts per ideal\n");
  for (const auto& [name, v] : r.by_kernel) {
    const LaunchProfile& p = v.second;
    std::fprintf(stderr, "  %-60s %6llu  %10.3f %5.1f %%  %10.3f %5.1f %%  %10llu %5.2f\n", name.c_str(),
                 static_cast<unsigned long long>(v.first), as_double(p.load_bytes) / 1e6,
                 sector_efficiency(p.load_used, p.load_sectors), as_double(p.store_bytes) / 1e6,
                 sector_efficiency(p.store_used, p.store_sectors), static_cast<unsigned long long>(p.shared_requests),
                 p.shared_ideal_wavefronts ? as_double(p.shared_wavefronts) / as_double(p.shared_ideal_wavefronts) : 0.0);
  }
}

Recorder& recorder() {
  static Recorder* r = [] {
    auto* rec = new Recorder;  // never destroyed: launches may run during static destruction
    const char* v = std::getenv("KVINFER_SIM_PROFILE");
    if (v != nullptr && std::string(v) == "1") {
      rec->print = true;
      std::atexit(print_table);
    }
    return rec;
  }();
  return *r;
}

struct GroupKey {
  const void* pc;
  uint32_t warp, execution;
  bool shared, store;
  bool operator==(const GroupKey&) const = default;
};
struct GroupKeyHash {
  size_t operator()(const GroupKey& k) const {
    uint64_t h = reinterpret_cast<uintptr_t>(k.pc) * 0x9e3779b97f4a7c15ull;
    h ^= (uint64_t{k.warp} << 32 | k.execution) + 0x632be59bd9b4e019ull + (h << 6) + (h >> 2);
    return static_cast<size_t>(h ^ (uint64_t{k.shared} << 1 | uint64_t{k.store}));
  }
};
struct Group {
  std::vector<uint64_t> units;  // sectors (global) or 4-byte words (shared), with repeats
  std::vector<uint32_t> masks;  // global: the bytes of units[i] asked for, a bit each
  uint64_t bytes = 0;
};
struct BlockState {
  std::vector<std::unordered_map<const void*, uint32_t>> executions;  // per thread: site → runs so far
  std::unordered_map<GroupKey, Group, GroupKeyHash> groups;
};
struct SiteKey {
  const void* pc;
  bool shared, store;
  bool operator==(const SiteKey&) const = default;
};
struct SiteKeyHash {
  size_t operator()(const SiteKey& k) const {
    return static_cast<size_t>(reinterpret_cast<uintptr_t>(k.pc) * 0x9e3779b97f4a7c15ull) ^ (k.shared << 1 | k.store);
  }
};
struct LaunchState {
  LaunchProfile p;
  std::unordered_map<const Block*, BlockState> blocks;
  std::unordered_map<uint64_t, uint32_t> read, written;  // sector → its bytes touched, a bit each
  std::unordered_map<SiteKey, size_t, SiteKeyHash> sites;  // → p.sites and pcs
  std::vector<const void*> pcs;
  std::vector<std::pair<uintptr_t, uintptr_t>> allocations;  // device allocations seen: [lo, hi)
};
thread_local LaunchState* t_launch = nullptr;

bool in_device_memory(LaunchState& l, uintptr_t a, size_t n) {
  for (const auto& [lo, hi] : l.allocations)
    if (a >= lo && a < hi) return n <= hi - a;
  uintptr_t lo = 0, hi = 0;
  if (!device_allocation(reinterpret_cast<const void*>(a), lo, hi)) return false;
  l.allocations.emplace_back(lo, hi);
  return n <= hi - a;
}

size_t site(LaunchState& l, const void* pc, bool shared, bool store) {
  auto [it, fresh] = l.sites.try_emplace(SiteKey{pc, shared, store}, l.p.sites.size());
  if (fresh) {
    SiteProfile s;
    s.shared = shared, s.store = store;
    l.p.sites.push_back(std::move(s));
    l.pcs.push_back(pc);
  }
  return it->second;
}

// Calls f(sector, mask of its bytes) for each sector [a, a + n) touches.
template <typename F>
void for_sectors(uintptr_t a, size_t n, F&& f) {
  for (uintptr_t x = a, end = a + n; x < end;) {
    const uint64_t sector = x / 32;
    const unsigned lo = static_cast<unsigned>(x % 32);
    const unsigned hi = static_cast<unsigned>(std::min<uintptr_t>(32, lo + (end - x)));
    f(sector, (hi == 32 ? ~0u : (1u << hi) - 1u) & ~((1u << lo) - 1u));
    x = (sector + 1) * 32;
  }
}

uint64_t bytes_of(const std::unordered_map<uint64_t, uint32_t>& touched) {
  uint64_t n = 0;
  for (const auto& kv : touched) n += static_cast<uint64_t>(std::popcount(kv.second));
  return n;
}

}  // namespace

void profile_start() {
  Recorder& r = recorder();
  std::lock_guard lock(r.mu);
  r.recording = true;
  r.launches.clear();
}

std::vector<LaunchProfile> profile_stop() {
  Recorder& r = recorder();
  std::lock_guard lock(r.mu);
  r.recording = false;
  return std::exchange(r.launches, {});
}

void profile_begin_launch(const Grid& g) {
  Recorder& r = recorder();
  {
    std::lock_guard lock(r.mu);
    t_profiling = (r.recording || r.print) && access_checks_compiled();
  }
  if (!t_profiling) return;
  t_launch = new LaunchState;
  LaunchProfile& p = t_launch->p;
  p.kernel = g.name.empty() ? code_site(g.kernel) : g.name;  // launched without kvinfer::cuda::launch
  p.grid = g.grid, p.block = g.block, p.dynamic_smem = g.smem;
}

void profile_access(Block& b, uintptr_t a, size_t n, bool write, bool shared, const void* pc) {
  LaunchState& l = *t_launch;
  if (n == 0 || (!shared && !in_device_memory(l, a, n))) return;
  BlockState& bs = l.blocks[&b];
  if (bs.executions.size() != b.threads.size()) bs.executions.resize(b.threads.size());
  const unsigned t = b.current->linear;
  const uint32_t run = bs.executions[t][pc]++;
  if (run == 0) site(l, pc, shared, write);  // sites in the order they first run
  Group& g = bs.groups[GroupKey{pc, t / 32, run, shared, write}];
  g.bytes += n;
  if (shared) {
    for (uintptr_t w = a / 4; w <= (a + n - 1) / 4; ++w) g.units.push_back(w);
    return;
  }
  auto& touched = write ? l.written : l.read;
  for_sectors(a, n, [&](uint64_t sector, uint32_t mask) {
    g.units.push_back(sector);
    g.masks.push_back(mask);
    touched[sector] |= mask;
  });
}

void profile_block_end(Block& b) {
  LaunchState& l = *t_launch;
  auto it = l.blocks.find(&b);
  if (it == l.blocks.end()) return;
  LaunchProfile& p = l.p;
  for (auto& [k, g] : it->second.groups) {
    SiteProfile& s = p.sites[site(l, k.pc, k.shared, k.store)];
    ++s.requests;
    s.bytes += g.bytes;
    uint64_t used = 0;
    if (!k.shared) {  // distinct sectors, and the bytes of each some lane asked for
      std::unordered_map<uint64_t, uint32_t> sectors;
      for (size_t i = 0; i < g.units.size(); ++i) sectors[g.units[i]] |= g.masks[i];
      g.units.clear();
      for (const auto& [sector, mask] : sectors) g.units.push_back(sector), used += static_cast<uint64_t>(std::popcount(mask));
    }
    if (k.shared) {  // distinct words, by bank
      std::sort(g.units.begin(), g.units.end());
      g.units.erase(std::unique(g.units.begin(), g.units.end()), g.units.end());
      std::array<uint32_t, 32> per_bank{};
      for (uint64_t w : g.units) ++per_bank[w % 32];
      const uint64_t passes = *std::max_element(per_bank.begin(), per_bank.end());
      const uint64_t ideal = (g.units.size() + 31) / 32;
      s.wavefronts += passes, s.ideal += ideal;
      ++p.shared_requests, p.shared_wavefronts += passes, p.shared_ideal_wavefronts += ideal;
    } else if (k.store) {
      s.sectors += g.units.size(), s.used += used;
      ++p.store_requests, p.store_bytes += g.bytes, p.store_sectors += g.units.size(), p.store_used += used;
    } else {
      s.sectors += g.units.size(), s.used += used;
      ++p.load_requests, p.load_bytes += g.bytes, p.load_sectors += g.units.size(), p.load_used += used;
    }
  }
  l.blocks.erase(it);
}

void profile_end_launch(bool ok) {
  LaunchState* l = std::exchange(t_launch, nullptr);
  t_profiling = false;
  if (l == nullptr) return;
  if (ok) {
    LaunchProfile& p = l->p;
    p.unique_read_bytes = bytes_of(l->read);
    p.unique_written_bytes = bytes_of(l->written);
    for (size_t i = 0; i < p.sites.size(); ++i) p.sites[i].where = code_site(l->pcs[i]);
    Recorder& r = recorder();
    std::lock_guard lock(r.mu);
    if (r.print) {
      std::fprintf(stderr,
                   "[kvi_sim profile] %s grid %ux%ux%u block %ux%ux%u smem %zu: load %llu B in %llu requests, %llu "
                   "sectors (%.1f %%); store %llu B, %llu sectors (%.1f %%); distinct read %llu B, written %llu B; "
                   "shared %llu requests, %llu wavefronts (ideal %llu)\n",
                   p.kernel.c_str(), p.grid.x, p.grid.y, p.grid.z, p.block.x, p.block.y, p.block.z, p.dynamic_smem,
                   static_cast<unsigned long long>(p.load_bytes), static_cast<unsigned long long>(p.load_requests),
                   static_cast<unsigned long long>(p.load_sectors), sector_efficiency(p.load_used, p.load_sectors),
                   static_cast<unsigned long long>(p.store_bytes), static_cast<unsigned long long>(p.store_sectors),
                   sector_efficiency(p.store_used, p.store_sectors), static_cast<unsigned long long>(p.unique_read_bytes),
                   static_cast<unsigned long long>(p.unique_written_bytes),
                   static_cast<unsigned long long>(p.shared_requests),
                   static_cast<unsigned long long>(p.shared_wavefronts),
                   static_cast<unsigned long long>(p.shared_ideal_wavefronts));
      auto& [count, sum] = r.by_kernel[p.kernel];
      ++count;
      sum.load_bytes += p.load_bytes, sum.load_sectors += p.load_sectors, sum.load_used += p.load_used;
      sum.store_bytes += p.store_bytes, sum.store_sectors += p.store_sectors, sum.store_used += p.store_used;
      sum.shared_requests += p.shared_requests, sum.shared_wavefronts += p.shared_wavefronts;
      sum.shared_ideal_wavefronts += p.shared_ideal_wavefronts;
    }
    if (r.recording) r.launches.push_back(std::move(p));
  }
  delete l;
}

}  // namespace kvi_sim
