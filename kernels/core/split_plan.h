#pragma once
// Split-K planning for decode attention (Flash-Decoding): the context of the one query row is
// cut into `splits` contiguous ranges so that (work items × splits) thread blocks fill the GPU;
// each block writes a partial softmax state and a combine merges them (online_softmax.h).
//
// Ranges are whole tiles (a multiple of the kernel's tile size), never empty unless the context
// is (then there is one empty split), and cover [0, context) exactly once, in order.
#include <cstdint>

#include "host_device.h"

namespace kvinfer::core {

struct SplitPlan {
  int64_t splits = 1;     // >= 1
  int64_t per_split = 0;  // positions per split: a positive multiple of the tile; the last may hold fewer

  KVI_HD int64_t begin(int64_t s) const { return s * per_split; }
  KVI_HD int64_t end(int64_t s, int64_t context) const {
    const int64_t e = (s + 1) * per_split;
    return e < context ? e : context;
  }
};

KVI_HD int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The split count plan_splits aims at (it returns at most this many); never falls as the
// context grows. Arguments as plan_splits', already clamped to >= 1.
KVI_HD int64_t split_target(int64_t tiles, int64_t items, int64_t target_blocks, int64_t max_splits,
                            int64_t min_tiles_per_split) {
  int64_t want = ceil_div(target_blocks, items);
  const int64_t by_length = tiles / min_tiles_per_split > 0 ? tiles / min_tiles_per_split : 1;
  if (want > by_length) want = by_length;
  if (want > max_splits) want = max_splits;
  if (want > tiles) want = tiles;
  return want < 1 ? 1 : want;
}

// context: positions to attend (>= 0). items: thread blocks per split (e.g. KV heads).
// target_blocks: blocks wanted in flight (a few waves over the multiprocessors). tile: positions
// per kernel tile (>= 1). max_splits: cap, e.g. what the workspace holds (>= 1).
// min_tiles_per_split: the shortest split worth its fixed cost (query load, partial write,
// combine) when the target would cut finer.
KVI_HD SplitPlan plan_splits(int64_t context, int64_t items, int64_t target_blocks, int64_t tile,
                             int64_t max_splits, int64_t min_tiles_per_split = 1) {
  if (tile < 1) tile = 1;
  if (context <= 0) return SplitPlan{1, tile};
  if (items < 1) items = 1;
  if (target_blocks < 1) target_blocks = 1;
  if (max_splits < 1) max_splits = 1;
  if (min_tiles_per_split < 1) min_tiles_per_split = 1;
  const int64_t tiles = ceil_div(context, tile);
  const int64_t want = split_target(tiles, items, target_blocks, max_splits, min_tiles_per_split);
  // Whole tiles per split, then the split count that this size needs: no empty trailing split,
  // and never more than `want` (so never more than max_splits).
  const int64_t tiles_per_split = ceil_div(tiles, want);
  return SplitPlan{ceil_div(tiles, tiles_per_split), tiles_per_split * tile};
}

// The most splits plan_splits (same arguments) returns for any context in [1, max_context]: the
// grid of a launch whose context is known only on the device.
KVI_HD int64_t most_splits(int64_t max_context, int64_t items, int64_t target_blocks, int64_t tile,
                           int64_t max_splits, int64_t min_tiles_per_split = 1) {
  if (tile < 1) tile = 1;
  if (max_context <= 0) return 1;
  return split_target(ceil_div(max_context, tile), items < 1 ? 1 : items, target_blocks < 1 ? 1 : target_blocks,
                      max_splits < 1 ? 1 : max_splits, min_tiles_per_split < 1 ? 1 : min_tiles_per_split);
}

// The most splits plan_splits can return for any context <= max_context with tiles of at least
// min_tile positions: what a workspace must be sized for.
KVI_HD int64_t max_splits_bound(int64_t max_context, int64_t min_tile, int64_t max_splits) {
  const int64_t tiles = max_context > 0 && min_tile > 0 ? ceil_div(max_context, min_tile) : 1;
  return tiles < max_splits ? tiles : max_splits;
}

}  // namespace kvinfer::core
