// The Llama-family decoder (Touvron et al. 2023), as HF transformers computes it:
//   x = embed(ids)
//   per layer:  x += W_o · attention(rope(W_q·norm(x)), rope(W_k·norm(x)), W_v·norm(x))
//               x += W_down · (silu(W_gate·norm(x)) ⊙ W_up·norm(x))
//   logits = W_lm · norm(x)
// Mistral adds a sliding attention window (Qwen2/Qwen3 one on the layers their config names);
// Qwen2 adds q/k/v biases; Qwen3 RMSNorms each head of q and k before rope. Mixtral and Qwen2-MoE
// replace the MLP of (some) layers by a mixture of SwiGLU experts (moe_block.cpp). Phi-3 is this
// block too: its fused qkv and gate_up projections are bound as row blocks (load_common.cpp), and
// its rope may rotate only part of each head (partial rotary: the frequencies' count says how much).
#include <algorithm>

#include <fmt/format.h>

#include "models/forward.h"

namespace kvinfer {

std::span<const float> llama_forward(const ModelConfig& cfg, const ModelWeights& w, ForwardScratch& s,
                                     std::span<const BatchSegment> batch) {
  const ops::Exec& e = s.exec;
  const Device dev = e.device;
  const int64_t n = gather_ids(s, batch);  // rows: every segment's tokens
  const int64_t hidden = cfg.hidden_size, hd = cfg.head_dim, heads = cfg.num_heads, kvh = cfg.num_kv_heads;
  const int64_t inter = cfg.intermediate_size;
  const float eps = static_cast<float>(cfg.norm_eps);
  const float rope_scale = static_cast<float>(cfg.rope_scaling.attention_factor);  // YaRN, LongRoPE; else 1

  float* x = s.x.reserve(dev, n * hidden);          // (n, hidden)
  float* h = s.h.reserve(dev, n * hidden);          // (n, hidden)
  float* q = s.q.reserve(dev, n * heads * hd);      // (n, heads, hd)
  float* k = s.k.reserve(dev, n * kvh * hd);        // (n, kv_heads, hd)
  float* v = s.v.reserve(dev, n * kvh * hd);        // (n, kv_heads, hd)
  float* att = s.att.reserve(dev, n * heads * hd);  // (n, heads, hd)
  // A mixture-of-experts layer uses them for its k experts' (or its shared expert's) rows.
  const int64_t ffn = std::max({inter, cfg.num_experts_per_tok * cfg.moe_intermediate_size,
                                cfg.shared_expert_intermediate_size});
  float* gate = s.gate.reserve(dev, n * ffn);       // (n, inter)
  float* up = s.up.reserve(dev, n * ffn);           // (n, inter)

  ops::embed(e, w.embed, s.ids, x);
  check_residual(s, x, batch, hidden, "the token embedding");
  for (int64_t l = 0; l < cfg.num_layers; ++l) {
    const LayerWeights& L = w.layers[static_cast<size_t>(l)];
    // Self-attention block.
    ops::rms_norm(e, x, L.attn_norm, n, hidden, eps, h);
    ops::linears(e, {{&L.q, q}, {&L.k, k}, {&L.v, v}}, h, n);
    if (cfg.qk_norm) {  // Qwen3: every head of q and k RMSNorm-ed on its own
      ops::head_rms_norm(e, q, L.q_norm, n * heads, hd, eps);
      ops::head_rms_norm(e, k, L.k_norm, n * kvh, hd, eps);
    }
    // Each sequence at its own positions (rope on q and k), over its own cache.
    ops::self_attention(e, s.sequences,
                        {l, heads, kvh, hd, cfg.layer_window(l), &w.rope_inv_freq, cfg.rope_layout, rope_scale}, q, k,
                        v, att);
    ops::linear(e, L.o, att, n, h);
    ops::add(e, x, h, n * hidden);
    if (e.check_finite) check_residual(s, x, batch, hidden, fmt::format("layer {} (attention block)", l));
    // Feed-forward block (SwiGLU, or a mixture of SwiGLU experts).
    ops::rms_norm(e, x, L.ffn_norm, n, hidden, eps, h);
    if (!L.moe.empty()) {
      moe_block(cfg, L, s, h, n, x);
    } else {
      ops::linears(e, {{&L.gate, gate}, {&L.up, up}}, h, n);
      ops::silu_mul(e, gate, up, gate, n * inter);
      ops::linear(e, L.down, gate, n, h);
      ops::add(e, x, h, n * hidden);
    }
    if (e.check_finite) check_residual(s, x, batch, hidden, fmt::format("layer {} (feed-forward block)", l));
  }

  return final_logits(cfg, w, s, x, batch);
}

}  // namespace kvinfer
