#pragma once
// Tensor-core matrix multiply-accumulate of one warp: mma.sync.aligned.m16n8k16.row.col.f32.T.T.f32
// with T = f16 or bf16 (sm_80 and later), D (16 × 8, f32) = A (16 × 16, T) · B (16 × 8, T) + C.
//
// Fragments, per lane, as the PTX ISA lays them out ("Matrix Fragments for mma.m16n8k16 with
// floating point type", docs.nvidia.com/cuda/parallel-thread-execution/
// #warp-level-matrix-fragment-mma-16816-float). g = lane >> 2 (groupID), t = lane % 4
// (threadID_in_group); a register holds two 16-bit elements, the lower-indexed one in bits 0-15:
//   a[0] = A[g][2t, 2t+1]     a[1] = A[g+8][2t, 2t+1]   a[2] = A[g][2t+8, 2t+9]   a[3] = A[g+8][2t+8, 2t+9]
//   b[0] = B[2t, 2t+1][g]     b[1] = B[2t+8, 2t+9][g]   (B indexed [k][n])
//   c[0], c[1] = C[g][2t, 2t+1]                          c[2], c[3] = C[g+8][2t, 2t+1]   (D likewise)
// Every lane of the warp must call it together (it is .sync.aligned: same instruction, full warp).
//
// In the simulation build (sim/, KVINFER_CUDA_SIM) it is kvi_sim::warp_mma_m16n8k16: the 32 lanes
// meet at the call site, the warp's fragments are gathered by this layout and D is computed with
// exact products summed in k order in f32. Real tensor cores do not promise that rounding, so the
// kernels' tests compare with tolerances.
#include <cuda_runtime.h>

#include <cstdint>

#include "core/convert.h"
#include "kvinfer/dtype.h"

namespace kvinfer::cuda {

#if defined(KVINFER_CUDA_SIM)
template <DType T>
inline void mma_m16n8k16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], const float (&c)[4],
                         const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  static_assert(T == DType::F16 || T == DType::BF16, "mma_m16n8k16: f16 or bf16 operands");
  kvi_sim::warp_mma_m16n8k16(T == DType::BF16, d, a, b, c, file, line);
}
#else
template <DType T>
__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                                             const float (&c)[4]) {
  static_assert(T == DType::F16 || T == DType::BF16, "mma_m16n8k16: f16 or bf16 operands");
#if defined(__CUDA_ARCH__)
#if __CUDA_ARCH__ < 800
#error "mma.sync m16n8k16 with f32 accumulation of f16/bf16 needs sm_80 or later"
#endif
  if constexpr (T == DType::F16) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%10, %11, %12, %13};"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]),
                   "f"(c[2]), "f"(c[3]));
  } else {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%10, %11, %12, %13};"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]),
                   "f"(c[2]), "f"(c[3]));
  }
#else
  (void)d, (void)a, (void)b, (void)c;  // the host pass of nvcc: no body
#endif
}
#endif

// Two f32 values rounded to T (nearest even) and packed into one fragment register: lo in bits
// 0-15, hi in bits 16-31. On the device one cvt (its first source goes to the upper half).
template <DType T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
#if defined(__CUDA_ARCH__)
  uint32_t r;
  if constexpr (T == DType::F16) asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  else asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
#else
  if constexpr (T == DType::F16) return core::f32_to_f16(lo) | static_cast<uint32_t>(core::f32_to_f16(hi)) << 16;
  else return core::f32_to_bf16(lo) | static_cast<uint32_t>(core::f32_to_bf16(hi)) << 16;
#endif
}

}  // namespace kvinfer::cuda
