// Quantised weights (ggml's block formats) on the device: one thread dequantises one 32-value
// group with kernels/core/quant.h, so every value is bit-identical to cpu::to_f32's. Linear
// layers dequantise their matrix into an f16 scratch before the cuBLAS GEMM; the embedding
// dequantises only the gathered rows, in f32.
#include <cuda_runtime.h>

#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "core/convert.h"
#include "core/quant.h"
#include "cuda_check.h"
#include "cuda_ops.h"
#include "launch.h"

namespace kvinfer::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int64_t kMaxBlocks = 1 << 20;  // grid-stride loops cover the rest
constexpr int kGroup = core::kQuantGroup;

// Calls f(std::integral_constant<DType, T>{}) for a quantised T: one kernel instance per format.
template <typename F>
void visit_quantized(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::Q8_0: return f(std::integral_constant<DType, DType::Q8_0>{});
    case DType::Q4_0: return f(std::integral_constant<DType, DType::Q4_0>{});
    case DType::Q4_1: return f(std::integral_constant<DType, DType::Q4_1>{});
    case DType::Q5_0: return f(std::integral_constant<DType, DType::Q5_0>{});
    case DType::Q5_1: return f(std::integral_constant<DType, DType::Q5_1>{});
    case DType::Q4_K: return f(std::integral_constant<DType, DType::Q4_K>{});
    case DType::Q5_K: return f(std::integral_constant<DType, DType::Q5_K>{});
    case DType::Q6_K: return f(std::integral_constant<DType, DType::Q6_K>{});
    default: break;
  }
  throw Error(ErrorKind::InvalidArgument, std::string("cuda::") + op + ": " + std::string(dtype_name(t)) + " is not a quantised type");
}

[[noreturn]] void fail(const char* op, const std::string& what) { throw Error(ErrorKind::InvalidArgument, std::string("cuda::") + op + ": " + what); }

void require(bool ok, const char* op, const char* what) {
  if (!ok) fail(op, what);
}

// rows/n and cols as the kernels index them; cols whole blocks. Messages are built on failure only.
void check_shape(DType t, int64_t rows, int64_t cols, const char* op) {
  if (rows <= 0) fail(op, "rows must be positive, got " + std::to_string(rows));
  if (cols <= 0 || cols % dtype_block(t).elements != 0)
    fail(op, "cols (" + std::to_string(cols) + ") must be a positive multiple of the " + std::string(dtype_name(t)) +
                 " block size " + std::to_string(dtype_block(t).elements));
  require(rows <= std::numeric_limits<int64_t>::max() / cols, op, "rows · cols overflows");
}

unsigned blocks_for(int64_t total) {
  const int64_t b = (total + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < kMaxBlocks ? b : kMaxBlocks);
}

// The block and group of group index `gi` of a (rows, cols) matrix of T, as a pointer + index.
template <DType T>
__device__ __forceinline__ const std::byte* group_block(const std::byte* w, int64_t row, int64_t group_in_row,
                                                        int64_t cols, int& g) {
  constexpr int64_t kGroupsPerBlock = dtype_block(T).elements / kGroup;
  g = static_cast<int>(group_in_row % kGroupsPerBlock);
  const int64_t block = group_in_row / kGroupsPerBlock;
  return w + static_cast<int64_t>(dtype_row_bytes(T, cols)) * row + block * dtype_block(T).bytes;
}

// out (rows, cols) f16; thread = one group. A group's 32 halves are 64 aligned bytes of `out`
// (cols is a multiple of 32 and out 16-byte aligned), written as four 16-byte stores.
template <DType T>
__global__ void dequantize_f16_kernel(const std::byte* w, int64_t rows, int64_t cols, uint16_t* out) {
  const int64_t groups_per_row = cols / kGroup;
  for (int64_t gi = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; gi < rows * groups_per_row;
       gi += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = gi / groups_per_row, gr = gi % groups_per_row;
    int g;
    const std::byte* block = group_block<T>(w, row, gr, cols, g);
    float v[kGroup];
    core::dequantize_group<T>(block, g, v);
    uint4* dst = reinterpret_cast<uint4*>(out + row * cols + gr * kGroup);
#pragma unroll
    for (int q = 0; q < kGroup / 8; ++q) {
      uint32_t h[4];
#pragma unroll
      for (int k = 0; k < 4; ++k)
        h[k] = static_cast<uint32_t>(core::f32_to_f16(v[8 * q + 2 * k])) |
               (static_cast<uint32_t>(core::f32_to_f16(v[8 * q + 2 * k + 1])) << 16);
      dst[q] = make_uint4(h[0], h[1], h[2], h[3]);
    }
  }
}

// out (n, cols) f32 = rows ids of table (vocab, cols); thread = one group of one gathered row.
// An id outside [0, vocab) gives a NaN row (ids are checked on the host; a missed check is loud).
template <DType T>
__global__ void embed_kernel(const std::byte* table, int64_t vocab, int64_t cols, const int32_t* ids, int64_t n,
                             float* out) {
  const int64_t groups_per_row = cols / kGroup;
  for (int64_t gi = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; gi < n * groups_per_row;
       gi += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = gi / groups_per_row, gr = gi % groups_per_row;
    float* dst = out + t * cols + gr * kGroup;  // (32)
    const int32_t id = ids[t];
    if (id < 0 || id >= vocab) {
      for (int j = 0; j < kGroup; ++j) dst[j] = NAN;
      continue;
    }
    int g;
    const std::byte* block = group_block<T>(table, id, gr, cols, g);
    float v[kGroup];
    core::dequantize_group<T>(block, g, v);
    for (int j = 0; j < kGroup; ++j) dst[j] = v[j];
  }
}

}  // namespace

void dequantize_f16(DType dtype, const void* w, int64_t rows, int64_t cols, void* out, cudaStream_t stream) {
  require(w != nullptr && out != nullptr, "dequantize_f16", "w and out must be non-null device pointers");
  require(reinterpret_cast<uintptr_t>(out) % 16 == 0, "dequantize_f16", "out must be 16-byte aligned");
  check_shape(dtype, rows, cols, "dequantize_f16");
  visit_quantized(dtype, "dequantize_f16", [&](auto t) {
    launch("dequantize_f16", dequantize_f16_kernel<decltype(t)::value>, blocks_for(rows * (cols / kGroup)), kThreads,
           0, stream, static_cast<const std::byte*>(w), rows, cols, static_cast<uint16_t*>(out));
  });
}

void embed_quantized(DType table_dtype, const void* table, int64_t vocab, int64_t hidden, const int32_t* ids,
                     int64_t n, float* out, cudaStream_t stream) {
  require(table != nullptr && ids != nullptr && out != nullptr, "embed_quantized",
          "table, ids and out must be non-null device pointers");
  if (vocab <= 0) fail("embed_quantized", "vocab must be positive, got " + std::to_string(vocab));
  check_shape(table_dtype, n, hidden, "embed_quantized");
  visit_quantized(table_dtype, "embed_quantized", [&](auto t) {
    launch("embed_quantized", embed_kernel<decltype(t)::value>, blocks_for(n * (hidden / kGroup)), kThreads, 0, stream,
        static_cast<const std::byte*>(table), vocab, hidden, ids, n, out);
  });
}

}  // namespace kvinfer::cuda
