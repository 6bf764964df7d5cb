#pragma once
// The 8-bit KV cache rows (DType::I8, DType::FP8), shared by the CPU and the CUDA kernels so that
// both write the same codes: a row of head_dim values x gets one f32 scale and one byte a value,
//   amax = max |x[d]|,  scale = amax / kMax,  code[d] = round(x[d] / amax · kMax),
// rounded to nearest even (int8: an integer in −127..127; fp8: an E4M3 value, at most ±448), so
// that code × scale reads back x. Dividing by amax before multiplying keeps every quotient in
// [−1, 1] for any finite amax (no overflow for huge rows, no infinite reciprocal for tiny ones).
// A row holding a NaN or an infinity gets a NaN scale and zero codes: it reads back as NaN, and
// the forward pass's non-finite check reports it. An all-zero row gets scale 0.
#include <cmath>
#include <cstdint>

#include "convert.h"
#include "host_device.h"

namespace kvinfer::core {

inline constexpr float kI8Max = 127.0f;   // the largest int8 code used (symmetric: −128 is never written)
inline constexpr float kFp8Max = 448.0f;  // E4M3's largest finite value

// f32 → E4M3 (1 sign, 4 exponent bits with bias 7, 3 mantissa bits; 0x7f and 0xff are NaN, there
// are no infinities), rounded to nearest even and saturated to ±448; NaN gives 0x7f.
KVI_HD uint8_t f32_to_e4m3(float x) {
  const uint32_t bits = f32_to_bits(x);
  const auto sign = static_cast<uint8_t>((bits >> 24) & 0x80u);
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint8_t>(sign | 0x7fu);
  if (abs >= 0x43e00000u) return static_cast<uint8_t>(sign | 0x7eu);  // >= 448: saturate
  if (abs < 0x3c800000u) {  // below 2^-6, the smallest normal: multiples of 2^-9, exactly scaled
    const float m = rintf(bits_to_f32(abs) * 512.0f);  // 0 .. 8 (8 is the smallest normal, 0x08)
    return static_cast<uint8_t>(sign | static_cast<uint8_t>(m));
  }
  const uint32_t rounded = abs + 0x7ffffu + ((abs >> 20) & 1u);  // to 3 mantissa bits, ties to even
  const uint32_t code = (rounded >> 20) - (120u << 3);             // rebias the exponent 127 → 7
  return static_cast<uint8_t>(sign | (code > 0x7eu ? 0x7eu : code));
}

// E4M3 → f32, exact.
KVI_HD float e4m3_to_f32(uint8_t c) {
  const uint32_t sign = static_cast<uint32_t>(c & 0x80u) << 24;
  const uint32_t exp = (c >> 3) & 0xfu, mant = c & 7u;
  if ((c & 0x7fu) == 0x7fu) return bits_to_f32(0x7fc00000u | sign);
  if (exp == 0) {
    const float v = static_cast<float>(mant) * 0.001953125f;  // mant × 2^-9
    return sign ? -v : v;
  }
  return bits_to_f32(sign | ((exp + 120u) << 23) | (mant << 20));
}

// int8 code → f32, exact.
KVI_HD float i8_to_f32(uint8_t c) { return static_cast<float>(static_cast<int8_t>(c)); }

// The scale of a row whose largest magnitude is amax (a NaN amax: a non-finite row).
KVI_HD float kv_row_scale(float amax, bool fp8) {
  if (!(amax <= 3.4028234663852886e38f)) return NAN;  // NaN or infinite
  return amax / (fp8 ? kFp8Max : kI8Max);
}

// The code of x in a finite row whose largest magnitude is amax > 0.
KVI_HD uint8_t kv_code(float x, float amax, bool fp8) {
  const float y = x / amax * (fp8 ? kFp8Max : kI8Max);
  if (fp8) return f32_to_e4m3(y);
  return static_cast<uint8_t>(static_cast<int8_t>(rintf(y)));
}

// The value a code stands for before its row's scale (exact).
KVI_HD float kv_code_value(uint8_t c, bool fp8) { return fp8 ? e4m3_to_f32(c) : i8_to_f32(c); }

// A whole row: n values to n codes and the row's scale.
KVI_HD void quantize_kv_row(const float* x, int n, bool fp8, uint8_t* codes, float* scale) {
  float amax = 0.0f;
  bool finite = true;
  for (int d = 0; d < n; ++d) {
    const float a = fabsf(x[d]);
    finite = finite && a <= 3.4028234663852886e38f;
    amax = a > amax ? a : amax;
  }
  *scale = finite ? kv_row_scale(amax, fp8) : NAN;
  for (int d = 0; d < n; ++d) codes[d] = finite && amax > 0.0f ? kv_code(x[d], amax, fp8) : uint8_t{0};
}

// Keys are stored rotated. A key's largest values sit in a few channels, the same in every row
// (measured on the default model: int8 keys cost 20× the KL of int8 values), and one scale per
// row spends the 8 bits on them. The Walsh–Hadamard transform H spreads them over the row; as
// HᵀH = b·I, (H q / b)·(H k) = q·k, so scores need only the query rotated once per head.
// H works in blocks of b values, b the largest power of two dividing the row (64 → one block of
// 64, 96 → three of 32), its entries ±1 (unnormalised: the row's scale absorbs the gain).
KVI_HD int kv_rotation_block(int n) { return n & -n; }

// x ← H x, blockwise: butterfly stages len = 1, 2, …, b/2, each output one addition or
// subtraction of two values of the stage before, so any order of the pairs within a stage (a
// loop, a warp) gives the same bits.
KVI_HD void hadamard_rotate(float* x, int n) {
  const int b = kv_rotation_block(n);
  for (int len = 1; len < b; len <<= 1)
    for (int i = 0; i < n; i += 2 * len)
      for (int j = i; j < i + len; ++j) {
        const float a = x[j], c = x[j + len];
        x[j] = a + c;
        x[j + len] = a - c;
      }
}

// A query rotated for scores against rotated keys: H q / b (the 1/b a power of two, exact).
KVI_HD void rotate_query(float* q, int n) {
  hadamard_rotate(q, n);
  const float inv = 1.0f / static_cast<float>(kv_rotation_block(n));
  for (int d = 0; d < n; ++d) q[d] *= inv;
}

// A key row: rotated in `work` (n floats), then coded as quantize_kv_row does. A key whose
// rotated values overflow f32 (|k| beyond about 3.4e38 / b) reads back as NaN, as non-finite
// rows do; an f16 cache already turns anything beyond 65504 into an infinity.
KVI_HD void quantize_kv_key_row(const float* x, int n, bool fp8, uint8_t* codes, float* scale, float* work) {
  for (int d = 0; d < n; ++d) work[d] = x[d];
  hadamard_rotate(work, n);
  quantize_kv_row(work, n, fp8, codes, scale);
}

}  // namespace kvinfer::core
