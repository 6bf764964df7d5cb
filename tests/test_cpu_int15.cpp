// The 15-bit activation products (cpu/linear_int15.h, LoadOptions::activations = Int15) against
// the arithmetic their header documents, bit for bit, against the exact product, and against the
// 8-bit products they refine. CMake runs this file twice: on this CPU's kernels and with
// KVINFER_NO_AVX2=1 (the portable loops), so that both give the documented bits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/convert.h"
#include "cpu/cpu_features.h"
#include "cpu/cpu_ops.h"
#include "cpu/linear_int15.h"
#include "cpu_test_util.h"

namespace kvinfer {
namespace {

using test::randn;
using test::rel_error;
using test::StoredMatrix;

// The documented quantiser, spelled out for one block: d, then each value's code a, split into
// h and l.
struct Codes {
  float d, ds;
  int32_t h[32], l[32];
};

Codes quantise_block(const float* x) {
  Codes c{};
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  c.d = amax / 16256.0f;
  int32_t sum = 0;
  for (int j = 0; j < 32; ++j) {
    const float a = c.d != 0.0f ? std::clamp(std::nearbyint(x[j] / c.d), -16256.0f, 16256.0f) : 0.0f;
    c.h[j] = static_cast<int32_t>(std::nearbyint(a / 128.0f));
    c.l[j] = static_cast<int32_t>(a) - 128 * c.h[j];
    sum += static_cast<int32_t>(a);
  }
  c.ds = c.d * static_cast<float>(sum);
  return c;
}

// The documented product, spelled out from the stored bytes: weight codes (Q8_0's signed bytes,
// Q4's nibbles), 4 exact partials 128 · Σ w · h + Σ w · l, scaled, summed in block order, the tree,
// the Q4 offset term.
float int15_reference(DType t, const std::vector<Codes>& x, const std::byte* row, int64_t in) {
  const size_t block_bytes = dtype_block(t).bytes;
  float acc[4] = {}, off = 0.0f;
  for (int64_t b = 0; b < in / 32; ++b) {
    const std::byte* block = row + static_cast<size_t>(b) * block_bytes;
    const auto byte = [&](size_t i) { return static_cast<uint8_t>(block[i]); };
    const auto half = [&](size_t i) { return core::f16_to_f32(static_cast<uint16_t>(byte(i) | (byte(i + 1) << 8))); };
    int32_t w[32];
    const size_t qs = t == DType::Q4_1 ? 4 : 2;
    for (size_t j = 0; j < 32; ++j)
      w[j] = t == DType::Q8_0 ? static_cast<int8_t>(byte(2 + j)) : j < 16 ? byte(qs + j) & 0x0F : byte(qs + j - 16) >> 4;
    const Codes& c = x[static_cast<size_t>(b)];
    const float d = half(0), p = d * c.d;
    for (int m = 0; m < 4; ++m) {
      int32_t high = 0, low = 0;
      for (int j : {4 * m, 4 * m + 1, 4 * m + 2, 4 * m + 3, 16 + 4 * m, 17 + 4 * m, 18 + 4 * m, 19 + 4 * m}) {
        high += w[j] * c.h[j];
        low += w[j] * c.l[j];
      }
      const float term = p * static_cast<float>(128 * high + low);
      acc[m] = acc[m] + term;
    }
    if (t != DType::Q8_0) {
      const float term = (t == DType::Q4_1 ? half(2) : d) * c.ds;
      off = off + term;
    }
  }
  const float tree = (acc[0] + acc[2]) + (acc[1] + acc[3]);
  if (t == DType::Q4_1) return tree + off;
  if (t == DType::Q4_0) return tree - 8.0f * off;
  return tree;
}

std::vector<Codes> quantise_row(const float* x, int64_t in) {
  std::vector<Codes> codes;
  for (int64_t b = 0; b < in / 32; ++b) codes.push_back(quantise_block(x + 32 * b));
  return codes;
}

// The quantiser is the documented arithmetic bit for bit on values of every magnitude, exact
// halves (ties to even, in a and in h), signed zeros, subnormals and an all-zero block; codes
// within half a step of their value (where the step d is a normal float: a subnormal one is
// rounded too coarsely for that); a non-finite value poisons its block (NaN scale) and no other.
TEST(Int15Activations, QuantisationIsTheDocumentedArithmetic) {
  std::vector<float> x;
  for (float scale : {1e-3f, 1.0f, 7.5f, 3e4f}) {
    const auto r = randn(32 * 5, 90 + static_cast<uint32_t>(scale), scale);
    x.insert(x.end(), r.begin(), r.end());
  }
  x.push_back(16256.0f);  // d = 1: the others are ties of a (k + 0.5) and of h (a = 64 + 128k)
  for (int j = 1; j < 16; ++j) x.push_back(static_cast<float>(j * 100 - 800) + 0.5f);
  for (int j = 0; j < 16; ++j) x.push_back(static_cast<float>(64 + 128 * (j - 8)));
  for (int j = 0; j < 32; ++j) x.push_back(j % 2 ? -0.0f : 0.0f);
  for (int j = 0; j < 32; ++j) x.push_back(static_cast<float>(j + 1) * 1e-41f);  // subnormal
  const size_t poisoned = x.size() / 32;
  for (int j = 0; j < 32; ++j) x.push_back(j == 5 ? std::numeric_limits<float>::infinity() : 1.0f);
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<cpu::Int8Block> blocks(static_cast<size_t>(n / 32));
  std::vector<int8_t> h(x.size()), l(x.size());
  cpu::quantize_int15(x.data(), n, blocks.data(), h.data(), l.data());
  for (size_t b = 0; b < blocks.size(); ++b) {
    if (b == poisoned) {
      EXPECT_TRUE(std::isnan(blocks[b].d) && std::isnan(blocks[b].ds));
      for (size_t j = 32 * b; j < 32 * b + 32; ++j) EXPECT_EQ(h[j] | l[j], 0);
      continue;
    }
    const Codes want = quantise_block(x.data() + 32 * b);
    EXPECT_EQ(core::f32_to_bits(blocks[b].d), core::f32_to_bits(want.d)) << b;
    EXPECT_EQ(core::f32_to_bits(blocks[b].ds), core::f32_to_bits(want.ds)) << b;
    for (size_t j = 0; j < 32; ++j) {
      const size_t i = 32 * b + j;
      ASSERT_EQ(h[i], want.h[j]) << "block " << b << " value " << j << ": " << x[i];
      ASSERT_EQ(l[i], want.l[j]) << "block " << b << " value " << j << ": " << x[i];
      ASSERT_LE(std::abs(h[i]), 127);
      ASSERT_LE(std::abs(l[i]), 64);
      if (blocks[b].d >= std::numeric_limits<float>::min()) {
        EXPECT_LE(std::fabs(x[i] - blocks[b].d * static_cast<float>(128 * h[i] + l[i])), 0.5001f * blocks[b].d) << i;
      }
    }
  }
}

class Int15LinearTest : public ::testing::TestWithParam<DType> {};

// linear with 15-bit activations is the documented arithmetic bit for bit, close to the exact
// product (far closer than the 8-bit one), batch-invariant and independent of the thread count.
TEST_P(Int15LinearTest, IsTheDocumentedArithmeticCloseToExactAndBatchInvariant) {
  const DType t = GetParam();
  const int64_t n = 5, in = 512, out = 37;
  StoredMatrix w(t, out, in, 71);
  auto bias = randn(static_cast<size_t>(out), 72);
  Linear layer{w.m, Vector{bias.data(), out}};
  auto x = randn(static_cast<size_t>(n * in), 73);
  x[100] = 40.0f;  // an outlier channel, as small models have: it sets its block's step
  std::vector<float> y(static_cast<size_t>(n * out), std::nanf("")), y8(y);
  cpu::linear(layer, x.data(), n, y.data(), ActivationMode::Int15);
  cpu::linear(layer, x.data(), n, y8.data(), ActivationMode::Int8);

  const size_t row_bytes = dtype_row_bytes(t, in);
  std::vector<double> exact(y.size());
  for (int64_t r = 0; r < n; ++r) {
    const auto codes = quantise_row(x.data() + r * in, in);
    for (int64_t c = 0; c < out; ++c) {
      const float want = int15_reference(t, codes, w.bytes.data() + static_cast<size_t>(c) * row_bytes, in) +
                         bias[static_cast<size_t>(c)];
      ASSERT_EQ(core::f32_to_bits(y[static_cast<size_t>(r * out + c)]), core::f32_to_bits(want)) << r << " " << c;
      double e = bias[static_cast<size_t>(c)];
      for (int64_t i = 0; i < in; ++i)
        e += static_cast<double>(x[static_cast<size_t>(r * in + i)]) * w.values[static_cast<size_t>(c * in + i)];
      exact[static_cast<size_t>(r * out + c)] = e;
    }
  }
  const double err15 = rel_error(y, exact), err8 = rel_error(y8, exact);
  EXPECT_LT(err15, 1e-3) << "8-bit: " << err8;
  EXPECT_LT(err15, err8 / 30) << "8-bit: " << err8;  // 128 times finer codes

  std::vector<float> single(static_cast<size_t>(out));
  for (int64_t r = 0; r < n; ++r) {
    cpu::linear(layer, x.data() + r * in, 1, single.data(), ActivationMode::Int15);
    EXPECT_EQ(0, std::memcmp(single.data(), y.data() + r * out, single.size() * sizeof(float))) << "row " << r;
  }
  const int64_t big = 203;  // above the threading threshold, and a last row block of 11 rows
  StoredMatrix wb(t, big, in, 74);
  Linear lb{wb.m, {}};
  std::vector<std::vector<float>> yb;
  for (int threads : test::thread_counts()) {
    const test::ScopedThreads scoped(threads);
    yb.emplace_back(static_cast<size_t>(n * big), std::nanf(""));
    cpu::linear(lb, x.data(), n, yb.back().data(), ActivationMode::Int15);
  }
  for (size_t i = 1; i < yb.size(); ++i)
    EXPECT_EQ(0, std::memcmp(yb[0].data(), yb[i].data(), yb[0].size() * sizeof(float))) << "threads run " << i;
}

// A NaN in an input block makes every product of that input row NaN, and no other row's.
TEST_P(Int15LinearTest, ANonFiniteInputPoisonsItsRowOnly) {
  const DType t = GetParam();
  const int64_t n = 3, in = 256, out = 20;
  StoredMatrix w(t, out, in, 81);
  Linear layer{w.m, {}};
  auto x = randn(static_cast<size_t>(n * in), 82);
  x[static_cast<size_t>(in + 70)] = std::nanf("");
  std::vector<float> y(static_cast<size_t>(n * out));
  cpu::linear(layer, x.data(), n, y.data(), ActivationMode::Int15);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < out; ++c) EXPECT_EQ(std::isnan(y[static_cast<size_t>(r * out + c)]), r == 1) << r << " " << c;
}

// Other weight types ignore the mode: their products are the exact ones, bit for bit.
TEST(Int15Activations, OtherTypesTakeTheExactProducts) {
  for (DType t : {DType::Q5_0, DType::Q4_K, DType::Q6_K, DType::BF16, DType::F32}) {
    const int64_t n = 2, in = 512, out = 19;
    StoredMatrix w(t, out, in, 91);
    Linear layer{w.m, {}};
    const auto x = randn(static_cast<size_t>(n * in), 92);
    std::vector<float> exact(static_cast<size_t>(n * out)), fine(exact.size());
    cpu::linear(layer, x.data(), n, exact.data(), ActivationMode::Exact);
    cpu::linear(layer, x.data(), n, fine.data(), ActivationMode::Int15);
    EXPECT_EQ(0, std::memcmp(exact.data(), fine.data(), exact.size() * sizeof(float))) << dtype_name(t);
  }
}

INSTANTIATE_TEST_SUITE_P(Types, Int15LinearTest, ::testing::Values(DType::Q8_0, DType::Q4_0, DType::Q4_1),
                         [](const auto& p) { return std::string(dtype_name(p.param)); });

}  // namespace
}  // namespace kvinfer
