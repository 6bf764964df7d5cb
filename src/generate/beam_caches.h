#pragma once
// The beams' KV caches during beam search: one contiguous cache per beam, reordered after each
// step with as few row copies as the new beams' parents allow.
#include <cstdint>
#include <span>
#include <vector>

#include "kvinfer/kv_cache.h"

namespace kvinfer {

struct BeamSearchStats;

class BeamCaches {
 public:
  // `first` is beam 0's cache and holds the prompt; the other beams' caches are forks of it with
  // `capacity` positions (every beam starts as the prompt). The forks count in `stats`.
  BeamCaches(KvCache& first, int32_t num_beams, int64_t capacity, BeamSearchStats& stats);

  KvCache& operator[](int32_t beam) { return *caches_[static_cast<size_t>(slot_[static_cast<size_t>(beam)])]; }
  int32_t size() const { return static_cast<int32_t>(slot_.size()); }

  // New beam j continues old beam parents[j]'s sequence. A parent keeps its own cache for one of
  // its children (no copy); every other child takes the cache of an old beam no child continues,
  // the one sharing the longest prefix with the parent, and copies in only the rows after it.
  void reorder(std::span<const int32_t> parents, BeamSearchStats& stats);

  uint64_t bytes() const;  // all the caches

 private:
  std::vector<KvCache> owned_;    // the forks (beams other than the first)
  std::vector<KvCache*> caches_;  // every cache: `first`, then owned_
  std::vector<int32_t> slot_;     // beam -> index into caches_
};

// Makes dst hold src's positions [0, src.size()), copying only the rows after the prefix of
// token ids the two already share (dst's rows there are the same bits: a position's K/V depend
// only on the tokens up to it). Returns the number of rows copied; adds their bytes to `bytes`.
int64_t copy_rows_after_common_prefix(KvCache& dst, const KvCache& src, uint64_t& bytes);

}  // namespace kvinfer
