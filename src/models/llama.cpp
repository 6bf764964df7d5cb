// The Llama-family decoder (Touvron et al. 2023), as HF transformers computes it:
//   x = embed(ids)
//   per layer:  x += W_o · attention(rope(W_q·norm(x)), rope(W_k·norm(x)), W_v·norm(x))
//               x += W_down · (silu(W_gate·norm(x)) ⊙ W_up·norm(x))
//   logits = W_lm · norm(x)
// Mistral adds a sliding attention window; Qwen2 adds q/k/v biases.
#include "models/forward.h"

#include "cpu/cpu_ops.h"

namespace kvinfer {

namespace {
float* sized(std::vector<float>& buf, int64_t n) {
  if (buf.size() < static_cast<size_t>(n)) buf.resize(static_cast<size_t>(n));
  return buf.data();
}
}  // namespace

std::span<const float> llama_forward(const ModelConfig& cfg, const ModelWeights& w, ForwardScratch& s, KvCache& kv,
                                     std::span<const int32_t> ids, Logits which) {
  const int64_t n = static_cast<int64_t>(ids.size());
  const int64_t start = kv.size();
  const int64_t hidden = cfg.hidden_size, hd = cfg.head_dim, heads = cfg.num_heads, kvh = cfg.num_kv_heads;
  const int64_t inter = cfg.intermediate_size, vocab = cfg.vocab_size;
  const int64_t window = cfg.sliding_window.value_or(0);
  const float eps = static_cast<float>(cfg.rms_norm_eps);

  float* x = sized(s.x, n * hidden);          // (n, hidden)
  float* h = sized(s.h, n * hidden);          // (n, hidden)
  float* q = sized(s.q, n * heads * hd);      // (n, heads, hd)
  float* k = sized(s.k, n * kvh * hd);        // (n, kv_heads, hd)
  float* v = sized(s.v, n * kvh * hd);        // (n, kv_heads, hd)
  float* att = sized(s.att, n * heads * hd);  // (n, heads, hd)
  float* gate = sized(s.gate, n * inter);     // (n, inter)
  float* up = sized(s.up, n * inter);         // (n, inter)

  cpu::embed(w.embed, ids, x);
  for (int64_t l = 0; l < cfg.num_layers; ++l) {
    const LayerWeights& L = w.layers[static_cast<size_t>(l)];
    // Self-attention block.
    cpu::rms_norm(x, L.attn_norm.data, n, hidden, eps, h);
    cpu::linear(L.q, h, n, q);
    cpu::linear(L.k, h, n, k);
    cpu::linear(L.v, h, n, v);
    cpu::rope(q, n, heads, hd, start, w.rope_inv_freq.data);
    cpu::rope(k, n, kvh, hd, start, w.rope_inv_freq.data);
    cpu::store_kv(kv, l, start, n, k, v);
    cpu::attention(kv, l, q, n, start, heads, window, att);
    cpu::linear(L.o, att, n, h);
    cpu::add(x, h, n * hidden);
    // Feed-forward block (SwiGLU).
    cpu::rms_norm(x, L.ffn_norm.data, n, hidden, eps, h);
    cpu::linear(L.gate, h, n, gate);
    cpu::linear(L.up, h, n, up);
    cpu::silu_mul(gate, up, gate, n * inter);
    cpu::linear(L.down, gate, n, h);
    cpu::add(x, h, n * hidden);
  }
  kv.commit(n);

  // Only the rows whose logits are wanted go through the final norm and the LM head.
  const int64_t first = which == Logits::All ? 0 : n - 1;
  const int64_t rows = n - first;
  cpu::rms_norm(x + first * hidden, w.final_norm.data, rows, hidden, eps, h);
  float* logits = sized(s.logits, rows * vocab);  // (rows, vocab)
  cpu::linear(w.lm_head, h, rows, logits);
  return {logits, static_cast<size_t>(rows * vocab)};
}

}  // namespace kvinfer
