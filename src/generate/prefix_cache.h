#pragma once
// The scheduler's shared prompt prefixes: K/V rows of finished prompts, keyed by their token ids.
// A new prompt that starts with a kept one copies those rows into its own cache instead of
// computing them: a position's K/V depend only on the tokens up to it, so the bits are the same.
#include <cstdint>
#include <span>
#include <vector>

#include "kvinfer/kv_cache.h"

namespace kvinfer {

class PrefixCache {
 public:
  PrefixCache(const Model& model, uint64_t capacity_bytes, int64_t min_tokens)
      : model_(&model), capacity_(capacity_bytes), min_tokens_(min_tokens) {}

  bool enabled() const { return capacity_ > 0; }
  // Copies into kv (empty) the longest run of leading positions a kept entry shares with
  // `prompt`, at most max_tokens of them, when that is at least min_tokens; returns how many.
  int64_t reuse(std::span<const int32_t> prompt, int64_t max_tokens, KvCache& kv);
  // Keeps a copy of kv's first n positions, unless a kept entry already starts with them; drops
  // the entries it extends, and the least recently used ones beyond the capacity. `room`: bytes
  // the copy may take beyond what the cache holds now (the scheduler's budget left). A copy the
  // memory figure refuses is not kept.
  void keep(const KvCache& kv, int64_t n, uint64_t room);
  // Drops entries, least recently used first, until `bytes` are freed or none is left; the bytes freed.
  uint64_t evict(uint64_t bytes);

  uint64_t bytes() const { return bytes_; }
  int64_t entries() const { return static_cast<int64_t>(entries_.size()); }

 private:
  struct Entry {
    KvCache kv;  // exactly its prefix: size() == capacity()
    uint64_t last_used;
  };
  void drop(size_t i);
  uint64_t drop_least_recent();  // the bytes freed

  const Model* model_;
  uint64_t capacity_;
  int64_t min_tokens_;
  std::vector<Entry> entries_;
  uint64_t bytes_ = 0;
  uint64_t clock_ = 0;  // use order for least-recently-used eviction
};

}  // namespace kvinfer
