#include "generate/beam_caches.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "core/kv_cache_access.h"
#include "cuda/device_memory.h"
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

void copy_bytes(Device device, void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  if (device == Device::CUDA)
    cuda_backend::copy_on_device(dst, src, bytes);
  else
    std::memcpy(dst, src, bytes);
}

}  // namespace

int64_t copy_rows_after_common_prefix(KvCache& dst, const KvCache& src, uint64_t& bytes) {
  const int64_t n = src.size();
  const int64_t from = common_prefix(dst, src);
  dst.truncate(from);
  if (from == n) return 0;
  // Rows [from, n) of every (layer, K/V, KV head) block, and their scales for the 8-bit types.
  const size_t row_bytes = static_cast<size_t>(src.head_dim()) * dtype_size(src.dtype());
  const size_t rows = static_cast<size_t>(n - from);
  const size_t first = static_cast<size_t>(from);
  const bool scaled = kv_scale_bytes(src.dtype()) > 0;
  for (int64_t l = 0; l < src.num_layers(); ++l)
    for (int64_t h = 0; h < src.num_kv_heads(); ++h) {
      const size_t at = first * row_bytes;
      copy_bytes(dst.device(), KvCacheAccess::k(dst, l, h) + at, KvCacheAccess::k(src, l, h) + at, rows * row_bytes);
      copy_bytes(dst.device(), KvCacheAccess::v(dst, l, h) + at, KvCacheAccess::v(src, l, h) + at, rows * row_bytes);
      if (scaled) {
        copy_bytes(dst.device(), KvCacheAccess::k_scales(dst, l, h) + first, KvCacheAccess::k_scales(src, l, h) + first,
                   rows * sizeof(float));
        copy_bytes(dst.device(), KvCacheAccess::v_scales(dst, l, h) + first, KvCacheAccess::v_scales(src, l, h) + first,
                   rows * sizeof(float));
      }
    }
  KvCacheAccess::commit(dst, src.tokens().subspan(first));
  bytes += position_bytes(src) * rows;
  return static_cast<int64_t>(rows);
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
