// place_weights (load_common.h): CPU weights copied out of the file mapping onto huge pages, or
// read once in place; then packed for decode where this CPU's kernels read them so.
#include <cstring>
#include <map>
#include <set>
#include <type_traits>

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

#include "cpu/packed_rows.h"
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

void place_weights(ModelWeights& w, HostStorage& storage, bool copy,
                   const std::function<void(uint64_t, uint64_t)>& progress) {
  constexpr uint64_t kAlign = 64;  // each copy starts on a cache line of the buffer
  constexpr uint64_t kInPlace = ~uint64_t{0};
  // Each tensor's data once, and where its copy goes in the buffer (kInPlace: nowhere).
  std::map<const void*, uint64_t> offsets;
  uint64_t total = 0, buffer = 0;
  for_each_tensor(w, [&](const auto& t) {
    if (!t.data || offsets.count(t.data)) return;
    total += t.bytes();
    uint64_t at = kInPlace;
    if constexpr (std::is_same_v<std::decay_t<decltype(t)>, Matrix>) {
      if (copy && in_mapping(storage.mapped, t.data, t.bytes())) {
        at = buffer;
        buffer += (t.bytes() + kAlign - 1) / kAlign * kAlign;
      }
    }
    offsets.emplace(t.data, at);
  });
  std::byte* copies = buffer ? storage.allocate(buffer) : nullptr;  // (buffer bytes) the copied matrices
  std::set<const void*> done_data;  // placed already
  uint64_t done = 0;
  unsigned sum = 0;
  if (progress) progress(0, total);
  for_each_tensor(w, [&](auto& t) {
    if (!t.data) return;
    const void* source = t.data;
    const uint64_t at = offsets.at(source);
    const bool first = done_data.insert(source).second;
    if constexpr (std::is_same_v<std::decay_t<decltype(t)>, Matrix>) {
      if (at != kInPlace) {
        t.data = copies + at;  // every view of these bytes points at the one copy
        if (!first) return;
        std::memcpy(copies + at, source, t.bytes());
        release_mapped(static_cast<const std::byte*>(source), t.bytes());
      }
    }
    if (!first) return;
    if (at == kInPlace) {
      const auto* p = static_cast<const volatile unsigned char*>(source);
      for (uint64_t i = 0; i < t.bytes(); i += 4096) sum += p[i];
    }
    done += t.bytes();
    if (progress) progress(done, total);
  });
  static_cast<void>(sum);
  // The matrices outside the mappings live in the storage's own buffers, which are writable.
  std::set<const void*> packed;
  for_each_tensor(w, [&](auto& t) {
    if constexpr (std::is_same_v<std::decay_t<decltype(t)>, Matrix>) {
      if (!t.data || !cpu::packs_rows(t.dtype, t.cols) || in_mapping(storage.mapped, t.data, t.bytes())) return;
      if (packed.insert(t.data).second) cpu::pack_rows(t.dtype, t.rows, t.cols, const_cast<std::byte*>(t.data));
      t.packed = true;
    }
  });
}

}  // namespace kvinfer
