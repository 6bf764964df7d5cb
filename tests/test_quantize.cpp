// The quantiser (src/core/quantize.h): quantize_row equals gguf-py's gguf.quants.quantize byte for
// byte on tests/data/quant/quantize_* (written by tools/make_quantize_fixtures.py, which checks
// gguf-py against a literal port of ggml's C reference quantisers), and dequantise(quantise(x))
// is within half a quantisation step of x. Hand-made blocks pin down ggml's choices where gguf-py
// differs (signed zeros) and the defined result for non-finite input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/convert.h"
#include "core/quant.h"
#include "core/quantize.h"
#include "cpu/cpu_ops.h"
#include "kvinfer/error.h"
#include "test_files.h"

namespace kvinfer {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr int64_t kBlock = 32;

fs::path quant_dir() { return fs::path(KVINFER_TEST_DATA) / "quant"; }

std::vector<float> fixture_input() {
  const std::string bytes = test::read_bytes(quant_dir() / "quantize_in.f32");
  std::vector<float> v(bytes.size() / sizeof(float));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
  return v;
}

std::vector<std::byte> fixture_blocks(DType t) {
  const std::string bytes = test::read_bytes(quant_dir() / ("quantize_" + std::string(dtype_name(t)) + ".bin"));
  std::vector<std::byte> v(bytes.size());
  std::memcpy(v.data(), bytes.data(), bytes.size());
  return v;
}

std::vector<std::byte> quantize(DType t, const std::vector<float>& x) {
  std::vector<std::byte> out(dtype_row_bytes(t, static_cast<int64_t>(x.size())), std::byte{0xEE});
  quantize_row(t, x.data(), out.data(), static_cast<int64_t>(x.size()));
  return out;
}

uint16_t half_at(const std::byte* p, size_t offset) {
  return static_cast<uint16_t>(static_cast<unsigned>(p[offset]) | (static_cast<unsigned>(p[offset + 1]) << 8));
}
double half_value(const std::byte* p, size_t offset) { return core::f16_to_f32(half_at(p, offset)); }

// The largest |x - dequantised x| allowed in one block: half a step of the block's exact scale,
// plus what rounding the scale (and Q4_1's minimum) to f16 adds over the largest code, plus a few
// f32 roundings. Q4_0's code 15 allows a whole step: the value opposite max (x · id = +8) needs
// code 16, which is clipped. `code` is the value's stored code (0..15; unused for Q8_0).
double tolerance(DType t, const float* x, const std::byte* block, int code) {
  double amax = 0, signed_max = 0, lo = x[0], hi = x[0];
  for (int64_t j = 0; j < kBlock; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      signed_max = x[j];
    }
    lo = std::min<double>(lo, x[j]);
    hi = std::max<double>(hi, x[j]);
  }
  const double slack = 1e-5 * amax;
  switch (t) {
    case DType::Q8_0: {
      const double step = amax / 127;
      return 0.5 * step + 127 * std::fabs(step - std::fabs(half_value(block, 0))) + slack;
    }
    case DType::Q4_0: {
      const double step = std::fabs(signed_max) / 8;
      return (code == 15 ? 1.0 : 0.5) * step + 8 * std::fabs(step - std::fabs(half_value(block, 0))) + slack;
    }
    case DType::Q4_1: {
      const double step = (hi - lo) / 15;
      return 0.5 * step + 15 * std::fabs(step - half_value(block, 0)) + std::fabs(lo - half_value(block, 2)) + slack;
    }
    default: ADD_FAILURE() << "no tolerance for " << dtype_name(t); return 0;
  }
}

// The stored code of value j (0..31) of a Q4_0/Q4_1 block; -1 for Q8_0.
int code_of(DType t, const std::byte* block, int64_t j) {
  if (t == DType::Q8_0) return -1;
  const size_t qs = t == DType::Q4_0 ? offsetof(core::BlockQ4_0, qs) : offsetof(core::BlockQ4_1, qs);
  const auto byte = static_cast<unsigned>(block[qs + static_cast<size_t>(j % 16)]);
  return static_cast<int>(j < 16 ? byte & 0xFu : byte >> 4);
}

void expect_within_half_a_step(DType t, const std::vector<float>& x, const std::vector<std::byte>& blocks) {
  std::vector<float> back(x.size());
  cpu::to_f32(t, blocks.data(), back.data(), static_cast<int64_t>(x.size()));
  const auto bytes = static_cast<size_t>(dtype_block(t).bytes);
  int failures = 0;
  for (size_t b = 0; b < x.size() / kBlock && failures < 5; ++b) {
    const float* xb = x.data() + b * kBlock;
    const std::byte* block = blocks.data() + b * bytes;
    for (int64_t j = 0; j < kBlock; ++j) {
      const double err = std::fabs(static_cast<double>(back[b * kBlock + static_cast<size_t>(j)]) - xb[j]);
      const double tol = tolerance(t, xb, block, code_of(t, block, j));
      if (!(err <= tol)) {
        ADD_FAILURE() << dtype_name(t) << " block " << b << " value " << j << ": x " << xb[j] << ", dequantised "
                      << back[b * kBlock + static_cast<size_t>(j)] << ", error " << err << " > " << tol;
        ++failures;
      }
    }
  }
}

class QuantizeTest : public ::testing::TestWithParam<DType> {};

TEST_P(QuantizeTest, EqualsGgufByteForByte) {
  const DType t = GetParam();
  const std::vector<float> x = fixture_input();
  const std::vector<std::byte> want = fixture_blocks(t);
  ASSERT_EQ(x.size() % kBlock, 0u);
  ASSERT_GT(x.size(), 4000u);
  ASSERT_EQ(want.size(), dtype_row_bytes(t, static_cast<int64_t>(x.size())));
  const std::vector<std::byte> got = quantize(t, x);
  const auto bytes = static_cast<size_t>(dtype_block(t).bytes);
  int failures = 0;
  for (size_t b = 0; b < x.size() / kBlock && failures < 5; ++b)
    if (std::memcmp(got.data() + b * bytes, want.data() + b * bytes, bytes) != 0) {
      ADD_FAILURE() << dtype_name(t) << ": block " << b << " (values " << b * kBlock << "..) differs from gguf-py";
      ++failures;
    }
  EXPECT_TRUE(got == want);
}

TEST_P(QuantizeTest, RoundTripIsWithinHalfAStepOnTheFixture) {
  const DType t = GetParam();
  const std::vector<float> x = fixture_input();
  expect_within_half_a_step(t, x, quantize(t, x));
}

// The same on 64k values of weight-like data at several scales.
TEST_P(QuantizeTest, RoundTripIsWithinHalfAStepOnRandomData) {
  const DType t = GetParam();
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(1 << 16);
  for (size_t i = 0; i < x.size(); ++i) {
    const float scale = std::pow(10.0f, static_cast<float>(static_cast<int>(i / 4096 % 8)) - 5.0f);  // 1e-5 .. 1e2
    x[i] = normal(rng) * scale + (i / 2048 % 3 == 0 ? scale : 0.0f);
  }
  expect_within_half_a_step(t, x, quantize(t, x));
}

// Blocks are independent: quantising a row in pieces of whole blocks gives the same bytes
// (random_model relies on it to build matrices in parallel chunks).
TEST_P(QuantizeTest, PiecesOfWholeBlocksGiveTheSameBytes) {
  const DType t = GetParam();
  const std::vector<float> x = fixture_input();
  const std::vector<std::byte> whole = quantize(t, x);
  std::vector<std::byte> pieces(whole.size());
  const auto n = static_cast<int64_t>(x.size());
  for (int64_t begin = 0; begin < n; begin += 3 * kBlock) {
    const int64_t count = std::min(3 * kBlock, n - begin);
    quantize_row(t, x.data() + begin, pieces.data() + dtype_row_bytes(t, begin), count);
  }
  EXPECT_TRUE(pieces == whole);
}

TEST_P(QuantizeTest, PartialBlocksAreErrorsNamingTheDtype) {
  const DType t = GetParam();
  std::vector<float> x(96, 1.0f);
  std::vector<std::byte> out(256);
  for (int64_t n : {int64_t{1}, int64_t{31}, int64_t{33}, int64_t{80}, int64_t{-32}}) {
    try {
      quantize_row(t, x.data(), out.data(), n);
      ADD_FAILURE() << "no error for n = " << n;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(std::string(dtype_name(t))));
      EXPECT_THAT(e.what(), HasSubstr(std::to_string(n)));
    }
  }
  EXPECT_NO_THROW(quantize_row(t, x.data(), out.data(), 0));
}

INSTANTIATE_TEST_SUITE_P(Types, QuantizeTest, ::testing::Values(DType::Q8_0, DType::Q4_0, DType::Q4_1),
                         [](const auto& p) { return std::string(dtype_name(p.param)); });

TEST(Quantize, OtherTypesAreErrorsNamingTheDtype) {
  std::vector<float> x(256, 1.0f);
  std::vector<std::byte> out(1024);
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q5_0, DType::Q5_1, DType::Q4_K, DType::Q5_K,
                  DType::Q6_K}) {
    EXPECT_FALSE(can_quantize(t));
    try {
      quantize_row(t, x.data(), out.data(), 256);
      ADD_FAILURE() << "no error for " << dtype_name(t);
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(std::string(dtype_name(t))));
    }
  }
}

// Hand-made blocks: the layouts, independently of the fixtures.
TEST(Quantize, HandMadeBlocks) {
  // Q8_0: max |x| = 127 → d = 1; roundf takes 2.5 to 3 and -0.5 to -1 (away from zero).
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f, x[1] = 2.5f, x[2] = -0.5f, x[3] = -127.0f;
  std::vector<std::byte> q = quantize(DType::Q8_0, x);
  EXPECT_EQ(half_at(q.data(), 0), 0x3C00u);  // 1.0
  EXPECT_EQ(static_cast<int8_t>(q[2]), 127);
  EXPECT_EQ(static_cast<int8_t>(q[3]), 3);
  EXPECT_EQ(static_cast<int8_t>(q[4]), -1);
  EXPECT_EQ(static_cast<int8_t>(q[5]), -127);
  EXPECT_EQ(static_cast<int8_t>(q[6]), 0);

  // Q4_0: max = -8 → d = 1, codes x + 8 (7.5 → trunc(16) → 15); value j + 16 in the high nibble.
  std::fill(x.begin(), x.end(), 0.0f);
  x[0] = -8.0f, x[1] = 7.5f, x[16] = 3.0f, x[17] = -2.5f;
  q = quantize(DType::Q4_0, x);
  EXPECT_EQ(half_at(q.data(), 0), 0x3C00u);
  EXPECT_EQ(static_cast<unsigned>(q[2]), 0x0u | (11u << 4));   // codes 0 (x = -8) and 11 (x = 3)
  EXPECT_EQ(static_cast<unsigned>(q[3]), 15u | (6u << 4));     // 15 (7.5, clipped from 16) and 6 (-2.5 + 8.5 = 6)
  EXPECT_EQ(static_cast<unsigned>(q[4]), 8u | (8u << 4));      // zeros: code 8

  // Q4_1: min -1, max 14 → d = 1, m = -1.
  std::fill(x.begin(), x.end(), 0.0f);
  x[0] = -1.0f, x[1] = 14.0f, x[16] = 0.5f;
  q = quantize(DType::Q4_1, x);
  EXPECT_EQ(half_at(q.data(), 0), 0x3C00u);  // d = 1
  EXPECT_EQ(half_at(q.data(), 2), 0xBC00u);  // m = -1
  EXPECT_EQ(static_cast<unsigned>(q[4]), 0u | (2u << 4));   // -1 → 0; 0.5 → trunc(1.5 + 0.5) = 2
  EXPECT_EQ(static_cast<unsigned>(q[5]), 15u | (1u << 4));  // 14 → 15; 0 → 1
}

// Where gguf-py and ggml differ (tools/make_quantize_fixtures.py), kvinfer follows ggml.
TEST(Quantize, SignedZerosFollowGgml) {
  std::vector<float> zeros(32, -0.0f);
  // Q4_0: ggml's max stays the initial +0.0 (no |v| exceeds it), so d = 0 / -8 = -0 (0x8000);
  // gguf-py's argmax picks x[0] = -0.0 and stores +0.
  std::vector<std::byte> q = quantize(DType::Q4_0, zeros);
  EXPECT_EQ(half_at(q.data(), 0), 0x8000u);
  for (size_t j = 2; j < q.size(); ++j) EXPECT_EQ(static_cast<unsigned>(q[j]), 0x88u);
  // All +0: both give d = -0.
  q = quantize(DType::Q4_0, std::vector<float>(32, 0.0f));
  EXPECT_EQ(half_at(q.data(), 0), 0x8000u);
  // Q4_1, zeros of both signs: min and max are the first zero (-0.0), so d = +0 and m = -0.
  for (size_t j = 1; j < zeros.size(); j += 2) zeros[j] = 0.0f;
  q = quantize(DType::Q4_1, zeros);
  EXPECT_EQ(half_at(q.data(), 0), 0x0000u);
  EXPECT_EQ(half_at(q.data(), 2), 0x8000u);
  // Q8_0: max |x| is +0 either way.
  q = quantize(DType::Q8_0, zeros);
  EXPECT_EQ(half_at(q.data(), 0), 0x0000u);
}

// ggml's C is undefined here (a float → int8 conversion out of range); kvinfer's codes are
// clamped and a NaN code is 0, so the bytes are defined.
TEST(Quantize, NonFiniteValuesGiveDefinedCodes) {
  for (float bad : {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    std::vector<float> x(32, 0.25f);
    x[3] = bad;
    const std::vector<std::byte> q = quantize(DType::Q8_0, x);
    // An infinity: d = inf, id = 0, every code 0 (inf · 0 = NaN → 0). A NaN: ggml's
    // MAX(amax, |v|) drops it at the next value, so d = 0.25 / 127 and the others are 127.
    const int others = std::isinf(bad) ? 0 : 127;
    for (size_t j = 0; j < 32; ++j) EXPECT_EQ(static_cast<int8_t>(q[2 + j]), j == 3 ? 0 : others) << j;
    for (DType t : {DType::Q4_0, DType::Q4_1}) EXPECT_NO_THROW(quantize(t, x));
  }
  // f32 subnormals: d = amax / 127 is subnormal and 1 / d overflows to infinity.
  std::vector<float> tiny(32, 0.0f);
  tiny[0] = 1e-40f, tiny[1] = -1e-40f;
  const std::vector<std::byte> q = quantize(DType::Q8_0, tiny);
  EXPECT_EQ(static_cast<int8_t>(q[2]), 127);
  EXPECT_EQ(static_cast<int8_t>(q[3]), -128);
  EXPECT_EQ(static_cast<int8_t>(q[4]), 0);  // 0 · inf = NaN
}

}  // namespace
}  // namespace kvinfer
