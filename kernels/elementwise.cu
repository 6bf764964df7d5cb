// The elementwise CUDA kernels of kernels/cuda_ops.h: thin loops over the scalar math of
// kernels/core/, so that every value they produce is the one the CPU backend produces (up to
// the summation order of rms_norm and layer_norm and the contraction of rope's products into FMAs).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "core/convert.h"
#include "core/kv_quant.h"
#include "core/kv_ring.h"
#include "core/rope.h"
#include "cuda_check.h"
#include "cuda_ops.h"
#include "kv_rotation.h"
#include "launch.h"

namespace kvinfer::cuda {
namespace {

constexpr int kThreads = 256;           // elementwise blocks
constexpr int kNormThreads = 512;       // rms_norm, layer_norm: one block per row (at most)
constexpr int kLayerNormCached = 8;     // layer_norm: row elements a thread keeps in registers
constexpr int kArgmaxThreads = 1024;    // argmax: one block for the whole vocabulary
constexpr int kRopeHeadsPerBlock = 8;   // rope: heads sharing one cos/sin evaluation
constexpr int64_t kMaxBlocks = 1 << 20; // grid-stride loops cover the rest
constexpr int64_t kMaxGridY = 65535;
constexpr int64_t kStoreKvSharedBytes = 48 * 1024;  // store_kv, 8-bit caches: a block's shared K rows
constexpr int64_t kStoreKvMaxHeadDim = kStoreKvSharedBytes / 4;  // one warp's row in them

// Storage formats: load widens to f32 (exact), store narrows with round to nearest even.
struct F32 {
  using T = float;
  static __device__ __forceinline__ float load(T v) { return v; }
  static __device__ __forceinline__ T store(float v) { return v; }
};
struct F16 {
  using T = uint16_t;
  static __device__ __forceinline__ float load(T v) { return core::f16_to_f32(v); }
  static __device__ __forceinline__ T store(float v) { return core::f32_to_f16(v); }
};
struct BF16 {
  using T = uint16_t;
  static __device__ __forceinline__ float load(T v) { return core::bf16_to_f32(v); }
  static __device__ __forceinline__ T store(float v) { return core::f32_to_bf16(v); }
};

// Calls f(F32{}), f(F16{}) or f(BF16{}): one template instance per dtype, no per-element branch.
template <typename F>
void visit_dtype(DType t, F&& f) {
  switch (t) {
    case DType::F32: f(F32{}); return;
    case DType::F16: f(F16{}); return;
    case DType::BF16: f(BF16{}); return;
    default: break;
  }
  throw Error(ErrorKind::InvalidArgument, std::string("cuda: dtype ") + std::string(dtype_name(t)) + " is not a plain element type here");
}

// ---- argument checks (host) -------------------------------------------------------------------
// The message is built only when the check fails: a decode step makes dozens of these calls.
template <typename Message>
void require(bool ok, const char* op, Message&& what) {
  if (!ok) [[unlikely]]
    throw Error(ErrorKind::InvalidArgument, std::string("cuda::") + op + ": " + what());
}
void require_ptr(const void* p, const char* op, const char* name) {
  require(p != nullptr, op, [&] { return std::string(name) + " is a null pointer"; });
}
void require_positive(int64_t v, const char* op, const char* name) {
  require(v > 0, op, [&] { return std::string(name) + " must be positive, got " + std::to_string(v); });
}
void require_grid_x(int64_t v, const char* op, const char* name) {
  require(v <= std::numeric_limits<int32_t>::max(), op,
          [&] { return std::string(name) + " = " + std::to_string(v) + " exceeds the grid's 2^31 - 1 blocks"; });
}

unsigned blocks_for(int64_t total, int threads) {
  const int64_t b = (total + threads - 1) / threads;
  return static_cast<unsigned>(b < kMaxBlocks ? b : kMaxBlocks);
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

__device__ __forceinline__ int64_t global_thread() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t grid_threads() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

// ---- kernels -----------------------------------------------------------------------------------

// grid (n, column chunks). Token ids are validated on the host (src/ops); an id outside
// [0, vocab) is never read from: its row comes out NaN, so that a missed check is loud.
template <typename D>
__global__ void embed_kernel(const typename D::T* table, int64_t vocab, int64_t hidden, const int32_t* ids,
                             float* out) {
  const int64_t t = blockIdx.x;
  const int32_t id = ids[t];
  float* row = out + t * hidden;  // (hidden)
  const int64_t step = static_cast<int64_t>(gridDim.y) * blockDim.x;
  if (id < 0 || id >= vocab) {
    for (int64_t j = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x; j < hidden; j += step) row[j] = NAN;
    return;
  }
  const typename D::T* src = table + static_cast<int64_t>(id) * hidden;  // (hidden)
  for (int64_t j = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x; j < hidden; j += step)
    row[j] = D::load(src[j]);
}

// Sum over the block; every thread gets the total. `scratch` holds one float per warp.
__device__ float block_sum(float v, float* scratch) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int warps = static_cast<int>(blockDim.x) / 32;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : 0.0f;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// One block per row; y may alias x (every x is read before the reduction's barrier).
__global__ void rms_norm_kernel(const float* x, const float* weight, int64_t dim, float eps, float* y) {
  __shared__ float scratch[32];
  const float* xr = x + static_cast<int64_t>(blockIdx.x) * dim;  // (dim)
  float* yr = y + static_cast<int64_t>(blockIdx.x) * dim;        // (dim)
  float sum_sq = 0.0f;
  for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) sum_sq += xr[j] * xr[j];
  sum_sq = block_sum(sum_sq, scratch);
  // As the CPU and HF: inverse of the root, then weight · (x · inv).
  const float inv = 1.0f / sqrtf(sum_sq / static_cast<float>(dim) + eps);
  for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) yr[j] = weight[j] * (xr[j] * inv);
}

// One block per row: y (dim) = (x - mean) / sqrt(var + eps) · weight + bias, torch.nn.LayerNorm
// in f32: two passes (the mean, then the mean of the squared deviations: biased variance), never
// E[x²] - mean², which cancels when |mean| >> std. kCached > 0: dim <= kCached · blockDim.x and
// each thread keeps its elements j = threadIdx.x + k · blockDim.x in registers, so x is read from
// memory once; kCached == 0: any dim, each pass reads x again (from L1/L2).
// y may alias x: a thread writes only its own elements, after the second reduction's barrier,
// which every read of the first two passes precedes.
template <int kCached>
__global__ void layer_norm_kernel(const float* x, const float* weight, const float* bias, int64_t dim, float eps,
                                  float* y) {
  __shared__ float scratch[32];
  const float* xr = x + static_cast<int64_t>(blockIdx.x) * dim;  // (dim)
  float* yr = y + static_cast<int64_t>(blockIdx.x) * dim;        // (dim)
  float v[kCached > 0 ? kCached : 1];  // x, then x - mean, of this thread's elements
  float sum = 0.0f;
  if constexpr (kCached > 0) {
#pragma unroll
    for (int k = 0; k < kCached; ++k) {
      const int64_t j = threadIdx.x + static_cast<int64_t>(k) * blockDim.x;
      v[k] = j < dim ? xr[j] : 0.0f;
      sum += v[k];
    }
  } else {
    for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) sum += xr[j];
  }
  // The CPU divides the sum by dim (not a product with 1/dim): so does this.
  const float mean = block_sum(sum, scratch) / static_cast<float>(dim);
  __syncthreads();  // every thread has read scratch before the second reduction rewrites it
  float sum_sq = 0.0f;
  if constexpr (kCached > 0) {
#pragma unroll
    for (int k = 0; k < kCached; ++k) {
      const int64_t j = threadIdx.x + static_cast<int64_t>(k) * blockDim.x;
      v[k] = j < dim ? v[k] - mean : 0.0f;
      sum_sq += v[k] * v[k];
    }
  } else {
    for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) {
      const float d = xr[j] - mean;
      sum_sq += d * d;
    }
  }
  const float inv = 1.0f / sqrtf(block_sum(sum_sq, scratch) / static_cast<float>(dim) + eps);
  // ((x - mean) · inv) · weight + bias, each step rounded as on the CPU (no FMA contraction).
  if constexpr (kCached > 0) {
#pragma unroll
    for (int k = 0; k < kCached; ++k) {
      const int64_t j = threadIdx.x + static_cast<int64_t>(k) * blockDim.x;
      if (j < dim) yr[j] = __fadd_rn(__fmul_rn(__fmul_rn(v[k], inv), weight[j]), bias[j]);
    }
  } else {
    for (int64_t j = threadIdx.x; j < dim; j += blockDim.x)
      yr[j] = __fadd_rn(__fmul_rn(__fmul_rn(__fsub_rn(xr[j], mean), inv), weight[j]), bias[j]);
  }
}

// Threads over (t, i) pairs, grid.y over groups of heads: one cos/sin serves kRopeHeadsPerBlock
// heads. The angle is one f32 product as in HF; its cos/sin are taken in double and rounded, as
// the CPU backend does: sinf/cosf of angles near 16K+ radians would already differ by ulps.
// half: pairs rotated per head (rotary_dim / 2); cos and sin are scaled by attention_factor as on
// the CPU (one f32 product each; × 1 changes no bit).
template <RopeLayout kLayout>
__global__ void rope_kernel(float* x, int64_t n, int64_t heads, int64_t head_dim, int64_t half, int64_t start,
                            const int32_t* start_on_device, const float* inv_freq, float attention_factor) {
  if (start_on_device != nullptr) start = *start_on_device;
  const int64_t h0 = static_cast<int64_t>(blockIdx.y) * kRopeHeadsPerBlock;
  const int64_t h1 = h0 + kRopeHeadsPerBlock < heads ? h0 + kRopeHeadsPerBlock : heads;
  for (int64_t p = global_thread(); p < n * half; p += grid_threads()) {
    const int64_t t = p / half, i = p % half;
    const float angle = static_cast<float>(start + t) * inv_freq[i];
    double s, c;
    sincos(static_cast<double>(angle), &s, &c);
    const float cos_a = __fmul_rn(static_cast<float>(c), attention_factor);
    const float sin_a = __fmul_rn(static_cast<float>(s), attention_factor);
    for (int64_t h = h0; h < h1; ++h) {
      float* xh = x + (t * heads + h) * head_dim;  // (head_dim)
      if constexpr (kLayout == RopeLayout::HalfSplit)
        core::rope_rotate(xh[i], xh[i + half], cos_a, sin_a);
      else
        core::rope_rotate(xh[2 * i], xh[2 * i + 1], cos_a, sin_a);
    }
  }
}

__device__ __forceinline__ float silu_mul1(float g, float u) { return g / (1.0f + expf(-g)) * u; }

// kVec: all pointers 16-byte aligned; float4 for the first n/4 groups, scalars for the tail.
template <bool kVec>
__global__ void silu_mul_kernel(const float* gate, const float* up, float* out, int64_t n) {
  const int64_t vec_end = kVec ? n / 4 : 0;
  for (int64_t v = global_thread(); v < vec_end; v += grid_threads()) {
    const float4 g = reinterpret_cast<const float4*>(gate)[v];
    const float4 u = reinterpret_cast<const float4*>(up)[v];
    reinterpret_cast<float4*>(out)[v] =
        make_float4(silu_mul1(g.x, u.x), silu_mul1(g.y, u.y), silu_mul1(g.z, u.z), silu_mul1(g.w, u.w));
  }
  for (int64_t j = vec_end * 4 + global_thread(); j < n; j += grid_threads()) out[j] = silu_mul1(gate[j], up[j]);
}

// HF's gelu_new: 0.5·x·(1 + tanh(sqrt(2/π)·(x + 0.044715·x³))), every product and sum rounded
// in the CPU's order (no FMA contraction), so only tanhf (≤ 2 ulp) differs from the CPU's.
// Huge |x|: x³ overflows to ±inf, tanh gives ±1, and the result is x or -0, as on the CPU.
__device__ __forceinline__ float gelu_tanh1(float x) {
  const float k = 0.7978845608028654f;  // sqrt(2/π)
  const float cube = __fmul_rn(__fmul_rn(__fmul_rn(0.044715f, x), x), x);
  const float t = tanhf(__fmul_rn(k, __fadd_rn(x, cube)));
  return __fmul_rn(__fmul_rn(0.5f, x), __fadd_rn(1.0f, t));
}

// kVec: both pointers 16-byte aligned; float4 for the first n/4 groups, scalars for the tail.
// out may alias x: each element is read, then written, by the same thread.
template <bool kVec>
__global__ void gelu_tanh_kernel(const float* x, float* out, int64_t n) {
  const int64_t vec_end = kVec ? n / 4 : 0;
  for (int64_t v = global_thread(); v < vec_end; v += grid_threads()) {
    const float4 a = reinterpret_cast<const float4*>(x)[v];
    reinterpret_cast<float4*>(out)[v] = make_float4(gelu_tanh1(a.x), gelu_tanh1(a.y), gelu_tanh1(a.z), gelu_tanh1(a.w));
  }
  for (int64_t j = vec_end * 4 + global_thread(); j < n; j += grid_threads()) out[j] = gelu_tanh1(x[j]);
}

template <bool kVec>
__global__ void add_kernel(float* x, const float* y, int64_t n) {
  const int64_t vec_end = kVec ? n / 4 : 0;
  for (int64_t v = global_thread(); v < vec_end; v += grid_threads()) {
    float4 a = reinterpret_cast<float4*>(x)[v];
    const float4 b = reinterpret_cast<const float4*>(y)[v];
    a.x += b.x, a.y += b.y, a.z += b.z, a.w += b.w;
    reinterpret_cast<float4*>(x)[v] = a;
  }
  for (int64_t j = vec_end * 4 + global_thread(); j < n; j += grid_threads()) x[j] += y[j];
}

__global__ void add_bias_kernel(float* y, const float* bias, int64_t rows, int64_t cols) {
  for (int64_t j = global_thread(); j < rows * cols; j += grid_threads()) y[j] += bias[j % cols];
}

template <typename D>
__global__ void convert_kernel(const float* src, typename D::T* out, int64_t n) {
  for (int64_t j = global_thread(); j < n; j += grid_threads()) out[j] = D::store(src[j]);
}

// Threads over the elements of k, v (n, kv_heads, head_dim) → (kv_heads, rows, head_dim), position
// p in row p mod rows (kernels/core/kv_ring.h; n <= rows).
template <typename D>
__global__ void store_kv_kernel(const float* k, const float* v, int64_t n, int64_t kv_heads, int64_t head_dim,
                                int64_t start, const int32_t* start_on_device, int64_t rows,
                                typename D::T* k_layer, typename D::T* v_layer) {
  if (start_on_device != nullptr) start = *start_on_device;
  const int64_t row0 = core::ring_row(start, rows);
  for (int64_t j = global_thread(); j < n * kv_heads * head_dim; j += grid_threads()) {
    const int64_t d = j % head_dim, g = (j / head_dim) % kv_heads, t = j / (head_dim * kv_heads);
    const int64_t dst = (g * rows + core::ring_step(row0, t, rows)) * head_dim + d;
    k_layer[dst] = D::store(k[j]);
    v_layer[dst] = D::store(v[j]);
  }
}

// 8-bit caches (int8, fp8): one warp per row (one position's K or V row of one KV head, rows
// ordered (t, kv_head, {K, V})), the bits of the CPU's cpu::store_kv. A K row is stored rotated
// (core::quantize_kv_key_row; kernels/core/kv_quant.h says why): the warp copies it to its slice
// of shared memory (`work`, head_dim floats a warp) and rotates it there (kv_rotation.h: the
// CPU's butterfly stages, so the CPU's bits); a V row is coded as it is (core::quantize_kv_row).
// Then the row's largest magnitude by a warp max (exact and order-free) and whether it is finite
// by a warp AND, and each lane codes its values with core::kv_code. head_dim may be any size
// (lanes stride by 32).
template <bool FP8>
__global__ void store_kv_scaled_kernel(const float* k, const float* v, int64_t n, int64_t kv_heads, int64_t head_dim,
                                       int64_t start, const int32_t* start_on_device, int64_t rows,
                                       uint8_t* k_layer, uint8_t* v_layer, float* k_scales, float* v_scales) {
  if (start_on_device != nullptr) start = *start_on_device;
  const int64_t row0 = core::ring_row(start, rows);
  const int lane = static_cast<int>(threadIdx.x % 32);
  float* work = dynamic_shared<float>() + (threadIdx.x / 32) * head_dim;  // this warp's K row
  const int64_t in_rows = n * kv_heads * 2, warps = grid_threads() / 32;
  for (int64_t r = global_thread() / 32; r < in_rows; r += warps) {  // warp-uniform: all lanes or none
    const int64_t tg = r / 2, g = tg % kv_heads, t = tg / kv_heads;  // tg: row (t, g) of k and v
    const bool is_v = (r & 1) != 0;
    const float* x = (is_v ? v : k) + tg * head_dim;
    if (!is_v) {
      __syncwarp();  // the warp's previous row has been read from `work`
      for (int64_t d = lane; d < head_dim; d += 32) work[d] = x[d];
      hadamard_rotate_warp(work, static_cast<int>(head_dim), lane);
      x = work;
    }
    float amax = 0.0f;
    int finite = 1;
    for (int64_t d = lane; d < head_dim; d += 32) {
      const float m = fabsf(x[d]);
      finite &= m <= 3.4028234663852886e38f ? 1 : 0;  // NaN and ±inf: not finite
      amax = m > amax ? m : amax;
    }
    for (int o = 16; o > 0; o >>= 1) {
      const float other = __shfl_xor_sync(0xffffffffu, amax, o);
      amax = other > amax ? other : amax;
      finite &= __shfl_xor_sync(0xffffffffu, finite, o);
    }
    const int64_t slot = g * rows + core::ring_step(row0, t, rows);  // (kv_head, row of position start + t)
    if (lane == 0) (is_v ? v_scales : k_scales)[slot] = finite ? core::kv_row_scale(amax, FP8) : NAN;
    uint8_t* codes = (is_v ? v_layer : k_layer) + slot * head_dim;
    const bool coded = finite && amax > 0.0f;
    for (int64_t d = lane; d < head_dim; d += 32) codes[d] = coded ? core::kv_code(x[d], amax, FP8) : uint8_t{0};
  }
}

// (value, index) a beats (value, index) b: larger value, or equal value and lower index.
// NaN never wins (as std::max_element, the CPU's argmax, when the first logit is not NaN).
__device__ __forceinline__ bool beats(float va, int32_t ia, float vb, int32_t ib) {
  return va > vb || (va == vb && ia < ib);
}

// One block; vocab < 2^31 - 1 (index `vocab` is the "nothing yet" sentinel).
__global__ void argmax_kernel(const float* logits, int32_t vocab, int32_t* out) {
  __shared__ float best_v[32];
  __shared__ int32_t best_i[32];
  float v = -INFINITY;
  int32_t idx = vocab;
  for (int32_t j = static_cast<int32_t>(threadIdx.x); j < vocab; j += static_cast<int32_t>(blockDim.x))
    if (beats(logits[j], j, v, idx)) v = logits[j], idx = j;
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_down_sync(0xffffffffu, v, o);
    const int32_t oi = __shfl_down_sync(0xffffffffu, idx, o);
    if (beats(ov, oi, v, idx)) v = ov, idx = oi;
  }
  if (lane == 0) best_v[warp] = v, best_i[warp] = idx;
  __syncthreads();
  if (warp != 0) return;
  const int warps = static_cast<int>(blockDim.x) / 32;
  v = lane < warps ? best_v[lane] : -INFINITY;
  idx = lane < warps ? best_i[lane] : vocab;
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_down_sync(0xffffffffu, v, o);
    const int32_t oi = __shfl_down_sync(0xffffffffu, idx, o);
    if (beats(ov, oi, v, idx)) v = ov, idx = oi;
  }
  if (lane == 0) *out = idx == vocab ? 0 : idx;  // all NaN: 0, as the CPU
}

}  // namespace

// ---- launchers ---------------------------------------------------------------------------------

void embed(DType table_dtype, const void* table, int64_t vocab, int64_t hidden, const int32_t* ids, int64_t n,
           float* out, cudaStream_t stream) {
  require_ptr(table, "embed", "table");
  require_ptr(ids, "embed", "ids");
  require_ptr(out, "embed", "out");
  require_positive(vocab, "embed", "vocab");
  require_positive(hidden, "embed", "hidden");
  require_positive(n, "embed", "n");
  require_grid_x(n, "embed", "n");
  const int64_t chunks = (hidden + kThreads - 1) / kThreads;
  const dim3 grid(static_cast<unsigned>(n), static_cast<unsigned>(chunks < 64 ? chunks : 64));
  visit_dtype(table_dtype, [&](auto d) {
    using D = decltype(d);
    launch("embed", embed_kernel<D>, grid, kThreads, 0, stream,
        static_cast<const typename D::T*>(table), vocab, hidden, ids, out);
  });
}

void rms_norm(const float* x, const float* weight, int64_t n, int64_t dim, float eps, float* y, cudaStream_t stream) {
  require_ptr(x, "rms_norm", "x");
  require_ptr(weight, "rms_norm", "weight");
  require_ptr(y, "rms_norm", "y");
  require_positive(n, "rms_norm", "n");
  require_positive(dim, "rms_norm", "dim");
  require_grid_x(n, "rms_norm", "n");
  require(eps >= 0.0f, "rms_norm", [&] { return "eps must be >= 0, got " + std::to_string(eps); });
  launch("rms_norm", rms_norm_kernel, static_cast<unsigned>(n), kNormThreads, 0, stream, x, weight, dim, eps, y);
}

void layer_norm(const float* x, const float* weight, const float* bias, int64_t n, int64_t dim, float eps, float* y,
                cudaStream_t stream) {
  require_ptr(x, "layer_norm", "x");
  require_ptr(weight, "layer_norm", "weight");
  require_ptr(bias, "layer_norm", "bias");
  require_ptr(y, "layer_norm", "y");
  require_positive(n, "layer_norm", "n");
  require_positive(dim, "layer_norm", "dim");
  require_grid_x(n, "layer_norm", "n");
  require(eps >= 0.0f, "layer_norm", [&] { return "eps must be >= 0, got " + std::to_string(eps); });
  // About 4 elements per thread (whole warps, 32 .. kNormThreads): GPT-2's 768 gets 192 threads,
  // fewer idle lanes and shorter reductions than a fixed 512.
  const int64_t want = ((dim + 3) / 4 + 31) / 32 * 32;
  const int threads = static_cast<int>(want < 32 ? 32 : want > kNormThreads ? kNormThreads : want);
  if (dim <= static_cast<int64_t>(kLayerNormCached) * threads)
    launch("layer_norm", layer_norm_kernel<kLayerNormCached>, static_cast<unsigned>(n), threads, 0, stream,
        x, weight, bias, dim, eps, y);
  else
    launch("layer_norm", layer_norm_kernel<0>, static_cast<unsigned>(n), threads, 0, stream,
        x, weight, bias, dim, eps, y);
}

void rope(float* x, int64_t n, int64_t heads, int64_t head_dim, int64_t start, const float* inv_freq,
          RopeLayout layout, cudaStream_t stream, const int32_t* start_on_device, int64_t rotary_dim,
          float attention_factor) {
  require_ptr(x, "rope", "x");
  require_ptr(inv_freq, "rope", "inv_freq");
  require_positive(n, "rope", "n");
  require_positive(heads, "rope", "heads");
  require_positive(head_dim, "rope", "head_dim");
  require(head_dim % 2 == 0, "rope", [&] { return "head_dim must be even, got " + std::to_string(head_dim); });
  require(start >= 0, "rope", [&] { return "start must be >= 0, got " + std::to_string(start); });
  if (rotary_dim == 0) rotary_dim = head_dim;
  require(rotary_dim > 0 && rotary_dim <= head_dim && rotary_dim % 2 == 0, "rope", [&] {
    return "rotary_dim must be even and in [2, head_dim = " + std::to_string(head_dim) + "], got " +
           std::to_string(rotary_dim);
  });
  const int64_t half = rotary_dim / 2;
  const int64_t head_groups = (heads + kRopeHeadsPerBlock - 1) / kRopeHeadsPerBlock;
  require(head_groups <= kMaxGridY, "rope", [&] { return "too many heads: " + std::to_string(heads); });
  const dim3 grid(blocks_for(n * half, kThreads), static_cast<unsigned>(head_groups));
  switch (layout) {
    case RopeLayout::HalfSplit:
      launch("rope", rope_kernel<RopeLayout::HalfSplit>, grid, kThreads, 0, stream,
          x, n, heads, head_dim, half, start, start_on_device, inv_freq, attention_factor);
      break;
    case RopeLayout::Interleaved:
      launch("rope", rope_kernel<RopeLayout::Interleaved>, grid, kThreads, 0, stream,
          x, n, heads, head_dim, half, start, start_on_device, inv_freq, attention_factor);
      break;
    default: throw Error(ErrorKind::InvalidArgument, "cuda::rope: unknown layout " + std::to_string(static_cast<int>(layout)));
  }
}

void silu_mul(const float* gate, const float* up, float* out, int64_t n, cudaStream_t stream) {
  require_ptr(gate, "silu_mul", "gate");
  require_ptr(up, "silu_mul", "up");
  require_ptr(out, "silu_mul", "out");
  require_positive(n, "silu_mul", "n");
  if (aligned16(gate) && aligned16(up) && aligned16(out))
    launch("silu_mul", silu_mul_kernel<true>, blocks_for(n / 4 + 4, kThreads), kThreads, 0, stream, gate, up, out, n);
  else
    launch("silu_mul", silu_mul_kernel<false>, blocks_for(n, kThreads), kThreads, 0, stream, gate, up, out, n);
}

void gelu_tanh(const float* x, float* out, int64_t n, cudaStream_t stream) {
  require_ptr(x, "gelu_tanh", "x");
  require_ptr(out, "gelu_tanh", "out");
  require_positive(n, "gelu_tanh", "n");
  if (aligned16(x) && aligned16(out))
    launch("gelu_tanh", gelu_tanh_kernel<true>, blocks_for(n / 4 + 4, kThreads), kThreads, 0, stream, x, out, n);
  else
    launch("gelu_tanh", gelu_tanh_kernel<false>, blocks_for(n, kThreads), kThreads, 0, stream, x, out, n);
}

void add(float* x, const float* y, int64_t n, cudaStream_t stream) {
  require_ptr(x, "add", "x");
  require_ptr(y, "add", "y");
  require_positive(n, "add", "n");
  if (aligned16(x) && aligned16(y))
    launch("add", add_kernel<true>, blocks_for(n / 4 + 4, kThreads), kThreads, 0, stream, x, y, n);
  else
    launch("add", add_kernel<false>, blocks_for(n, kThreads), kThreads, 0, stream, x, y, n);
}

void add_bias(float* y, const float* bias, int64_t rows, int64_t cols, cudaStream_t stream) {
  require_ptr(y, "add_bias", "y");
  require_ptr(bias, "add_bias", "bias");
  require_positive(rows, "add_bias", "rows");
  require_positive(cols, "add_bias", "cols");
  launch("add_bias", add_bias_kernel, blocks_for(rows * cols, kThreads), kThreads, 0, stream, y, bias, rows, cols);
}

void convert_from_f32(DType dtype, const float* src, void* out, int64_t n, cudaStream_t stream) {
  require_ptr(src, "convert_from_f32", "src");
  require_ptr(out, "convert_from_f32", "out");
  require_positive(n, "convert_from_f32", "n");
  visit_dtype(dtype, [&](auto d) {
    using D = decltype(d);
    launch("convert", convert_kernel<D>, blocks_for(n, kThreads), kThreads, 0, stream,
        src, static_cast<typename D::T*>(out), n);
  });
}

void store_kv(DType kv_dtype, const float* k, const float* v, int64_t n, int64_t kv_heads, int64_t head_dim,
              int64_t start, int64_t rows, void* k_layer, void* v_layer, cudaStream_t stream,
              const int32_t* start_on_device, float* k_scales, float* v_scales) {
  require_ptr(k, "store_kv", "k");
  require_ptr(v, "store_kv", "v");
  require_ptr(k_layer, "store_kv", "k_layer");
  require_ptr(v_layer, "store_kv", "v_layer");
  require_positive(n, "store_kv", "n");
  require_positive(kv_heads, "store_kv", "kv_heads");
  require_positive(head_dim, "store_kv", "head_dim");
  require_positive(rows, "store_kv", "rows");
  require(start >= 0, "store_kv", [&] { return "position start = " + std::to_string(start) + " is negative"; });
  // One call's positions in distinct rows: a ring takes at most its rows at a time.
  require(n <= rows, "store_kv", [&] {
    return "n = " + std::to_string(n) + " positions do not fit the cache's " + std::to_string(rows) + " rows at once";
  });
  if (is_scaled_kv(kv_dtype)) {
    require(k_scales != nullptr && v_scales != nullptr, "store_kv", [&] {
      return std::string("an ") + std::string(dtype_name(kv_dtype)) + " cache needs k_scales and v_scales (non-null)";
    });
    // A warp per row, and head_dim floats of shared memory per warp (a K row, rotated there):
    // kThreads a block, fewer for rows too long for 8 of them in the default 48 KiB.
    require(head_dim <= kStoreKvMaxHeadDim, "store_kv", [&] {
      return "head_dim " + std::to_string(head_dim) + " is too large for an " + std::string(dtype_name(kv_dtype)) +
             " cache (its key rows are rotated in shared memory: at most " + std::to_string(kStoreKvMaxHeadDim) + ")";
    });
    const int64_t in_rows = n * kv_heads * 2, row_bytes = head_dim * static_cast<int64_t>(sizeof(float));
    const int threads = 32 * static_cast<int>(std::min<int64_t>(kThreads / 32, kStoreKvSharedBytes / row_bytes));
    auto* kernel = kv_dtype == DType::FP8 ? store_kv_scaled_kernel<true> : store_kv_scaled_kernel<false>;
    launch("store_kv", kernel, blocks_for(in_rows * 32, threads), threads, static_cast<size_t>(threads / 32 * row_bytes),
           stream, k, v, n, kv_heads, head_dim, start, start_on_device, rows, static_cast<uint8_t*>(k_layer),
           static_cast<uint8_t*>(v_layer), k_scales, v_scales);
    return;
  }
  visit_dtype(kv_dtype, [&](auto d) {
    using D = decltype(d);
    using T = typename D::T;
    launch("store_kv", store_kv_kernel<D>, blocks_for(n * kv_heads * head_dim, kThreads), kThreads, 0, stream,
        k, v, n, kv_heads, head_dim, start, start_on_device, rows, static_cast<T*>(k_layer),
        static_cast<T*>(v_layer));
  });
}

void argmax(const float* logits, int64_t vocab, int32_t* out, cudaStream_t stream) {
  require_ptr(logits, "argmax", "logits");
  require_ptr(out, "argmax", "out");
  require_positive(vocab, "argmax", "vocab");
  require(vocab < std::numeric_limits<int32_t>::max(), "argmax",
          [&] { return "vocab " + std::to_string(vocab) + " does not fit int32 token ids"; });
  launch("argmax", argmax_kernel, 1, kArgmaxThreads, 0, stream, logits, static_cast<int32_t>(vocab), out);
}

// ---- Qwen3 / Gemma: per-head RMSNorm, GeGLU, scale, soft-cap ---------------------------------
namespace {

constexpr int kHeadNormWarps = 8;  // head_rms_norm: rows (heads) a block, one warp each

// One warp per row of head_dim values, in place: the sum of squares over the warp's lanes (any
// head_dim), then weight · (x · inv) as rms_norm_kernel. A lane writes only the elements it read,
// after the shuffle reduction every lane takes part in.
__global__ void head_rms_norm_kernel(float* x, const float* weight, int64_t rows, int64_t dim, float eps) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kHeadNormWarps + threadIdx.x / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (row >= rows) return;  // a whole warp: the shuffles below see all 32 lanes or none
  float* xr = x + row * dim;  // (dim)
  float sum_sq = 0.0f;
  for (int64_t j = lane; j < dim; j += 32) sum_sq += xr[j] * xr[j];
  for (int o = 16; o > 0; o >>= 1) sum_sq += __shfl_xor_sync(0xffffffffu, sum_sq, o);
  const float inv = 1.0f / sqrtf(sum_sq / static_cast<float>(dim) + eps);
  for (int64_t j = lane; j < dim; j += 32) xr[j] = weight[j] * (xr[j] * inv);
}

// gelu_tanh1's bits times up; out may alias gate (each element read, then written, by one thread).
__global__ void gelu_tanh_mul_kernel(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t j = global_thread(); j < n; j += grid_threads()) out[j] = __fmul_rn(gelu_tanh1(gate[j]), up[j]);
}

__global__ void scale_kernel(float* x, int64_t n, float factor) {
  for (int64_t j = global_thread(); j < n; j += grid_threads()) x[j] = __fmul_rn(x[j], factor);
}

// As HF and the CPU: x / cap, tanh, times cap (tanhf within 2 ulp of the CPU's std::tanh).
__global__ void softcap_kernel(float* x, int64_t n, float cap) {
  for (int64_t j = global_thread(); j < n; j += grid_threads()) x[j] = __fmul_rn(tanhf(__fdiv_rn(x[j], cap)), cap);
}

}  // namespace

void head_rms_norm(float* x, const float* weight, int64_t rows, int64_t head_dim, float eps, cudaStream_t stream) {
  require_ptr(x, "head_rms_norm", "x");
  require_ptr(weight, "head_rms_norm", "weight");
  require_positive(rows, "head_rms_norm", "rows");
  require_positive(head_dim, "head_rms_norm", "head_dim");
  require(eps >= 0.0f, "head_rms_norm", [&] { return "eps must be >= 0, got " + std::to_string(eps); });
  const int64_t blocks = (rows + kHeadNormWarps - 1) / kHeadNormWarps;
  require_grid_x(blocks, "head_rms_norm", "rows / 8");
  launch("head_rms_norm", head_rms_norm_kernel, static_cast<unsigned>(blocks), 32 * kHeadNormWarps, 0, stream, x,
         weight, rows, head_dim, eps);
}

void gelu_tanh_mul(const float* gate, const float* up, float* out, int64_t n, cudaStream_t stream) {
  require_ptr(gate, "gelu_tanh_mul", "gate");
  require_ptr(up, "gelu_tanh_mul", "up");
  require_ptr(out, "gelu_tanh_mul", "out");
  require_positive(n, "gelu_tanh_mul", "n");
  launch("gelu_tanh_mul", gelu_tanh_mul_kernel, blocks_for(n, kThreads), kThreads, 0, stream, gate, up, out, n);
}

void scale(float* x, int64_t n, float factor, cudaStream_t stream) {
  require_ptr(x, "scale", "x");
  require_positive(n, "scale", "n");
  launch("scale", scale_kernel, blocks_for(n, kThreads), kThreads, 0, stream, x, n, factor);
}

void softcap(float* x, int64_t n, float cap, cudaStream_t stream) {
  require_ptr(x, "softcap", "x");
  require_positive(n, "softcap", "n");
  require(cap > 0.0f, "softcap", [&] { return "cap must be > 0, got " + std::to_string(cap); });
  launch("softcap", softcap_kernel, blocks_for(n, kThreads), kThreads, 0, stream, x, n, cap);
}

}  // namespace kvinfer::cuda
