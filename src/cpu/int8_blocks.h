#pragma once
// How the 8-bit activation products (linear_int8.h) read Q5_0/Q5_1 blocks and K-quant
// super-blocks: unsigned codes, scales and offsets. The portable products, the AVX2 kernels'
// prepared tiles and the tests all read weights through these definitions.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/quant.h"
#include "kvinfer/dtype.h"

namespace kvinfer::cpu {

// The types read per 32-value block (Int8WeightBlock), with Int8Block inputs.
constexpr bool int8_block_type(DType t) { return t == DType::Q5_0 || t == DType::Q5_1; }

// Block b (32 values) of a Q5_0/Q5_1 row: value j is s · u_j − 16 s (Q5_0) or s · u_j + f (Q5_1).
struct Int8WeightBlock {
  uint8_t u[32];  // codes in value order: nibble | bit 4, 0..31
  float s;        // d
  float f;        // the offset factor: Q5_0 d, Q5_1 m
};

template <DType T>
inline void int8_weight_block(const std::byte* row, int64_t b, Int8WeightBlock& out) {
  static_assert(T == DType::Q5_0 || T == DType::Q5_1);
  using core::q_byte;
  using core::q_half;
  using B = typename core::BlockOf<T>::type;
  const std::byte* blk = row + static_cast<size_t>(b) * sizeof(B);
  uint32_t qh = 0;
  for (int i = 0; i < 4; ++i) qh |= static_cast<uint32_t>(q_byte(blk, offsetof(B, qh) + i)) << (8 * i);
  for (int j = 0; j < 16; ++j) {
    const uint8_t byte = q_byte(blk, offsetof(B, qs) + j);
    out.u[j] = static_cast<uint8_t>((byte & 0x0F) | (((qh >> j) & 1u) << 4));
    out.u[j + 16] = static_cast<uint8_t>((byte >> 4) | (((qh >> (j + 16)) & 1u) << 4));
  }
  out.s = q_half(blk, offsetof(B, d));
  out.f = T == DType::Q5_1 ? q_half(blk, offsetof(core::BlockQ5_1, m)) : out.s;
}

inline void int8_weight_block(DType t, const std::byte* row, int64_t b, Int8WeightBlock& out) {
  if (t == DType::Q5_0) return int8_weight_block<DType::Q5_0>(row, b, out);
  return int8_weight_block<DType::Q5_1>(row, b, out);
}

// ggml's Q4_K/Q5_K scales as one 16-byte table: bytes 0..7 the 6-bit scales of groups 0..7, bytes
// 8..15 their mins (k_scale_min for all eight groups at once, as llama.cpp unpacks them).
inline void k_scales_mins(const std::byte* scales, uint8_t out[16]) {
  uint32_t u[4];
  std::memcpy(u, scales, 12);
  constexpr uint32_t kLow6 = 0x3f3f3f3f, kLow4 = 0x0f0f0f0f, kLow2 = 0x03030303;
  u[3] = ((u[2] >> 4) & kLow4) | (((u[1] >> 6) & kLow2) << 4);
  const uint32_t mins_low = u[1] & kLow6;
  u[1] = (u[2] & kLow4) | (((u[0] >> 6) & kLow2) << 4);
  u[2] = mins_low;
  u[0] &= kLow6;
  std::memcpy(out, u, 16);
}

// Super-block s (256 values) of a Q4_K, Q5_K or Q6_K row (linear_int8.h's m, n, d, dmin):
// value 32k + j is d · m[k][j / 16 ... ] · u − dmin · n (Q4_K/Q5_K: d · sc_k · u_{32k+j} − dmin · mn_k;
// Q6_K: d · sc_{2k + j/16} · (u_{32k+j} − 32)).
struct KSuper {
  uint8_t u[256];   // codes in value order
  int16_t m[8][2];  // chunk k: the multiplier of its values 0..15 and 16..31
  int16_t n[16];    // offset multipliers by 16-value group: Q4_K/Q5_K mn_{i/2}; Q6_K sc_i
  float d, dmin;    // Q6_K: dmin = d
};

template <DType T>
inline void k_super(const std::byte* row, int64_t s, KSuper& out) {
  using core::q_byte;
  using core::q_half;
  if constexpr (T == DType::Q4_K || T == DType::Q5_K) {
    using B = typename core::BlockOf<T>::type;
    const std::byte* blk = row + static_cast<size_t>(s) * sizeof(B);
    uint8_t sm[16];
    k_scales_mins(blk + offsetof(B, scales), sm);
    for (int g = 0; g < 8; ++g) {
      const std::byte* qs = blk + offsetof(B, qs) + 32 * (g / 2);
      for (int l = 0; l < 32; ++l) {
        int q = (q_byte(qs, l) >> (4 * (g % 2))) & 0xF;
        if constexpr (T == DType::Q5_K) q |= ((q_byte(blk, offsetof(B, qh) + l) >> g) & 1) << 4;
        out.u[32 * g + l] = static_cast<uint8_t>(q);
      }
      out.m[g][0] = out.m[g][1] = sm[g];
      out.n[2 * g] = out.n[2 * g + 1] = sm[8 + g];
    }
    out.d = q_half(blk, offsetof(B, d));
    out.dmin = q_half(blk, offsetof(B, dmin));
  } else {
    static_assert(T == DType::Q6_K);
    const std::byte* blk = row + static_cast<size_t>(s) * sizeof(core::BlockQ6_K);
    for (int g = 0; g < 8; ++g) {  // values 32g .. 32g + 31: part c of 128-value half g / 4
      const int half = g / 4, c = g % 4;
      const std::byte* ql = blk + offsetof(core::BlockQ6_K, ql) + 64 * half + 32 * (c % 2);
      const std::byte* qh = blk + offsetof(core::BlockQ6_K, qh) + 32 * half;
      for (int l = 0; l < 32; ++l) {
        const int low = (q_byte(ql, l) >> (4 * (c / 2))) & 0xF;
        const int high = (q_byte(qh, l) >> (2 * c)) & 3;
        out.u[32 * g + l] = static_cast<uint8_t>(low | (high << 4));
      }
    }
    for (int i = 0; i < 16; ++i) {
      const auto sc = static_cast<int8_t>(q_byte(blk, offsetof(core::BlockQ6_K, scales) + i));
      out.m[i / 2][i % 2] = sc;
      out.n[i] = sc;
    }
    out.d = out.dmin = q_half(blk, offsetof(core::BlockQ6_K, d));
  }
}

inline void k_super(DType t, const std::byte* row, int64_t s, KSuper& out) {
  switch (t) {
    case DType::Q4_K: return k_super<DType::Q4_K>(row, s, out);
    case DType::Q5_K: return k_super<DType::Q5_K>(row, s, out);
    default: return k_super<DType::Q6_K>(row, s, out);
  }
}

}  // namespace kvinfer::cpu
