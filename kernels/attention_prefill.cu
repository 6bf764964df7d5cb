// Tiled causal attention for n >= 1 query rows (FlashAttention-2's loop order on CUDA cores, f32).
// It serves f32 and 8-bit (int8, fp8) KV caches; f16 and bf16 caches go to the tensor-core kernel
// of attention_prefill_mma.cu (the dispatch is attention_prefill(), at the end of this file).
//
// GQA-native: the rows of a KV head's group are the (query t, head h) pairs, t-major
// (r = t · group + h), and a block takes kRows consecutive pairs, so every K/V tile it loads
// into shared memory serves all the query heads of its group at once. Grid (row tile, kv_head).
// Per key tile of kCols positions (kRows = 16 · RPT, kCols = 16 · CPT):
//   S = Q Kᵀ    (kRows, kCols)   thread (ty, tx): rows ty·RPT .. +RPT-1, keys tx + 16·j (j < CPT)
//   mask        causal (key <= query position) and window (key > position - window)
//   softmax     online, per row: kernels/core/online_softmax.h; 16-lane shuffles per row
//   O += P V    (kRows, HDP)     thread: rows ty·RPT .. +RPT-1, dims tx·4 + 64·k
// K/V tiles are widened to f32 in shared memory once, so the inner loops are pure f32 FMAs.
//
// head_dim is any multiple of 8 from 8 to 256, at run time: the template's HDP (64, 128 or 256,
// the smallest >= head_dim) is a capacity. Global rows are head_dim elements apart; the copies
// and QK's loop stop at head_dim; V's padded dims in shared memory are zero, so PV's accumulators
// for them stay 0, and only dims < head_dim are written out.
//
// The tile is the largest of (RPT, CPT) = (4, 2), then (2, 1), whose shared memory fits the
// device's opt-in limit: 141,824 B for head_dim 256 at (4, 2), 68,864 B at (2, 1) (sm_86: 101,376).
//
// 8-bit caches (int8, fp8: codes and an f32 scale per row, kernels/core/kv_quant.h): the codes
// come in 8-byte loads (their blocks are 8-byte aligned), widened exactly to f32 in shared memory
// as the other types are, and the tile's K and V scales beside them (kCols f32 each). The keys are
// stored rotated, so the queries in shared memory are rotated too (H q / b). Each score is
// q · codes times its K row's scale, before the mask and the softmax; P holds each weight times
// its V row's scale, while the softmax's l sums the unscaled weights: src/cpu/attention.cpp's
// order of operations.
//
// Position p is cache row p mod rows (a sliding-window ring; kernels/core/kv_ring.h): each key
// tile takes its first row once and steps from it, so a tile may straddle the ring's wrap. Only
// addresses change, so a ring gives the bits of a full cache.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "attention_check.h"
#include "attention_prefill_mma.h"
#include "core/kv_code_load.h"
#include "core/kv_load.h"
#include "core/kv_ring.h"
#include "core/online_softmax.h"
#include "cuda_check.h"
#include "cuda_ops.h"
#include "kv_rotation.h"
#include "launch.h"

namespace kvinfer::cuda {
namespace {

constexpr int kThreads = 256;  // 16 × 16: ty = tid / 16, tx = tid % 16

template <int HDP, DType KV, int RPT, int CPT>
struct Shape {
  static constexpr int kRows = 16 * RPT;        // (query, head) rows per block
  static constexpr int kCols = 16 * CPT;        // key positions per tile
  static constexpr bool kScaled = is_scaled_kv(KV);  // int8, fp8: codes and a scale per row
  static constexpr int kElem = static_cast<int>(dtype_size(KV));
  static constexpr int kVec = kScaled ? 8 : 16 / kElem;  // elements per load: 16 bytes, or 8 codes
  static constexpr int kPitch = HDP + 4;        // floats; +4: a quarter-warp's rows hit distinct banks
  static constexpr int kPPitch = kRows + 4;     // floats per row of P, stored (key, row)
  static constexpr int kDimVecs = HDP / 64;     // float4 output chunks per thread and row
  static constexpr int kScaleFloats = kScaled ? 2 * kCols : 0;  // the tile's K scales, then V scales
  static constexpr int kSmemBytes = ((kRows + 2 * kCols) * kPitch + kCols * kPPitch + kScaleFloats) * 4;
  static_assert(HDP % 64 == 0 && (RPT == 1 || RPT == 2 || RPT == 4) && (CPT == 1 || CPT == 2));
};

// Reductions over the 16 lanes (tx) that share a row; lanes 0-15 and 16-31 stay apart.
__device__ __forceinline__ float row_max(float x) {
  for (int o = 8; o > 0; o /= 2) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}
__device__ __forceinline__ float row_sum(float x) {
  for (int o = 8; o > 0; o /= 2) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// kVec consecutive cache elements from one 16-byte aligned load; 8 codes of an 8-bit type (before
// their row's scale) from one 8-byte aligned load.
template <DType KV, int N>
__device__ __forceinline__ void load_vec(const unsigned char* p, float (&x)[N]) {
  if constexpr (is_scaled_kv(KV)) {
    const uint64_t r = *reinterpret_cast<const uint64_t*>(p);  // one 8-byte load
    const uint32_t w[2] = {static_cast<uint32_t>(r), static_cast<uint32_t>(r >> 32)};
    if constexpr (KV == DType::FP8) core::widen8_e4m3(w, x);
    else core::widen8_i8(w, x);
  } else if constexpr (KV == DType::F32) {
    const float4 a = *reinterpret_cast<const float4*>(p);
    x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w;
  } else {
    const uint4 r = *reinterpret_cast<const uint4*>(p);
    const uint32_t w[4] = {r.x, r.y, r.z, r.w};
    if constexpr (KV == DType::BF16) core::widen8_bf16(w, x);
    else core::widen8_f16(w, x);
  }
}

__device__ __forceinline__ float dot4(float4 a, float4 b, float acc) {
  acc = fmaf(a.x, b.x, acc);
  acc = fmaf(a.y, b.y, acc);
  acc = fmaf(a.z, b.z, acc);
  return fmaf(a.w, b.w, acc);
}

// N consecutive floats of shared memory (16-byte aligned for N = 4, 8-byte for N = 2).
template <int N>
__device__ __forceinline__ void load_rows(const float* p, float (&x)[N]) {
  if constexpr (N == 4) {
    const float4 v = *reinterpret_cast<const float4*>(p);
    x[0] = v.x, x[1] = v.y, x[2] = v.z, x[3] = v.w;
  } else if constexpr (N == 2) {
    const float2 v = *reinterpret_cast<const float2*>(p);
    x[0] = v.x, x[1] = v.y;
  } else {
    x[0] = p[0];
  }
}
template <int N>
__device__ __forceinline__ void store_rows(float* p, const float (&x)[N]) {
  if constexpr (N == 4) *reinterpret_cast<float4*>(p) = make_float4(x[0], x[1], x[2], x[3]);
  else if constexpr (N == 2) *reinterpret_cast<float2*>(p) = make_float2(x[0], x[1]);
  else p[0] = x[0];
}

template <int HDP, DType KV, int RPT, int CPT>
__global__ void __launch_bounds__(kThreads) prefill_kernel(const PrefillArgs a) {
  using S = Shape<HDP, KV, RPT, CPT>;
  constexpr int kRows = S::kRows, kCols = S::kCols;
  float* q_s = dynamic_shared<float>();  // (kRows, kPitch) scaled queries
  float* k_s = q_s + kRows * S::kPitch;  // (kCols, kPitch) K tile in f32
  float* v_s = k_s + kCols * S::kPitch;  // (kCols, kPitch) V tile in f32
  float* p_s = v_s + kCols * S::kPitch;  // (kCols, kPPitch) weights, key-major
  float* ks_s = p_s + kCols * S::kPPitch;  // 8-bit types: (kCols) the tile's K scales, then (kCols) V's
  float* vs_s = ks_s + kCols;
  const int tid = threadIdx.x, ty = tid / 16, tx = tid % 16;
  const int g = blockIdx.y, group = a.group, hd = a.head_dim;
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * kRows;
  const int64_t r_last = (a.rows_total < r0 + kRows ? a.rows_total : r0 + kRows) - 1;
  // Keys any row of this block may attend: [k_begin, k_end).
  const int64_t first_pos = a.start + r0 / group, last_pos = a.start + r_last / group;
  const int64_t lo = a.window > 0 ? first_pos - a.window + 1 : 0;
  const int64_t k_begin = lo > 0 ? lo : 0, k_end = last_pos + 1;
  const size_t head_row0 = static_cast<size_t>(g) * a.rows;  // cache row of (g, row 0)

  // 8-bit types: the keys are stored rotated (kernels/core/kv_quant.h), so each row's q becomes
  // H q / b (kv_rotation.h, the 1/b in q_scale) before any score: the CPU's rotate_query.
  for (int idx = tid; idx < kRows * hd; idx += kThreads) {
    const int i = idx / hd, d = idx % hd;
    const int64_t r = r0 + i;
    float x = 0.0f;  // padding rows past rows_total: zeros, fully masked below
    if (r < a.rows_total) {
      const int64_t t = r / group, h = r % group;
      x = a.q[((t * a.heads) + static_cast<int64_t>(g) * group + h) * hd + d];
      if constexpr (!S::kScaled) x *= a.q_scale;
    }
    q_s[i * S::kPitch + d] = x;
  }
  if constexpr (S::kScaled) hadamard_rotate_rows(q_s, kRows, hd, S::kPitch, a.q_scale, tid, kThreads);
  // V's dims hd .. HDP-1 (never written by the tile loads): zero, so PV adds exactly 0 there.
  // QK reads no dim >= hd of q_s or k_s.
  if (hd < HDP)
    for (int idx = tid; idx < kCols * (HDP - hd); idx += kThreads)
      v_s[idx / (HDP - hd) * S::kPitch + hd + idx % (HDP - hd)] = 0.0f;
  int64_t pos[RPT], first[RPT];  // this thread's rows attend keys [first, pos]; pos = -1: padding row
#pragma unroll
  for (int i = 0; i < RPT; ++i) {
    const int64_t r = r0 + ty * RPT + i;
    pos[i] = r < a.rows_total ? a.start + r / group : -1;
    first[i] = a.window > 0 ? pos[i] - a.window + 1 : 0;
  }

  core::OnlineSoftmax st[RPT];
  float4 o[RPT][S::kDimVecs];
#pragma unroll
  for (int i = 0; i < RPT; ++i)
#pragma unroll
    for (int k = 0; k < S::kDimVecs; ++k) o[i][k] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);

  const int copies = hd / S::kVec;  // loads per cache row
  for (int64_t k0 = k_begin; k0 < k_end; k0 += kCols) {
    // The tile's keys k0 .. (at most rows of them: the launcher's check) from row0 on. A modulo
    // a tile: a register fewer than stepping from the first tile's row (ptxas: no spill at HDP 64).
    const int64_t row0 = core::ring_row(k0, a.rows);
    // K and V tile, widened to f32; rows past k_end are zeros (they are masked, and 0 · 0 = 0).
    for (int idx = tid; idx < kCols * copies; idx += kThreads) {
      const int c = idx / copies, col = (idx % copies) * S::kVec;
      float x[S::kVec], y[S::kVec];
      if (k0 + c < k_end) {
        const size_t row = head_row0 + static_cast<size_t>(core::ring_step(row0, c, a.rows));
        const size_t off = (row * hd + col) * S::kElem;
        load_vec<KV>(a.k + off, x);
        load_vec<KV>(a.v + off, y);
      } else {
#pragma unroll
        for (int e = 0; e < S::kVec; ++e) x[e] = y[e] = 0.0f;
      }
#pragma unroll
      for (int e = 0; e < S::kVec; e += 4) {
        *reinterpret_cast<float4*>(k_s + c * S::kPitch + col + e) = make_float4(x[e], x[e + 1], x[e + 2], x[e + 3]);
        *reinterpret_cast<float4*>(v_s + c * S::kPitch + col + e) = make_float4(y[e], y[e + 1], y[e + 2], y[e + 3]);
      }
    }
    if constexpr (S::kScaled) {  // keys past k_end: scale 0 (their scores are masked anyway)
      if (tid < 2 * kCols) {
        const int c = tid % kCols;
        const float* scales = tid < kCols ? a.k_scales : a.v_scales;
        ks_s[tid] = k0 + c < k_end ? scales[head_row0 + static_cast<size_t>(core::ring_step(row0, c, a.rows))] : 0.0f;
      }
    }
    __syncthreads();

    float s[RPT][CPT] = {};
    // Steps of 8 dims (hd is a multiple of 8), not unrolled further: with a run-time bound, an
    // unrolled loop takes 30-40 more registers (ptxas: 106 instead of 80 at HDP 64, 168 instead
    // of 128 at HDP 256).
#pragma unroll 1
    for (int d0 = 0; d0 < hd; d0 += 8) {
#pragma unroll
      for (int d = d0; d < d0 + 8; d += 4) {
        float4 qv[RPT], kv[CPT];
#pragma unroll
        for (int i = 0; i < RPT; ++i) qv[i] = *reinterpret_cast<const float4*>(q_s + (ty * RPT + i) * S::kPitch + d);
#pragma unroll
        for (int j = 0; j < CPT; ++j) kv[j] = *reinterpret_cast<const float4*>(k_s + (tx + 16 * j) * S::kPitch + d);
#pragma unroll
        for (int i = 0; i < RPT; ++i)
#pragma unroll
          for (int j = 0; j < CPT; ++j) s[i][j] = dot4(qv[i], kv[j], s[i][j]);
      }
    }

    if constexpr (S::kScaled) {
#pragma unroll
      for (int j = 0; j < CPT; ++j) {
        const float ks = ks_s[tx + 16 * j];
#pragma unroll
        for (int i = 0; i < RPT; ++i) s[i][j] *= ks;
      }
    }
    if (a.cap > 0.0f) {  // Gemma 2's soft-cap, after the K row's scale and before the mask, as the CPU
#pragma unroll
      for (int i = 0; i < RPT; ++i)
#pragma unroll
        for (int j = 0; j < CPT; ++j) s[i][j] = a.cap * tanhf(s[i][j] / a.cap);
    }
#pragma unroll
    for (int i = 0; i < RPT; ++i) {
      float mx = -INFINITY;
#pragma unroll
      for (int j = 0; j < CPT; ++j) {
        const int64_t key = k0 + tx + 16 * j;
        if (key >= k_end || key > pos[i] || key < first[i]) s[i][j] = -INFINITY;
        mx = fmaxf(mx, s[i][j]);
      }
      const float alpha = st[i].rescale(row_max(mx));
#pragma unroll
      for (int k = 0; k < S::kDimVecs; ++k)
        o[i][k] = make_float4(o[i][k].x * alpha, o[i][k].y * alpha, o[i][k].z * alpha, o[i][k].w * alpha);
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < CPT; ++j) {
        s[i][j] = st[i].weight(s[i][j]);
        sum += s[i][j];
      }
      st[i].add(row_sum(sum));
    }
#pragma unroll
    for (int j = 0; j < CPT; ++j) {
      float w[RPT];
#pragma unroll
      for (int i = 0; i < RPT; ++i) w[i] = s[i][j];
      if constexpr (S::kScaled) {
        // A masked key's weight stays 0, whatever its V scale (a non-finite row's is NaN).
        const float vs = vs_s[tx + 16 * j];
#pragma unroll
        for (int i = 0; i < RPT; ++i) w[i] = w[i] != 0.0f ? w[i] * vs : 0.0f;
      }
      store_rows<RPT>(p_s + (tx + 16 * j) * S::kPPitch + ty * RPT, w);
    }
    __syncthreads();

#pragma unroll 4
    for (int c = 0; c < kCols; ++c) {
      float pr[RPT];
      load_rows<RPT>(p_s + c * S::kPPitch + ty * RPT, pr);
#pragma unroll
      for (int k = 0; k < S::kDimVecs; ++k) {
        const float4 v = *reinterpret_cast<const float4*>(v_s + c * S::kPitch + tx * 4 + 64 * k);
#pragma unroll
        for (int i = 0; i < RPT; ++i) {
          o[i][k].x = fmaf(pr[i], v.x, o[i][k].x);
          o[i][k].y = fmaf(pr[i], v.y, o[i][k].y);
          o[i][k].z = fmaf(pr[i], v.z, o[i][k].z);
          o[i][k].w = fmaf(pr[i], v.w, o[i][k].w);
        }
      }
    }
    __syncthreads();  // k_s, v_s and p_s are rewritten by the next tile
  }

#pragma unroll
  for (int i = 0; i < RPT; ++i) {
    const int64_t r = r0 + ty * RPT + i;
    if (r >= a.rows_total) continue;
    const int64_t t = r / group, h = r % group;
    float* dst = a.out + ((t * a.heads) + static_cast<int64_t>(g) * group + h) * hd;
    const float inv = st[i].inv_sum();
#pragma unroll
    for (int k = 0; k < S::kDimVecs; ++k) {
      const int d0 = tx * 4 + 64 * k;  // hd is a multiple of 8: dims d0 .. d0+3 are all in or all out
      if (d0 >= hd) continue;
      float* d = dst + d0;  // scalar stores: out need not be 16-byte aligned
      d[0] = o[i][k].x * inv, d[1] = o[i][k].y * inv, d[2] = o[i][k].z * inv, d[3] = o[i][k].w * inv;
    }
  }
}


template <int HDP, DType KV, int RPT, int CPT>
void run(const AttentionParams& p, cudaStream_t stream) {
  using S = Shape<HDP, KV, RPT, CPT>;
  auto* kernel = prefill_kernel<HDP, KV, RPT, CPT>;
  allow_max_shared(kernel);  // per device: a second GPU needs its own
  int64_t row_tiles = 0;
  PrefillArgs a = prefill_args(p, S::kRows, row_tiles);
  // 8-bit types: rotate_query's 1/b (a power of two: exact) with the scale.
  if constexpr (S::kScaled) a.q_scale *= 1.0f / static_cast<float>(core::kv_rotation_block(a.head_dim));
  launch("attention_prefill", kernel, dim3(static_cast<unsigned>(row_tiles), static_cast<unsigned>(p.kv_heads)),
         dim3(kThreads), static_cast<size_t>(S::kSmemBytes), stream, a);
}

// The largest tile whose shared memory fits the device.
template <int HDP, DType KV>
void run_tile(const AttentionParams& p, cudaStream_t stream) {
  const int limit = max_shared_bytes_optin();
  if (Shape<HDP, KV, 4, 2>::kSmemBytes <= limit) return run<HDP, KV, 4, 2>(p, stream);
  if (Shape<HDP, KV, 2, 1>::kSmemBytes <= limit) return run<HDP, KV, 2, 1>(p, stream);
  throw Error(ErrorKind::Unsupported, "attention_prefill: head_dim " + std::to_string(p.head_dim) + " needs " +
              std::to_string(Shape<HDP, KV, 2, 1>::kSmemBytes) +
              " bytes of shared memory per block (32 rows × 16 keys); the device allows " + std::to_string(limit));
}

template <int HDP>
void run_dtype(const AttentionParams& p, cudaStream_t stream) {
  switch (p.kv_dtype) {
    case DType::F32: return run_tile<HDP, DType::F32>(p, stream);
    case DType::I8: return run_tile<HDP, DType::I8>(p, stream);
    case DType::FP8: return run_tile<HDP, DType::FP8>(p, stream);
    default: break;  // f16 and bf16: attention_prefill_mma.cu
  }
  throw Error(ErrorKind::Unsupported, "attention_prefill: unsupported KV cache dtype");
}

void check(bool ok, const std::string& what) {
  if (!ok) throw Error(ErrorKind::InvalidArgument, "attention_prefill: " + what);
}

}  // namespace

void attention_prefill(const AttentionParams& p, cudaStream_t stream) {
  const auto s = [](int64_t x) { return std::to_string(x); };
  check(p.n >= 1, "n must be at least 1, got " + s(p.n));
  check(p.head_dim >= 8 && p.head_dim <= 256 && p.head_dim % 8 == 0,
        "head_dim " + s(p.head_dim) + " is not supported: it must be a multiple of 8 from 8 to 256");
  check(p.kv_heads > 0 && p.kv_heads <= 65535 && p.heads > 0 && p.heads % p.kv_heads == 0,
        "heads (" + s(p.heads) + ") must be a positive multiple of kv_heads (" + s(p.kv_heads) + ", at most 65535)");
  check(p.q && p.k && p.v && p.out, "q, k, v and out must be non-null device pointers");
  check_kv_pointers(p, "attention_prefill");
  check(p.start >= 0 && p.start + p.n <= p.capacity,
        "positions " + s(p.start) + " .. " + s(p.start + p.n - 1) + " must lie in the cache (capacity " +
            s(p.capacity) + ")");
  check_kv_rows(p, "attention_prefill", false);  // prefill reads no device position
  check(p.heads / p.kv_heads <= 0x7fffffff && (p.n * (p.heads / p.kv_heads) + 63) / 64 <= 0x7fffffff,
        "n · group is too large for one launch");
  // The one dispatch point: 16-bit caches on tensor cores (every head_dim: the MMA kernel pads
  // QK's k-dimension to 16 with zeros), f32 and 8-bit caches on this file's kernel.
  if (p.kv_dtype == DType::F16 || p.kv_dtype == DType::BF16) return attention_prefill_mma(p, stream);
  if (p.head_dim <= 64) return run_dtype<64>(p, stream);
  if (p.head_dim <= 128) return run_dtype<128>(p, stream);
  return run_dtype<256>(p, stream);
}

}  // namespace kvinfer::cuda
