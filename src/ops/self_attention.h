#pragma once
// The per-sequence part of a batched attention sub-layer (ops::self_attention, cpu::self_attention):
// which rows of the call belong to which sequence, and the shape of the work.
#include <cstdint>

#include "kvinfer/config.h"
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

}  // namespace kvinfer
