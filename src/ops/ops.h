#pragma once
// One entry per op for the forward pass: a switch on the device to the CPU backend
// (src/cpu/cpu_ops.h) or the CUDA backend (src/cuda/cuda_backend.h). Pointers live on the
// device of the Exec; layouts and semantics are those documented in cpu_ops.h.
#include <cstdint>
#include <initializer_list>
#include <span>

#include "kvinfer/config.h"
#include "kvinfer/device.h"
#include "kvinfer/kv_cache.h"
#include "models/weights.h"
#include "ops/moe.h"
#include "ops/self_attention.h"

namespace kvinfer {
namespace cuda_backend {
class Context;
}

namespace ops {

struct Exec {
  Device device = Device::CPU;
  cuda_backend::Context* cuda = nullptr;  // set when device == CUDA
  ActivationMode activations = ActivationMode::Exact;  // CPU products with quantised weights (LoadOptions)
  bool check_finite = false;              // LoadOptions::check_finite: the forward pass checks x per block
  // The rows of each sequence in the call, in order (set by the forward pass); one entry or none
  // for a single sequence. The CUDA products give each sequence's rows the bits they get alone.
  std::span<const int64_t> segments;
};

void embed(const Exec& e, const Matrix& table, std::span<const int32_t> ids, float* out,
           EmbedIds kind = EmbedIds::Tokens);
void rms_norm(const Exec& e, const float* x, const Vector& weight, int64_t n, int64_t dim, float eps, float* y);
void layer_norm(const Exec& e, const float* x, const Vector& weight, const Vector& bias, int64_t n, int64_t dim,
                float eps, float* y);
void linear(const Exec& e, const Linear& layer, const float* x, int64_t n, float* y);
// Several products of one input x (n, in): q, k and v; gate and up. Each y as linear() gives it.
void linears(const Exec& e, std::initializer_list<LinearInto> products, const float* x, int64_t n);
// Rotates the first 2 · inv_freq.n values of each head (partial rotary when fewer than head_dim);
// cos and sin scaled by attention_factor (YaRN, LongRoPE; 1: plain rope).
void rope(const Exec& e, float* x, int64_t n, int64_t heads, int64_t head_dim, int64_t start, const Vector& inv_freq,
          RopeLayout layout, float attention_factor = 1.0f);
void silu_mul(const Exec& e, const float* gate, const float* up, float* out, int64_t n);
void gelu_tanh(const Exec& e, const float* x, float* out, int64_t n);
void add(const Exec& e, float* x, const float* y, int64_t n);
// x (rows, head_dim) RMSNorm-ed per row in place: each head of q (n, heads, hd) or k a row.
void head_rms_norm(const Exec& e, float* x, const Vector& weight, int64_t rows, int64_t head_dim, float eps);
// out (n) = gelu_tanh(gate) · up (GeGLU); out may alias gate.
void gelu_tanh_mul(const Exec& e, const float* gate, const float* up, float* out, int64_t n);
// x (n) *= factor
void scale(const Exec& e, float* x, int64_t n, float factor);
// x (n) = cap · tanh(x / cap)
void softcap(const Exec& e, float* x, int64_t n, float cap);
void store_kv(const Exec& e, KvCache& kv, int64_t layer, int64_t start, int64_t n, const float* k, const float* v);
void attention(const Exec& e, const KvCache& kv, int64_t layer, const float* q, int64_t n, int64_t start,
               int64_t heads, int64_t window, float* out, const ScoreOptions& scores = {});
// For every sequence of a call: its q and k rows rotated (rope), its K/V rows stored in its cache
// and its q rows' causal attention over that cache into att; each sequence's rows get the bits
// those ops give them alone. q, att: (n, heads, head_dim); k, v: (n, kv_heads, head_dim).
void self_attention(const Exec& e, std::span<const SequenceRows> seqs, const SelfAttention& a, float* q, float* k,
                    const float* v, float* att);
// Mixture of experts (cpu_ops.h): ids, weights (n, k) routed from logits (n, experts); ids int32.
void moe_route(const Exec& e, const float* logits, int64_t n, int64_t experts, int64_t k, bool normalize,
               int32_t* ids, float* weights);
// out (n, hidden) = each row's k experts' SwiGLU outputs, weighted and summed in expert order.
void moe_experts(const Exec& e, const MoeWeights& m, const float* x, int64_t n, int64_t hidden, const int32_t* ids,
                 const float* weights, int64_t k, const MoeScratch& scratch, float* out);
// out (n, dim) += sigmoid(gate[t]) · y (n, dim)
void add_gated(const Exec& e, float* out, const float* gate, const float* y, int64_t n, int64_t dim);
// The index of the first NaN or ±Inf among x[0 .. n) and, through *value, that value; -1 when
// every value is finite. On CUDA, x is copied to the host (a debug check: it waits for the stream).
int64_t first_nonfinite(const Exec& e, const float* x, int64_t n, float* value);

}  // namespace ops
}  // namespace kvinfer
