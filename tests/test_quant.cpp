// ggml's quantised weight types: our dequantisation equals the reference (gguf-py's dequantize,
// itself checked against ggml's C loops by tools/make_quant_fixtures.py) bit for bit, on every
// value of tests/data/quant; hand-made blocks pin the layouts down independently of the
// fixtures; linear and embed work on quantised matrices; a KV cache refuses quantised types.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "core/convert.h"
#include "core/quant.h"
#include "cpu/cpu_ops.h"
#include "kvinfer/error.h"
#include "kvinfer/kv_cache.h"
#include "kvinfer/kv_plan.h"
#include "test_files.h"

namespace kvinfer {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr int64_t kRows = 6, kCols = 512;  // the fixtures' shape (tools/make_quant_fixtures.py)
constexpr DType kQuantTypes[] = {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0,
                                 DType::Q5_1, DType::Q4_K, DType::Q5_K, DType::Q6_K};

struct Fixture {
  std::vector<std::byte> blocks;  // (kRows, kCols) of the type
  std::vector<float> values;      // (kRows, kCols): gguf's dequantisation
};

Fixture load_fixture(DType t) {
  const fs::path dir = fs::path(KVINFER_TEST_DATA) / "quant";
  const std::string name(dtype_name(t));
  const std::string bin = test::read_bytes(dir / (name + ".bin")), f32 = test::read_bytes(dir / (name + ".f32"));
  Fixture f;
  f.blocks.resize(bin.size());
  std::memcpy(f.blocks.data(), bin.data(), bin.size());
  f.values.resize(f32.size() / sizeof(float));
  std::memcpy(f.values.data(), f32.data(), f32.size());
  return f;
}

std::vector<float> randn(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// Index of the first value whose bits differ, or -1.
int64_t first_bit_difference(const float* a, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (core::f32_to_bits(a[i]) != core::f32_to_bits(b[i])) return i;
  return -1;
}

class QuantTest : public ::testing::TestWithParam<DType> {};

TEST_P(QuantTest, FixtureHasTheBlockLayoutsSize) {
  const DType t = GetParam();
  const Fixture f = load_fixture(t);
  EXPECT_EQ(f.blocks.size(), kRows * dtype_row_bytes(t, kCols));
  EXPECT_EQ(f.values.size(), static_cast<size_t>(kRows * kCols));
  EXPECT_EQ((Matrix{t, f.blocks.data(), kRows, kCols}.bytes()), f.blocks.size());
}

TEST_P(QuantTest, ToF32IsBitIdenticalToGguf) {
  const DType t = GetParam();
  const Fixture f = load_fixture(t);
  std::vector<float> got(f.values.size(), std::nanf(""));
  cpu::to_f32(t, f.blocks.data(), got.data(), kRows * kCols);
  EXPECT_EQ(std::memcmp(got.data(), f.values.data(), got.size() * sizeof(float)), 0);
  const int64_t i = first_bit_difference(got.data(), f.values.data(), kRows * kCols);
  EXPECT_EQ(i, -1) << "value " << i << " (row " << i / kCols << "): got " << got[static_cast<size_t>(i)]
                   << ", gguf " << f.values[static_cast<size_t>(i)];
}

// The runtime-dispatched block function of kernels/core/quant.h, block by block.
TEST_P(QuantTest, DequantizeBlockIsBitIdenticalToGguf) {
  const DType t = GetParam();
  const Fixture f = load_fixture(t);
  const DTypeBlock b = dtype_block(t);
  std::vector<float> out(static_cast<size_t>(b.elements));
  for (int64_t k = 0; k < kRows * kCols / b.elements; ++k) {
    ASSERT_TRUE(core::dequantize_block(t, f.blocks.data() + k * b.bytes, out.data()));
    ASSERT_EQ(std::memcmp(out.data(), f.values.data() + k * b.elements, out.size() * sizeof(float)), 0)
        << "block " << k;
  }
}

TEST_P(QuantTest, ToF32RejectsPartialBlocks) {
  const DType t = GetParam();
  const Fixture f = load_fixture(t);
  std::vector<float> out(static_cast<size_t>(kCols));
  for (int64_t n : {int64_t{1}, dtype_block(t).elements - 1, dtype_block(t).elements + 16}) {
    try {
      cpu::to_f32(t, f.blocks.data(), out.data(), n);
      ADD_FAILURE() << "no error for n = " << n;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(std::string(dtype_name(t))));
      EXPECT_THAT(e.what(), HasSubstr(std::to_string(n)));
    }
  }
}

// Checked before linear's parallel region: an exception must not escape an OpenMP team.
TEST_P(QuantTest, LinearRejectsRowsOfPartialBlocks) {
  const DType t = GetParam();
  const Fixture f = load_fixture(t);
  const int64_t cols = dtype_block(t).elements + 16;
  const Linear layer{Matrix{t, f.blocks.data(), 2, cols}, {}};
  std::vector<float> x(static_cast<size_t>(cols), 1.0f), y(2);
  try {
    cpu::linear(layer, x.data(), 1, y.data());
    ADD_FAILURE() << "no error for rows of " << cols << " values";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(std::to_string(cols)));
  }
}

TEST_P(QuantTest, FromF32RefusesQuantisedTypes) {
  std::vector<float> x(static_cast<size_t>(kCols), 1.0f);
  std::vector<std::byte> out(dtype_row_bytes(GetParam(), kCols));
  EXPECT_THROW(cpu::from_f32(GetParam(), x.data(), out.data(), kCols), Error);
}

// y = x · Wᵀ over the quantised fixture matrix, against a double-precision product of gguf's
// dequantised values. Tolerance: the rounding bound of cpu::dot's order (8 lanes of in/8 sums,
// then a 3-level tree, every product rounded): |error| <= (in/8 + 4) · 2^-24 · Σ|w·x|.
TEST_P(QuantTest, LinearMatchesDoubleReference) {
  const DType t = GetParam();
  const Fixture f = load_fixture(t);
  const int64_t n = 3;
  const Linear layer{Matrix{t, f.blocks.data(), kRows, kCols}, {}};
  const auto x = randn(static_cast<size_t>(n * kCols), 7);
  std::vector<float> y(static_cast<size_t>(n * kRows), std::nanf(""));
  cpu::linear(layer, x.data(), n, y.data());
  const double unit = std::ldexp(1.0, -24) * (kCols / 8 + 4) * 1.001;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t o = 0; o < kRows; ++o) {
      double want = 0, magnitude = 0;
      for (int64_t i = 0; i < kCols; ++i) {
        const double p = static_cast<double>(x[static_cast<size_t>(r * kCols + i)]) *
                         f.values[static_cast<size_t>(o * kCols + i)];
        want += p;
        magnitude += std::fabs(p);
      }
      const double got = y[static_cast<size_t>(r * kRows + o)];
      EXPECT_LE(std::fabs(got - want), unit * magnitude) << "row " << r << " out " << o;  // NaN fails
    }
}

TEST_P(QuantTest, EmbedGathersDequantisedRows) {
  const DType t = GetParam();
  const Fixture f = load_fixture(t);
  const int32_t ids[] = {4, 0, 5, 4, 2};
  std::vector<float> out(5 * kCols, std::nanf(""));
  cpu::embed(Matrix{t, f.blocks.data(), kRows, kCols}, ids, out.data());
  for (size_t k = 0; k < 5; ++k)
    EXPECT_EQ(std::memcmp(out.data() + k * kCols, f.values.data() + ids[k] * kCols, kCols * sizeof(float)), 0)
        << "id " << ids[k];
}

TEST_P(QuantTest, KvCacheAndPlanRefuseQuantisedTypes) {
  ModelConfig cfg;
  cfg.num_layers = 2;
  cfg.num_kv_heads = 2;
  cfg.head_dim = 64;
  cfg.num_heads = 4;
  try {
    KvCache kv(cfg, 16, GetParam());
    ADD_FAILURE() << "KvCache accepted " << dtype_name(GetParam());
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(std::string(dtype_name(GetParam()))));
  }
  EXPECT_THROW(plan_kv_bytes(cfg, 16, GetParam()), Error);
  EXPECT_THROW(kv_bytes_per_token(cfg, GetParam()), Error);
}

INSTANTIATE_TEST_SUITE_P(Types, QuantTest, ::testing::ValuesIn(kQuantTypes),
                         [](const auto& p) { return std::string(dtype_name(p.param)); });

// ---- hand-made blocks: the layouts, independent of the fixtures -------------------------------

void put_half(std::vector<std::byte>& b, size_t offset, float v) {
  const uint16_t h = core::f32_to_f16(v);
  b[offset] = static_cast<std::byte>(h & 0xFF);
  b[offset + 1] = static_cast<std::byte>(h >> 8);
}

std::vector<float> dequantize(DType t, const std::vector<std::byte>& block) {
  std::vector<float> out(static_cast<size_t>(dtype_block(t).elements));
  cpu::to_f32(t, block.data(), out.data(), dtype_block(t).elements);
  return out;
}

// Low nibbles are values 0..15, high nibbles 16..31; Q5 takes bit j of qh as bit 4 of value j.
TEST(QuantLayout, Q5_1NibbleOrderHighBitsAndMin) {
  std::vector<std::byte> b(24);
  put_half(b, 0, 0.5f);    // d
  put_half(b, 2, -3.0f);   // m
  const uint32_t qh = 0x80010002u;  // bits 1, 16, 31: values 1, 16, 31
  for (int i = 0; i < 4; ++i) b[4 + static_cast<size_t>(i)] = static_cast<std::byte>(qh >> (8 * i));
  for (int j = 0; j < 16; ++j) b[8 + static_cast<size_t>(j)] = static_cast<std::byte>(j | ((15 - j) << 4));
  const auto v = dequantize(DType::Q5_1, b);
  for (int j = 0; j < 32; ++j) {
    int q = j < 16 ? j : 31 - j;
    if (j == 1 || j == 16 || j == 31) q += 16;
    EXPECT_EQ(v[static_cast<size_t>(j)], 0.5f * static_cast<float>(q) - 3.0f) << j;
  }
}

// Q4_K: sub-block 5's 6-bit scale and min live in the low/high nibbles of byte 9 (low 4 bits)
// and the top bits of bytes 1 and 5 (high 2 bits); values 160..191 are the high nibbles of
// qs[64..95].
TEST(QuantLayout, Q4_KSixBitScalesOfUpperSubBlocks) {
  std::vector<std::byte> b(144);
  put_half(b, 0, 0.25f);  // d
  put_half(b, 2, 2.0f);   // dmin
  const int sc = 0b110101, mn = 0b100011;  // 53, 35
  b[4 + 1] = static_cast<std::byte>((sc >> 4) << 6);
  b[4 + 5] = static_cast<std::byte>((mn >> 4) << 6);
  b[4 + 9] = static_cast<std::byte>((sc & 0xF) | ((mn & 0xF) << 4));
  for (int l = 0; l < 32; ++l) b[16 + 64 + static_cast<size_t>(l)] = static_cast<std::byte>((l % 16) << 4 | 0x3);
  const auto v = dequantize(DType::Q4_K, b);
  for (int l = 0; l < 32; ++l)
    EXPECT_EQ(v[160 + static_cast<size_t>(l)], 0.25f * sc * static_cast<float>(l % 16) - 2.0f * mn) << l;
  // Sub-block 4 (low nibbles of the same bytes) has scale and min 0 here: every value is 0 · q − 0.
  for (int l = 0; l < 32; ++l) EXPECT_EQ(v[128 + static_cast<size_t>(l)], 0.0f) << l;
}

// Q6_K: value 128h + 32k + l takes 4 bits from ql and 2 from qh, and scale 8h + 2k + l/16.
TEST(QuantLayout, Q6_KElementOrderAndScales) {
  std::vector<std::byte> b(210);
  put_half(b, 208, 1.0f);
  for (int s = 0; s < 16; ++s) b[192 + static_cast<size_t>(s)] = static_cast<std::byte>(static_cast<int8_t>(s - 8));
  std::vector<int> q(256);
  std::mt19937 rng(3);
  for (auto& x : q) x = static_cast<int>(rng() % 64);
  for (int h = 0; h < 2; ++h)
    for (int l = 0; l < 32; ++l) {
      const int* L = q.data() + 128 * h;
      b[static_cast<size_t>(64 * h + l)] = static_cast<std::byte>((L[l] & 0xF) | ((L[l + 64] & 0xF) << 4));
      b[static_cast<size_t>(64 * h + l + 32)] = static_cast<std::byte>((L[l + 32] & 0xF) | ((L[l + 96] & 0xF) << 4));
      b[static_cast<size_t>(128 + 32 * h + l)] = static_cast<std::byte>(
          (L[l] >> 4) | ((L[l + 32] >> 4) << 2) | ((L[l + 64] >> 4) << 4) | ((L[l + 96] >> 4) << 6));
    }
  const auto v = dequantize(DType::Q6_K, b);
  for (int e = 0; e < 256; ++e) {
    const int scale = e / 16 - 8;  // scale index 8h + 2k + l/16 == e / 16
    EXPECT_EQ(v[static_cast<size_t>(e)], static_cast<float>(scale) * static_cast<float>(q[static_cast<size_t>(e)] - 32))
        << e;
  }
}

TEST(QuantLayout, RowBytesAndBlockSizes) {
  EXPECT_EQ(dtype_row_bytes(DType::Q8_0, 4096), 4096u / 32 * 34);
  EXPECT_EQ(dtype_row_bytes(DType::Q4_K, 4096), 4096u / 256 * 144);
  EXPECT_EQ(dtype_row_bytes(DType::Q6_K, 512), 420u);
  EXPECT_EQ(dtype_row_bytes(DType::F16, 7), 14u);
  EXPECT_EQ((Matrix{DType::Q5_K, nullptr, 3, 256}.bytes()), 3u * 176);
  for (DType t : kQuantTypes) EXPECT_TRUE(is_quantized(t)) << dtype_name(t);
  EXPECT_FALSE(is_quantized(DType::BF16));
  EXPECT_FALSE(core::dequantize_block(DType::F16, nullptr, nullptr));
}

}  // namespace
}  // namespace kvinfer
