// The f16/bf16 conversions of kernels/core/convert.h against the compiler's own IEEE half type
// (_Float16, or clang 14's __fp16) and a double-precision rounding reference, exhaustively over all 65536 patterns.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/convert.h"

namespace kvinfer::core {
namespace {

// The compiler's IEEE half: _Float16, which clang supports on x86 from version 15 only; clang 14
// (the sanitizer builds) has the storage type __fp16, with the same conversions.
#if defined(__clang__) && __clang_major__ < 15
using Half = __fp16;
#else
using Half = _Float16;
#endif

TEST(Convert, F16WideningIsExactForAllPatterns) {
  for (uint32_t h = 0; h < 65536; ++h) {
    Half ref;
    uint16_t bits = static_cast<uint16_t>(h);
    std::memcpy(&ref, &bits, 2);
    float want = static_cast<float>(ref);
    float got = f16_to_f32(bits);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << h;
    } else {
      EXPECT_EQ(f32_to_bits(got), f32_to_bits(want)) << h;
    }
  }
}

TEST(Convert, F16NarrowingRoundsToNearestEven) {
  std::mt19937 rng(1);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 200000; ++i) {
    float f = bits_to_f32(bits(rng));
    if (i % 2) f = std::ldexp(f, -100) ;  // many values in the f16 range and its subnormals
    if (std::isnan(f)) continue;
    Half ref = static_cast<Half>(f);
    uint16_t want;
    std::memcpy(&want, &ref, 2);
    EXPECT_EQ(f32_to_f16(f), want) << f;
  }
  // Ties go to even: 1 + 2^-11 lies halfway between 1 and 1 + 2^-10.
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);  // rounds to infinity
  EXPECT_EQ(f32_to_f16(65519.0f), 0x7bff);
}

TEST(Convert, Bf16RoundTripAndRounding) {
  for (uint32_t h = 0; h < 65536; ++h) {
    float f = bf16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(f32_to_bf16(f), h);  // every bf16 value survives the round trip
  }
  std::mt19937 rng(2);
  std::uniform_real_distribution<double> u(-1e3, 1e3);
  for (int i = 0; i < 100000; ++i) {
    float f = static_cast<float>(u(rng));
    float r = bf16_to_f32(f32_to_bf16(f));
    // Nearest: no bf16 value is closer (neighbours differ by one in the last bit).
    uint16_t b = f32_to_bf16(f);
    float lo = bf16_to_f32(static_cast<uint16_t>(b - 1)), hi = bf16_to_f32(static_cast<uint16_t>(b + 1));
    EXPECT_LE(std::fabs(r - f), std::fabs(lo - f));
    EXPECT_LE(std::fabs(r - f), std::fabs(hi - f));
  }
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::nanf("")))));
}

}  // namespace
}  // namespace kvinfer::core
