// Matrix-vector products for n <= 8 input rows (decode and small batches): y = x · Wᵀ (+ bias).
//
// gemv_quant_kernel: at n <= 8 the product is bound by reading W, so W is read once, in its
// stored blocks: a dequantised f16 copy would be written and read again, 7× a Q4_K matrix's own
// bytes. x comes from L1/L2, 4n bytes a column per block, already 7n× Q4_K's 0.56: at n = 1 a
// block takes two output rows so that each x value loaded serves both (576 rows: 288 blocks for
// 132 SMs); at n > 1 one row (more registers would spill). Up to 8 warps split a long row. A warp stages 32 groups' blocks in shared memory with
// 16-byte loads (bytewise at unaligned heads and tails: rows of 18, 20, 22 or 34-byte blocks
// start anywhere), then each lane decodes one 32-value group with kernels/core/quant.h, the
// CPU's code, so the values are cpu::to_f32's bit for bit, and uses it for all n inputs.
//
// gemv_float_kernel: f32/f16/bf16 weights, one block per row, a lane reads 8 consecutive values
// with one or two 16-byte loads (scalar loads when the row or x is not 16-byte aligned).
//
// Both: fixed reduction order (each thread's columns in order, a warp butterfly, then the warps
// in order), so the bits depend on the shape only, never on timing; bias added last.
#include <cuda_runtime.h>

#include <cstdint>
#include <limits>
#include <string>

#include "core/convert.h"
#include "core/quant.h"
#include "cuda_gemv.h"
#include "kvinfer/error.h"
#include "launch.h"

namespace kvinfer::cuda {
namespace {

constexpr int kWarp = 32;
constexpr int kMaxWarps = 8;  // threads per row: at most 256
constexpr int kGroup = core::kQuantGroup;
// Output rows a block of the quantised kernel: for n = 1 two, which share each x value loaded;
// for more, one (two rows' decoded groups and n sums each spill registers at n >= 4 on sm_90).
constexpr int quant_rows(int n) { return n == 1 ? 2 : 1; }
constexpr unsigned kFullMask = 0xffffffffu;

// Warps per row when each lane takes `units` of work in turn: enough that every lane has one,
// at most kMaxWarps.
int warps_for(int64_t units) {
  const int64_t w = (units + kWarp - 1) / kWarp;
  return static_cast<int>(w < 1 ? 1 : w > kMaxWarps ? kMaxWarps : w);
}

__device__ __forceinline__ bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

// The block's sums for rows row0 .. row0+R-1 (those < rows) into y (n, rows): warp butterflies,
// then the warps' partials summed in warp order by thread r·N + t, plus the bias. red: (warps, R,
// N) shared.
template <int R, int N>
__device__ void reduce_store(float (&acc)[R][N], float* red, int64_t row0, int64_t rows, const float* bias, float* y) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp, warp = static_cast<int>(threadIdx.x) / kWarp;
  const int warps = static_cast<int>(blockDim.x) / kWarp;
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < N; ++t)
      for (int o = 16; o > 0; o >>= 1) acc[r][t] += __shfl_xor_sync(kFullMask, acc[r][t], o);
  if (lane == 0)
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int t = 0; t < N; ++t) red[(warp * R + r) * N + t] = acc[r][t];
  __syncthreads();
  const int r = static_cast<int>(threadIdx.x) / N, t = static_cast<int>(threadIdx.x) % N;
  if (r < R && row0 + r < rows) {
    const int64_t row = row0 + r;
    float s = red[r * N + t];
    for (int w = 1; w < warps; ++w) s += red[(w * R + r) * N + t];
    if (bias != nullptr) s += bias[row];
    y[t * rows + row] = s;
  }
}

// ---- quantised weights ------------------------------------------------------------------------

template <DType T>
struct QuantShape {
  static constexpr int kBlockValues = static_cast<int>(dtype_block(T).elements);
  static constexpr int kBlockBytes = static_cast<int>(dtype_block(T).bytes);
  static constexpr int kGroupsPerBlock = kBlockValues / kGroup;
  static constexpr int kChunkBlocks = kWarp / kGroupsPerBlock;  // blocks a warp decodes a step: 32 groups
  // A warp's staging buffer: the chunk plus up to 15 bytes of alignment slack, a multiple of 16.
  static constexpr int kStageBytes = (kChunkBlocks * kBlockBytes + 15 + 15) / 16 * 16;
};

// Copies the warp's `bytes` bytes at src into stage with 16-byte loads (bytewise at the unaligned
// head and tail) and returns where src's first byte landed: stage mirrors the 16-byte aligned
// address below src, so that both sides of each 16-byte copy are aligned. stage: (bytes + 15).
__device__ const std::byte* stage_warp(const std::byte* src, int bytes, std::byte* stage, int lane) {
  const uintptr_t s = reinterpret_cast<uintptr_t>(src), base = s & ~uintptr_t{15};
  const uintptr_t lo = (s + 15) & ~uintptr_t{15}, hi = (s + static_cast<uintptr_t>(bytes)) & ~uintptr_t{15};
  if (lo < hi) {
    for (uintptr_t a = lo + 16 * static_cast<uintptr_t>(lane); a < hi; a += 16 * kWarp)
      *reinterpret_cast<uint4*>(stage + (a - base)) = *reinterpret_cast<const uint4*>(a);
    const int head = static_cast<int>(lo - s), tail = static_cast<int>(s + static_cast<uintptr_t>(bytes) - hi);
    if (lane < head) stage[s - base + lane] = src[lane];
    if (lane >= 16 && lane - 16 < tail) stage[hi - base + (lane - 16)] = reinterpret_cast<const std::byte*>(hi)[lane - 16];
  } else {
    for (int i = lane; i < bytes; i += kWarp) stage[s - base + i] = src[i];
  }
  __syncwarp();
  return stage + (s - base);
}

// p[r] = Σ v[r][j] · x[j], j = 0..31 in order, for each of R rows: x read once for all of them.
// x: (32) f32, 16-byte aligned when `vec`.
template <int R>
__device__ __forceinline__ void dot32(const float (&v)[R][kGroup], const float* x, bool vec, float (&p)[R]) {
#pragma unroll
  for (int r = 0; r < R; ++r) p[r] = 0.0f;
  if (vec) {
#pragma unroll
    for (int j = 0; j < kGroup; j += 4) {
      const float4 a = *reinterpret_cast<const float4*>(x + j);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        p[r] = fmaf(v[r][j], a.x, p[r]), p[r] = fmaf(v[r][j + 1], a.y, p[r]);
        p[r] = fmaf(v[r][j + 2], a.z, p[r]), p[r] = fmaf(v[r][j + 3], a.w, p[r]);
      }
    }
  } else {
#pragma unroll
    for (int j = 0; j < kGroup; ++j) {
      const float a = x[j];
#pragma unroll
      for (int r = 0; r < R; ++r) p[r] = fmaf(v[r][j], a, p[r]);
    }
  }
}

// R = quant_rows(N) output rows a block, warp w decoding blocks [w·C, w·C + C) of each, then
// [(w + warps)·C, ...), with C = 32 groups' blocks; lane l takes group l of the warp's chunks.
// The rows share each x value loaded. Dynamic shared memory: (warps, R, kStageBytes) staged
// blocks, then (warps, R, N) f32 partial sums.
template <DType T, int N>
__global__ void __launch_bounds__(kMaxWarps* kWarp)
    gemv_quant_kernel(const std::byte* w, int64_t rows, int64_t cols, const float* x, const float* bias, float* y) {
  using S = QuantShape<T>;
  constexpr int R = quant_rows(N);
  const int lane = static_cast<int>(threadIdx.x) % kWarp, warp = static_cast<int>(threadIdx.x) / kWarp;
  const int warps = static_cast<int>(blockDim.x) / kWarp;
  std::byte* stage = dynamic_shared<std::byte>() + warp * R * S::kStageBytes;                     // (R, kStageBytes)
  float* red = reinterpret_cast<float*>(dynamic_shared<std::byte>() + warps * R * S::kStageBytes);  // (warps, R, N)
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * R;
  const int64_t blocks_per_row = cols / S::kBlockValues;
  const int64_t row_bytes = static_cast<int64_t>(dtype_row_bytes(T, cols));
  const bool vec_x = aligned16(x);  // then every group of x (32 f32, cols a multiple of 32) is aligned too
  float acc[R][N];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < N; ++t) acc[r][t] = 0.0f;
  for (int64_t b0 = static_cast<int64_t>(warp) * S::kChunkBlocks; b0 < blocks_per_row;
       b0 += static_cast<int64_t>(warps) * S::kChunkBlocks) {
    const int blocks = static_cast<int>(blocks_per_row - b0 < S::kChunkBlocks ? blocks_per_row - b0 : S::kChunkBlocks);
    const std::byte* chunk[R];  // (blocks) blocks of each row, staged
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int64_t row = row0 + r < rows ? row0 + r : rows - 1;  // a missing last row repeats one, unstored
      chunk[r] = stage_warp(w + row * row_bytes + b0 * S::kBlockBytes, blocks * S::kBlockBytes,
                            stage + r * S::kStageBytes, lane);
    }
    if (lane < blocks * S::kGroupsPerBlock) {
      float v[R][kGroup];  // values of group `lane` of each row's chunk
#pragma unroll
      for (int r = 0; r < R; ++r)
        core::dequantize_group<T>(chunk[r] + (lane / S::kGroupsPerBlock) * S::kBlockBytes, lane % S::kGroupsPerBlock,
                                  v[r]);
      const int64_t c0 = (b0 * S::kGroupsPerBlock + lane) * kGroup;  // its first column
#pragma unroll
      for (int t = 0; t < N; ++t) {
        float p[R];
        dot32<R>(v, x + t * cols + c0, vec_x, p);
#pragma unroll
        for (int r = 0; r < R; ++r) acc[r][t] += p[r];
      }
    }
    __syncwarp();  // every lane has read the stage before the next chunk overwrites it
  }
  reduce_store<R, N>(acc, red, row0, rows, bias, y);
}

// ---- f32 / f16 / bf16 weights -----------------------------------------------------------------

template <DType T>
__device__ __forceinline__ float widen1(const std::byte* row, int64_t c) {
  if constexpr (T == DType::F32) return reinterpret_cast<const float*>(row)[c];
  else if constexpr (T == DType::F16) return core::f16_to_f32(reinterpret_cast<const uint16_t*>(row)[c]);
  else return core::bf16_to_f32(reinterpret_cast<const uint16_t*>(row)[c]);
}

// v = values c .. c+7 of the row (16-byte aligned): two 16-byte loads for f32, one for f16/bf16.
template <DType T>
__device__ __forceinline__ void widen8(const std::byte* row, int64_t c, float (&v)[8]) {
  if constexpr (T == DType::F32) {
    const float4 a = reinterpret_cast<const float4*>(row)[c / 4], b = reinterpret_cast<const float4*>(row)[c / 4 + 1];
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
  } else {
    const uint4 q = reinterpret_cast<const uint4*>(row)[c / 8];
    const uint32_t u[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const auto lo = static_cast<uint16_t>(u[k] & 0xFFFFu), hi = static_cast<uint16_t>(u[k] >> 16);
      v[2 * k] = T == DType::F16 ? core::f16_to_f32(lo) : core::bf16_to_f32(lo);
      v[2 * k + 1] = T == DType::F16 ? core::f16_to_f32(hi) : core::bf16_to_f32(hi);
    }
  }
}

// One block per output row; thread i takes values 8i .. 8i+7, then 8(i + threads) .. (16-byte
// loads) when cols is a multiple of 8 and W and x are aligned, else values i, i + threads, ....
// Dynamic shared memory: (warps, N) f32 partial sums.
// Launch bounds: up to 128 registers a thread (2 blocks of 256 threads an SM). Without the
// minimum ptxas aims at 32 and spills f16 at n = 3; with 4 blocks (64) it spills f16 at n >= 7.
template <DType T, int N>
__global__ void __launch_bounds__(kMaxWarps* kWarp, 2)
    gemv_float_kernel(const std::byte* w, int64_t rows, int64_t cols, const float* x, const float* bias, float* y) {
  const int64_t row = blockIdx.x;
  const std::byte* w_row = w + row * cols * static_cast<int64_t>(dtype_size(T));  // (cols) of T
  const int64_t step = blockDim.x;
  float acc[1][N];  // reduce_store's (rows, N): one row
#pragma unroll
  for (int t = 0; t < N; ++t) acc[0][t] = 0.0f;
  if (cols % 8 == 0 && aligned16(w) && aligned16(x)) {  // rows and x rows are then aligned too
    for (int64_t c = 8 * static_cast<int64_t>(threadIdx.x); c < cols; c += 8 * step) {
      float v[8];
      widen8<T>(w_row, c, v);
#pragma unroll
      for (int t = 0; t < N; ++t) {
        const float4 a = *reinterpret_cast<const float4*>(x + t * cols + c);
        const float4 b = *reinterpret_cast<const float4*>(x + t * cols + c + 4);
        float p = acc[0][t];
        p = fmaf(v[0], a.x, p), p = fmaf(v[1], a.y, p), p = fmaf(v[2], a.z, p), p = fmaf(v[3], a.w, p);
        p = fmaf(v[4], b.x, p), p = fmaf(v[5], b.y, p), p = fmaf(v[6], b.z, p), p = fmaf(v[7], b.w, p);
        acc[0][t] = p;
      }
    }
  } else {
    for (int64_t c = threadIdx.x; c < cols; c += step) {
      const float v = widen1<T>(w_row, c);
#pragma unroll
      for (int t = 0; t < N; ++t) acc[0][t] = fmaf(v, x[t * cols + c], acc[0][t]);
    }
  }
  reduce_store<1, N>(acc, dynamic_shared<float>(), row, rows, bias, y);
}

// ---- host side ----------------------------------------------------------------------------------

[[noreturn]] void fail(const std::string& what) { throw Error(ErrorKind::InvalidArgument, "cuda::gemv: " + what); }

template <DType T, int N>
void launch_gemv(const void* w, int64_t rows, int64_t cols, const float* x, const float* bias, float* y,
                 cudaStream_t stream) {
  const auto* wb = static_cast<const std::byte*>(w);
  if constexpr (is_quantized(T)) {
    const int warps = warps_for(cols / kGroup);
    constexpr int R = quant_rows(N);
    const size_t smem = static_cast<size_t>(warps) * R * (QuantShape<T>::kStageBytes + N * sizeof(float));
    const auto blocks = static_cast<unsigned>((rows + R - 1) / R);
    launch("gemv_quant", gemv_quant_kernel<T, N>, dim3(blocks), dim3(warps * kWarp), smem, stream, wb, rows, cols, x,
           bias, y);
  } else {
    const int warps = warps_for((cols + 7) / 8);
    const size_t smem = static_cast<size_t>(warps) * N * sizeof(float);
    launch("gemv_float", gemv_float_kernel<T, N>, dim3(static_cast<unsigned>(rows)), dim3(warps * kWarp), smem, stream,
           wb, rows, cols, x, bias, y);
  }
}

template <DType T>
void launch_for_n(int64_t n, const void* w, int64_t rows, int64_t cols, const float* x, const float* bias, float* y,
                  cudaStream_t stream) {
  static_assert(kGemvMaxRows == 8);
  switch (n) {
    case 1: return launch_gemv<T, 1>(w, rows, cols, x, bias, y, stream);
    case 2: return launch_gemv<T, 2>(w, rows, cols, x, bias, y, stream);
    case 3: return launch_gemv<T, 3>(w, rows, cols, x, bias, y, stream);
    case 4: return launch_gemv<T, 4>(w, rows, cols, x, bias, y, stream);
    case 5: return launch_gemv<T, 5>(w, rows, cols, x, bias, y, stream);
    case 6: return launch_gemv<T, 6>(w, rows, cols, x, bias, y, stream);
    case 7: return launch_gemv<T, 7>(w, rows, cols, x, bias, y, stream);
    default: return launch_gemv<T, 8>(w, rows, cols, x, bias, y, stream);
  }
}

}  // namespace

void gemv(DType w_dtype, const void* w, int64_t rows, int64_t cols, const float* x, int64_t n, const float* bias,
          float* y, cudaStream_t stream) {
  // Checks first; messages are built only on failure.
  if (w == nullptr || x == nullptr || y == nullptr) fail("w, x and y must be non-null device pointers");
  if (n < 1 || n > kGemvMaxRows) fail("n must be in 1 .. 8, got " + std::to_string(n));
  if (rows < 1 || rows > std::numeric_limits<int>::max())
    fail("rows must be in 1 .. 2^31 - 1 (one thread block a row), got " + std::to_string(rows));
  const int64_t block = dtype_block(w_dtype).elements;
  if (cols < 1 || cols % block != 0)
    fail("cols (" + std::to_string(cols) + ") must be a positive multiple of the " + std::string(dtype_name(w_dtype)) +
         " block size " + std::to_string(block));
  if (rows > std::numeric_limits<int64_t>::max() / cols / 4) fail("rows · cols overflows");
  switch (w_dtype) {
    case DType::F32: return launch_for_n<DType::F32>(n, w, rows, cols, x, bias, y, stream);
    case DType::F16: return launch_for_n<DType::F16>(n, w, rows, cols, x, bias, y, stream);
    case DType::BF16: return launch_for_n<DType::BF16>(n, w, rows, cols, x, bias, y, stream);
    case DType::Q8_0: return launch_for_n<DType::Q8_0>(n, w, rows, cols, x, bias, y, stream);
    case DType::Q4_0: return launch_for_n<DType::Q4_0>(n, w, rows, cols, x, bias, y, stream);
    case DType::Q4_1: return launch_for_n<DType::Q4_1>(n, w, rows, cols, x, bias, y, stream);
    case DType::Q5_0: return launch_for_n<DType::Q5_0>(n, w, rows, cols, x, bias, y, stream);
    case DType::Q5_1: return launch_for_n<DType::Q5_1>(n, w, rows, cols, x, bias, y, stream);
    case DType::Q4_K: return launch_for_n<DType::Q4_K>(n, w, rows, cols, x, bias, y, stream);
    case DType::Q5_K: return launch_for_n<DType::Q5_K>(n, w, rows, cols, x, bias, y, stream);
    case DType::Q6_K: return launch_for_n<DType::Q6_K>(n, w, rows, cols, x, bias, y, stream);
    default: break;
  }
  fail("no kernel for dtype " + std::string(dtype_name(w_dtype)));
}

}  // namespace kvinfer::cuda
