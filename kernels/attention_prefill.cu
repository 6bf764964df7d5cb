// Tiled causal attention for n >= 1 query rows (FlashAttention-2's loop order on CUDA cores, f32).
//
// GQA-native: the rows of a KV head's group are the (query t, head h) pairs, t-major
// (r = t · group + h), and a block takes kRows consecutive pairs, so every K/V tile it loads
// into shared memory serves all the query heads of its group at once. Grid (row tile, kv_head).
// Per key tile of kCols positions:
//   S = Q Kᵀ    (kRows, kCols)   thread (ty, tx): rows ty·4 .. +3, keys tx and tx + 16
//   mask        causal (key <= query position) and window (key > position - window)
//   softmax     online, per row: kernels/core/online_softmax.h; 16-lane shuffles per row
//   O += P V    (kRows, HD)      thread: rows ty·4 .. +3, dims tx·4 + 64·k
// K/V tiles are widened to f32 in shared memory once, so the inner loops are pure f32 FMAs.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "core/kv_load.h"
#include "core/online_softmax.h"
#include "cuda_check.h"
#include "cuda_ops.h"

namespace kvinfer::cuda {
namespace {

constexpr int kThreads = 256;  // 16 × 16: ty = tid / 16, tx = tid % 16
constexpr int kRows = 64;      // (query, head) rows per block
constexpr int kCols = 32;      // key positions per tile

template <int HD, DType KV>
struct Shape {
  static constexpr int kElem = KV == DType::F32 ? 4 : 2;
  static constexpr int kVec = 16 / kElem;       // elements per 16-byte load
  static constexpr int kCopies = HD / kVec;     // 16-byte loads per cache row
  static constexpr int kPitch = HD + 4;         // floats; +4: a quarter-warp's rows hit distinct banks
  static constexpr int kPPitch = kRows + 4;     // floats per row of P, stored (key, row)
  static constexpr int kDimVecs = HD / 64;      // float4 output chunks per thread and row
  static constexpr int kSmemBytes = ((kRows + 2 * kCols) * kPitch + kCols * kPPitch) * 4;
  static_assert(HD % 64 == 0);
};

struct PrefillArgs {
  const float* q;          // (n, heads, HD)
  const unsigned char* k;  // (kv_heads, capacity, HD) of the cache dtype
  const unsigned char* v;  // (kv_heads, capacity, HD)
  float* out;              // (n, heads, HD)
  float q_scale;           // 1/sqrt(HD) · log2(e): scores in the base-2 domain
  int group;
  int64_t heads, start, capacity, window, rows_total;  // rows_total = n · group
};

__device__ __forceinline__ float* shared_floats() {
  extern __shared__ __align__(16) unsigned char kvi_prefill_smem[];
  return reinterpret_cast<float*>(kvi_prefill_smem);
}

// Reductions over the 16 lanes (tx) that share a row; lanes 0-15 and 16-31 stay apart.
__device__ __forceinline__ float row_max(float x) {
  for (int o = 8; o > 0; o /= 2) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}
__device__ __forceinline__ float row_sum(float x) {
  for (int o = 8; o > 0; o /= 2) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// kVec consecutive cache elements from one 16-byte aligned load.
template <DType KV>
__device__ __forceinline__ void load16(const unsigned char* p, float (&x)[16 / (KV == DType::F32 ? 4 : 2)]) {
  if constexpr (KV == DType::F32) {
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

template <int HD, DType KV>
__global__ void __launch_bounds__(kThreads) prefill_kernel(const PrefillArgs a) {
  using S = Shape<HD, KV>;
  float* q_s = shared_floats();         // (kRows, kPitch) scaled queries
  float* k_s = q_s + kRows * S::kPitch;  // (kCols, kPitch) K tile in f32
  float* v_s = k_s + kCols * S::kPitch;  // (kCols, kPitch) V tile in f32
  float* p_s = v_s + kCols * S::kPitch;  // (kCols, kPPitch) weights, key-major
  const int tid = threadIdx.x, ty = tid / 16, tx = tid % 16;
  const int g = blockIdx.y, group = a.group;
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * kRows;
  const int64_t r_last = (a.rows_total < r0 + kRows ? a.rows_total : r0 + kRows) - 1;
  // Keys any row of this block may attend: [k_begin, k_end).
  const int64_t first_pos = a.start + r0 / group, last_pos = a.start + r_last / group;
  const int64_t lo = a.window > 0 ? first_pos - a.window + 1 : 0;
  const int64_t k_begin = lo > 0 ? lo : 0, k_end = last_pos + 1;
  const size_t head_row0 = static_cast<size_t>(g) * a.capacity;  // cache row of (g, position 0)

  for (int idx = tid; idx < kRows * HD; idx += kThreads) {
    const int i = idx / HD, d = idx % HD;
    const int64_t r = r0 + i;
    float x = 0.0f;  // padding rows past rows_total: zeros, fully masked below
    if (r < a.rows_total) {
      const int64_t t = r / group, h = r % group;
      x = a.q[((t * a.heads) + static_cast<int64_t>(g) * group + h) * HD + d] * a.q_scale;
    }
    q_s[i * S::kPitch + d] = x;
  }
  int64_t pos[4], first[4];  // this thread's rows attend keys [first, pos]; pos = -1: padding row
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t r = r0 + ty * 4 + i;
    pos[i] = r < a.rows_total ? a.start + r / group : -1;
    first[i] = a.window > 0 ? pos[i] - a.window + 1 : 0;
  }

  core::OnlineSoftmax st[4];
  float4 o[4][S::kDimVecs];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int k = 0; k < S::kDimVecs; ++k) o[i][k] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);

  for (int64_t k0 = k_begin; k0 < k_end; k0 += kCols) {
    // K and V tile, widened to f32; rows past k_end are zeros (they are masked, and 0 · 0 = 0).
    for (int idx = tid; idx < kCols * S::kCopies; idx += kThreads) {
      const int c = idx / S::kCopies, col = (idx % S::kCopies) * S::kVec;
      float x[S::kVec], y[S::kVec];
      if (k0 + c < k_end) {
        const size_t off = ((head_row0 + static_cast<size_t>(k0 + c)) * HD + col) * S::kElem;
        load16<KV>(a.k + off, x);
        load16<KV>(a.v + off, y);
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
    __syncthreads();

    float s[4][2] = {};
#pragma unroll 4
    for (int d = 0; d < HD; d += 4) {
      float4 qv[4], kv[2];
#pragma unroll
      for (int i = 0; i < 4; ++i) qv[i] = *reinterpret_cast<const float4*>(q_s + (ty * 4 + i) * S::kPitch + d);
#pragma unroll
      for (int j = 0; j < 2; ++j) kv[j] = *reinterpret_cast<const float4*>(k_s + (tx + 16 * j) * S::kPitch + d);
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) s[i][j] = dot4(qv[i], kv[j], s[i][j]);
    }

#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float mx = -INFINITY;
#pragma unroll
      for (int j = 0; j < 2; ++j) {
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
      for (int j = 0; j < 2; ++j) {
        s[i][j] = st[i].weight(s[i][j]);
        sum += s[i][j];
      }
      st[i].add(row_sum(sum));
    }
#pragma unroll
    for (int j = 0; j < 2; ++j)
      *reinterpret_cast<float4*>(p_s + (tx + 16 * j) * S::kPPitch + ty * 4) =
          make_float4(s[0][j], s[1][j], s[2][j], s[3][j]);
    __syncthreads();

#pragma unroll 4
    for (int c = 0; c < kCols; ++c) {
      const float4 p = *reinterpret_cast<const float4*>(p_s + c * S::kPPitch + ty * 4);
      const float pr[4] = {p.x, p.y, p.z, p.w};
#pragma unroll
      for (int k = 0; k < S::kDimVecs; ++k) {
        const float4 v = *reinterpret_cast<const float4*>(v_s + c * S::kPitch + tx * 4 + 64 * k);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
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
  for (int i = 0; i < 4; ++i) {
    const int64_t r = r0 + ty * 4 + i;
    if (r >= a.rows_total) continue;
    const int64_t t = r / group, h = r % group;
    float* dst = a.out + ((t * a.heads) + static_cast<int64_t>(g) * group + h) * HD;
    const float inv = st[i].inv_sum();
#pragma unroll
    for (int k = 0; k < S::kDimVecs; ++k) {
      float* d = dst + tx * 4 + 64 * k;  // scalar stores: out need not be 16-byte aligned
      d[0] = o[i][k].x * inv, d[1] = o[i][k].y * inv, d[2] = o[i][k].z * inv, d[3] = o[i][k].w * inv;
    }
  }
}

template <int HD, DType KV>
void run(const AttentionParams& p, cudaStream_t stream) {
  using S = Shape<HD, KV>;
  PrefillArgs a{};
  a.q = p.q;
  a.k = static_cast<const unsigned char*>(p.k);
  a.v = static_cast<const unsigned char*>(p.v);
  a.out = p.out;
  a.q_scale = 1.0f / sqrtf(static_cast<float>(HD)) * core::kLog2e;
  a.group = static_cast<int>(p.heads / p.kv_heads);
  a.heads = p.heads;
  a.start = p.start;
  a.capacity = p.capacity;
  a.window = p.window;
  a.rows_total = p.n * a.group;
  auto* kernel = prefill_kernel<HD, KV>;
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, S::kSmemBytes));
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>((a.rows_total + kRows - 1) / kRows), static_cast<unsigned>(p.kv_heads));
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = S::kSmemBytes;
  cfg.stream = stream;
  CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, a));
}

template <int HD>
void run_dtype(const AttentionParams& p, cudaStream_t stream) {
  switch (p.kv_dtype) {
    case DType::F32: return run<HD, DType::F32>(p, stream);
    case DType::F16: return run<HD, DType::F16>(p, stream);
    case DType::BF16: return run<HD, DType::BF16>(p, stream);
    default: break;
  }
  throw Error("attention_prefill: unsupported KV cache dtype");
}

void check(bool ok, const std::string& what) {
  if (!ok) throw Error("attention_prefill: " + what);
}

}  // namespace

void attention_prefill(const AttentionParams& p, cudaStream_t stream) {
  const auto s = [](int64_t x) { return std::to_string(x); };
  check(p.n >= 1, "n must be at least 1, got " + s(p.n));
  check(p.head_dim == 64 || p.head_dim == 128 || p.head_dim == 256,
        "head_dim " + s(p.head_dim) + " is not supported (64, 128 or 256)");
  check(p.kv_heads > 0 && p.kv_heads <= 65535 && p.heads > 0 && p.heads % p.kv_heads == 0,
        "heads (" + s(p.heads) + ") must be a positive multiple of kv_heads (" + s(p.kv_heads) + ", at most 65535)");
  check(p.q && p.k && p.v && p.out, "q, k, v and out must be non-null device pointers");
  check(reinterpret_cast<uintptr_t>(p.k) % 16 == 0 && reinterpret_cast<uintptr_t>(p.v) % 16 == 0,
        "k and v must be 16-byte aligned");
  check(p.start >= 0 && p.start + p.n <= p.capacity,
        "positions " + s(p.start) + " .. " + s(p.start + p.n - 1) + " must lie in the cache (capacity " +
            s(p.capacity) + ")");
  check((p.n * (p.heads / p.kv_heads) + kRows - 1) / kRows <= 0x7fffffff, "n · group is too large for one launch");
  switch (p.head_dim) {
    case 64: return run_dtype<64>(p, stream);
    case 128: return run_dtype<128>(p, stream);
    default: return run_dtype<256>(p, stream);
  }
}

}  // namespace kvinfer::cuda
