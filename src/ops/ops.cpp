#include "ops/ops.h"

#include "cpu/cpu_ops.h"
#include "cuda/cuda_backend.h"

namespace kvinfer::ops {

// Device::Auto is resolved when a model loads: an Exec holds CPU or CUDA.

void embed(const Exec& e, const Matrix& table, std::span<const int32_t> ids, float* out, EmbedIds kind) {
  if (e.device == Device::CUDA) return cuda_backend::embed(*e.cuda, table, ids, out, kind);
  cpu::embed(table, ids, out);
}

void rms_norm(const Exec& e, const float* x, const Vector& weight, int64_t n, int64_t dim, float eps, float* y) {
  if (e.device == Device::CUDA) return cuda_backend::rms_norm(*e.cuda, x, weight, n, dim, eps, y);
  cpu::rms_norm(x, weight.data, n, dim, eps, y);
}

void layer_norm(const Exec& e, const float* x, const Vector& weight, const Vector& bias, int64_t n, int64_t dim,
                float eps, float* y) {
  if (e.device == Device::CUDA) return cuda_backend::layer_norm(*e.cuda, x, weight, bias, n, dim, eps, y);
  cpu::layer_norm(x, weight.data, bias.data, n, dim, eps, y);
}

void linear(const Exec& e, const Linear& layer, const float* x, int64_t n, float* y) {
  if (e.device == Device::CUDA) return cuda_backend::linear(*e.cuda, layer, x, n, y, e.segments);
  cpu::linear(layer, x, n, y, e.activations);
}

void linears(const Exec& e, std::initializer_list<LinearInto> products, const float* x, int64_t n) {
  if (e.device == Device::CUDA) {
    for (const LinearInto& p : products) cuda_backend::linear(*e.cuda, *p.layer, x, n, p.y, e.segments);
    return;
  }
  cpu::linears({products.begin(), products.size()}, x, n, e.activations);
}

void rope(const Exec& e, float* x, int64_t n, int64_t heads, int64_t head_dim, int64_t start, const Vector& inv_freq,
          RopeLayout layout, float attention_factor) {
  if (e.device == Device::CUDA)
    return cuda_backend::rope(*e.cuda, x, n, heads, head_dim, start, inv_freq, layout, attention_factor);
  cpu::rope(x, n, heads, head_dim, start, inv_freq.data, layout, 2 * inv_freq.n, attention_factor);
}

void silu_mul(const Exec& e, const float* gate, const float* up, float* out, int64_t n) {
  if (e.device == Device::CUDA) return cuda_backend::silu_mul(*e.cuda, gate, up, out, n);
  cpu::silu_mul(gate, up, out, n);
}

void gelu_tanh(const Exec& e, const float* x, float* out, int64_t n) {
  if (e.device == Device::CUDA) return cuda_backend::gelu_tanh(*e.cuda, x, out, n);
  cpu::gelu_tanh(x, out, n);
}

void add(const Exec& e, float* x, const float* y, int64_t n) {
  if (e.device == Device::CUDA) return cuda_backend::add(*e.cuda, x, y, n);
  cpu::add(x, y, n);
}

void head_rms_norm(const Exec& e, float* x, const Vector& weight, int64_t rows, int64_t head_dim, float eps) {
  if (e.device == Device::CUDA) return cuda_backend::head_rms_norm(*e.cuda, x, weight, rows, head_dim, eps);
  cpu::head_rms_norm(x, weight.data, rows, head_dim, eps);
}

void gelu_tanh_mul(const Exec& e, const float* gate, const float* up, float* out, int64_t n) {
  if (e.device == Device::CUDA) return cuda_backend::gelu_tanh_mul(*e.cuda, gate, up, out, n);
  cpu::gelu_tanh_mul(gate, up, out, n);
}

void scale(const Exec& e, float* x, int64_t n, float factor) {
  if (e.device == Device::CUDA) return cuda_backend::scale(*e.cuda, x, n, factor);
  cpu::scale(x, n, factor);
}

void softcap(const Exec& e, float* x, int64_t n, float cap) {
  if (e.device == Device::CUDA) return cuda_backend::softcap(*e.cuda, x, n, cap);
  cpu::softcap(x, n, cap);
}

void store_kv(const Exec& e, KvCache& kv, int64_t layer, int64_t start, int64_t n, const float* k, const float* v) {
  if (e.device == Device::CUDA) return cuda_backend::store_kv(*e.cuda, kv, layer, start, n, k, v);
  cpu::store_kv(kv, layer, start, n, k, v);
}

void attention(const Exec& e, const KvCache& kv, int64_t layer, const float* q, int64_t n, int64_t start,
               int64_t heads, int64_t window, float* out, const ScoreOptions& scores) {
  if (e.device == Device::CUDA)
    return cuda_backend::attention(*e.cuda, kv, layer, q, n, start, heads, window, out, scores);
  cpu::attention(kv, layer, q, n, start, heads, window, out, false, scores);
}

void self_attention(const Exec& e, std::span<const SequenceRows> seqs, const SelfAttention& a, float* q, float* k,
                    const float* v, float* att) {
  if (e.device != Device::CUDA) return cpu::self_attention(seqs, a, q, k, v, att);
  const int64_t hd = a.head_dim;
  for (const SequenceRows& s : seqs) {  // each sequence at its own positions, over its own cache
    float* sq = q + s.row * a.heads * hd;
    float* sk = k + s.row * a.kv_heads * hd;
    if (a.inv_freq) {
      rope(e, sq, s.n, a.heads, hd, s.start, *a.inv_freq, a.layout, a.rope_attention_factor);
      rope(e, sk, s.n, a.kv_heads, hd, s.start, *a.inv_freq, a.layout, a.rope_attention_factor);
    }
    for_each_piece(s, a.layer, a.window, [&](int64_t t, int64_t m) {
      store_kv(e, *s.kv, a.layer, s.start + t, m, sk + t * a.kv_heads * hd, v + (s.row + t) * a.kv_heads * hd);
      attention(e, *s.kv, a.layer, sq + t * a.heads * hd, m, s.start + t, a.heads, a.window,
                att + (s.row + t) * a.heads * hd, a.scores);
    });
  }
}

void moe_route(const Exec& e, const float* logits, int64_t n, int64_t experts, int64_t k, bool normalize,
               int32_t* ids, float* weights) {
  if (e.device == Device::CUDA) return cuda_backend::moe_route(*e.cuda, logits, n, experts, k, normalize, ids, weights);
  cpu::moe_route(logits, n, experts, k, normalize, ids, weights);
}

void moe_experts(const Exec& e, const MoeWeights& m, const float* x, int64_t n, int64_t hidden, const int32_t* ids,
                 const float* weights, int64_t k, const MoeScratch& scratch, float* out) {
  if (e.device == Device::CUDA) return cuda_backend::moe_experts(*e.cuda, m, x, n, hidden, ids, weights, k, scratch, out, e.segments);
  cpu::moe_experts(m, x, n, hidden, ids, weights, k, scratch, out, e.activations);
}

void add_gated(const Exec& e, float* out, const float* gate, const float* y, int64_t n, int64_t dim) {
  if (e.device == Device::CUDA) return cuda_backend::add_gated(*e.cuda, out, gate, y, n, dim);
  cpu::add_gated(out, gate, y, n, dim);
}

int64_t first_nonfinite(const Exec& e, const float* x, int64_t n, float* value) {
  if (e.device == Device::CUDA) return cuda_backend::first_nonfinite(*e.cuda, x, n, value);
  const int64_t i = cpu::first_nonfinite(x, n);
  if (i >= 0) *value = x[i];
  return i;
}

}  // namespace kvinfer::ops
