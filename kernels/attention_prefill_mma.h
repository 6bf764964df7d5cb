#pragma once
// The tensor-core prefill kernel (kernels/attention_prefill_mma.cu) for f16 and bf16 KV caches.
// Internal: attention_prefill (cuda_ops.h) checks the arguments and dispatches here.
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>

#include "core/online_softmax.h"
#include "cuda_ops.h"
#include "kvinfer/error.h"

namespace kvinfer::cuda {

// The launch arguments of both prefill kernels (this one and attention_prefill.cu's f32 and 8-bit
// kernel).
struct PrefillArgs {
  const float* q;          // (n, heads, hd)
  const unsigned char* k;  // (kv_heads, rows, hd) of the cache dtype, position p in row p mod rows
  const unsigned char* v;  // (kv_heads, rows, hd)
  const float* k_scales;   // 8-bit types (the f32 kernel's): (kv_heads, rows) the rows' scales
  const float* v_scales;
  float* out;              // (n, heads, hd)
  float q_scale;           // 1/sqrt(hd) · log2(e): scores in the base-2 domain (8-bit types: / b, set by
                           // attention_prefill.cu for their rotated keys)
  int head_dim;            // hd: a multiple of 8, at most the kernel's HDP
  int group;
  int64_t heads, start, rows, window, rows_total;  // rows: the cache's per KV head; rows_total = n · group
  float cap;               // > 0: each score becomes cap · tanh(s / cap) before the mask (softcap · log2(e))
};

// p's arguments, and the grid's x: tiles of `rows` (query, head) rows. Throws when they exceed a
// grid's 2^31 - 1 blocks.
inline PrefillArgs prefill_args(const AttentionParams& p, int rows, int64_t& row_tiles) {
  PrefillArgs a{};
  a.q = p.q;
  a.k = static_cast<const unsigned char*>(p.k);
  a.v = static_cast<const unsigned char*>(p.v);
  a.k_scales = p.k_scales;
  a.v_scales = p.v_scales;
  a.out = p.out;
  a.head_dim = static_cast<int>(p.head_dim);
  a.q_scale = p.scale > 0 ? p.scale * core::kLog2e : 1.0f / std::sqrt(static_cast<float>(p.head_dim)) * core::kLog2e;
  a.cap = p.softcap * core::kLog2e;
  a.group = static_cast<int>(p.heads / p.kv_heads);
  a.heads = p.heads;
  a.start = p.start;
  a.rows = p.rows;
  a.window = p.window;
  a.rows_total = p.n * a.group;
  row_tiles = (a.rows_total + rows - 1) / rows;
  if (row_tiles > 0x7fffffff) throw Error(ErrorKind::InvalidArgument, "attention_prefill: n · group is too large for one launch");
  return a;
}

// p as attention_prefill's, already checked; p.kv_dtype is F16 or BF16.
void attention_prefill_mma(const AttentionParams& p, cudaStream_t stream);

}  // namespace kvinfer::cuda
