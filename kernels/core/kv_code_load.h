#pragma once
// The CUDA attention kernels' widening of an 8-bit KV cache row (DType::I8, DType::FP8): 8
// consecutive codes, as an 8-byte load returns them (two little-endian 32-bit words, code 0 in
// the low byte of w[0]), to the values they stand for before their row's scale, exactly the
// values of core::kv_code_value (kernels/core/kv_quant.h; tests/test_cuda_ops.cpp checks all 256
// codes of both types).
#include <cstdint>

#include "convert.h"
#include "host_device.h"
#include "kv_load.h"

namespace kvinfer::core {

// int8: sign-extended.
KVI_HD void widen8_i8(const uint32_t (&w)[2], float (&out)[8]) {
  for (int i = 0; i < 8; ++i)
    out[i] = static_cast<float>(static_cast<int8_t>(static_cast<uint8_t>(w[i / 4] >> (8 * (i % 4)))));
}

// E4M3 placed in the bits of an f16 (the sign at bit 15, exponent and mantissa shifted left by
// 7), widened exactly (one cvt on the device) and times 2^8, the difference of the exponent
// biases (15 - 7); subnormal codes land on f16 subnormals, so they are exact too. The NaN codes
// 0x7f and 0xff become NaN, as core::e4m3_to_f32 makes them.
KVI_HD float e4m3_code_to_f32(uint32_t c) {
  const uint32_t mag = c & 0x7fu;
  const auto h = static_cast<uint16_t>(((c & 0x80u) << 8) | (mag << 7));
  const float v = f16_bits_to_f32(h) * 256.0f;
  return mag == 0x7fu ? bits_to_f32(0x7fc00000u | ((c & 0x80u) << 24)) : v;
}

KVI_HD void widen8_e4m3(const uint32_t (&w)[2], float (&out)[8]) {
  for (int i = 0; i < 8; ++i) out[i] = e4m3_code_to_f32((w[i / 4] >> (8 * (i % 4))) & 0xffu);
}

}  // namespace kvinfer::core
