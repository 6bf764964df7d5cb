#pragma once
// The CPU backend: the reference every other backend is compared against.
//
// Batch invariance: every output element is computed by the same sequence of floating-point
// operations whatever the number of rows in the call. A prefill of n tokens and n single-token
// decodes therefore produce bit-identical results, which makes cache-on == cache-off exact.
#include <cstdint>
#include <span>

#include "kvinfer/config.h"
#include "kvinfer/kv_cache.h"
#include "models/weights.h"
#include "ops/moe.h"
#include "ops/self_attention.h"

namespace kvinfer::cpu {

// Dot product of two f32 vectors in a fixed order (8 interleaved partial sums, fixed reduction;
// fused multiply-adds on AVX2 machines, see linear_avx2.h).
float dot(const float* a, const float* b, int64_t n);
// Sum of n f32 values in dot's order (8 interleaved partial sums, fixed reduction).
float sum(const float* a, int64_t n);
// Widens n elements of dtype `t` to f32; the codes of an 8-bit KV type (int8, fp8) become the
// values they stand for before their row's scale.
void to_f32(DType t, const std::byte* src, float* dst, int64_t n);
// Narrows n f32 values to dtype `t` (round to nearest even): f32, f16 or bf16.
void from_f32(DType t, const float* src, std::byte* dst, int64_t n);
// One K or V row of n values (head_dim) for an 8-bit KV type: n codes and the row's scale, as
// kernels/core/kv_quant.h defines them (the CUDA kernels write the same); a key row rotated.
enum class KvRow { Key, Value };
void quantize_kv_row(DType t, KvRow row, const float* x, int64_t n, std::byte* codes, float* scale);

// dst (n) = src (n) in the pair order of bf16 products: each whole 16 values' 8 at even places,
// then their 8 at odd places; the last n mod 16 in place. dst must not overlap src.
void split_pairs(const float* src, float* dst, int64_t n);

// y (n, out) = x (n, in) · Wᵀ (+ b): element (t, c) is dot(x row t, weight row c widened), or for
// bf16 weights dot(split_pairs(x row t), split_pairs(weight row c widened)), on every path and
// for every n (the bf16 decode kernel multiplies 16 values from one load in that order, see
// linear_avx2.h). With ActivationMode::Int8, the weight types int8_product_supported names take the
// 8-bit activation products of cpu/linear_int8.h, with Int15 those int15_product_supported names
// the 15-bit ones of cpu/linear_int15.h (close to the exact product, not equal to it); other
// weights ignore it.
void linear(const Linear& layer, const float* x, int64_t n, float* y, ActivationMode activations = ActivationMode::Exact);
// linear() for several layers of one input (q, k and v; gate and up) in one parallel region, with
// the input quantised once for the 8- or 15-bit products: each y gets the bits linear() gives it, one
// wait for the threads instead of one per product.
void linears(std::span<const LinearInto> products, const float* x, int64_t n,
             ActivationMode activations = ActivationMode::Exact);
// y (n, dim) = x / sqrt(mean(x²) + eps) · weight, per row, as HF's LlamaRMSNorm in f32.
void rms_norm(const float* x, const float* weight, int64_t n, int64_t dim, float eps, float* y);
// y (n, dim) = (x - mean) / sqrt(var + eps) · weight + bias, per row, as torch.nn.LayerNorm in
// f32 (biased variance, two passes: mean, then the mean of squared deviations).
void layer_norm(const float* x, const float* weight, const float* bias, int64_t n, int64_t dim, float eps, float* y);
// x (n, heads, head_dim) rotated in place, row t at position start + t; pair i (frequency
// inv_freq[i]) is (i, i + head_dim/2) in the half-split layout, (2i, 2i + 1) in the interleaved one.
// rotary_dim (even, <= head_dim; 0: head_dim): only the first rotary_dim values of each head rotate,
// pairs (i, i + rotary_dim/2), inv_freq (rotary_dim / 2); the rest pass through (partial rotary).
// attention_factor: cos and sin are multiplied by it once rounded to f32 (YaRN, LongRoPE; HF's
// attention_scaling); 1 gives the bits of plain rope.
void rope(float* x, int64_t n, int64_t heads, int64_t head_dim, int64_t start, const float* inv_freq,
          RopeLayout layout = RopeLayout::HalfSplit, int64_t rotary_dim = 0, float attention_factor = 1.0f);
// rope of q (n, q_heads, head_dim) and k (n, k_heads, head_dim) at the same positions, each angle's
// cosine and sine computed once for both: the bits rope gives each.
void rope_qk(float* q, int64_t q_heads, float* k, int64_t k_heads, int64_t n, int64_t head_dim, int64_t start,
             const float* inv_freq, RopeLayout layout, int64_t rotary_dim = 0, float attention_factor = 1.0f);
// x (rows, head_dim) RMSNorm-ed per row in place with weight (head_dim): rms_norm's bits, each
// head of q or k a row (Qwen3's and Gemma 3's q_norm / k_norm).
void head_rms_norm(float* x, const float* weight, int64_t rows, int64_t head_dim, float eps);
// out (n) = gelu_tanh(gate) · up: Gemma's GeGLU (gelu_tanh's bits times up). out may alias gate.
void gelu_tanh_mul(const float* gate, const float* up, float* out, int64_t n);
// x (n) *= factor
void scale(float* x, int64_t n, float factor);
// x (n) = cap · tanh(x / cap): Gemma 2's final logit soft-capping, as HF computes it in f32.
void softcap(float* x, int64_t n, float cap);
// out (n) = silu(gate) · up, computed as gate / (1 + exp(-gate)) · up (AVX2: a vectorised exp
// within 2 ulp, see elementwise_avx2.h)
void silu_mul(const float* gate, const float* up, float* out, int64_t n);
// out (n) = GELU with the tanh approximation (HF gelu_new):
//   0.5·x·(1 + tanh(u)), u = sqrt(2/π)·(x + 0.044715·x³)   (out may alias x)
// computed as the equal x / (1 + exp(-2u)), which does not cancel for x < 0, with u in double.
// Each output element depends on its input element alone, on either path.
void gelu_tanh(const float* x, float* out, int64_t n);
// x (n) += y
void add(float* x, const float* y, int64_t n);
// out (n, hidden) = embed[ids]
void embed(const Matrix& table, std::span<const int32_t> ids, float* out);
// The index of the first NaN or ±Inf among x[0 .. n), or -1 when every value is finite. Reads x
// only (the debug check of LoadOptions::check_finite and the check of every call's logits).
int64_t first_nonfinite(const float* x, int64_t n);

// Mixture of experts (src/cpu/moe.cpp; the routing math is kernels/core/moe.h's).
// ids (n, k) and weights (n, k): each row's k experts from its router logits (n, experts), sorted
// by expert index (core::route_top_k).
void moe_route(const float* logits, int64_t n, int64_t experts, int64_t k, bool normalize, int32_t* ids,
               float* weights);
// out (n, hidden) = Σ_j weights[t, j] · down_e(silu(gate_e · x_t) ⊙ up_e · x_t), e = ids[t, j],
// the terms added from 0 in j order (by expert index, as HF's index_add_ loop). Experts are taken
// in index order, each over the rows that chose it, gathered: its matrices are read once per call,
// and an expert no row chose is not read at all. Each row's result has the bits it gets alone
// (linear's products are batch-invariant and a row's adds come in j order whatever n is).
void moe_experts(const MoeWeights& m, const float* x, int64_t n, int64_t hidden, const int32_t* ids,
                 const float* weights, int64_t k, const MoeScratch& scratch, float* out,
                 ActivationMode activations = ActivationMode::Exact);
// out (n, dim) += sigmoid(gate[t]) · y (n, dim): Qwen2-MoE's shared expert, scaled by its gate.
void add_gated(float* out, const float* gate, const float* y, int64_t n, int64_t dim);

// Writes k, v (n, kv_heads, head_dim) into layer `layer` of the cache at positions start..start+n-1.
void store_kv(KvCache& kv, int64_t layer, int64_t start, int64_t n, const float* k, const float* v);
// out (n, heads, head_dim): causal softmax attention of q (n, heads, head_dim), row t at
// position start + t, over the cache's positions [max(0, p - window + 1), p] of `layer`.
// Query head h reads KV head h / group; window <= 0 means no window.
// one_thread: on the calling thread alone (the same bits, which never depend on the threads).
// `scores`: their scale and soft-cap (ScoreOptions; the default: 1/sqrt(head_dim), none).
void attention(const KvCache& kv, int64_t layer, const float* q, int64_t n, int64_t start, int64_t heads,
               int64_t window, float* out, bool one_thread = false, const ScoreOptions& scores = {});
// ops::self_attention on the CPU: rope, store_kv and attention for each sequence, with the bits
// those give it alone. The decode rows of several sequences (one row each) go to the threads a
// sequence at a time, in one parallel region; longer sequences follow one by one, each on the team.
void self_attention(std::span<const SequenceRows> seqs, const SelfAttention& a, float* q, float* k, const float* v,
                    float* att);

}  // namespace kvinfer::cpu
