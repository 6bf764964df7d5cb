#pragma once
// Launchers of the CUDA kernels (kernels/*.cu). They take raw device pointers and sizes and
// enqueue on the given stream; argument errors and launch failures throw kvinfer::Error.
// Layouts are those of the CPU backend (src/cpu/cpu_ops.h), which is their reference.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kvinfer/dtype.h"

namespace kvinfer::cuda {

// Rotary layouts: HF's half split pairs (i, i + d/2); GGUF's interleaved pairs (2i, 2i + 1).
enum class RopeLayout { HalfSplit, Interleaved };

// Ops that depend on the position take `start` on the host and, optionally, `start_on_device`:
// one int32 in device memory that the kernel reads instead when it is set. A CUDA graph captured
// once then serves every decode step (its launch arguments are frozen; the position is not).
// Host-side checks use `start`, which must then be a position the device value may take.

// ---- kernels/elementwise.cu -----------------------------------------------------------------
// out (n, hidden) = table[ids], widened to f32. table (vocab, hidden) of table_dtype (f32, f16
// or bf16; quantised tables go through embed_quantized).
void embed(DType table_dtype, const void* table, int64_t vocab, int64_t hidden, const int32_t* ids, int64_t n,
           float* out, cudaStream_t stream);
// y (n, dim) = x / sqrt(mean(x²) + eps) · weight
void rms_norm(const float* x, const float* weight, int64_t n, int64_t dim, float eps, float* y, cudaStream_t stream);
// y (n, dim) = (x - mean) / sqrt(var + eps) · weight + bias per row (torch.nn.LayerNorm, biased var)
void layer_norm(const float* x, const float* weight, const float* bias, int64_t n, int64_t dim, float eps, float* y,
                cudaStream_t stream);
// x (n, heads, head_dim) rotated in place; row t at position start + t; inv_freq (rotary_dim / 2).
// rotary_dim (0: head_dim): only the first rotary_dim values of each head rotate (partial rotary);
// attention_factor scales cos and sin (1: plain rope, the same bits). As cpu::rope.
void rope(float* x, int64_t n, int64_t heads, int64_t head_dim, int64_t start, const float* inv_freq,
          RopeLayout layout, cudaStream_t stream, const int32_t* start_on_device = nullptr, int64_t rotary_dim = 0,
          float attention_factor = 1.0f);
// out (n) = silu(gate) · up   (out may alias gate)
void silu_mul(const float* gate, const float* up, float* out, int64_t n, cudaStream_t stream);
// out (n) = 0.5·x·(1 + tanh(sqrt(2/π)·(x + 0.044715·x³)))   (out may alias x)
void gelu_tanh(const float* x, float* out, int64_t n, cudaStream_t stream);
// x (n) += y
void add(float* x, const float* y, int64_t n, cudaStream_t stream);
// x (rows, head_dim) RMSNorm-ed per row in place (a warp a row): each head of q or k (Qwen3, Gemma 3).
void head_rms_norm(float* x, const float* weight, int64_t rows, int64_t head_dim, float eps, cudaStream_t stream);
// out (n) = gelu_tanh(gate) · up (Gemma's GeGLU; out may alias gate)
void gelu_tanh_mul(const float* gate, const float* up, float* out, int64_t n, cudaStream_t stream);
// x (n) *= factor
void scale(float* x, int64_t n, float factor, cudaStream_t stream);
// x (n) = cap · tanh(x / cap)   (Gemma 2's final logit soft-capping)
void softcap(float* x, int64_t n, float cap, cudaStream_t stream);
// y (rows, cols) += bias (cols)
void add_bias(float* y, const float* bias, int64_t rows, int64_t cols, cudaStream_t stream);
// out (n) = src narrowed to dtype (round to nearest even), for GEMM inputs.
void convert_from_f32(DType dtype, const float* src, void* out, int64_t n, cudaStream_t stream);
// Writes k, v (n, kv_heads, head_dim) at positions start .. start+n-1 of one layer's cache
// blocks k_layer, v_layer: (kv_heads, rows, head_dim) of kv_dtype, position p in row p mod rows
// (KvCache::layer_rows: the capacity, or a sliding-window ring's rows); n <= rows. An 8-bit cache
// (int8, fp8) gets each row's codes there and its scale in k_scales, v_scales ((kv_heads, rows)
// f32, required for those types): the bits the CPU's store_kv writes (core::quantize_kv_key_row for
// a K row, stored rotated; core::quantize_kv_row for a V row). head_dim at most 12288 for those
// types. The bound on positions is the caller's (KvCache's capacity).
void store_kv(DType kv_dtype, const float* k, const float* v, int64_t n, int64_t kv_heads, int64_t head_dim,
              int64_t start, int64_t rows, void* k_layer, void* v_layer, cudaStream_t stream,
              const int32_t* start_on_device = nullptr, float* k_scales = nullptr, float* v_scales = nullptr);
// *out = index of the largest logit (lowest index on ties, as torch.argmax).
void argmax(const float* logits, int64_t vocab, int32_t* out, cudaStream_t stream);

// ---- kernels/dequantize.cu: ggml block-quantised matrices (kernels/core/quant.h) -----------
// Values are bit-identical to cpu::to_f32's; cols is a multiple of the format's block size and
// rows are dtype_row_bytes(dtype, cols) apart.
// out (rows, cols) f16 (16-byte aligned) = w (rows, cols) of a quantised dtype, dequantised and
// rounded to f16 (nearest even): the GEMM operand of a quantised linear layer.
void dequantize_f16(DType dtype, const void* w, int64_t rows, int64_t cols, void* out, cudaStream_t stream);
// out (n, hidden) f32 = table[ids] for a quantised table (vocab, hidden); only those rows are read.
void embed_quantized(DType table_dtype, const void* table, int64_t vocab, int64_t hidden, const int32_t* ids,
                     int64_t n, float* out, cudaStream_t stream);

// ---- kernels/attention_prefill.cu, kernels/attention_decode.cu ------------------------------
// Causal softmax attention of q over one layer's cache, scale 1/sqrt(head_dim). Query row t sits
// at position start + t and attends to positions [max(0, pos - window + 1), pos] (window <= 0:
// no window). Query head h reads KV head h / (heads / kv_heads): any group size.
// An 8-bit cache (int8, fp8; kernels/core/kv_quant.h) holds codes in k and v and each row's f32
// scale in k_scales and v_scales, its K rows rotated: a score is (H q / b · codes) times its K
// row's scale (core::rotate_query), and each V row is weighted by its probability times its V
// row's scale, as src/cpu/attention.cpp does.
// Position p of the cache is in row p mod rows (a sliding-window ring when rows < capacity): the
// positions a call reads, from its first query's window to its last query, span at most rows
// (with start_on_device: those of any position < capacity). The bits are those of a cache of
// capacity rows holding the same positions.
struct AttentionParams {
  const float* q = nullptr;  // (n, heads, head_dim)
  const void* k = nullptr;   // (kv_heads, rows, head_dim) of kv_dtype
  const void* v = nullptr;   // (kv_heads, rows, head_dim) of kv_dtype
  const float* k_scales = nullptr;  // int8, fp8: (kv_heads, rows) the K rows' scales; else unused
  const float* v_scales = nullptr;  // int8, fp8: (kv_heads, rows) the V rows' scales
  float* out = nullptr;      // (n, heads, head_dim)
  DType kv_dtype = DType::F32;
  int64_t n = 0, start = 0, heads = 0, kv_heads = 0, head_dim = 0, window = 0;
  int64_t capacity = 0;  // positions: start + n <= capacity (also sizes decode's split plan for a graph)
  int64_t rows = 0;      // rows per KV head, 1 .. capacity: the block stride and the ring's modulus
  float scale = 0;    // scores' scale (Gemma's query_pre_attn_scalar^-0.5); 0: 1/sqrt(head_dim)
  float softcap = 0;  // > 0: each score becomes softcap · tanh(score / softcap) before the mask
  const int32_t* start_on_device = nullptr;  // decode only: read instead of start (see above)
};
// Tiled prefill (FlashAttention-style online softmax); a K/V tile is loaded once for all query
// heads of its group. Any n >= 1.
void attention_prefill(const AttentionParams& p, cudaStream_t stream);
// Bytes of workspace attention_decode needs for this shape at up to max_context positions.
size_t attention_decode_workspace_bytes(int64_t heads, int64_t head_dim, int64_t max_context);
// Flash-Decoding: n == 1; the context is split across thread blocks, then combined. With
// start_on_device the grid covers the most splits any position up to capacity may need, and
// each block plans from the device position (blocks past the plan exit): the same plan, and the
// same bits, as a launch for that position.
void attention_decode(const AttentionParams& p, void* workspace, size_t workspace_bytes, cudaStream_t stream);

}  // namespace kvinfer::cuda
