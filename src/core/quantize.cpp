// f32 → Q8_0 / Q4_0 / Q4_1, as ggml's quantize_row_*_ref (see quantize.h). Every line below is
// one float32 operation of the C reference, in its order; the library is built with
// -ffp-contract=off, so `x * id + 8.5f` is two roundings here as in gguf-py's numpy.
#include "core/quantize.h"

#include <cfloat>
#include <cmath>
#include <cstddef>

#include <fmt/format.h>

#include "core/convert.h"
#include "core/quant.h"
#include "kvinfer/error.h"

namespace kvinfer {

namespace {

constexpr int kBlock = core::kQuantGroup;  // 32 values per block in all three formats

void put_half(std::byte* p, float v) {
  const uint16_t h = core::f32_to_f16(v);
  p[0] = static_cast<std::byte>(h & 0xFFu);
  p[1] = static_cast<std::byte>(h >> 8);
}

// C's float → integer conversion (truncation toward zero) where the value is in [lo, hi]; out
// of range it is clamped (C: undefined) and a NaN gives 0. Finite blocks never leave the range.
int to_code(float v, int lo, int hi) {
  if (std::isnan(v)) return 0;
  if (v <= static_cast<float>(lo)) return lo;
  if (v >= static_cast<float>(hi)) return hi;
  return static_cast<int>(v);
}

float inverse(float d) { return d != 0.0f ? 1.0f / d : 0.0f; }  // ggml: d ? 1.0f/d : 0.0f

void quantize_q8_0(const float* x, std::byte* b) {
  float amax = 0.0f;
  for (int j = 0; j < kBlock; ++j) {
    const float a = std::fabs(x[j]);
    amax = amax > a ? amax : a;  // ggml's MAX(amax, fabsf(v))
  }
  const float d = amax / 127.0f;
  const float id = inverse(d);
  put_half(b + offsetof(core::BlockQ8_0, d), d);
  for (int j = 0; j < kBlock; ++j) {
    const int q = to_code(std::round(x[j] * id), -128, 127);  // roundf: half away from zero
    b[offsetof(core::BlockQ8_0, qs) + static_cast<size_t>(j)] = static_cast<std::byte>(static_cast<uint8_t>(q));
  }
}

// Codes 0..15 of Q4_0/Q4_1: value j in the low nibble of byte j, value j + 16 in the high one.
void pack_nibbles(const int* q, std::byte* qs) {
  for (int j = 0; j < kBlock / 2; ++j)
    qs[j] = static_cast<std::byte>(static_cast<unsigned>(q[j]) | (static_cast<unsigned>(q[j + kBlock / 2]) << 4));
}

void quantize_q4_0(const float* x, std::byte* b) {
  float amax = 0.0f, max = 0.0f;  // the value of largest magnitude, with its sign (the first one)
  for (int j = 0; j < kBlock; ++j) {
    const float v = x[j];
    if (amax < std::fabs(v)) {
      amax = std::fabs(v);
      max = v;
    }
  }
  const float d = max / -8.0f;
  const float id = inverse(d);
  put_half(b + offsetof(core::BlockQ4_0, d), d);
  int q[kBlock];
  for (int j = 0; j < kBlock; ++j) q[j] = to_code(x[j] * id + 8.5f, 0, 15);  // MIN(15, (int8_t)(x0 + 8.5f))
  pack_nibbles(q, b + offsetof(core::BlockQ4_0, qs));
}

void quantize_q4_1(const float* x, std::byte* b) {
  float min = FLT_MAX, max = -FLT_MAX;
  for (int j = 0; j < kBlock; ++j) {
    const float v = x[j];
    if (v < min) min = v;
    if (v > max) max = v;
  }
  const float d = (max - min) / 15.0f;
  const float id = inverse(d);
  put_half(b + offsetof(core::BlockQ4_1, d), d);
  put_half(b + offsetof(core::BlockQ4_1, m), min);
  int q[kBlock];
  for (int j = 0; j < kBlock; ++j) q[j] = to_code((x[j] - min) * id + 0.5f, 0, 15);
  pack_nibbles(q, b + offsetof(core::BlockQ4_1, qs));
}

template <void (*Quantize)(const float*, std::byte*)>
void quantize_blocks(DType t, const float* src, std::byte* dst, int64_t n) {
  const auto bytes = static_cast<size_t>(dtype_block(t).bytes);
  for (int64_t i = 0; i < n / kBlock; ++i) Quantize(src + i * kBlock, dst + static_cast<size_t>(i) * bytes);
}

}  // namespace

void quantize_row(DType t, const float* src, std::byte* dst, int64_t n) {
  if (!can_quantize(t))
    throw Error(fmt::format("quantize_row: cannot quantise to {} (only q8_0, q4_0 and q4_1 are written)", dtype_name(t)));
  if (n < 0 || n % kBlock != 0)
    throw Error(fmt::format("quantize_row: {} values of {} are not a whole number of {}-value blocks", n, dtype_name(t),
                            kBlock));
  switch (t) {
    case DType::Q8_0: return quantize_blocks<quantize_q8_0>(t, src, dst, n);
    case DType::Q4_0: return quantize_blocks<quantize_q4_0>(t, src, dst, n);
    case DType::Q4_1: return quantize_blocks<quantize_q4_1>(t, src, dst, n);
    default: break;
  }
}

}  // namespace kvinfer
