// Mixture-of-experts kernels (cuda_moe.h): routing, the chosen experts' GEMVs picked on the
// device, their weighted sum, the shared expert's gate.
//
// moe_gemv_kernel: a warp per output row of one (row, expert) pair; lanes take 32-value groups in
// turn (a quantised group decoded with kernels/core/quant.h, the CPU's code), a warp butterfly
// sums them: a fixed order, so the bits depend on the shape only.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "core/convert.h"
#include "core/moe.h"
#include "core/quant.h"
#include "cuda_moe.h"
#include "kvinfer/error.h"
#include "launch.h"

namespace kvinfer::cuda {
namespace {

constexpr int kWarp = 32;
constexpr int kRowWarps = 4;  // output rows a block of moe_gemv_kernel
constexpr int kThreads = 256;
constexpr int kGroup = core::kQuantGroup;
constexpr unsigned kFullMask = 0xffffffffu;
constexpr int64_t kMaxGridY = 65535;

void require(bool ok, const char* op, const std::string& what) {
  if (!ok) throw Error(ErrorKind::InvalidArgument, std::string(op) + ": " + what);
}

unsigned blocks_for(int64_t total, int threads) {
  const int64_t b = (total + threads - 1) / threads;
  return static_cast<unsigned>(b < 1 ? 1 : b > (1 << 20) ? (1 << 20) : b);
}

__global__ void moe_route_kernel(const float* logits, int64_t n, int64_t experts, int64_t k, bool normalize,
                                 int32_t* ids, float* weights) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= n) return;
  core::route_top_k(logits + t * experts, static_cast<int>(experts), static_cast<int>(k), normalize, ids + t * k,
                    weights + t * k);
}

template <DType T>
__device__ __forceinline__ float widen1(const std::byte* row, int64_t c) {
  if constexpr (T == DType::F32) return reinterpret_cast<const float*>(row)[c];
  else if constexpr (T == DType::F16) return core::f16_to_f32(reinterpret_cast<const uint16_t*>(row)[c]);
  else return core::bf16_to_f32(reinterpret_cast<const uint16_t*>(row)[c]);
}

template <DType T>
__global__ void __launch_bounds__(kRowWarps* kWarp)
    moe_gemv_kernel(ExpertMatrices experts, const int32_t* ids, int64_t rows, int64_t cols, const float* x,
                    int64_t x_per, float* y) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp, warp = static_cast<int>(threadIdx.x) / kWarp;
  const int64_t pair = blockIdx.y, row = static_cast<int64_t>(blockIdx.x) * kRowWarps + warp;
  if (row >= rows) return;  // the whole warp: no lane is left for the butterfly
  const std::byte* w = experts.w[ids[pair]] + static_cast<int64_t>(dtype_row_bytes(T, cols)) * row;
  const float* xr = x + (pair / x_per) * cols;
  float acc = 0.0f;
  if constexpr (T == DType::F32 || T == DType::F16 || T == DType::BF16) {
    for (int64_t c = lane; c < cols; c += kWarp) acc = fmaf(widen1<T>(w, c), xr[c], acc);
  } else {
    constexpr int kBlockValues = static_cast<int>(dtype_block(T).elements);
    constexpr int kBlockBytes = static_cast<int>(dtype_block(T).bytes);
    constexpr int kGroupsPerBlock = kBlockValues / kGroup;
    float v[kGroup];
    for (int64_t g = lane; g < cols / kGroup; g += kWarp) {
      core::dequantize_group<T>(w + (g / kGroupsPerBlock) * kBlockBytes, static_cast<int>(g % kGroupsPerBlock), v);
      const float* xg = xr + g * kGroup;
#pragma unroll
      for (int j = 0; j < kGroup; ++j) acc = fmaf(v[j], xg[j], acc);
    }
  }
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(kFullMask, acc, o);
  if (lane == 0) y[pair * rows + row] = acc;
}

__global__ void moe_combine_kernel(const float* y, const float* weights, int64_t n, int64_t k, int64_t dim,
                                   float* out, const int32_t* rows) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n * dim; i += stride) {
    const int64_t t = i / dim, c = i % dim;
    float s = 0.0f;
    for (int64_t j = 0; j < k; ++j) {
      const int64_t row = rows != nullptr ? rows[t * k + j] : t * k + j;
      s = __fadd_rn(s, __fmul_rn(y[row * dim + c], weights[t * k + j]));
    }
    out[i] = s;
  }
}

__global__ void moe_gather_kernel(const float* x, const int32_t* pairs_of, int64_t pairs, int64_t k, int64_t dim,
                                  float* xg) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < pairs * dim; i += stride)
    xg[i] = x[pairs_of[i / dim] / k * dim + i % dim];
}

__global__ void add_gated_kernel(float* out, const float* gate, const float* y, int64_t n, int64_t dim) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n * dim; i += stride)
    out[i] = __fadd_rn(out[i], __fmul_rn(core::sigmoid(gate[i / dim]), y[i]));
}

template <DType T>
void launch_gemv(const ExpertMatrices& experts, const int32_t* ids, int64_t pairs, int64_t rows, int64_t cols,
                 const float* x, int64_t x_per, float* y, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((rows + kRowWarps - 1) / kRowWarps), static_cast<unsigned>(pairs));
  launch("moe_gemv", moe_gemv_kernel<T>, grid, dim3(kRowWarps * kWarp), 0, stream, experts, ids, rows, cols, x, x_per, y);
}

}  // namespace

void moe_route(const float* logits, int64_t n, int64_t experts, int64_t k, bool normalize, int32_t* ids,
               float* weights, cudaStream_t stream) {
  require(logits && ids && weights, "moe_route", "a null pointer");
  require(n > 0 && k > 0 && k <= experts && experts <= core::kMaxExperts, "moe_route",
          "needs n > 0 and 0 < k <= experts <= " + std::to_string(core::kMaxExperts));
  launch("moe_route", moe_route_kernel, dim3(blocks_for(n, 64)), dim3(64), 0, stream, logits, n, experts, k, normalize,
         ids, weights);
}

void moe_gemv(DType dtype, const ExpertMatrices& experts, int64_t num_experts, const int32_t* ids, int64_t pairs,
              int64_t rows, int64_t cols, const float* x, int64_t x_per, float* y, cudaStream_t stream) {
  require(ids && x && y, "moe_gemv", "a null pointer");
  require(num_experts > 0 && num_experts <= core::kMaxExperts, "moe_gemv", "expert count out of range");
  for (int64_t e = 0; e < num_experts; ++e) require(experts.w[e] != nullptr, "moe_gemv", "a null expert matrix");
  require(pairs > 0 && rows > 0 && cols > 0 && x_per > 0 && pairs % x_per == 0, "moe_gemv",
          "bad shape: pairs " + std::to_string(pairs) + ", rows " + std::to_string(rows) + ", cols " +
              std::to_string(cols) + ", x_per " + std::to_string(x_per));
  require(!is_quantized(dtype) || cols % static_cast<int64_t>(dtype_block(dtype).elements) == 0, "moe_gemv",
          "a quantised row must be whole blocks");
  // The grid's y dimension is at most 65535 pairs: longer calls go in chunks of whole rows' pairs.
  const int64_t chunk = kMaxGridY / x_per * x_per;
  for (int64_t p0 = chunk; p0 < pairs; p0 += chunk)
    moe_gemv(dtype, experts, num_experts, ids + p0, std::min(chunk, pairs - p0), rows, cols, x + p0 / x_per * cols,
             x_per, y + p0 * rows, stream);
  pairs = std::min(chunk, pairs);
  switch (dtype) {
    case DType::F32: return launch_gemv<DType::F32>(experts, ids, pairs, rows, cols, x, x_per, y, stream);
    case DType::F16: return launch_gemv<DType::F16>(experts, ids, pairs, rows, cols, x, x_per, y, stream);
    case DType::BF16: return launch_gemv<DType::BF16>(experts, ids, pairs, rows, cols, x, x_per, y, stream);
    case DType::Q8_0: return launch_gemv<DType::Q8_0>(experts, ids, pairs, rows, cols, x, x_per, y, stream);
    case DType::Q4_0: return launch_gemv<DType::Q4_0>(experts, ids, pairs, rows, cols, x, x_per, y, stream);
    case DType::Q4_1: return launch_gemv<DType::Q4_1>(experts, ids, pairs, rows, cols, x, x_per, y, stream);
    case DType::Q5_0: return launch_gemv<DType::Q5_0>(experts, ids, pairs, rows, cols, x, x_per, y, stream);
    case DType::Q5_1: return launch_gemv<DType::Q5_1>(experts, ids, pairs, rows, cols, x, x_per, y, stream);
    case DType::Q4_K: return launch_gemv<DType::Q4_K>(experts, ids, pairs, rows, cols, x, x_per, y, stream);
    case DType::Q5_K: return launch_gemv<DType::Q5_K>(experts, ids, pairs, rows, cols, x, x_per, y, stream);
    case DType::Q6_K: return launch_gemv<DType::Q6_K>(experts, ids, pairs, rows, cols, x, x_per, y, stream);
    default: break;
  }
  throw Error(ErrorKind::Unsupported, std::string("moe_gemv: unsupported weight dtype ") + std::string(dtype_name(dtype)));
}

void moe_combine(const float* y, const float* weights, int64_t n, int64_t k, int64_t dim, float* out,
                 cudaStream_t stream, const int32_t* rows) {
  require(y && weights && out && n > 0 && k > 0 && dim > 0, "moe_combine", "bad arguments");
  launch("moe_combine", moe_combine_kernel, dim3(blocks_for(n * dim, kThreads)), dim3(kThreads), 0, stream, y, weights,
         n, k, dim, out, rows);
}

void moe_gather(const float* x, const int32_t* pairs_of, int64_t pairs, int64_t k, int64_t dim, float* xg,
                cudaStream_t stream) {
  require(x && pairs_of && xg && pairs > 0 && k > 0 && dim > 0, "moe_gather", "bad arguments");
  launch("moe_gather", moe_gather_kernel, dim3(blocks_for(pairs * dim, kThreads)), dim3(kThreads), 0, stream, x,
         pairs_of, pairs, k, dim, xg);
}

void add_gated(float* out, const float* gate, const float* y, int64_t n, int64_t dim, cudaStream_t stream) {
  require(out && gate && y && n > 0 && dim > 0, "add_gated", "bad arguments");
  launch("add_gated", add_gated_kernel, dim3(blocks_for(n * dim, kThreads)), dim3(kThreads), 0, stream, out, gate, y, n,
         dim);
}

}  // namespace kvinfer::cuda
