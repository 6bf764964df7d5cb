// The Gemma 2 and Gemma 3 decoders (Gemma Team 2024, 2025), as HF transformers computes them:
//   x = embed(ids) · sqrt(hidden)
//   per layer:  x += post_norm(W_o · attention(rope(W_q·norm(x)), rope(W_k·norm(x)), W_v·norm(x)))
//               x += post_norm(W_down · (gelu_tanh(W_gate·norm(x)) ⊙ W_up·norm(x)))
//   logits = W_lm · norm(x)   (Gemma 2: then soft-capped, c · tanh(logits / c))
// Every norm is RMSNorm with (1 + w) (folded into w at load). Scores are scaled by
// query_pre_attn_scalar^-0.5; Gemma 2 soft-caps them before the softmax. Sliding layers attend
// to the last sliding_window positions, global layers to all. Gemma 3 also RMSNorms each head
// of q and k before rope, and rotates sliding layers with its local base (rope_local_base_freq).
#include <cmath>

#include <fmt/format.h>

#include "models/forward.h"

namespace kvinfer {

std::span<const float> gemma_forward(const ModelConfig& cfg, const ModelWeights& w, ForwardScratch& s,
                                     std::span<const BatchSegment> batch) {
  const ops::Exec& e = s.exec;
  const Device dev = e.device;
  const int64_t n = gather_ids(s, batch);  // rows: every segment's tokens
  const int64_t hidden = cfg.hidden_size, hd = cfg.head_dim, heads = cfg.num_heads, kvh = cfg.num_kv_heads;
  const int64_t inter = cfg.intermediate_size;
  const float eps = static_cast<float>(cfg.norm_eps);
  const float rope_scale = static_cast<float>(cfg.rope_scaling.attention_factor);  // YaRN, LongRoPE; else 1
  // HF multiplies the embeddings by sqrt(hidden) cast to the activations' dtype: f32 here.
  const auto normalizer = static_cast<float>(std::sqrt(static_cast<double>(hidden)));
  const ScoreOptions scores{static_cast<float>(std::pow(cfg.query_pre_attn_scalar, -0.5)),
                            static_cast<float>(cfg.attn_logit_softcapping)};

  float* x = s.x.reserve(dev, n * hidden);          // (n, hidden)
  float* h = s.h.reserve(dev, n * hidden);          // (n, hidden)
  float* q = s.q.reserve(dev, n * heads * hd);      // (n, heads, hd)
  float* k = s.k.reserve(dev, n * kvh * hd);        // (n, kv_heads, hd)
  float* v = s.v.reserve(dev, n * kvh * hd);        // (n, kv_heads, hd)
  float* att = s.att.reserve(dev, n * heads * hd);  // (n, heads, hd)
  float* gate = s.gate.reserve(dev, n * inter);     // (n, inter)
  float* up = s.up.reserve(dev, n * inter);         // (n, inter)

  ops::embed(e, w.embed, s.ids, x);
  ops::scale(e, x, n * hidden, normalizer);
  check_residual(s, x, batch, hidden, "the scaled token embedding");
  for (int64_t l = 0; l < cfg.num_layers; ++l) {
    const LayerWeights& L = w.layers[static_cast<size_t>(l)];
    const int64_t window = cfg.layer_window(l);
    // Gemma 3's sliding layers rotate with the local base; global layers (and Gemma 2) with rope_theta.
    // The attention factor (YaRN, LongRoPE) belongs to the scaled global table; the local one is unscaled.
    const bool local = window > 0 && !w.rope_local_inv_freq.empty();
    const Vector* inv_freq = local ? &w.rope_local_inv_freq : &w.rope_inv_freq;
    const float rope_factor = local ? 1.0f : rope_scale;
    // Self-attention block, normed before and after.
    ops::rms_norm(e, x, L.attn_norm, n, hidden, eps, h);
    ops::linears(e, {{&L.q, q}, {&L.k, k}, {&L.v, v}}, h, n);
    if (cfg.qk_norm) {  // Gemma 3: every head of q and k RMSNorm-ed on its own
      ops::head_rms_norm(e, q, L.q_norm, n * heads, hd, eps);
      ops::head_rms_norm(e, k, L.k_norm, n * kvh, hd, eps);
    }
    ops::self_attention(e, s.sequences, {l, heads, kvh, hd, window, inv_freq, cfg.rope_layout, rope_factor, scores}, q, k,
                        v, att);
    ops::linear(e, L.o, att, n, h);
    ops::rms_norm(e, h, L.post_attn_norm, n, hidden, eps, h);
    ops::add(e, x, h, n * hidden);
    if (e.check_finite) check_residual(s, x, batch, hidden, fmt::format("layer {} (attention block)", l));
    // Feed-forward block (GeGLU), normed before and after.
    ops::rms_norm(e, x, L.ffn_norm, n, hidden, eps, h);
    ops::linears(e, {{&L.gate, gate}, {&L.up, up}}, h, n);
    ops::gelu_tanh_mul(e, gate, up, gate, n * inter);
    ops::linear(e, L.down, gate, n, h);
    ops::rms_norm(e, h, L.post_ffn_norm, n, hidden, eps, h);
    ops::add(e, x, h, n * hidden);
    if (e.check_finite) check_residual(s, x, batch, hidden, fmt::format("layer {} (feed-forward block)", l));
  }

  const std::span<const float> logits = final_logits(cfg, w, s, x, batch);
  if (cfg.final_logit_softcapping > 0)  // in place: the logits are this scratch's own buffer
    ops::softcap(e, const_cast<float*>(logits.data()), static_cast<int64_t>(logits.size()),
                 static_cast<float>(cfg.final_logit_softcapping));
  return logits;
}

}  // namespace kvinfer
