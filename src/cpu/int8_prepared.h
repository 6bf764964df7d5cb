#pragma once
// Weight rows unpacked once for prefill's 8-bit activation tiles (linear_int8_avx512.h, and the
// AVX2 tiles of linear_avx2.h for Q4_0 and Q4_1): the layout both kernels read, 64-byte aligned.
// Each 32-value block of up to 16 weight rows becomes one record; rows past the last are zeros.
#include <cstddef>
#include <cstdint>

#include "kvinfer/dtype.h"

namespace kvinfer::cpu {

// One 32-value block of 16 Q4_0 or Q4_1 weight rows: group g is rows 4g .. 4g + 3, one to a
// 128-bit lane (a 256-bit register holds rows 4g + 2k and 4g + 2k + 1 from byte 32k).
struct Q4Prepared {
  uint8_t lo[4][64];  // group g: row 4g + i's codes of values 0..15 (low nibbles) at bytes 16i ..
  uint8_t hi[4][64];  // ... and of values 16..31 (high nibbles)
  float d[4][16];     // group g: row 4g + i's d_w in lanes 4i .. 4i + 3
  float f[16];        // row c's offset factor: Q4_1's m_w, Q4_0's d_w
};
static_assert(sizeof(Q4Prepared) == 832);

// One 32-value block of 8 Q8_0 weight rows (a half of the 16): pair p is rows 2p and 2p + 1, one
// to a 256-bit half. The 16 rows' records go half 0's blocks, then half 1's.
struct Q8Prepared {
  int8_t w[4][64];      // pair p: row 2p's 32 codes, then row 2p + 1's
  int32_t negc[4][16];  // pair p, lane 8h + l: −128 · (w_4l + w_4l+1 + w_4l+2 + w_4l+3) of row 2p + h
  float d[4][16];       // pair p: row 2p's d_w in lanes 0..7, row 2p + 1's in lanes 8..15
};
static_assert(sizeof(Q8Prepared) == 768);

// The most weight rows one prepared block holds.
inline constexpr int64_t kInt8PreparedRows = 16;

// The bytes of the records of 16 rows of `in` values (a multiple of 32) of type t (Q8_0, Q4_0 or
// Q4_1): 48 · in for Q8_0, 26 · in for Q4.
constexpr size_t int8_prepared_bytes(DType t, int64_t in) {
  const auto blocks = static_cast<size_t>(in / 32);
  return t == DType::Q8_0 ? 2 * blocks * sizeof(Q8Prepared) : blocks * sizeof(Q4Prepared);
}

}  // namespace kvinfer::cpu
