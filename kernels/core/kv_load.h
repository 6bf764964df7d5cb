#pragma once
// Block decode helpers: widening 16 bytes of a KV cache row (four little-endian 32-bit words,
// as a 16-byte vector load returns them) to 8 f32 values, element 0 first.
#include <cstdint>

#include "convert.h"
#include "host_device.h"

namespace kvinfer::core {

// bfloat16 is the upper half of an f32: element 2i is the low half of word i.
KVI_HD void widen8_bf16(const uint32_t (&w)[4], float (&out)[8]) {
  for (int i = 0; i < 4; ++i) {
    out[2 * i] = bits_to_f32(w[i] << 16);
    out[2 * i + 1] = bits_to_f32(w[i] & 0xffff0000u);
  }
}

// IEEE half to f32, exact. On the device one cvt instruction; elsewhere the bit-exact
// software conversion of convert.h, which the tests compare against.
KVI_HD float f16_bits_to_f32(uint16_t h) {
#if defined(__CUDA_ARCH__)
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
#else
  return f16_to_f32(h);
#endif
}

KVI_HD void widen8_f16(const uint32_t (&w)[4], float (&out)[8]) {
  for (int i = 0; i < 4; ++i) {
    out[2 * i] = f16_bits_to_f32(static_cast<uint16_t>(w[i] & 0xffffu));
    out[2 * i + 1] = f16_bits_to_f32(static_cast<uint16_t>(w[i] >> 16));
  }
}

}  // namespace kvinfer::core
