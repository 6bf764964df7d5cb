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
#include "models/synthetic.h"
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
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q5_0, DType::Q5_1}) {
    EXPECT_FALSE(can_quantize(t));
    try {
      quantize_row(t, x.data(), out.data(), 256);
      ADD_FAILURE() << "no error for " << dtype_name(t);
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(std::string(dtype_name(t))));
    }
  }
}

// ---- K-quants (Q4_K, Q5_K, Q6_K) ----
// gguf-py has no K-quant quantiser, so there is no fixture of their bytes: these check what the
// algorithm guarantees instead. Its last pass codes every value against the scales as stored,
// Q4_K/Q5_K q = clamp(nearest((x + dmin·m) / (d·sc)), 0, nmax), Q6_K q = clamp(nearest(x /
// (d·sc)), -32, 31) + 32: each value is within half a step |d·sc| of its dequantised value,
// unless clipped at the lowest or highest code; and the fit is good on weight-like data (an RMS
// error a fraction of a step of plain min/max quantisation).

struct KCode {
  float step, offset;  // d·sc and (Q4_K/Q5_K) dmin·m of the value's sub-block
  int code, zero, nmax;  // value = step · (code - zero) - offset; codes 0..nmax
};

// Value i (0..255) of a Q4_K/Q5_K/Q6_K super-block, read from its fields as ggml lays them out.
KCode k_code(DType t, const std::byte* b, int i) {
  if (t == DType::Q6_K) {  // kernels/core/quant.h's dequantize_q6_k_group, value by value
    const int h = i / 128, k = i % 128 / 32, l = i % 32;
    const size_t ql_at = offsetof(core::BlockQ6_K, ql) + static_cast<size_t>(64 * h + 32 * (k % 2) + l);
    const auto ql = static_cast<unsigned>(b[ql_at]);
    const auto qh = static_cast<unsigned>(b[offsetof(core::BlockQ6_K, qh) + static_cast<size_t>(32 * h + l)]);
    const int code = static_cast<int>(((k < 2 ? ql : ql >> 4) & 0xFu) | (((qh >> (2 * k)) & 3u) << 4));
    const auto sc = static_cast<int8_t>(b[offsetof(core::BlockQ6_K, scales) + static_cast<size_t>(i / 16)]);
    return {static_cast<float>(half_value(b, offsetof(core::BlockQ6_K, d)) * sc), 0.0f, code, 32, 63};
  }
  const bool five = t == DType::Q5_K;
  const size_t d_at = five ? offsetof(core::BlockQ5_K, d) : offsetof(core::BlockQ4_K, d);
  const size_t scales_at = five ? offsetof(core::BlockQ5_K, scales) : offsetof(core::BlockQ4_K, scales);
  const size_t qs_at = five ? offsetof(core::BlockQ5_K, qs) : offsetof(core::BlockQ4_K, qs);
  const int g = i / 32, l = i % 32;
  int sc = 0, m = 0;
  core::k_scale_min(b + scales_at, g, sc, m);
  const auto byte = static_cast<unsigned>(b[qs_at + static_cast<size_t>(32 * (g / 2) + l)]);
  int code = static_cast<int>(g % 2 ? byte >> 4 : byte & 0xFu);
  if (five) {
    const auto qh = static_cast<unsigned>(b[offsetof(core::BlockQ5_K, qh) + static_cast<size_t>(l)]);
    code |= static_cast<int>((qh >> g) & 1u) << 4;
  }
  return {static_cast<float>(half_value(b, d_at) * sc), static_cast<float>(half_value(b, d_at + 2) * m), code, 0,
          five ? 31 : 15};
}

class QuantizeKTest : public ::testing::TestWithParam<DType> {};

// Weight-like rows at scales 1e-4 .. 1e2, some shifted, some with an outlier.
std::vector<float> k_input() {
  std::mt19937 rng(23);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(256 * 64);
  for (size_t i = 0; i < x.size(); ++i) {
    const size_t block = i / 256;
    const float scale = std::pow(10.0f, static_cast<float>(static_cast<int>(block % 7)) - 4.0f);
    x[i] = normal(rng) * scale + (block % 3 == 1 ? 2 * scale : 0.0f);
    if (block % 5 == 2 && i % 256 == 77) x[i] = 12 * scale;  // an outlier
  }
  return x;
}

TEST_P(QuantizeKTest, EveryValueIsWithinHalfAStepOfItsCodeUnlessClipped) {
  const DType t = GetParam();
  const std::vector<float> x = k_input();
  const std::vector<std::byte> q = quantize(t, x);
  ASSERT_EQ(q.size(), x.size() / 256 * dtype_block(t).bytes);
  std::vector<float> back(x.size());
  cpu::to_f32(t, q.data(), back.data(), static_cast<int64_t>(x.size()));
  int failures = 0;
  for (size_t i = 0; i < x.size() && failures < 5; ++i) {
    const std::byte* b = q.data() + i / 256 * dtype_block(t).bytes;
    const KCode k = k_code(t, b, static_cast<int>(i % 256));
    // The dequantiser is the fields' d·sc·(q - zero) - dmin·m (the same float operations).
    ASSERT_EQ(back[i], k.step * static_cast<float>(k.code - k.zero) - k.offset) << i;
    const double err = std::fabs(static_cast<double>(back[i]) - x[i]);
    const double half = 0.5 * std::fabs(k.step) * (1 + 1e-5) + 1e-6 * std::fabs(x[i]);
    // Clipped: x beyond the lowest or the highest code's value (either end, the step may be negative).
    const double lo = k.step * static_cast<double>(0 - k.zero) - k.offset;
    const double hi = k.step * static_cast<double>(k.nmax - k.zero) - k.offset;
    const bool clipped = (k.code == 0 && (x[i] - lo) * k.step < 0) || (k.code == k.nmax && (x[i] - hi) * k.step > 0);
    if (k.step != 0 && !(err <= half) && !clipped) {
      ADD_FAILURE() << dtype_name(t) << " value " << i << ": x " << x[i] << ", code " << k.code << ", dequantised "
                    << back[i] << ", error " << err << " > half a step " << half;
      ++failures;
    }
  }
}

// The RMS error of each super-block against its spread: plain min/max quantisation with nmax
// steps over [min, max] would give about range / nmax / √12; the fitted scales do no worse
// than twice that, and the whole error is far under a careless quantiser's.
TEST_P(QuantizeKTest, RmsErrorIsAFractionOfAStep) {
  const DType t = GetParam();
  const std::vector<float> x = k_input();
  const std::vector<std::byte> q = quantize(t, x);
  std::vector<float> back(x.size());
  cpu::to_f32(t, q.data(), back.data(), static_cast<int64_t>(x.size()));
  // Q6_K: 16-value sub-blocks, codes -32..31 around zero (a step of max |x| / 32); Q4_K/Q5_K:
  // 32-value sub-blocks, codes 0..nmax from min(x, 0).
  const bool six = t == DType::Q6_K;
  const double nmax = t == DType::Q5_K ? 31 : 15;
  const size_t sub = six ? 16 : 32;
  int checked = 0;
  for (size_t b = 0; b < x.size() / 256; ++b) {
    // A super-block whose f16 d is under 1e-6 (fewer than 17 subnormal steps of 2^-24) has its
    // scales rounded by a few % or more: a limit of the format, not of the fit. At 1e-4 scale
    // Q6_K's d (max |x| / 4096) is about one step.
    const std::byte* block = q.data() + b * dtype_block(t).bytes;
    if (std::fabs(half_value(block, six ? offsetof(core::BlockQ6_K, d) : 0)) < 1e-6) continue;
    ++checked;
    double worst_plain = 0, sq = 0;
    for (size_t g = 0; g < 256 / sub; ++g) {
      const auto* xs = x.data() + 256 * b + sub * g;
      const auto [lo, hi] = std::minmax_element(xs, xs + sub);
      const double step = six ? std::max<double>(std::fabs(*lo), std::fabs(*hi)) / 32
                              : (static_cast<double>(*hi) - std::min(0.0f, *lo)) / nmax;
      worst_plain = std::max(worst_plain, step / std::sqrt(12.0));
    }
    for (size_t i = 256 * b; i < 256 * (b + 1); ++i) sq += std::pow(static_cast<double>(back[i]) - x[i], 2);
    EXPECT_LT(std::sqrt(sq / 256), 2 * worst_plain) << dtype_name(t) << " super-block " << b;
    EXPECT_GT(sq, 0.0);
  }
  EXPECT_GE(checked, 50);  // of 64: the 1e-4 super-blocks (and some of Q6_K's at 1e-3) are left out
}

TEST_P(QuantizeKTest, PiecesOfWholeBlocksGiveTheSameBytes) {
  const DType t = GetParam();
  const std::vector<float> x = k_input();
  const std::vector<std::byte> whole = quantize(t, x);
  std::vector<std::byte> pieces(whole.size());
  for (int64_t begin = 0; begin < static_cast<int64_t>(x.size()); begin += 3 * 256)
    quantize_row(t, x.data() + begin, pieces.data() + dtype_row_bytes(t, begin),
                 std::min<int64_t>(3 * 256, static_cast<int64_t>(x.size()) - begin));
  EXPECT_TRUE(pieces == whole);
}

TEST_P(QuantizeKTest, PartialSuperBlocksAreErrors) {
  const DType t = GetParam();
  std::vector<float> x(512, 1.0f);
  std::vector<std::byte> out(512);
  for (int64_t n : {int64_t{32}, int64_t{255}, int64_t{257}, int64_t{-256}}) {
    try {
      quantize_row(t, x.data(), out.data(), n);
      ADD_FAILURE() << "no error for n = " << n;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(std::string(dtype_name(t))));
      EXPECT_THAT(e.what(), HasSubstr("256-value blocks"));
    }
  }
  // Zeros and constants: finite fields, and zeros dequantise to zeros.
  std::vector<float> zeros(256, 0.0f), back(256, 1.0f);
  std::vector<std::byte> q = quantize(t, zeros);
  cpu::to_f32(t, q.data(), back.data(), 256);
  for (float v : back) EXPECT_EQ(v, 0.0f);
  q = quantize(t, std::vector<float>(256, -0.75f));
  cpu::to_f32(t, q.data(), back.data(), 256);
  for (float v : back) EXPECT_NEAR(v, -0.75f, 0.75f / 63);
}

INSTANTIATE_TEST_SUITE_P(Types, QuantizeKTest, ::testing::Values(DType::Q4_K, DType::Q5_K, DType::Q6_K),
                         [](const auto& p) { return std::string(dtype_name(p.param)); });

// Q6_K: every 16-value sub-block -32, -28, ..., 28, so the first fit is exact (scale 1: the
// codes are the values), every scale quantises to -128 against d = f16(1 / -128) = 0xA000, d·sc
// = 1, and every code is its value + 32: 0, 4, ..., 60.
TEST(Quantize, HandMadeQ6KBlock) {
  std::vector<float> x(256);
  for (size_t i = 0; i < x.size(); ++i) x[i] = -32.0f + 4.0f * static_cast<float>(i % 16);
  const std::vector<std::byte> q = quantize(DType::Q6_K, x);
  EXPECT_EQ(half_at(q.data(), offsetof(core::BlockQ6_K, d)), 0xA000u);
  for (size_t j = 0; j < 16; ++j)
    EXPECT_EQ(static_cast<unsigned>(q[offsetof(core::BlockQ6_K, scales) + j]), 0x80u) << j;
  for (int i = 0; i < 256; ++i) EXPECT_EQ(k_code(DType::Q6_K, q.data(), i).code, 4 * (i % 16)) << i;
  std::vector<float> back(256);
  cpu::to_f32(DType::Q6_K, q.data(), back.data(), 256);
  EXPECT_TRUE(back == x);
}

// Sub-blocks whose values are the codes themselves (Q4_K: x = l mod 16; Q5_K: x = l): the first
// fit is exact (scale 1, min 0), so every sub-block gets the 6-bit scale 63 and min 0, d =
// f16(1/63) = 0x2410 (0.015869140625), dmin = 0, and every code is its value (x / (63·d) rounds
// to x for x <= 31).
TEST(Quantize, HandMadeKBlocks) {
  for (DType t : {DType::Q4_K, DType::Q5_K}) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    const bool five = t == DType::Q5_K;
    std::vector<float> x(256);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(five ? i % 32 : i % 16);
    const std::vector<std::byte> q = quantize(t, x);
    EXPECT_EQ(half_at(q.data(), 0), 0x2410u);  // d
    EXPECT_EQ(half_at(q.data(), 2), 0x0000u);  // dmin
    // Scales 63 (low 6 bits of bytes 0..3, and 15 | 3 << 4 for sub-blocks 4..7), mins 0.
    for (size_t j = 0; j < 4; ++j) EXPECT_EQ(static_cast<unsigned>(q[4 + j]), 0xFFu) << j;
    for (size_t j = 4; j < 8; ++j) EXPECT_EQ(static_cast<unsigned>(q[4 + j]), 0x00u) << j;
    for (size_t j = 8; j < 12; ++j) EXPECT_EQ(static_cast<unsigned>(q[4 + j]), 0x0Fu) << j;
    for (int i = 0; i < 256; ++i)
      EXPECT_EQ(k_code(t, q.data(), i).code, static_cast<int>(x[static_cast<size_t>(i)])) << i;
    if (five) {  // qh[l]: bit g set where value 32g + l >= 16, i.e. l >= 16, for every g
      for (size_t l = 0; l < 32; ++l)
        EXPECT_EQ(static_cast<unsigned>(q[offsetof(core::BlockQ5_K, qh) + l]), l >= 16 ? 0xFFu : 0x00u) << l;
    } else {  // qs[32i + l]: codes of values 64i + l and 64i + 32 + l, both l mod 16
      for (size_t l = 0; l < 128; ++l)
        EXPECT_EQ(static_cast<unsigned>(q[offsetof(core::BlockQ4_K, qs) + l]), (l % 16) * 0x11u) << l;
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
