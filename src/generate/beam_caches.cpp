#include "generate/beam_caches.h"

#include <algorithm>
#include <chrono>

#include "core/kv_cache_access.h"
#include "kvinfer/beam_search.h"
#include "kvinfer/dtype.h"

namespace kvinfer {

namespace {

using Clock = std::chrono::steady_clock;

int64_t common_prefix(const KvCache& a, const KvCache& b) {
  const auto ta = a.tokens(), tb = b.tokens();
  const size_t n = std::min(ta.size(), tb.size());
  return static_cast<int64_t>(std::mismatch(ta.begin(), ta.begin() + static_cast<std::ptrdiff_t>(n), tb.begin()).first -
                              ta.begin());
}

// K and V of one position, every layer and KV head (and their scales for the 8-bit types).
uint64_t position_bytes(const KvCache& kv) {
  return static_cast<uint64_t>(kv.num_layers() * kv.num_kv_heads()) * 2 *
         (static_cast<uint64_t>(kv.head_dim()) * dtype_size(kv.dtype()) + kv_scale_bytes(kv.dtype()));
}

}  // namespace

int64_t copy_rows_after_common_prefix(KvCache& dst, const KvCache& src, uint64_t& bytes) {
  const int64_t n = src.size();
  // The rows after the shared prefix; all of them when a sliding-window ring no longer holds the
  // window before its end.
  const int64_t from = dst.reusable(common_prefix(dst, src));
  dst.truncate(from);
  if (from == n) return 0;
  KvCacheAccess::take_positions(dst, src);
  bytes += position_bytes(src) * static_cast<uint64_t>(n - from);
  return n - from;
}

BeamCaches::BeamCaches(KvCache& first, int32_t num_beams, int64_t capacity, BeamSearchStats& stats) {
  const auto t0 = Clock::now();
  owned_.reserve(static_cast<size_t>(num_beams - 1));
  for (int32_t b = 1; b < num_beams; ++b) {
    owned_.push_back(first.copy(capacity));
    stats.cache_copies += 1;
    stats.copied_rows += first.size();
    stats.copied_bytes += position_bytes(first) * static_cast<uint64_t>(first.size());
  }
  stats.copy_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
  caches_.push_back(&first);
  for (KvCache& c : owned_) caches_.push_back(&c);
  for (int32_t b = 0; b < num_beams; ++b) slot_.push_back(b);
}

void BeamCaches::reorder(std::span<const int32_t> parents, BeamSearchStats& stats) {
  const auto t0 = Clock::now();
  const size_t n = slot_.size();
  std::vector<int32_t> next(n, -1);
  std::vector<bool> kept(n, false);  // old beam i's cache goes on with one of its children
  for (size_t j = 0; j < n; ++j) {
    const auto p = static_cast<size_t>(parents[j]);
    if (!kept[p]) {
      kept[p] = true;
      next[j] = slot_[p];
    }
  }
  std::vector<int32_t> free;  // caches of old beams that no child continues: free to overwrite
  for (size_t i = 0; i < n; ++i)
    if (!kept[i]) free.push_back(slot_[i]);
  for (size_t j = 0; j < n; ++j) {
    if (next[j] >= 0) continue;
    const KvCache& parent = *caches_[static_cast<size_t>(slot_[static_cast<size_t>(parents[j])])];
    const auto shared = [&](int32_t slot) { return common_prefix(*caches_[static_cast<size_t>(slot)], parent); };
    auto best = std::max_element(free.begin(), free.end(), [&](int32_t a, int32_t b) { return shared(a) < shared(b); });
    next[j] = *best;
    free.erase(best);
    KvCache& dst = *caches_[static_cast<size_t>(next[j])];
    const int64_t rows = copy_rows_after_common_prefix(dst, parent, stats.copied_bytes);
    stats.copied_rows += rows;
    stats.cache_copies += rows > 0 ? 1 : 0;
  }
  slot_ = std::move(next);
  stats.copy_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
}

uint64_t BeamCaches::bytes() const {
  uint64_t total = 0;
  for (const KvCache* c : caches_) total += c->bytes();
  return total;
}

}  // namespace kvinfer
