#pragma once
// The 8-bit activation products of Q5_0, Q5_1, Q4_K, Q5_K and Q6_K weights (linear_int8.h has
// their arithmetic): each 32-value block of a weight row read as unsigned codes, the scale of its
// two 16-value halves and an offset factor. The portable product, the AVX2 kernels' prepared tiles
// and the tests all read blocks through this one definition.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/quant.h"
#include "kvinfer/dtype.h"

namespace kvinfer::cpu {

// True for the types whose 8-bit products take this form.
constexpr bool int8_block_type(DType t) {
  return t == DType::Q5_0 || t == DType::Q5_1 || t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K;
}

// Block b (32 values) of a weight row: value j is s · (u[j] − bias) (s = s_lo for j < 16, s_hi
// after) plus the type's offset (f below).
struct Int8WeightBlock {
  uint8_t u[32];  // codes in value order: Q5_x 0..31 (nibble | bit 4), Q4_K 0..15, Q5_K 0..31, Q6_K 0..63
  float s_lo, s_hi;  // Q5_x: d; Q4_K/Q5_K: d · scale of the block's group; Q6_K: d · scale of each half
  float f;           // the offset factor: Q5_0 d (value − 16 d), Q5_1 m, Q4_K/Q5_K dmin · min; Q6_K 0
};

// Q6_K's codes are q − 32; the others' are the codes themselves.
template <DType T>
constexpr int int8_code_bias() {
  return T == DType::Q6_K ? 32 : 0;
}

// How a row's offset sum joins its products (linear_int8.h): y = tree + sign · Off.
template <DType T>
constexpr float int8_offset_sign() {
  return T == DType::Q5_0 ? -16.0f : T == DType::Q5_1 ? 1.0f : T == DType::Q6_K ? 0.0f : -1.0f;
}

// ggml's Q4_K/Q5_K scales as one 16-byte table: bytes 0..7 the 6-bit scales of groups 0..7, bytes
// 8..15 their mins (k_scale_min for all eight groups at once).
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

template <DType T>
inline void int8_weight_block(const std::byte* row, int64_t b, Int8WeightBlock& out) {
  using core::q_byte;
  using core::q_half;
  using B = typename core::BlockOf<T>::type;
  if constexpr (T == DType::Q5_0 || T == DType::Q5_1) {
    const std::byte* blk = row + static_cast<size_t>(b) * sizeof(B);
    uint32_t qh = 0;
    for (int i = 0; i < 4; ++i) qh |= static_cast<uint32_t>(q_byte(blk, offsetof(B, qh) + i)) << (8 * i);
    for (int j = 0; j < 16; ++j) {
      const uint8_t byte = q_byte(blk, offsetof(B, qs) + j);
      out.u[j] = static_cast<uint8_t>((byte & 0x0F) | (((qh >> j) & 1u) << 4));
      out.u[j + 16] = static_cast<uint8_t>((byte >> 4) | (((qh >> (j + 16)) & 1u) << 4));
    }
    out.s_lo = out.s_hi = q_half(blk, offsetof(B, d));
    if constexpr (T == DType::Q5_1)
      out.f = q_half(blk, offsetof(core::BlockQ5_1, m));
    else
      out.f = out.s_lo;
  } else if constexpr (T == DType::Q4_K || T == DType::Q5_K) {
    const std::byte* blk = row + static_cast<size_t>(b / 8) * sizeof(B);
    const int g = static_cast<int>(b % 8);
    uint8_t sm[16];
    k_scales_mins(blk + offsetof(B, scales), sm);
    const std::byte* qs = blk + offsetof(B, qs) + 32 * (g / 2);
    for (int l = 0; l < 32; ++l) {
      int q = (q_byte(qs, l) >> (4 * (g % 2))) & 0xF;
      if constexpr (T == DType::Q5_K) q |= ((q_byte(blk, offsetof(B, qh) + l) >> g) & 1) << 4;
      out.u[l] = static_cast<uint8_t>(q);
    }
    // Exact in f32: an f16 times a 6-bit integer.
    out.s_lo = out.s_hi = q_half(blk, offsetof(B, d)) * static_cast<float>(sm[g]);
    out.f = q_half(blk, offsetof(B, dmin)) * static_cast<float>(sm[8 + g]);
  } else {
    static_assert(T == DType::Q6_K);
    const std::byte* blk = row + static_cast<size_t>(b / 8) * sizeof(core::BlockQ6_K);
    const int g = static_cast<int>(b % 8);  // values 32g .. 32g + 31 of the super-block
    const int half = g / 4, c = g % 4;      // 128-value half, and its 32-value part
    const std::byte* ql = blk + offsetof(core::BlockQ6_K, ql) + 64 * half + 32 * (c % 2);
    const std::byte* qh = blk + offsetof(core::BlockQ6_K, qh) + 32 * half;
    for (int l = 0; l < 32; ++l) {
      const int low = (q_byte(ql, l) >> (4 * (c / 2))) & 0xF;
      const int high = (q_byte(qh, l) >> (2 * c)) & 3;
      out.u[l] = static_cast<uint8_t>(low | (high << 4));
    }
    const float d = q_half(blk, offsetof(core::BlockQ6_K, d));
    const auto scale = [&](int i) {
      return d * static_cast<float>(static_cast<int8_t>(q_byte(blk, offsetof(core::BlockQ6_K, scales) + i)));
    };
    out.s_lo = scale(2 * g);  // exact: an f16 times an 8-bit integer
    out.s_hi = scale(2 * g + 1);
    out.f = 0.0f;
  }
}

inline void int8_weight_block(DType t, const std::byte* row, int64_t b, Int8WeightBlock& out) {
  switch (t) {
    case DType::Q5_0: return int8_weight_block<DType::Q5_0>(row, b, out);
    case DType::Q5_1: return int8_weight_block<DType::Q5_1>(row, b, out);
    case DType::Q4_K: return int8_weight_block<DType::Q4_K>(row, b, out);
    case DType::Q5_K: return int8_weight_block<DType::Q5_K>(row, b, out);
    default: return int8_weight_block<DType::Q6_K>(row, b, out);
  }
}

}  // namespace kvinfer::cpu
