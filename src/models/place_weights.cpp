// place_weights (load_common.h): CPU weights copied out of the file (pread) onto huge pages, or
// read once in place; then packed for decode where this CPU's kernels read them so.
#include <map>
#include <set>
#include <type_traits>

#include "cpu/packed_rows.h"
#include "models/load_common.h"

namespace kvinfer {

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
      if (copy && storage.file_of(t.data, t.bytes())) {
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
        // pread: the mapping's pages are never faulted in (nothing to give back after), and a
        // file truncated meanwhile is an Error naming it where a read of the mapping is SIGBUS.
        storage.read(static_cast<const std::byte*>(source), t.bytes(), copies + at);
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
      if (!t.data || !cpu::packs_rows(t.dtype, t.cols) || storage.file_of(t.data, t.bytes())) return;
      if (packed.insert(t.data).second) cpu::pack_rows(t.dtype, t.rows, t.cols, const_cast<std::byte*>(t.data));
      t.packed = true;
    }
  });
}

}  // namespace kvinfer
