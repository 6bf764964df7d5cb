#pragma once
// The forward pass of the Llama family (Llama, Mistral, Qwen2).
#include <cstdint>
#include <span>
#include <vector>

#include "kvinfer/config.h"
#include "kvinfer/kv_cache.h"
#include "kvinfer/session.h"
#include "models/weights.h"

namespace kvinfer {

// Activations of one forward call over n positions; grown on demand, reused across calls.
struct ForwardScratch {
  std::vector<float> x;       // (n, hidden) residual stream
  std::vector<float> h;       // (n, hidden) normed input of a sub-layer / its output
  std::vector<float> q;       // (n, heads, head_dim)
  std::vector<float> k;       // (n, kv_heads, head_dim)
  std::vector<float> v;       // (n, kv_heads, head_dim)
  std::vector<float> att;     // (n, heads, head_dim)
  std::vector<float> gate;    // (n, intermediate)
  std::vector<float> up;      // (n, intermediate)
  std::vector<float> logits;  // (n or 1, vocab)
};

// Runs ids at positions kv.size().. through every layer, writes their K/V into kv (and
// commits them) and returns the logits of the last position or of all positions.
std::span<const float> llama_forward(const ModelConfig& cfg, const ModelWeights& w, ForwardScratch& s, KvCache& kv,
                                     std::span<const int32_t> ids, Logits which);

}  // namespace kvinfer
