#pragma once
// The key rotation of 8-bit caches (kernels/core/kv_quant.h: hadamard_rotate, rotate_query) on
// the device, by a warp or a whole block over rows in shared memory. The same butterfly stages in
// the same order (len = 1, 2, …, b/2), each output one addition or subtraction of two values of
// the stage before: the CPU's bits, whichever thread takes which pair.
#include <cuda_runtime.h>

#include "core/kv_quant.h"

namespace kvinfer::cuda {

// Pair p (0 .. n/2 - 1) of a stage of width len: the index i of the pair (i, i + len), i & len == 0.
__device__ __forceinline__ int butterfly_pair(int p, int len) { return ((p & ~(len - 1)) << 1) | (p & (len - 1)); }

// x (hd) ← H x, blockwise, by the 32 lanes of a warp (all of them call it, x in shared memory).
// The caller's writes to x must be visible to the warp (a __syncwarp) before; the rotated row is
// visible to the warp on return.
__device__ __forceinline__ void hadamard_rotate_warp(float* x, int hd, int lane) {
  const int b = core::kv_rotation_block(hd), pairs = hd / 2;
  for (int len = 1; len < b; len <<= 1) {
    __syncwarp();  // the stage before (or the caller's copy) is complete
    for (int p = lane; p < pairs; p += 32) {
      const int i = butterfly_pair(p, len);
      const float a = x[i], c = x[i + len];
      x[i] = a + c;
      x[i + len] = a - c;
    }
  }
  __syncwarp();
}

// Each of `rows` rows of hd values (pitch floats apart, in shared memory) ← H row · s, by the
// block's `threads` threads (every one of them calls it, at the same place). s (a query's scale,
// with rotate_query's 1/b in it) multiplies the last stage's sums, as a later pass would. Each
// stage starts at a barrier, so the caller's writes need none before; the caller synchronises
// after (the last stage is not waited for).
__device__ __forceinline__ void hadamard_rotate_rows(float* x, int rows, int hd, int pitch, float s, int tid,
                                                     int threads) {
  const int b = core::kv_rotation_block(hd), half = hd / 2, pairs = rows * half;
  for (int len = 1; len < b; len <<= 1) {
    __syncthreads();  // the stage before (or the caller's copy) is complete
    const float m = 2 * len == b ? s : 1.0f;  // x · 1 is x: the earlier stages are plain sums
    for (int p = tid; p < pairs; p += threads) {
      float* row = x + (p / half) * pitch;
      const int i = butterfly_pair(p % half, len);
      const float a = row[i], c = row[i + len];
      row[i] = (a + c) * m;
      row[i + len] = (a - c) * m;
    }
  }
  if (b == 1) {  // no stage (an odd hd): the scale alone
    __syncthreads();
    for (int e = tid; e < rows * hd; e += threads) x[(e / hd) * pitch + e % hd] *= s;
  }
}

}  // namespace kvinfer::cuda
