// Flash-Decoding (Dao, Haziza, Massa, Sizov 2023) for the one query row of a decode step.
//
// Grid (split × head chunk, kv_head). A block streams its range of cache positions through shared
// memory once (cp.async, two stages, 16-byte copies) and serves a chunk of up to 64 of the query
// heads of its KV head from it (the whole group when it is no larger and fits the device's
// shared memory), so the cache is read once per chunk whatever the group size. Per tile of kTile
// positions, in f32:
//   QK       scores (kTile, heads)   thread = one position × some heads, K row chunks from smem
//   softmax  one warp per head       the online-softmax step of kernels/core/online_softmax.h
//   PV       o (heads, hd) += p · V   thread = 8 dims × HV heads × every PG-th position
// A block then writes a partial (m, l, o) per head to the workspace (or the output itself when
// the plan has one split), and the combine kernel merges the splits.
//
// head_dim is any multiple of 8 from 8 to 256, at run time: the template's HDP (32, 64, 128 or
// 256, the smallest >= head_dim) is only a capacity, sizing the tile and the shared-memory rows.
// Global rows are head_dim elements apart; the 16-byte copies, QK's 8-element chunks and PV's
// dimension groups stop at head_dim, so the padded bytes of a shared row are never read.
//
// 8-bit caches (int8, fp8: one byte a value, one f32 scale per row; kernels/core/kv_quant.h): the
// tile's rows come as 16-byte copies where the rows and the code blocks allow them (head_dim a
// multiple of 16, k and v 16-byte aligned), else as 8-byte copies (the code blocks follow the
// cache's scales and are only 8-byte aligned in general); the tile's K and V scales come with it
// (4-byte copies). The keys are stored rotated (kernels/core/kv_quant.h), so the query in shared
// memory is too: H q / b per head (kv_rotation.h; the 1/b folded into q_scale). Each score is its
// K row's scale times q · codes, before the softmax, as on the CPU; PV weights each V row by
// p · its V row's scale, while l stays the sum of the unscaled p.
//
// Position p is cache row p mod rows (a sliding-window ring; kernels/core/kv_ring.h): a block
// takes its split's first row with one modulo and steps from it, so a split or a tile may
// straddle the ring's wrap. Only addresses change, so a ring gives the bits of a full cache.
#include <cuda_pipeline.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "attention_check.h"
#include "core/kv_code_load.h"
#include "core/kv_load.h"
#include "core/kv_ring.h"
#include "core/online_softmax.h"
#include "core/split_plan.h"
#include "cuda_check.h"
#include "cuda_ops.h"
#include "kv_rotation.h"
#include "launch.h"

namespace kvinfer::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxHeadsPerBlock = 64;  // PV's head sets of 8 × at least 8 thread rows (head_dim 256)
constexpr int kMinTile = 32;             // the smallest tile below: sizes the workspace bound
constexpr int64_t kMaxSplits = 128;
constexpr int kCombineThreads = 128;
constexpr int64_t kMinTilesPerSplit = 2;  // a shorter split costs more in fixed work than it hides
constexpr int kBlocksPerSm = 4;          // split target: about two waves of two resident blocks

// HDP: the head_dim capacity (the real head_dim, a multiple of 8, is at most HDP).
template <int HDP, DType KV, int HV>
struct Shape {
  static constexpr DType kKv = KV;
  static constexpr bool kScaled = is_scaled_kv(KV);  // int8, fp8: codes and a scale per row
  static constexpr int kElem = static_cast<int>(dtype_size(KV));
  static constexpr int kRowBytes = HDP * kElem;              // a shared row's capacity
  static constexpr int kTile = kRowBytes <= 256 ? 64 : 32;  // positions per tile: ~16 KB of K
  static constexpr int kPitch = kRowBytes + 16;  // +16 B: the 8 lanes of a quarter-warp hit distinct banks
  // K tile, V tile, then (8-bit types) the tile's K scales and V scales, (kTile) f32 each.
  static constexpr int kStageBytes = 2 * kTile * kPitch + (kScaled ? 2 * kTile * 4 : 0);
  // Two stages overlap the next tile's copy with this tile's math; an f32 head_dim-256 stage
  // (66 KB) gets one, so that 64 heads a block still fit sm_80's 163 KB of shared memory.
  static constexpr int kStages = kStageBytes > 40000 ? 1 : 2;
  static constexpr int kQkLanes = kThreads / kTile;  // threads sharing one position in QK
  // Heads per QK pass: registers beside PV's o[HV][8]. f32 with HV 8: one, as two took 133
  // registers and spilled under the 128 cap on sm_80/86 (ptxas 13.0: 8 B stored, 12 B loaded).
  static constexpr int kQkHeads = HV >= 8 ? (KV == DType::F32 ? 1 : 2) : 4;
  static_assert(HDP % 32 == 0 && HDP <= 256 && kTile >= kMinTile && kTile % 32 == 0);
  static_assert(!kScaled || 2 * kTile <= kThreads);  // a thread per K scale and per V scale of a tile
};

// Byte offsets into dynamic shared memory; the K/V stages come first and are reused, after the
// last tile, for the PV partial sums.
struct Layout {
  int q, p, stats, bytes;
};

__host__ __device__ constexpr int round16(int x) { return (x + 15) / 16 * 16; }

// heads: the query heads a block serves; hd: the real head_dim.
template <class S, int HV>
__host__ __device__ Layout layout(int heads, int hd) {
  const int stages = S::kStages * S::kStageBytes;
  const int partials = kThreads * HV * 8 * 4;  // (PV rows, HV, hd) floats; PV rows · hd / 8 <= kThreads
  Layout l{};
  l.q = round16(stages > partials ? stages : partials);                // (heads, hd) floats
  l.p = l.q + heads * hd * 4;                                          // (kTile, heads | 1) floats
  l.stats = l.p + round16(S::kTile * (heads | 1) * 4);                 // m, l, alpha: (3, heads)
  l.bytes = l.stats + 3 * heads * 4;
  return l;
}

// The split plan of a launch. With `start` (a device position: a graph's decode step) each
// block makes it from that position, as the host makes it otherwise (same function, same plan);
// the grid then holds the most splits any position may need, and the blocks past the plan exit.
struct PlanArgs {
  const int32_t* start;  // null: first, context, per_split and splits below are the plan
  int64_t window, items, target_blocks;
  int tile;
  int64_t first, context, per_split;  // attended positions: first .. first+context-1
  int splits;
  int slot_stride;  // splits' stride in the partials: splits, or the grid's splits with `start`
};

struct BlockPlan {
  int64_t first, context, per_split;
  int splits;
};

__device__ __forceinline__ BlockPlan block_plan(const PlanArgs& a) {
  if (a.start == nullptr) return {a.first, a.context, a.per_split, a.splits};
  const int64_t start = *a.start;
  const int64_t first = a.window > 0 && start - a.window + 1 > 0 ? start - a.window + 1 : 0;
  const core::SplitPlan p =
      core::plan_splits(start - first + 1, a.items, a.target_blocks, a.tile, kMaxSplits, kMinTilesPerSplit);
  return {first, start - first + 1, p.per_split, static_cast<int>(p.splits)};
}

struct DecodeArgs {
  const float* q;          // (heads, hd): the one query row
  const unsigned char* k;  // (kv_heads, rows, hd) of the cache dtype, position p in row p mod rows
  const unsigned char* v;  // (kv_heads, rows, hd)
  const float* k_scales;   // 8-bit types: (kv_heads, rows) the rows' scales; null otherwise
  const float* v_scales;
  int copy_bytes;          // of the tile copies: 16, or 8 for 8-bit rows that do not allow 16
  float* out;              // (heads, hd): written directly when splits == 1
  float* part_o;           // (heads, slot_stride, hd) unnormalised partial outputs
  float* part_ml;          // (heads, slot_stride, 2) partial (m, l)
  float q_scale;           // 1/sqrt(hd) · log2(e): scores in the base-2 domain (8-bit types: / b too)
  int head_dim;            // hd: a multiple of 8, at most the kernel's HDP
  int group;
  int heads_per_block, head_chunks;  // blockIdx.x = split · head_chunks + chunk; the last chunk may hold fewer
  int64_t rows;            // cache rows per KV head
  PlanArgs plan;
  float cap;               // > 0: scores soft-capped to cap · tanh(s / cap), cap = softcap · log2(e)
};

template <typename T>
__host__ __device__ constexpr T min_of(T a, T b) {
  return a < b ? a : b;
}

__device__ __forceinline__ float warp_max(float x) {
  for (int o = 16; o > 0; o /= 2) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}
__device__ __forceinline__ float warp_sum(float x) {
  for (int o = 16; o > 0; o /= 2) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// 8 consecutive cache elements (16 B of f16/bf16, 32 B of f32) from a 16-byte aligned address;
// 8 codes of an 8-bit type (8 B, 8-byte aligned), before their row's scale.
template <DType KV>
__device__ __forceinline__ void load8(const unsigned char* p, float (&x)[8]) {
  if constexpr (is_scaled_kv(KV)) {
    const uint64_t r = *reinterpret_cast<const uint64_t*>(p);  // one 8-byte load
    const uint32_t w[2] = {static_cast<uint32_t>(r), static_cast<uint32_t>(r >> 32)};
    if constexpr (KV == DType::FP8) core::widen8_e4m3(w, x);
    else core::widen8_i8(w, x);
  } else if constexpr (KV == DType::F32) {
    const float4 a = *reinterpret_cast<const float4*>(p), b = *reinterpret_cast<const float4*>(p + 16);
    x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w, x[4] = b.x, x[5] = b.y, x[6] = b.z, x[7] = b.w;
  } else {
    const uint4 r = *reinterpret_cast<const uint4*>(p);
    const uint32_t w[4] = {r.x, r.y, r.z, r.w};
    if constexpr (KV == DType::BF16) core::widen8_bf16(w, x);
    else core::widen8_f16(w, x);
  }
}

// Scores of position t for NH heads h0, h0 + kQkLanes, ...; -inf past the end of the split.
// q_s: (heads, hd); chunks = hd / 8. 8-bit types: each score times the K row's scale (ks_s, the
// tile's K scales).
template <class S, int NH>
__device__ __forceinline__ void qk_heads(const unsigned char* k_tile, const float* ks_s, const float* q_s, float* p_s,
                                         int ps, int t, int h0, bool live, int hd, int chunks, float cap) {
  float acc[NH] = {};
  if (live) {
    const unsigned char* k_row = k_tile + t * S::kPitch;
    // Not unrolled: with a run-time chunk count, unrolling by 2 spilled registers (ptxas).
#pragma unroll 1
    for (int c = 0; c < chunks; ++c) {
      float k[8];
      load8<S::kKv>(k_row + c * 8 * S::kElem, k);
#pragma unroll
      for (int j = 0; j < NH; ++j) {
        const float4* qv = reinterpret_cast<const float4*>(q_s + (h0 + j * S::kQkLanes) * hd + c * 8);
        const float4 x = qv[0], y = qv[1];
        float d = x.x * k[0];  // one short chain per chunk: chunks overlap in the pipeline
        d = fmaf(x.y, k[1], d), d = fmaf(x.z, k[2], d), d = fmaf(x.w, k[3], d);
        d = fmaf(y.x, k[4], d), d = fmaf(y.y, k[5], d), d = fmaf(y.z, k[6], d), d = fmaf(y.w, k[7], d);
        acc[j] += d;
      }
    }
  }
  if constexpr (S::kScaled) {
    if (live) {
      const float ks = ks_s[t];
#pragma unroll
      for (int j = 0; j < NH; ++j) acc[j] *= ks;
    }
  }
  if (cap > 0.0f) {  // Gemma 2's soft-cap, after the K row's scale, as the CPU
#pragma unroll
    for (int j = 0; j < NH; ++j) acc[j] = cap * tanhf(acc[j] / cap);
  }
#pragma unroll
  for (int j = 0; j < NH; ++j) p_s[t * ps + h0 + j * S::kQkLanes] = live ? acc[j] : -INFINITY;
}

template <class S>
__device__ void qk_tile(const unsigned char* k_tile, const float* ks_s, const float* q_s, float* p_s, int ps,
                        int heads, int rows, int hd, float cap) {
  const int t = threadIdx.x % S::kTile, lane_h = threadIdx.x / S::kTile;  // lane_h: warp-uniform
  const int chunks = hd / 8;
  for (int h0 = lane_h; h0 < heads; h0 += S::kQkHeads * S::kQkLanes) {
    const int left = (heads - h0 + S::kQkLanes - 1) / S::kQkLanes;  // heads h0 + j·kQkLanes < heads
    if (left >= S::kQkHeads) qk_heads<S, S::kQkHeads>(k_tile, ks_s, q_s, p_s, ps, t, h0, t < rows, hd, chunks, cap);
    else if (left == 3) qk_heads<S, 3>(k_tile, ks_s, q_s, p_s, ps, t, h0, t < rows, hd, chunks, cap);
    else if (left == 2) qk_heads<S, 2>(k_tile, ks_s, q_s, p_s, ps, t, h0, t < rows, hd, chunks, cap);
    else qk_heads<S, 1>(k_tile, ks_s, q_s, p_s, ps, t, h0, t < rows, hd, chunks, cap);
  }
}

// One online-softmax step per head over the tile's scores; scores become weights in place.
template <class S>
__device__ void softmax_tile(float* p_s, int ps, int heads, float* m_s, float* l_s, float* alpha_s) {
  constexpr int kPer = S::kTile / 32;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int h = warp; h < heads; h += kWarps) {
    float s[kPer];
    float mx = -INFINITY;
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      s[i] = p_s[(lane + 32 * i) * ps + h];
      mx = fmaxf(mx, s[i]);
    }
    core::OnlineSoftmax st{m_s[h], l_s[h]};
    const float alpha = st.rescale(warp_max(mx));
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const float w = st.weight(s[i]);
      p_s[(lane + 32 * i) * ps + h] = w;
      sum += w;
    }
    sum = warp_sum(sum);
    __syncwarp();  // every lane has read m_s[h], l_s[h] before lane 0 replaces them
    if (lane == 0) m_s[h] = st.m, l_s[h] = st.l + sum, alpha_s[h] = alpha;
  }
}

// o (HV heads h_base.., 8 dims at dg·8) = o·alpha + Σ_t p[t] v[t] over t = pg, pg + pgs, ... < rows;
// 8-bit types: Σ_t (p[t] · vs[t]) codes[t], vs_s the tile's V scales.
template <class S, int HV>
__device__ __forceinline__ void pv_tile(const unsigned char* v_tile, const float* vs_s, const float* p_s, int ps,
                                        const float* alpha_s, int h_base, int nh, int dg, int pg, int pgs, int rows,
                                        float (&o)[HV][8]) {
#pragma unroll
  for (int j = 0; j < HV; ++j) {
    if (j >= nh) continue;
    const float a = alpha_s[h_base + j];
#pragma unroll
    for (int e = 0; e < 8; ++e) o[j][e] *= a;
  }
  for (int t = pg; t < rows; t += pgs) {
    float v[8];
    load8<S::kKv>(v_tile + t * S::kPitch + dg * 8 * S::kElem, v);
    const float* p = p_s + t * ps + h_base;
    float vs = 1.0f;
    if constexpr (S::kScaled) vs = vs_s[t];
#pragma unroll
    for (int j = 0; j < HV; ++j) {
      if (j >= nh) continue;
      const float w = S::kScaled ? p[j] * vs : p[j];
#pragma unroll
      for (int e = 0; e < 8; ++e) o[j][e] = fmaf(w, v[e], o[j][e]);
    }
  }
}

template <int HDP, DType KV, int HV>
__global__ void __launch_bounds__(kThreads, 2) decode_split_kernel(const DecodeArgs a) {
  using S = Shape<HDP, KV, HV>;
  const int tid = threadIdx.x, hd = a.head_dim, g = blockIdx.y;
  const int split = static_cast<int>(blockIdx.x) / a.head_chunks, chunk = static_cast<int>(blockIdx.x) % a.head_chunks;
  const BlockPlan plan = block_plan(a.plan);
  if (split >= plan.splits) return;  // the whole block: past the plan of a device position
  const int h_first = chunk * a.heads_per_block;               // of the group: this block's first head
  const int heads = min_of(a.heads_per_block, a.group - h_first);  // heads this block serves
  const int64_t head0 = static_cast<int64_t>(g) * a.group + h_first;  // global index of head 0 here
  const Layout lay = layout<S, HV>(heads, hd);
  unsigned char* smem = dynamic_shared<unsigned char>();
  float* q_s = reinterpret_cast<float*>(smem + lay.q);      // (heads, hd) scaled query
  float* p_s = reinterpret_cast<float*>(smem + lay.p);      // (kTile, ps) scores, then weights
  float* m_s = reinterpret_cast<float*>(smem + lay.stats);  // (heads) running max
  float* l_s = m_s + heads;                                 // (heads) running sum
  float* alpha_s = l_s + heads;                             // (heads) this tile's rescale
  const int ps = heads | 1;  // odd pitch: the 32 positions a warp touches land on distinct banks
  const int64_t b = split * plan.per_split;
  const int n = static_cast<int>(min_of(plan.context, b + plan.per_split) - b);  // positions of this split
  const int tiles = (n + S::kTile - 1) / S::kTile;
  // A global row; its copies of a.copy_bytes (16; 8 for some 8-bit rows).
  const int row_bytes = hd * S::kElem, copies = row_bytes / a.copy_bytes;
  const int64_t head_row0 = g * a.rows;  // cache row of (g, row 0)
  const int64_t split_row = core::ring_row(plan.first + b, a.rows);  // the split's first position's row
  const unsigned char* k_rows = a.k + static_cast<size_t>(head_row0) * row_bytes;  // (rows, hd) of KV head g
  const unsigned char* v_rows = a.v + static_cast<size_t>(head_row0) * row_bytes;

  // Thread tid copies bytes col .. col+copy_bytes-1 of rows r_copy, r_copy + r_step, ... of a
  // tile (threads past r_step · copies: none). Rows past the split's end are not copied: QK masks
  // them and PV stops before them. Bytes of a shared row past row_bytes are never written nor
  // read. 8-bit types: threads 0 .. kTile-1 copy the tile's K scales, the next kTile its V scales.
  const int r_step = kThreads / copies, col = (tid % copies) * a.copy_bytes;
  const int r_copy = tid < r_step * copies ? tid / copies : int{S::kTile};
  auto load_tile = [&](int tile) {
    unsigned char* dk = smem + (tile % S::kStages) * S::kStageBytes;
    unsigned char* dv = dk + S::kTile * S::kPitch;
    const int t0 = tile * S::kTile, r_end = min_of(int{S::kTile}, n - t0);
    const int64_t row0 = core::ring_step(split_row, t0, a.rows);  // the tile's first row (t0 < n <= rows)
    if (S::kElem > 1 || a.copy_bytes == 16) {
      for (int r = r_copy; r < r_end; r += r_step) {
        const size_t src = static_cast<size_t>(core::ring_step(row0, r, a.rows)) * row_bytes + col;
        __pipeline_memcpy_async(dk + r * S::kPitch + col, k_rows + src, 16);
        __pipeline_memcpy_async(dv + r * S::kPitch + col, v_rows + src, 16);
      }
    } else {
      for (int r = r_copy; r < r_end; r += r_step) {
        const size_t src = static_cast<size_t>(core::ring_step(row0, r, a.rows)) * row_bytes + col;
        __pipeline_memcpy_async(dk + r * S::kPitch + col, k_rows + src, 8);
        __pipeline_memcpy_async(dv + r * S::kPitch + col, v_rows + src, 8);
      }
    }
    if constexpr (S::kScaled) {
      auto* ds = reinterpret_cast<float*>(dv + S::kTile * S::kPitch);  // (2, kTile): K's, then V's
      const int r = tid % S::kTile, which = tid / S::kTile;
      if (which < 2 && r < r_end)
        __pipeline_memcpy_async(ds + which * S::kTile + r,
                                (which == 0 ? a.k_scales : a.v_scales) + head_row0 + core::ring_step(row0, r, a.rows), 4);
    }
  };
  for (int tile = 0; tile < S::kStages - 1; ++tile) {
    if (tile < tiles) load_tile(tile);
    __pipeline_commit();
  }
  if constexpr (S::kScaled) {
    // The keys are stored rotated (kernels/core/kv_quant.h): each head's q becomes H q / b, the
    // 1/b in q_scale, before any score (the CPU's rotate_query, then the scale).
    for (int i = tid; i < heads * hd; i += kThreads) q_s[i] = a.q[head0 * hd + i];
    hadamard_rotate_rows(q_s, heads, hd, hd, a.q_scale, tid, kThreads);
  } else {
    for (int i = tid; i < heads * hd; i += kThreads) q_s[i] = a.q[head0 * hd + i] * a.q_scale;
  }
  for (int h = tid; h < heads; h += kThreads) m_s[h] = -INFINITY, l_s[h] = 0.0f;

  // PV roles: thread tid = pr · chunks + dg takes dimensions dg·8 .. +7 (chunks = hd / 8 of
  // them); pr = pg · ns + hs. Head set hs holds heads hs·HV .. +HV; position group pg takes every
  // pgs-th position of a tile. Threads past pgs · ns rows (and past kThreads / chunks rows, when
  // chunks does not divide kThreads) have no PV role.
  const int chunks = hd / 8, dg = tid % chunks, pr = tid / chunks;
  const int ns = (heads + HV - 1) / HV, pgs = kThreads / chunks / ns;
  const int hs = pr % ns, pg = pr / ns;
  const bool pv_active = pg < pgs;
  const int h_base = hs * HV, nh = min_of(HV, heads - h_base);
  float o[HV][8] = {};

  __syncthreads();  // q_s and the stats are visible (also when the split is empty)
  for (int tile = 0; tile < tiles; ++tile) {
    if (tile + S::kStages - 1 < tiles) load_tile(tile + S::kStages - 1);
    __pipeline_commit();
    __pipeline_wait_prior(S::kStages - 1);  // this tile's copies have landed; newer ones may be pending
    __syncthreads();
    const unsigned char* k_tile = smem + (tile % S::kStages) * S::kStageBytes;
    const unsigned char* v_tile = k_tile + S::kTile * S::kPitch;
    const float* ks_s = reinterpret_cast<const float*>(v_tile + S::kTile * S::kPitch);  // 8-bit types only
    const int rows = min_of(int{S::kTile}, n - tile * S::kTile);
    qk_tile<S>(k_tile, ks_s, q_s, p_s, ps, heads, rows, hd, a.cap);
    __syncthreads();
    softmax_tile<S>(p_s, ps, heads, m_s, l_s, alpha_s);
    __syncthreads();
    if (pv_active) pv_tile<S, HV>(v_tile, ks_s + S::kTile, p_s, ps, alpha_s, h_base, nh, dg, pg, pgs, rows, o);
    __syncthreads();  // the stage and p_s are free for the next tile
  }

  // Sum the position groups' partial outputs (the stages are free now; no copy is in flight).
  float* red = reinterpret_cast<float*>(smem);  // (pgs · ns, HV, hd)
  if (pv_active) {
#pragma unroll
    for (int j = 0; j < HV; ++j) {
      if (j >= nh) continue;
      float4* dst = reinterpret_cast<float4*>(red + (pr * HV + j) * hd + dg * 8);
      dst[0] = make_float4(o[j][0], o[j][1], o[j][2], o[j][3]);
      dst[1] = make_float4(o[j][4], o[j][5], o[j][6], o[j][7]);
    }
  }
  __syncthreads();
  for (int i = tid; i < heads * hd; i += kThreads) {
    const int h = i / hd, d = i % hd;
    float sum = 0.0f;
    for (int pgi = 0; pgi < pgs; ++pgi) sum += red[((pgi * ns + h / HV) * HV + h % HV) * hd + d];
    const int64_t head = head0 + h;
    if (plan.splits == 1) {
      a.out[head * hd + d] = sum * core::OnlineSoftmax{m_s[h], l_s[h]}.inv_sum();
    } else {
      const int64_t slot = head * a.plan.slot_stride + split;
      a.part_o[slot * hd + d] = sum;
      if (d == 0) a.part_ml[2 * slot] = m_s[h], a.part_ml[2 * slot + 1] = l_s[h];
    }
  }
}

struct CombineArgs {
  const float* part_o;   // (heads, slot_stride, head_dim)
  const float* part_ml;  // (heads, slot_stride, 2)
  float* out;            // (heads, head_dim)
  PlanArgs plan;
  int head_dim;
};

// One block per head. Every thread scans the (at most kMaxSplits) split maxima itself: the
// same addresses for the whole block, so the loads are broadcasts. Dynamic smem: (splits) floats.
__global__ void __launch_bounds__(kCombineThreads) decode_combine_kernel(const CombineArgs a) {
  const int splits = block_plan(a.plan).splits, stride = a.plan.slot_stride;
  if (splits == 1) return;  // a device position's plan of one split: the split kernel wrote the output
  float* w_s = dynamic_shared<float>();  // (splits) combine weights
  const int64_t h = blockIdx.x;
  const float* ml = a.part_ml + 2 * h * stride;  // (splits, 2)
  float m_max = -INFINITY, l_sum = 0.0f;
  for (int s = 0; s < splits; ++s) m_max = fmaxf(m_max, ml[2 * s]);
  for (int s = threadIdx.x; s < splits; s += kCombineThreads) w_s[s] = core::combine_weight(ml[2 * s], m_max);
  __syncthreads();
  for (int s = 0; s < splits; ++s) l_sum = fmaf(w_s[s], ml[2 * s + 1], l_sum);
  const float inv = core::OnlineSoftmax{m_max, l_sum}.inv_sum();
  for (int d = threadIdx.x; d < a.head_dim; d += kCombineThreads) {
    float acc = 0.0f;
    for (int s = 0; s < splits; ++s) acc = fmaf(w_s[s], a.part_o[(h * stride + s) * a.head_dim + d], acc);
    a.out[h * a.head_dim + d] = acc * inv;
  }
}

size_t partials_bytes(int64_t heads, int64_t head_dim, int64_t splits) {
  return static_cast<size_t>(heads * splits * (head_dim + 2)) * sizeof(float);
}


struct DecodeCall {
  const AttentionParams& p;
  int64_t first, context;
  int heads_per_block, head_chunks;
  void* workspace;
  size_t workspace_bytes;
  cudaStream_t stream;
};

template <int HDP, DType KV, int HV>
void run(const DecodeCall& c) {
  using S = Shape<HDP, KV, HV>;
  auto* kernel = decode_split_kernel<HDP, KV, HV>;
  allow_max_shared(kernel);  // per device: a second GPU needs its own
  const AttentionParams& p = c.p;
  const int hd = static_cast<int>(p.head_dim), group = static_cast<int>(p.heads / p.kv_heads);
  const int64_t items = p.kv_heads * c.head_chunks, target = int64_t{kBlocksPerSm} * multiprocessor_count();
  const core::SplitPlan plan = core::plan_splits(c.context, items, target, S::kTile, kMaxSplits, kMinTilesPerSplit);
  // A device position: the grid covers the most splits of any context the cache (or window) holds.
  const int64_t longest = p.window > 0 ? std::min(p.window, p.capacity) : p.capacity;
  const int64_t grid_splits =
      p.start_on_device == nullptr
          ? plan.splits
          : core::most_splits(longest, items, target, S::kTile, kMaxSplits, kMinTilesPerSplit);
  const size_t need = grid_splits > 1 ? partials_bytes(p.heads, hd, grid_splits) : 0;
  if (need > 0 && (c.workspace == nullptr || c.workspace_bytes < need))
    throw Error(ErrorKind::InvalidArgument, "attention_decode: workspace of " + std::to_string(c.workspace_bytes) + " bytes is too small: " +
                std::to_string(p.heads) + " heads × " + std::to_string(plan.splits) + " splits need " +
                std::to_string(need) + " bytes (size it with attention_decode_workspace_bytes)");
  if (grid_splits * c.head_chunks > 0x7fffffff)
    throw Error(ErrorKind::InvalidArgument, "attention_decode: " + std::to_string(p.heads / p.kv_heads) + " heads per KV head in chunks of " +
                std::to_string(c.heads_per_block) + " are too many for one launch");
  float* part_o = static_cast<float*>(c.workspace);
  const PlanArgs pa{p.start_on_device, p.window, items, target, S::kTile, c.first, c.context, plan.per_split,
                    static_cast<int>(plan.splits), static_cast<int>(grid_splits)};
  // 16-byte copies where every row allows them: always for 16- and 32-bit types (head_dim is a
  // multiple of 8), for 8-bit rows when head_dim is a multiple of 16 and k, v are 16-byte aligned.
  const bool wide = S::kElem > 1 || (hd % 16 == 0 && reinterpret_cast<uintptr_t>(p.k) % 16 == 0 &&
                                     reinterpret_cast<uintptr_t>(p.v) % 16 == 0);
  float q_scale = p.scale > 0 ? p.scale * core::kLog2e : 1.0f / sqrtf(static_cast<float>(hd)) * core::kLog2e;
  if constexpr (S::kScaled) q_scale *= 1.0f / static_cast<float>(core::kv_rotation_block(hd));  // a power of two: exact
  const DecodeArgs a{p.q, static_cast<const unsigned char*>(p.k), static_cast<const unsigned char*>(p.v),
                     p.k_scales, p.v_scales, wide ? 16 : 8, p.out,
                     part_o, need > 0 ? part_o + p.heads * grid_splits * hd : nullptr,
                     q_scale, hd, group,
                     c.heads_per_block, c.head_chunks, p.rows, pa, p.softcap * core::kLog2e};
  const Layout lay = layout<S, HV>(c.heads_per_block, hd);
  launch("attention_decode (split)", kernel,
         dim3(static_cast<unsigned>(grid_splits * c.head_chunks), static_cast<unsigned>(p.kv_heads)),
         dim3(kThreads), static_cast<size_t>(lay.bytes), c.stream, a);
  if (grid_splits == 1) return;
  const CombineArgs ca{a.part_o, a.part_ml, p.out, pa, hd};
  launch("attention_decode (combine)", decode_combine_kernel, dim3(static_cast<unsigned>(p.heads)),
         dim3(kCombineThreads), static_cast<size_t>(grid_splits) * sizeof(float), c.stream, ca);
}

// HV, the heads a PV thread accumulates: the heads a block serves itself up to 4, then sets of 8.
constexpr int hv_for(int heads_per_block) {
  return heads_per_block == 1 ? 1 : heads_per_block == 2 ? 2 : heads_per_block <= 4 ? 4 : 8;
}

template <int HDP, DType KV>
int layout_bytes(int heads, int hd) {
  switch (hv_for(heads)) {
    case 1: return layout<Shape<HDP, KV, 1>, 1>(heads, hd).bytes;
    case 2: return layout<Shape<HDP, KV, 2>, 2>(heads, hd).bytes;
    case 4: return layout<Shape<HDP, KV, 4>, 4>(heads, hd).bytes;
    default: return layout<Shape<HDP, KV, 8>, 8>(heads, hd).bytes;
  }
}

// Heads per block: as many of the group as fit (at most 64 and the device's shared memory), then
// spread evenly over the chunks that this many need.
template <int HDP, DType KV>
void run_group(const AttentionParams& p, int64_t first, void* workspace, size_t workspace_bytes,
               cudaStream_t stream) {
  const int hd = static_cast<int>(p.head_dim), limit = max_shared_bytes_optin();
  const int64_t group = p.heads / p.kv_heads;
  int fit = static_cast<int>(std::min<int64_t>(group, kMaxHeadsPerBlock));
  while (fit > 0 && layout_bytes<HDP, KV>(fit, hd) > limit) --fit;
  if (fit == 0)
    throw Error(ErrorKind::Unsupported, "attention_decode: head_dim " + std::to_string(hd) + " with a " + std::string(dtype_name(KV)) +
                " cache needs " + std::to_string(layout_bytes<HDP, KV>(1, hd)) +
                " bytes of shared memory per block for one head; the device allows " + std::to_string(limit));
  const int64_t chunks = (group + fit - 1) / fit;
  const int per_block = static_cast<int>((group + chunks - 1) / chunks);  // <= fit
  const int64_t context = p.start - first + 1;
  const DecodeCall c{p, first, context, per_block, static_cast<int>(chunks),
                     workspace, workspace_bytes, stream};
  switch (hv_for(per_block)) {
    case 1: return run<HDP, KV, 1>(c);
    case 2: return run<HDP, KV, 2>(c);
    case 4: return run<HDP, KV, 4>(c);
    default: return run<HDP, KV, 8>(c);
  }
}

template <int HDP>
void run_dtype(const AttentionParams& p, int64_t first, void* workspace, size_t workspace_bytes,
               cudaStream_t stream) {
  if (p.kv_dtype == DType::F32) return run_group<HDP, DType::F32>(p, first, workspace, workspace_bytes, stream);
  if (p.kv_dtype == DType::F16) return run_group<HDP, DType::F16>(p, first, workspace, workspace_bytes, stream);
  if (p.kv_dtype == DType::BF16) return run_group<HDP, DType::BF16>(p, first, workspace, workspace_bytes, stream);
  if (p.kv_dtype == DType::I8) return run_group<HDP, DType::I8>(p, first, workspace, workspace_bytes, stream);
  if (p.kv_dtype == DType::FP8) return run_group<HDP, DType::FP8>(p, first, workspace, workspace_bytes, stream);
  throw Error(ErrorKind::Unsupported, "attention_decode: unsupported KV cache dtype");
}

void check(bool ok, const std::string& what) {
  if (!ok) throw Error(ErrorKind::InvalidArgument, "attention_decode: " + what);
}

}  // namespace

size_t attention_decode_workspace_bytes(int64_t heads, int64_t head_dim, int64_t max_context) {
  if (heads <= 0 || head_dim <= 0) return 0;
  return partials_bytes(heads, head_dim, core::max_splits_bound(max_context, kMinTile, kMaxSplits));
}

void attention_decode(const AttentionParams& p, void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  const auto s = [](int64_t x) { return std::to_string(x); };
  check(p.n == 1, "n must be 1 (one query row per call; use attention_prefill for more), got " + s(p.n));
  check(p.head_dim >= 8 && p.head_dim <= 256 && p.head_dim % 8 == 0,
        "head_dim " + s(p.head_dim) + " is not supported: it must be a multiple of 8 from 8 to 256");
  check(p.kv_heads > 0 && p.kv_heads <= 65535 && p.heads > 0 && p.heads % p.kv_heads == 0,
        "heads (" + s(p.heads) + ") must be a positive multiple of kv_heads (" + s(p.kv_heads) + ", at most 65535)");
  check(p.heads <= 0x7fffffff, "heads (" + s(p.heads) + ") must be at most 2^31 - 1");
  check(p.q && p.k && p.v && p.out, "q, k, v and out must be non-null device pointers");
  check_kv_pointers(p, "attention_decode");
  check(p.start >= 0 && p.start + 1 <= p.capacity,
        "position start = " + s(p.start) + " must lie in the cache (capacity " + s(p.capacity) + ")");
  check_kv_rows(p, "attention_decode", p.start_on_device != nullptr);
  const int64_t first = p.window > 0 ? std::max<int64_t>(0, p.start - p.window + 1) : 0;
  if (p.head_dim <= 32) return run_dtype<32>(p, first, workspace, workspace_bytes, stream);
  if (p.head_dim <= 64) return run_dtype<64>(p, first, workspace, workspace_bytes, stream);
  if (p.head_dim <= 128) return run_dtype<128>(p, first, workspace, workspace_bytes, stream);
  return run_dtype<256>(p, first, workspace, workspace_bytes, stream);
}

}  // namespace kvinfer::cuda
