#pragma once
// Weight rows unpacked once for prefill's 8-bit activation tiles (linear_int8_avx512.h, and the
// AVX2 tiles of linear_avx2.h): the layout both kernels read, 64-byte aligned. Each 32-value
// block of up to 16 weight rows becomes one record; rows past the last are zeros. A 512-bit
// register holds a group's 4 rows × their 4 partial sums I_m (linear_int8.h), a 256-bit one 2
// rows × 4.
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

// One 32-value block of 16 Q8_0 weight rows, in the same groups. negc is for the AVX-512 VNNI
// tiles, whose vpdpbusd takes the input's codes shifted by 128 as unsigned bytes: starting the
// sum from it, (q + 128) · w − 128 · w = q · w. The AVX2 tiles leave it unwritten.
struct Q8Prepared {
  int8_t lo[4][64];     // group g: row 4g + i's codes of values 0..15 at bytes 16i ..
  int8_t hi[4][64];     // ... and of values 16..31
  int32_t negc[4][16];  // group g, lane 4i + m: −128 · (the sum of row 4g + i's codes in partial m)
  float d[4][16];       // group g: row 4g + i's d_w in lanes 4i .. 4i + 3
};
static_assert(sizeof(Q8Prepared) == 1024);

// The most weight rows one prepared block holds.
inline constexpr int64_t kInt8PreparedRows = 16;

// One 32-value block of 16 Q5_0 or Q5_1 rows (int8_blocks.h) for the AVX2 tiles: each row's
// unsigned codes, scale and offset factor.
struct Int8BlockPrepared {
  alignas(32) uint8_t u[16][32];
  float s[16];
  float f[16];
};
static_assert(sizeof(Int8BlockPrepared) == 640);

// One 256-value super-block of 16 Q4_K, Q5_K or Q6_K rows (int8_blocks.h's KSuper) for the AVX2
// tiles: codes, each chunk's multipliers laid out as vpmaddwd takes them (lanes 0..7 m_{k,0},
// 8..15 m_{k,1}), the offset multipliers, d and dmin.
struct Int8SuperPrepared {
  alignas(32) uint8_t u[16][256];
  alignas(32) int16_t m[16][8][16];
  alignas(32) int16_t n[16][16];
  float d[16], dmin[16];
};
static_assert(sizeof(Int8SuperPrepared) == 8832);

// The bytes of the records of 16 rows of `in` values (a multiple of 32, of 256 for the K-quants)
// of type t: 32 · in for Q8_0, 26 · in for Q4_0/Q4_1, 20 · in for Q5_0/Q5_1, 34.5 · in for the
// K-quants.
constexpr size_t int8_prepared_bytes(DType t, int64_t in) {
  if (t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K)
    return static_cast<size_t>(in / 256) * sizeof(Int8SuperPrepared);
  const size_t record = t == DType::Q8_0   ? sizeof(Q8Prepared)
                        : t == DType::Q4_0 || t == DType::Q4_1 ? sizeof(Q4Prepared)
                                                               : sizeof(Int8BlockPrepared);
  return static_cast<size_t>(in / 32) * record;
}

}  // namespace kvinfer::cpu
