// place_weights (load_common.h): CPU weights copied out of the file mapping onto huge pages.
#include <cstring>
#include <map>
#include <type_traits>

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

#include "models/load_common.h"

namespace kvinfer {
namespace {

// Whether [p, p + bytes) lies inside one of the mapped files.
bool in_mapping(const std::vector<std::span<const std::byte>>& mapped, const std::byte* p, uint64_t bytes) {
  for (const auto& m : mapped)
    if (p >= m.data() && p <= m.data() + m.size() && bytes <= static_cast<uint64_t>(m.data() + m.size() - p))
      return true;
  return false;
}

// Drops this process's pages of [p, p + bytes), a range of a read-only private file mapping, once
// copied: the page cache keeps them (a later read faults them back in, the same bytes), the
// resident set no longer counts them twice. Only the whole pages inside the range.
void release_mapped(const std::byte* p, uint64_t bytes) {
#if defined(__linux__) && defined(MADV_DONTNEED)
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto begin = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const auto end = (reinterpret_cast<uintptr_t>(p) + bytes) / page * page;
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
#else
  static_cast<void>(p), static_cast<void>(bytes);
#endif
}

}  // namespace

void place_weights(ModelWeights& w, HostStorage& storage, const std::function<void(uint64_t, uint64_t)>& progress) {
  constexpr uint64_t kAlign = 64;  // each matrix starts on a cache line of the arena (load_common.h)
  // Each tensor's data once (a tied LM head is the embedding), and where its copy goes in the
  // arena, for the matrices in the mapping.
  std::map<const void*, uint64_t> offsets;
  const uint64_t kNone = ~uint64_t{0};
  uint64_t total = 0, arena = 0;
  for_each_tensor(w, [&](const auto& t) {
    if (!t.data || offsets.count(t.data)) return;
    total += t.bytes();
    uint64_t at = kNone;
    if constexpr (std::is_same_v<std::decay_t<decltype(t)>, Matrix>) {
      if (in_mapping(storage.mapped, t.data, t.bytes())) {
        at = arena;
        arena += (t.bytes() + kAlign - 1) / kAlign * kAlign;
      }
    }
    offsets.emplace(t.data, at);
  });
  std::byte* copies = arena ? storage.allocate(arena) : nullptr;  // (arena bytes) every mapped matrix
  uint64_t done = 0;
  unsigned sum = 0;
  if (progress) progress(0, total);
  std::map<const void*, bool> visited;
  for_each_tensor(w, [&](auto& t) {
    if (!t.data) return;
    const uint64_t at = offsets.at(t.data);
    const bool first = visited.emplace(t.data, true).second;
    if (at == kNone) {  // in place, or made at load: read every page once, as read_weights does
      if (!first) return;
      const auto* p = reinterpret_cast<const volatile unsigned char*>(t.data);
      for (uint64_t i = 0; i < t.bytes(); i += 4096) sum += p[i];
    } else if constexpr (std::is_same_v<std::decay_t<decltype(t)>, Matrix>) {
      const std::byte* source = t.data;
      t.data = copies + at;  // every use of these bytes, the tied LM head too, points at the copy
      if (!first) return;
      std::memcpy(copies + at, source, t.bytes());
      release_mapped(source, t.bytes());
    }
    done += t.bytes();
    if (progress) progress(done, total);
  });
  static_cast<void>(sum);
}

}  // namespace kvinfer
