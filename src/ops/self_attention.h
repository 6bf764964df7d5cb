#pragma once
// The per-sequence part of a batched attention sub-layer (ops::self_attention, cpu::self_attention):
// which rows of the call belong to which sequence, and the shape of the work.
#include <algorithm>
#include <cstdint>

#include <fmt/format.h>

#include "core/kv_cache_access.h"
#include "kvinfer/config.h"
#include "kvinfer/error.h"
#include "kvinfer/kv_cache.h"
#include "models/weights.h"

namespace kvinfer {

// One sequence's rows in a call: rows [row, row + n) of q/k/v/att, at positions start .. start + n - 1
// of its own cache.
struct SequenceRows {
  KvCache* kv;
  int64_t start, row, n;
};

// How attention scores are made from q · k: times `scale` (0: 1/sqrt(head_dim)), then, with a
// soft-cap c > 0 (Gemma 2's attn_logit_softcapping), c · tanh(s / c), before the mask and softmax.
struct ScoreOptions {
  float scale = 0;
  float softcap = 0;
};

// Rope (none when inv_freq is null), the K/V store and causal attention of one layer.
struct SelfAttention {
  int64_t layer, heads, kv_heads, head_dim;
  int64_t window;           // <= 0: none
  const Vector* inv_freq;   // (rotary_dim / 2) rope frequencies on the Exec's device, or null (GPT-2)
  RopeLayout layout;
  float rope_attention_factor = 1.0f;  // cos and sin scaled by it (RopeScaling::attention_factor)
  ScoreOptions scores = {};
};

// Sequence s's rows in the pieces its cache's layer takes at a time, each to be stored and then
// attended to before the next is stored: f(t, m) for rows [t, t + m) of s (positions s.start + t
// onwards). A sliding-window ring of R rows (KvCache::layer_rows) takes R − window + 1 positions
// at a time, so a piece's writes never reach a row its own queries read; any other layer all n.
// Pieces change no bits: each query's attention is computed on its own.
template <typename F>
void for_each_piece(const SequenceRows& s, int64_t layer, int64_t window, F&& f) {
  const int64_t rows = s.kv->layer_rows(layer);
  int64_t piece = s.n;
  if (rows < s.kv->capacity()) {
    if (window <= 0 || window > rows)
      throw Error(ErrorKind::InvalidArgument, fmt::format("layer {}: attention window {} on a sliding-window ring of {} rows",
                                                   layer, window, rows));
    piece = rows - window + 1;
  }
  for (int64_t t = 0; t < s.n; t += piece) {
    const int64_t m = std::min(piece, s.n - t);
    KvCacheAccess::will_write(*s.kv, s.start + t + m);
    f(t, m);
  }
}

}  // namespace kvinfer
