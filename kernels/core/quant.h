#pragma once
// ggml's block-quantised weight formats (ggml-common.h) and their dequantisation, bit-identical
// to ggml's dequantize_row_* (ggml-quants.c) and gguf-py's quants.py: the same float operations
// in the same order. Every product here is exact in f32 (an f16 significand times integers of at
// most 12 bits: 23 significant bits or fewer), so the only rounding is the final addition of the
// offset (Q4_1/Q5_1's m, the K-quants' dmin · min): each value is the correctly rounded result,
// on the host and the device alike, with or without FMA contraction.
//
// Dequantisation works on 32-value groups, the unit shared by every format here: a Q8_0/Q4_x/
// Q5_x block is one group, a K-quant super-block of 256 values is eight. The CPU widens a row
// group by group; a CUDA thread dequantises one group. Fields are read byte by byte (little
// endian, as GGUF stores them), so blocks need no alignment.
#include <cstddef>
#include <cstdint>

#include "convert.h"
#include "host_device.h"
#include "kvinfer/dtype.h"

namespace kvinfer::core {

constexpr int kQuantGroup = 32;  // values per dequantisation group
constexpr int kQK = 256;         // values per K-quant super-block (ggml's QK_K)

// The ggml block structs (ggml_half is an IEEE binary16, here uint16_t). They define the sizes
// and field offsets; data is read at those offsets, never through a struct pointer.
struct BlockQ8_0 { uint16_t d; int8_t qs[32]; };
struct BlockQ4_0 { uint16_t d; uint8_t qs[16]; };
struct BlockQ4_1 { uint16_t d, m; uint8_t qs[16]; };
struct BlockQ5_0 { uint16_t d; uint8_t qh[4]; uint8_t qs[16]; };
struct BlockQ5_1 { uint16_t d, m; uint8_t qh[4]; uint8_t qs[16]; };
struct BlockQ4_K { uint16_t d, dmin; uint8_t scales[12]; uint8_t qs[128]; };
struct BlockQ5_K { uint16_t d, dmin; uint8_t scales[12]; uint8_t qh[32]; uint8_t qs[128]; };
struct BlockQ6_K { uint8_t ql[128]; uint8_t qh[64]; int8_t scales[16]; uint16_t d; };

// Byte offsets of a block's f16 fields: the scale d, then m or dmin where the format has one.
// For code that builds blocks (tests, benchmarks); the dequantisers read the fields directly.
struct HalfFields {
  size_t count = 0;
  size_t offset[2] = {};
  constexpr size_t size() const { return count; }
  constexpr size_t operator[](size_t i) const { return offset[i]; }
  constexpr const size_t* begin() const { return offset; }
  constexpr const size_t* end() const { return offset + count; }
};
constexpr HalfFields half_fields(DType t) {
  switch (t) {
    case DType::Q8_0: return {1, {offsetof(BlockQ8_0, d), 0}};
    case DType::Q4_0: return {1, {offsetof(BlockQ4_0, d), 0}};
    case DType::Q4_1: return {2, {offsetof(BlockQ4_1, d), offsetof(BlockQ4_1, m)}};
    case DType::Q5_0: return {1, {offsetof(BlockQ5_0, d), 0}};
    case DType::Q5_1: return {2, {offsetof(BlockQ5_1, d), offsetof(BlockQ5_1, m)}};
    case DType::Q4_K: return {2, {offsetof(BlockQ4_K, d), offsetof(BlockQ4_K, dmin)}};
    case DType::Q5_K: return {2, {offsetof(BlockQ5_K, d), offsetof(BlockQ5_K, dmin)}};
    case DType::Q6_K: return {1, {offsetof(BlockQ6_K, d), 0}};
    default: return {};
  }
}

static_assert(sizeof(BlockQ8_0) == dtype_block(DType::Q8_0).bytes);
static_assert(sizeof(BlockQ4_0) == dtype_block(DType::Q4_0).bytes);
static_assert(sizeof(BlockQ4_1) == dtype_block(DType::Q4_1).bytes);
static_assert(sizeof(BlockQ5_0) == dtype_block(DType::Q5_0).bytes);
static_assert(sizeof(BlockQ5_1) == dtype_block(DType::Q5_1).bytes);
static_assert(sizeof(BlockQ4_K) == dtype_block(DType::Q4_K).bytes);
static_assert(sizeof(BlockQ5_K) == dtype_block(DType::Q5_K).bytes);
static_assert(sizeof(BlockQ6_K) == dtype_block(DType::Q6_K).bytes);
static_assert(dtype_block(DType::Q4_K).elements == kQK && dtype_block(DType::Q6_K).elements == kQK);

template <DType T> struct BlockOf;
template <> struct BlockOf<DType::Q8_0> { using type = BlockQ8_0; };
template <> struct BlockOf<DType::Q4_0> { using type = BlockQ4_0; };
template <> struct BlockOf<DType::Q4_1> { using type = BlockQ4_1; };
template <> struct BlockOf<DType::Q5_0> { using type = BlockQ5_0; };
template <> struct BlockOf<DType::Q5_1> { using type = BlockQ5_1; };
template <> struct BlockOf<DType::Q4_K> { using type = BlockQ4_K; };
template <> struct BlockOf<DType::Q5_K> { using type = BlockQ5_K; };
template <> struct BlockOf<DType::Q6_K> { using type = BlockQ6_K; };

KVI_HD uint8_t q_byte(const std::byte* p, size_t i) { return static_cast<uint8_t>(p[i]); }
KVI_HD float q_half(const std::byte* p, size_t offset) {
  return f16_to_f32(static_cast<uint16_t>(q_byte(p, offset) | (q_byte(p, offset + 1) << 8)));
}

// ggml's get_scale_min_k4: the 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K block.
// Bytes 0..3 hold scales 0..3 (low 6 bits), bytes 4..7 mins 0..3; scales and mins 4..7 keep
// their low 4 bits in bytes 8..11 and their high 2 bits in the top of bytes 0..7.
KVI_HD void k_scale_min(const std::byte* scales, int j, int& sc, int& m) {
  if (j < 4) {
    sc = q_byte(scales, j) & 63;
    m = q_byte(scales, j + 4) & 63;
  } else {
    sc = (q_byte(scales, j + 4) & 0xF) | ((q_byte(scales, j - 4) >> 6) << 4);
    m = (q_byte(scales, j + 4) >> 4) | ((q_byte(scales, j) >> 6) << 4);
  }
}

// Q4_0, Q4_1, Q5_0, Q5_1: value j of the block is the low nibble of qs[j] for j < 16 and the
// high nibble of qs[j - 16] after; Q5 adds bit j of the 32-bit qh as bit 4.
template <DType T>
KVI_HD void dequantize_small(const std::byte* b, float* out) {
  using B = typename BlockOf<T>::type;
  constexpr bool kHasMin = T == DType::Q4_1 || T == DType::Q5_1;
  constexpr bool kFive = T == DType::Q5_0 || T == DType::Q5_1;
  constexpr int kQs = offsetof(B, qs);
  constexpr int kOffset = kHasMin ? 0 : (kFive ? 16 : 8);  // ggml's x0 - 8 / x0 - 16
  const float d = q_half(b, offsetof(B, d));
  float m = 0.0f;
  if constexpr (kHasMin) m = q_half(b, offsetof(B, m));
  // The codes first, then one multiply (and add) per value: both loops vectorise on the host.
  int q[32];
  for (int j = 0; j < 16; ++j) {
    q[j] = q_byte(b, kQs + j) & 0x0F;
    q[j + 16] = q_byte(b, kQs + j) >> 4;
  }
  if constexpr (kFive) {
    uint32_t qh = 0;
    for (int i = 0; i < 4; ++i) qh |= static_cast<uint32_t>(q_byte(b, offsetof(B, qh) + i)) << (8 * i);
    for (int j = 0; j < 32; ++j) q[j] |= static_cast<int>((qh >> j) & 1u) << 4;
  }
  for (int j = 0; j < 32; ++j) {
    const float v = static_cast<float>(q[j] - kOffset) * d;  // ggml: x0*d (+ m)
    out[j] = kHasMin ? v + m : v;
  }
}

KVI_HD void dequantize_q8_0(const std::byte* b, float* out) {
  const float d = q_half(b, offsetof(BlockQ8_0, d));
  for (int j = 0; j < 32; ++j)
    out[j] = static_cast<float>(static_cast<int8_t>(q_byte(b, offsetof(BlockQ8_0, qs) + j))) * d;
}

// Q4_K / Q5_K group g (0..7): values 32g .. 32g+31 of the super-block. Groups 2i and 2i+1 share
// qs[32i .. 32i+31] (low and high nibbles); Q5_K takes bit g of qh[l] as bit 4.
// Value = (d · scale) · q − dmin · min, as ggml's d1 * q - m1.
template <DType T>
KVI_HD void dequantize_k4_group(const std::byte* b, int g, float* out) {
  using B = typename BlockOf<T>::type;
  int sc, mn;
  k_scale_min(b + offsetof(B, scales), g, sc, mn);
  const float d = q_half(b, offsetof(B, d)) * static_cast<float>(sc);      // ggml's d1
  const float m = q_half(b, offsetof(B, dmin)) * static_cast<float>(mn);   // ggml's m1
  const std::byte* qs = b + offsetof(B, qs) + 32 * (g / 2);
  const int shift = 4 * (g % 2);
  for (int l = 0; l < 32; ++l) {
    int q = (q_byte(qs, l) >> shift) & 0xF;
    if constexpr (T == DType::Q5_K) q |= ((q_byte(b, offsetof(B, qh) + l) >> g) & 1) << 4;
    out[l] = d * static_cast<float>(q) - m;
  }
}

// Q6_K group g (0..7): half h = g / 4 of the super-block, quarter k = g % 4. Low 4 bits from
// ql[64h + 32(k % 2) + l] (low nibble for k < 2, high after), high 2 bits from bits 2k of
// qh[32h + l]; scale index 8h + 2k + l / 16. Value = (d · scale) · (q − 32).
KVI_HD void dequantize_q6_k_group(const std::byte* b, int g, float* out) {
  const int h = g / 4, k = g % 4;
  const float d = q_half(b, offsetof(BlockQ6_K, d));
  const std::byte* ql = b + offsetof(BlockQ6_K, ql) + 64 * h + 32 * (k % 2);
  const std::byte* qh = b + offsetof(BlockQ6_K, qh) + 32 * h;
  const int lo_shift = 4 * (k / 2), hi_shift = 2 * k;
  for (int half = 0; half < 2; ++half) {
    const auto scale = static_cast<int8_t>(q_byte(b, offsetof(BlockQ6_K, scales) + 8 * h + 2 * k + half));
    const float ds = d * static_cast<float>(scale);
    for (int l = 16 * half; l < 16 * half + 16; ++l) {
      const int q = ((q_byte(ql, l) >> lo_shift) & 0xF) | (((q_byte(qh, l) >> hi_shift) & 3) << 4);
      out[l] = ds * static_cast<float>(q - 32);
    }
  }
}

// Values 32g .. 32g+31 of the block at `block` (g = 0 for the 32-value formats).
template <DType T>
KVI_HD void dequantize_group(const std::byte* block, int g, float* out) {
  if constexpr (T == DType::Q8_0) {
    dequantize_q8_0(block, out);
  } else if constexpr (T == DType::Q4_0 || T == DType::Q4_1 || T == DType::Q5_0 || T == DType::Q5_1) {
    dequantize_small<T>(block, out);
  } else if constexpr (T == DType::Q4_K || T == DType::Q5_K) {
    dequantize_k4_group<T>(block, g, out);
  } else {
    static_assert(T == DType::Q6_K, "not a quantised type");
    dequantize_q6_k_group(block, g, out);
  }
  (void)g;
}

// All dtype_block(T).elements values of one block.
template <DType T>
KVI_HD void dequantize_block(const std::byte* block, float* out) {
  constexpr int kGroups = static_cast<int>(dtype_block(T).elements) / kQuantGroup;
  for (int g = 0; g < kGroups; ++g) dequantize_group<T>(block, g, out + kQuantGroup * g);
}

// Runtime dispatch; returns false (writing nothing) for a type that is not quantised.
KVI_HD bool dequantize_block(DType t, const std::byte* block, float* out) {
  switch (t) {
    case DType::Q8_0: dequantize_block<DType::Q8_0>(block, out); return true;
    case DType::Q4_0: dequantize_block<DType::Q4_0>(block, out); return true;
    case DType::Q4_1: dequantize_block<DType::Q4_1>(block, out); return true;
    case DType::Q5_0: dequantize_block<DType::Q5_0>(block, out); return true;
    case DType::Q5_1: dequantize_block<DType::Q5_1>(block, out); return true;
    case DType::Q4_K: dequantize_block<DType::Q4_K>(block, out); return true;
    case DType::Q5_K: dequantize_block<DType::Q5_K>(block, out); return true;
    case DType::Q6_K: dequantize_block<DType::Q6_K>(block, out); return true;
    default: return false;
  }
}

}  // namespace kvinfer::core
