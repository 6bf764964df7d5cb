// The GPT-2 decoder (Radford et al. 2019), as HF transformers' GPT2LMHeadModel computes it:
//   x = wte[ids] + wpe[positions]
//   per layer:  x += W_proj · attention(W_q·ln_1(x), W_k·ln_1(x), W_v·ln_1(x))     (+ biases)
//               x += W_mlp_proj · gelu_tanh(W_fc·ln_2(x))                           (+ biases)
//   logits = wte · ln_f(x)
// Pre-norm LayerNorms with bias, learned absolute positions (no rope), full multi-head attention.
// The checkpoint's fused c_attn is bound as the three linear layers q, k, v (load_hf.cpp).
#include <fmt/format.h>

#include "models/forward.h"

namespace kvinfer {

std::span<const float> gpt2_forward(const ModelConfig& cfg, const ModelWeights& w, ForwardScratch& s,
                                    std::span<const BatchSegment> batch) {
  const ops::Exec& e = s.exec;
  const Device dev = e.device;
  const int64_t n = gather_ids(s, batch);  // rows: every segment's tokens
  const int64_t hidden = cfg.hidden_size, heads = cfg.num_heads, hd = cfg.head_dim, inter = cfg.intermediate_size;
  const float eps = static_cast<float>(cfg.norm_eps);

  float* x = s.x.reserve(dev, n * hidden);          // (n, hidden) residual stream
  float* h = s.h.reserve(dev, n * hidden);          // (n, hidden)
  float* q = s.q.reserve(dev, n * heads * hd);      // (n, heads, hd)
  float* k = s.k.reserve(dev, n * heads * hd);      // (n, heads, hd)
  float* v = s.v.reserve(dev, n * heads * hd);      // (n, heads, hd)
  float* att = s.att.reserve(dev, n * heads * hd);  // (n, heads, hd)
  float* up = s.up.reserve(dev, n * inter);         // (n, inter)

  s.positions.clear();
  for (const BatchSegment& g : batch)
    for (int64_t t = 0; t < g.n(); ++t) s.positions.push_back(static_cast<int32_t>(g.start + t));
  ops::embed(e, w.embed, s.ids, x);
  ops::embed(e, w.pos_embed, s.positions, h, EmbedIds::Positions);
  ops::add(e, x, h, n * hidden);
  check_residual(s, x, batch, hidden, "the token and position embeddings");
  for (int64_t l = 0; l < cfg.num_layers; ++l) {
    const LayerWeights& L = w.layers[static_cast<size_t>(l)];
    // Self-attention block.
    ops::layer_norm(e, x, L.attn_norm, L.attn_norm_bias, n, hidden, eps, h);
    ops::linears(e, {{&L.q, q}, {&L.k, k}, {&L.v, v}}, h, n);
    // Each sequence over its own cache (learned positions: no rope).
    ops::self_attention(e, s.sequences, {l, heads, heads, hd, 0, nullptr, RopeLayout::HalfSplit}, q, k, v, att);
    ops::linear(e, L.o, att, n, h);
    ops::add(e, x, h, n * hidden);
    if (e.check_finite) check_residual(s, x, batch, hidden, fmt::format("layer {} (attention block)", l));
    // Feed-forward block.
    ops::layer_norm(e, x, L.ffn_norm, L.ffn_norm_bias, n, hidden, eps, h);
    ops::linear(e, L.up, h, n, up);
    ops::gelu_tanh(e, up, up, n * inter);
    ops::linear(e, L.down, up, n, h);
    ops::add(e, x, h, n * hidden);
    if (e.check_finite) check_residual(s, x, batch, hidden, fmt::format("layer {} (feed-forward block)", l));
  }

  return final_logits(cfg, w, s, x, batch);
}

}  // namespace kvinfer
