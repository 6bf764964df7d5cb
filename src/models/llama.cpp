// The Llama-family decoder (Touvron et al. 2023), as HF transformers computes it:
//   x = embed(ids)
//   per layer:  x += W_o · attention(rope(W_q·norm(x)), rope(W_k·norm(x)), W_v·norm(x))
//               x += W_down · (silu(W_gate·norm(x)) ⊙ W_up·norm(x))
//   logits = W_lm · norm(x)
// Mistral adds a sliding attention window; Qwen2 adds q/k/v biases.
#include "models/forward.h"

#include "cuda/cuda_backend.h"

namespace kvinfer {

float* Activations::reserve(Device device, int64_t n) {
  const auto count = static_cast<size_t>(n);
  if (device == Device::CUDA) {
    if (device_.bytes() < count * sizeof(float)) device_ = DeviceBuffer(count * sizeof(float), "activations");
    return device_.as<float>();
  }
  if (host_.size() < count) host_.resize(count);
  return host_.data();
}

std::span<const float> llama_forward(const ModelConfig& cfg, const ModelWeights& w, ForwardScratch& s, KvCache& kv,
                                     std::span<const int32_t> ids, Logits which) {
  const ops::Exec& e = s.exec;
  const Device dev = e.device;
  const int64_t n = static_cast<int64_t>(ids.size());
  const int64_t start = kv.size();
  const int64_t hidden = cfg.hidden_size, hd = cfg.head_dim, heads = cfg.num_heads, kvh = cfg.num_kv_heads;
  const int64_t inter = cfg.intermediate_size, vocab = cfg.vocab_size;
  const int64_t window = cfg.sliding_window.value_or(0);
  const float eps = static_cast<float>(cfg.rms_norm_eps);

  float* x = s.x.reserve(dev, n * hidden);          // (n, hidden)
  float* h = s.h.reserve(dev, n * hidden);          // (n, hidden)
  float* q = s.q.reserve(dev, n * heads * hd);      // (n, heads, hd)
  float* k = s.k.reserve(dev, n * kvh * hd);        // (n, kv_heads, hd)
  float* v = s.v.reserve(dev, n * kvh * hd);        // (n, kv_heads, hd)
  float* att = s.att.reserve(dev, n * heads * hd);  // (n, heads, hd)
  float* gate = s.gate.reserve(dev, n * inter);     // (n, inter)
  float* up = s.up.reserve(dev, n * inter);         // (n, inter)

  ops::embed(e, w.embed, ids, x);
  for (int64_t l = 0; l < cfg.num_layers; ++l) {
    const LayerWeights& L = w.layers[static_cast<size_t>(l)];
    // Self-attention block.
    ops::rms_norm(e, x, L.attn_norm, n, hidden, eps, h);
    ops::linear(e, L.q, h, n, q);
    ops::linear(e, L.k, h, n, k);
    ops::linear(e, L.v, h, n, v);
    ops::rope(e, q, n, heads, hd, start, w.rope_inv_freq, cfg.rope_layout);
    ops::rope(e, k, n, kvh, hd, start, w.rope_inv_freq, cfg.rope_layout);
    ops::store_kv(e, kv, l, start, n, k, v);
    ops::attention(e, kv, l, q, n, start, heads, window, att);
    ops::linear(e, L.o, att, n, h);
    ops::add(e, x, h, n * hidden);
    // Feed-forward block (SwiGLU).
    ops::rms_norm(e, x, L.ffn_norm, n, hidden, eps, h);
    ops::linear(e, L.gate, h, n, gate);
    ops::linear(e, L.up, h, n, up);
    ops::silu_mul(e, gate, up, gate, n * inter);
    ops::linear(e, L.down, gate, n, h);
    ops::add(e, x, h, n * hidden);
  }

  // Only the rows whose logits are wanted go through the final norm and the LM head.
  const int64_t first = which == Logits::All ? 0 : n - 1;
  const int64_t rows = n - first;
  ops::rms_norm(e, x + first * hidden, w.final_norm, rows, hidden, eps, h);
  float* logits = s.logits.reserve(dev, rows * vocab);  // (rows, vocab)
  ops::linear(e, w.lm_head, h, rows, logits);
  std::span<const float> out{logits, static_cast<size_t>(rows * vocab)};
  if (dev == Device::CUDA) {
    s.logits_host.resize(out.size());
    cuda_backend::to_host(*e.cuda, logits, s.logits_host.data(), rows * vocab);
    out = s.logits_host;
  }
  kv.commit(n);
  return out;
}

}  // namespace kvinfer
