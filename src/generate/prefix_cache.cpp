#include "generate/prefix_cache.h"

#include <algorithm>

#include "kvinfer/error.h"
#include "kvinfer/kv_plan.h"
#include "kvinfer/model.h"

namespace kvinfer {

namespace {

int64_t common_prefix(std::span<const int32_t> a, std::span<const int32_t> b) {
  const size_t n = std::min(a.size(), b.size());
  return static_cast<int64_t>(std::mismatch(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(n), b.begin()).first -
                              a.begin());
}

}  // namespace

int64_t PrefixCache::reuse(std::span<const int32_t> prompt, int64_t max_tokens, KvCache& kv) {
  if (entries_.empty()) return 0;
  size_t best = 0;
  int64_t best_len = 0;
  for (size_t i = 0; i < entries_.size(); ++i) {
    // The longest shared run the entry can give: its rings hold the window before it (else 0).
    const int64_t len = entries_[i].kv.reusable(std::min(common_prefix(entries_[i].kv.tokens(), prompt), max_tokens));
    if (len > best_len) best = i, best_len = len;
  }
  if (best_len < std::max<int64_t>(min_tokens_, 1)) return 0;
  kv.assign_prefix(entries_[best].kv, best_len);
  entries_[best].last_used = ++clock_;
  return best_len;
}

void PrefixCache::keep(const KvCache& kv, int64_t n, uint64_t room) {
  if (!enabled() || n < std::max<int64_t>(min_tokens_, 1) || n > kv.size()) return;
  if (kv.reusable(n) != n) return;  // kv's rings no longer hold the window before n: nothing to copy
  const std::span<const int32_t> tokens = kv.tokens().first(static_cast<size_t>(n));
  for (Entry& e : entries_)
    if (common_prefix(e.kv.tokens(), tokens) == n) {  // already kept, maybe within a longer one
      e.last_used = ++clock_;
      return;
    }
  for (size_t i = entries_.size(); i-- > 0;)  // the entries this one extends are not needed now
    if (common_prefix(entries_[i].kv.tokens(), tokens) == entries_[i].kv.size()) room += entries_[i].kv.bytes(), drop(i);
  const uint64_t need = plan_kv_bytes(model_->config(), n, kv.dtype());  // the entry's, rings included
  if (need > capacity_) return;
  while (!entries_.empty() && (bytes_ + need > capacity_ || need > room)) room += drop_least_recent();
  if (bytes_ + need > capacity_ || need > room) return;
  try {
    KvCache entry(*model_, n, kv.dtype());
    entry.assign_prefix(kv, n);
    bytes_ += entry.bytes();
    entries_.push_back({std::move(entry), ++clock_});
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::OutOfMemory) throw;  // the memory figure refused it: not kept
  }
}

uint64_t PrefixCache::evict(uint64_t bytes) {
  uint64_t freed = 0;
  while (freed < bytes && !entries_.empty()) freed += drop_least_recent();
  return freed;
}

uint64_t PrefixCache::drop_least_recent() {
  const auto lru = std::min_element(entries_.begin(), entries_.end(),
                                    [](const Entry& a, const Entry& b) { return a.last_used < b.last_used; });
  const uint64_t freed = lru->kv.bytes();
  drop(static_cast<size_t>(lru - entries_.begin()));
  return freed;
}

void PrefixCache::drop(size_t i) {
  bytes_ -= entries_[i].kv.bytes();
  entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(i));
}

}  // namespace kvinfer
