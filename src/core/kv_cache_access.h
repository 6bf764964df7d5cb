#pragma once
// What the backends (and tests) reach inside a KvCache that its users must not: the raw K/V
// storage on the cache's device, and commit, which marks positions filled once the forward pass
// has written them. Not installed: internal code only.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

#include "kvinfer/kv_cache.h"

namespace kvinfer {

struct KvCacheAccess {
  // K (or V) of one layer and KV head: (kv.layer_rows(layer), head_dim) elements of kv.dtype() on
  // kv.device(), position p in row p mod layer_rows (a sliding-window ring; p itself otherwise);
  // the heads of one layer follow each other.
  static std::byte* k(KvCache& kv, int64_t layer, int64_t kv_head) { return kv.k(layer, kv_head); }
  static std::byte* v(KvCache& kv, int64_t layer, int64_t kv_head) { return kv.v(layer, kv_head); }
  static const std::byte* k(const KvCache& kv, int64_t layer, int64_t kv_head) { return kv.k(layer, kv_head); }
  static const std::byte* v(const KvCache& kv, int64_t layer, int64_t kv_head) { return kv.v(layer, kv_head); }
  // The row scales of an 8-bit cache (int8, fp8): (layer_rows) f32 of one layer and KV head on
  // kv.device(), the heads of one layer following each other; null for the other dtypes.
  static float* k_scales(KvCache& kv, int64_t layer, int64_t kv_head) { return kv.scales(layer, 0, kv_head); }
  static float* v_scales(KvCache& kv, int64_t layer, int64_t kv_head) { return kv.scales(layer, 1, kv_head); }
  static const float* k_scales(const KvCache& kv, int64_t layer, int64_t kv_head) {
    return kv.scales(layer, 0, kv_head);
  }
  static const float* v_scales(const KvCache& kv, int64_t layer, int64_t kv_head) {
    return kv.scales(layer, 1, kv_head);
  }
  // Marks ids.size() more positions filled, computed from `ids`; throws past the capacity.
  static void commit(KvCache& kv, std::span<const int32_t> ids) { kv.commit(ids); }
  // dst, holding src's first dst.size() positions (same shape), takes src's positions from there
  // to src.size(): beam search's copies of a beam's last rows.
  static void take_positions(KvCache& dst, const KvCache& src) { dst.take_positions(src, src.size()); }
  // Called before positions up to `end` are written (a ring loses those before end − rows).
  static void will_write(KvCache& kv, int64_t end) { kv.will_write(end); }
  // A restored cache's sliding-window layers hold positions from p on (earliest_rewind follows).
  static void set_held_from(KvCache& kv, int64_t p) { kv.held_from_ = p; }
  // The first position every sliding-window ring still holds (0 until one overwrote a position).
  static int64_t held_from(const KvCache& kv) { return kv.held_from_; }
};

// Positions [first, last] of a layer whose position p lies in row p mod rows (KvCache::layer_rows),
// in runs of consecutive rows: f(j0, j1, r0) for positions j0 .. j1 in rows r0 .. r0 + j1 − j0.
// One run unless a sliding-window ring wraps within the range.
template <typename F>
void for_each_run(int64_t first, int64_t last, int64_t rows, F&& f) {
  for (int64_t j = first; j <= last;) {
    const int64_t r = j % rows, j1 = std::min(last, j + rows - r - 1);
    f(j, j1, r);
    j = j1 + 1;
  }
}

// Shorthands for the kernels' call sites.
inline std::byte* kv_k(KvCache& kv, int64_t layer, int64_t kv_head) { return KvCacheAccess::k(kv, layer, kv_head); }
inline std::byte* kv_v(KvCache& kv, int64_t layer, int64_t kv_head) { return KvCacheAccess::v(kv, layer, kv_head); }
inline const std::byte* kv_k(const KvCache& kv, int64_t layer, int64_t kv_head) {
  return KvCacheAccess::k(kv, layer, kv_head);
}
inline const std::byte* kv_v(const KvCache& kv, int64_t layer, int64_t kv_head) {
  return KvCacheAccess::v(kv, layer, kv_head);
}

template <typename Kv>
auto kv_k_scales(Kv& kv, int64_t layer, int64_t kv_head) {
  return KvCacheAccess::k_scales(kv, layer, kv_head);
}
template <typename Kv>
auto kv_v_scales(Kv& kv, int64_t layer, int64_t kv_head) {
  return KvCacheAccess::v_scales(kv, layer, kv_head);
}

}  // namespace kvinfer
