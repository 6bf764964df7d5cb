// The 8-bit activation products (cpu/linear_int8.h, LoadOptions::activations = Int8) against the
// arithmetic their header documents, bit for bit, and against the exact product.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "core/convert.h"
#include "cpu/aligned.h"
#include "cpu/cpu_features.h"
#include "cpu/cpu_ops.h"
#include "cpu/int8_blocks.h"
#include "cpu/int8_prepared.h"
#include "cpu/linear_avx2.h"
#include "cpu/linear_int8.h"
#include "cpu/linear_int8_avx512.h"
#include "cpu_test_util.h"

namespace kvinfer {
namespace {

using test::randn;
using test::rel_error;
using test::StoredMatrix;

// The documented arithmetic, spelled out: codes of weight row c and input row t, 4 exact integer
// partial sums (partial m: values 4m..4m + 3 and 16 + 4m..16 + 4m + 3), scaled, then the fixed
// tree (and the Q4 offset term: Q4_1's m_w, Q4_0's −8 · d_w).
float int8_block_reference(DType t, const cpu::Int8Block* xb, const int8_t* xq, const std::byte* row, int64_t in);

float int8_reference(DType t, const cpu::Int8Block* xb, const int8_t* xq, const std::byte* row, int64_t in) {
  if (cpu::int8_block_type(t)) return int8_block_reference(t, xb, xq, row, in);
  const size_t block_bytes = dtype_block(t).bytes;
  const bool q4 = t != DType::Q8_0;
  float acc[4] = {}, off = 0.0f;
  for (int64_t b = 0; b < in / 32; ++b) {
    const std::byte* block = row + static_cast<size_t>(b) * block_bytes;
    const auto byte = [&](size_t i) { return static_cast<uint8_t>(block[i]); };
    const auto half = [&](size_t i) { return core::f16_to_f32(static_cast<uint16_t>(byte(i) | (byte(i + 1) << 8))); };
    int32_t w[32];  // the weight codes: Q8_0 bytes from offset 2; Q4 nibbles after d (and m), unsigned
    const size_t qs = t == DType::Q4_1 ? 4 : 2;
    for (size_t j = 0; j < 32; ++j) {
      if (t == DType::Q8_0) {
        w[j] = static_cast<int8_t>(byte(2 + j));
      } else {
        w[j] = j < 16 ? byte(qs + j) & 0x0F : byte(qs + j - 16) >> 4;
      }
    }
    const float d = half(0);
    const float p = d * xb[b].d;
    for (int m = 0; m < 4; ++m) {
      int32_t partial = 0;
      for (int j = 4 * m; j < 4 * m + 4; ++j) partial += w[j] * xq[32 * b + j] + w[j + 16] * xq[32 * b + j + 16];
      const float term = p * static_cast<float>(partial);
      acc[m] = acc[m] + term;
    }
    if (q4) {
      const float term = (t == DType::Q4_1 ? half(2) : d) * xb[b].ds;
      off = off + term;
    }
  }
  const float tree = (acc[0] + acc[2]) + (acc[1] + acc[3]);
  if (t == DType::Q4_1) return tree + off;
  if (t == DType::Q4_0) return tree - 8.0f * off;
  return tree;
}

// Q5_0, Q5_1: blocks read by int8_blocks.h (checked against the dequantiser below), 8 exact
// partials by position, fused multiply-adds, the fixed trees, the offset's sign.
float tree8(const float* v) { return ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7])); }

float int8_block_reference(DType t, const cpu::Int8Block* xb, const int8_t* xq, const std::byte* row, int64_t in) {
  float acc[8] = {}, off[8] = {};
  for (int64_t b = 0; b < in / 32; ++b) {
    cpu::Int8WeightBlock w;
    cpu::int8_weight_block(t, row, b, w);
    const float p = w.s * xb[b].d;
    for (int l = 0; l < 8; ++l) {
      int32_t partial = 0;
      for (int j = 4 * l; j < 4 * l + 4; ++j) partial += w.u[j] * xq[32 * b + j];
      acc[l] = std::fma(p, static_cast<float>(partial), acc[l]);
    }
    off[b % 8] = std::fma(w.f, xb[b].ds, off[b % 8]);
  }
  return t == DType::Q5_0 ? tree8(acc) - 16.0f * tree8(off) : tree8(acc) + tree8(off);
}

// Q4_K, Q5_K, Q6_K with super-block inputs: integer sums over a super-block (Q6_K: each half),
// lane l taking chunk k's multiplier m_{k, l/4}, then fused multiply-adds; the offsets from the
// 16-value sums.
float int8_super_reference(DType t, const cpu::Int8Super* xs, const int8_t* xq, const std::byte* row, int64_t in) {
  float acc[8] = {}, moff[8] = {};
  const int per_flush = t == DType::Q6_K ? 4 : 8;
  for (int64_t s = 0; s < in / 256; ++s) {
    cpu::KSuper k;
    cpu::k_super(t, row, s, k);
    for (int k0 = 0; k0 < 8; k0 += per_flush) {
      int32_t lanes[8] = {};
      for (int c = k0; c < k0 + per_flush; ++c)
        for (int j = 0; j < 32; ++j) lanes[j / 4] += k.m[c][j / 16] * (k.u[32 * c + j] * xq[256 * s + 32 * c + j]);
      for (int l = 0; l < 8; ++l) acc[l] = std::fma(k.d * xs[s].d, static_cast<float>(lanes[l]), acc[l]);
    }
    for (int l = 0; l < 8; ++l)
      moff[l] = std::fma(k.dmin * xs[s].d,
                         static_cast<float>(k.n[2 * l] * xs[s].sums[2 * l] + k.n[2 * l + 1] * xs[s].sums[2 * l + 1]),
                         moff[l]);
  }
  return t == DType::Q6_K ? tree8(acc) - 32.0f * tree8(moff) : tree8(acc) - tree8(moff);
}

// int8_blocks.h reads every block (Q5) and super-block (K-quants) as the dequantiser does, bit for
// bit, on random bytes (every scale and min, Q6_K's −128 included).
TEST(Int8Activations, BlocksAndSuperBlocksReadAsTheDequantiserReads) {
  for (const DType t : {DType::Q5_0, DType::Q5_1, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    const int64_t in = 1024;
    const auto bytes = test::random_blocks(t, 3, in, 91);
    std::vector<float> values(static_cast<size_t>(3 * in));
    cpu::to_f32(t, bytes.data(), values.data(), 3 * in);
    const size_t row_bytes = dtype_row_bytes(t, in);
    for (int64_t r = 0; r < 3; ++r)
      for (int64_t i = 0; i < in; ++i) {
        const std::byte* row = bytes.data() + r * row_bytes;
        float v = 0;
        int code = 0;
        if (t == DType::Q5_0 || t == DType::Q5_1) {
          cpu::Int8WeightBlock w;
          cpu::int8_weight_block(t, row, i / 32, w);
          code = w.u[i % 32];
          v = t == DType::Q5_0 ? static_cast<float>(code - 16) * w.s : static_cast<float>(code) * w.s + w.f;
        } else {
          cpu::KSuper k;
          cpu::k_super(t, row, i / 256, k);
          const int64_t j = i % 256;
          code = k.u[j];
          const float scale = k.d * static_cast<float>(k.m[j / 32][(j % 32) / 16]);
          v = t == DType::Q6_K ? scale * static_cast<float>(code - 32)
                               : scale * static_cast<float>(code) - k.dmin * static_cast<float>(k.n[j / 16]);
          if (t != DType::Q6_K) {
            ASSERT_EQ(k.n[2 * (j / 32)], k.n[2 * (j / 32) + 1]);
          }
        }
        const float want = values[static_cast<size_t>(r * in + i)];
        ASSERT_EQ(core::f32_to_bits(v), core::f32_to_bits(want))
            << dtype_name(t) << " row " << r << " value " << i << ": " << v << " vs " << want;
        ASSERT_LT(code, t == DType::Q4_K ? 16 : t == DType::Q6_K ? 64 : 32);
      }
  }
}

// Super-block quantisation: one scale for 256 values, codes as the 32-value blocks', the 16-value
// sums; a non-finite value poisons its super-block only.
TEST(Int8Activations, SuperBlockQuantisationIsTheDocumentedArithmetic) {
  const int64_t n = 768;
  auto x = randn(static_cast<size_t>(n), 95, 3.0f);
  x[300] = std::numeric_limits<float>::infinity();  // super-block 1
  for (const bool simd : {false, true}) {
    if (simd && !cpu::cpu_has_avx2_fma_f16c()) continue;
    std::vector<cpu::Int8Super> s(3);
    std::vector<int8_t> q(static_cast<size_t>(n));
    if (simd)
      cpu::avx2::quantize_int8_super(x.data(), n, s.data(), q.data());
    else
      cpu::quantize_int8_super(x.data(), n, s.data(), q.data());
    for (int64_t b = 0; b < 3; ++b) {
      if (b == 1) {
        EXPECT_TRUE(std::isnan(s[1].d));
        for (int j = 0; j < 256; ++j) ASSERT_EQ(q[static_cast<size_t>(256 + j)], 0);
        continue;
      }
      float amax = 0;
      for (int j = 0; j < 256; ++j) amax = std::max(amax, std::fabs(x[static_cast<size_t>(256 * b + j)]));
      const float d = amax / 127.0f, id = 1.0f / d;
      EXPECT_EQ(core::f32_to_bits(s[static_cast<size_t>(b)].d), core::f32_to_bits(d));
      for (int i = 0; i < 16; ++i) {
        int sum = 0;
        for (int j = 16 * i; j < 16 * i + 16; ++j) {
          const float want = std::clamp(std::nearbyint(x[static_cast<size_t>(256 * b + j)] * id), -127.0f, 127.0f);
          ASSERT_EQ(static_cast<float>(q[static_cast<size_t>(256 * b + j)]), want) << simd << " " << b << " " << j;
          sum += q[static_cast<size_t>(256 * b + j)];
        }
        EXPECT_EQ(s[static_cast<size_t>(b)].sums[i], sum);
      }
    }
  }
}

class Int8LinearTest : public ::testing::TestWithParam<DType> {};

// Codes in [-127, 127], each within half a step of its value; a non-finite value poisons its
// block (NaN scale) and no other.
TEST(Int8Activations, QuantisationIsWithinHalfAStep) {
  auto x = randn(256, 60, 3.0f);
  x[40] = std::numeric_limits<float>::infinity();
  std::vector<cpu::Int8Block> blocks(8);
  std::vector<int8_t> q(256);
  cpu::quantize_int8(x.data(), 256, blocks.data(), q.data());
  for (size_t b = 0; b < 8; ++b) {
    if (b == 1) {
      EXPECT_TRUE(std::isnan(blocks[b].d) && std::isnan(blocks[b].ds));
      continue;
    }
    int32_t sum = 0;
    for (size_t j = 32 * b; j < 32 * b + 32; ++j) {
      ASSERT_GE(q[j], -127);
      EXPECT_LE(std::fabs(x[j] - blocks[b].d * q[j]), 0.5001f * blocks[b].d) << j;
      sum += q[j];
    }
    EXPECT_EQ(blocks[b].ds, blocks[b].d * static_cast<float>(sum));
  }
}

// The quantiser is the arithmetic linear_int8.h documents, bit for bit, on values of every
// magnitude, exact halves (ties go to even), signed zeros, subnormals and an all-zero block.
TEST(Int8Activations, QuantisationIsTheDocumentedArithmetic) {
  std::vector<float> x;
  for (float scale : {1e-3f, 1.0f, 7.5f, 3e4f}) {
    const auto r = randn(32 * 5, 70 + static_cast<uint32_t>(scale), scale);
    x.insert(x.end(), r.begin(), r.end());
  }
  x.push_back(127.0f);  // d = 1: the others, k + 0.5, are ties
  for (int j = 1; j < 32; ++j) x.push_back(static_cast<float>(j - 16) + 0.5f);
  for (int j = 0; j < 32; ++j) x.push_back(j % 2 ? -0.0f : 0.0f);
  for (int j = 0; j < 32; ++j) x.push_back(static_cast<float>(j + 1) * 1e-41f);  // subnormal
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<cpu::Int8Block> blocks(static_cast<size_t>(n / 32));
  std::vector<int8_t> q(x.size());
  cpu::quantize_int8(x.data(), n, blocks.data(), q.data());
  for (size_t b = 0; b < blocks.size(); ++b) {
    float amax = 0.0f;
    for (size_t j = 32 * b; j < 32 * b + 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    int32_t sum = 0;
    for (size_t j = 32 * b; j < 32 * b + 32; ++j) {
      const float want = std::clamp(std::nearbyint(x[j] * id), -127.0f, 127.0f);
      ASSERT_EQ(static_cast<float>(q[j]), want) << "block " << b << " value " << j << ": " << x[j];
      sum += q[j];
    }
    EXPECT_EQ(core::f32_to_bits(blocks[b].d), core::f32_to_bits(d)) << b;
    EXPECT_EQ(core::f32_to_bits(blocks[b].ds), core::f32_to_bits(d * static_cast<float>(sum))) << b;
  }
}

// linear with int8 activations is the documented arithmetic bit for bit (on the AVX2 kernels and
// the portable loops alike), close to the exact product, batch-invariant and independent of the
// thread count.
TEST_P(Int8LinearTest, IsTheDocumentedArithmeticCloseToExactAndBatchInvariant) {
  const DType t = GetParam();
  const int64_t n = 5, in = 512, out = 37;
  StoredMatrix w(t, out, in, 61);
  auto bias = randn(static_cast<size_t>(out), 62);
  Linear layer{w.m, Vector{bias.data(), out}};
  auto x = randn(static_cast<size_t>(n * in), 63);
  std::vector<float> y(static_cast<size_t>(n * out), std::nanf(""));
  cpu::linear(layer, x.data(), n, y.data(), ActivationMode::Int8);

  std::vector<cpu::Int8Block> xb(static_cast<size_t>(n * in / 32));
  std::vector<int8_t> xq(static_cast<size_t>(n * in));
  cpu::quantize_int8(x.data(), n * in, xb.data(), xq.data());  // rows are whole blocks
  const size_t row_bytes = dtype_row_bytes(t, in);
  std::vector<double> exact(y.size());
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < out; ++c) {
      const float want = int8_reference(t, xb.data() + r * in / 32, xq.data() + r * in,
                                        w.bytes.data() + static_cast<size_t>(c) * row_bytes, in) +
                         bias[static_cast<size_t>(c)];
      ASSERT_EQ(core::f32_to_bits(y[static_cast<size_t>(r * out + c)]), core::f32_to_bits(want)) << r << " " << c;
      double e = bias[static_cast<size_t>(c)];
      for (int64_t i = 0; i < in; ++i)
        e += static_cast<double>(x[static_cast<size_t>(r * in + i)]) * w.values[static_cast<size_t>(c * in + i)];
      exact[static_cast<size_t>(r * out + c)] = e;
    }
  EXPECT_LT(rel_error(y, exact), 1e-2);  // activations rounded to 8 bits: about 0.4 % a value

  std::vector<float> single(static_cast<size_t>(out));
  for (int64_t r = 0; r < n; ++r) {
    cpu::linear(layer, x.data() + r * in, 1, single.data(), ActivationMode::Int8);
    EXPECT_EQ(0, std::memcmp(single.data(), y.data() + r * out, single.size() * sizeof(float))) << "row " << r;
  }
#if defined(_OPENMP)
  const int threads = omp_get_max_threads();
  const int64_t big = 203;  // above the threading threshold
  StoredMatrix wb(t, big, in, 64);
  Linear lb{wb.m, {}};
  std::vector<float> yb[2];
  for (int run = 0; run < 2; ++run) {
    omp_set_num_threads(run == 0 ? 1 : 3);
    yb[run].assign(static_cast<size_t>(n * big), std::nanf(""));
    cpu::linear(lb, x.data(), n, yb[run].data(), ActivationMode::Int8);
  }
  omp_set_num_threads(threads);
  EXPECT_EQ(0, std::memcmp(yb[0].data(), yb[1].data(), yb[0].size() * sizeof(float)));
#endif
}

// Prefill's tiles (cpu/int8_prepared.h), each kernel this CPU can run (AVX-512 VNNI, AVX2): a
// prepared block of every size that matters (1 row; a part of a group, a pair
// or a half; 16 rows), against any number of input rows (every tile size and a shorter last
// tile), on random code bytes (Q8_0's −128 included) and an input block holding a NaN, the
// documented arithmetic bit for bit; the columns past the block's rows untouched.
TEST_P(Int8LinearTest, PreparedTilesAreTheDocumentedArithmetic) {
  const DType t = GetParam();
  struct Kernel {
    const char* name;
    void (*prepare)(DType, const std::byte*, int64_t, int64_t, std::byte*);
    void (*products)(DType, const std::byte*, int64_t, int64_t, const cpu::Int8Block*, const int8_t*, int64_t, float*,
                     int64_t);
  };
  std::vector<Kernel> kernels;
  if (cpu::cpu_has_avx512_vnni() && !cpu::int8_block_type(t))
    kernels.push_back({"AVX-512 VNNI", cpu::avx512::int8_prepare, cpu::avx512::int8_prepared_products});
  if (cpu::cpu_has_avx2_fma_f16c())
    kernels.push_back({"AVX2", cpu::avx2::int8_prepare, cpu::avx2::int8_prepared_products});
  if (kernels.empty()) GTEST_SKIP() << "no tile kernel runs on this CPU (no AVX2): linear takes the portable loops";

  const int64_t in = 1024, n = 11, ldy = 19;
  auto x = randn(static_cast<size_t>(n * in), 71, 2.0f);
  x[static_cast<size_t>(5 * in + 100)] = std::nanf("");  // row 5, block 3
  std::vector<cpu::Int8Block> xb(static_cast<size_t>(n * in / 32));
  std::vector<int8_t> xq(static_cast<size_t>(n * in));
  cpu::quantize_int8(x.data(), n * in, xb.data(), xq.data());
  const size_t row_bytes = dtype_row_bytes(t, in);
  cpu::AlignedVector<std::byte> prepared(cpu::int8_prepared_bytes(t, in));
  for (const Kernel& k : kernels)
    for (int64_t rows : {1, 3, 6, 9, 13, 16}) {
      const auto w = test::random_blocks(t, rows, in, 72 + static_cast<uint32_t>(rows));
      k.prepare(t, w.data(), rows, in, prepared.data());
      for (int64_t count : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{4}, int64_t{5}, int64_t{7}, n}) {
        std::vector<float> y(static_cast<size_t>(count * ldy), -1.0f);
        k.products(t, prepared.data(), rows, in, xb.data(), xq.data(), count, y.data(), ldy);
        for (int64_t r = 0; r < count; ++r)
          for (int64_t c = 0; c < ldy; ++c) {
            const float got = y[static_cast<size_t>(r * ldy + c)];
            const std::string at = std::string(k.name) + ", " + std::to_string(rows) + " rows, " +
                                   std::to_string(count) + " input rows: row " + std::to_string(r) + ", column " +
                                   std::to_string(c);
            if (c >= rows) {
              ASSERT_EQ(got, -1.0f) << at << " was written";
              continue;
            }
            const float want = int8_reference(t, xb.data() + r * in / 32, xq.data() + r * in,
                                              w.data() + static_cast<size_t>(c) * row_bytes, in);
            if (std::isnan(want)) {
              ASSERT_TRUE(std::isnan(got)) << at;
            } else {
              ASSERT_EQ(core::f32_to_bits(got), core::f32_to_bits(want)) << at;
            }
          }
      }
    }
}

// Decode's one-row kernels, each this CPU can run (AVX-512 VNNI, AVX2, and whichever
// int8_rows_product dispatches to, the portable loops under KVINFER_NO_AVX2=1): every row count
// up to 16 and past it, random code bytes and an input block holding a NaN, the documented
// arithmetic bit for bit.
TEST_P(Int8LinearTest, RowKernelsAreTheDocumentedArithmetic) {
  const DType t = GetParam();
  using RowKernel = void (*)(DType, const cpu::Int8Block*, const int8_t*, const std::byte*, int64_t, int64_t, float*,
                             cpu::Prefetcher&);
  std::vector<std::pair<const char*, RowKernel>> kernels = {{"dispatched", cpu::int8_rows_product}};
  if (cpu::cpu_has_avx512_vnni() && !cpu::int8_block_type(t))
    kernels.emplace_back("AVX-512 VNNI", cpu::avx512::int8_rows_product);
  if (cpu::cpu_has_avx2_fma_f16c()) kernels.emplace_back("AVX2", cpu::avx2::int8_rows_product);
  const int64_t in = 1024;
  auto x = randn(static_cast<size_t>(2 * in), 81, 2.0f);
  x[static_cast<size_t>(in + 300)] = std::nanf("");  // input row 1, block 9
  std::vector<cpu::Int8Block> blocks(static_cast<size_t>(2 * in / 32));
  std::vector<int8_t> codes(static_cast<size_t>(2 * in));
  cpu::quantize_int8(x.data(), 2 * in, blocks.data(), codes.data());
  const size_t row_bytes = dtype_row_bytes(t, in);
  for (int64_t rows : {1, 2, 3, 5, 8, 13, 16, 21, 37})
    for (int64_t input = 0; input < 2; ++input) {
      const cpu::Int8Block* xb = blocks.data() + input * in / 32;
      const int8_t* xq = codes.data() + input * in;
      const auto w = test::random_blocks(t, rows, in, 82 + static_cast<uint32_t>(rows));
      for (const auto& [name, kernel] : kernels) {
        std::vector<float> y(static_cast<size_t>(rows) + 1, -1.0f);
        cpu::Prefetcher none;
        kernel(t, xb, xq, w.data(), rows, in, y.data(), none);
        const std::string at =
            std::string(name) + ", " + std::to_string(rows) + " rows, input " + std::to_string(input);
        ASSERT_EQ(y.back(), -1.0f) << at << ": wrote past the last row";
        for (int64_t c = 0; c < rows; ++c) {
          const float want = int8_reference(t, xb, xq, w.data() + static_cast<size_t>(c) * row_bytes, in);
          const float got = y[static_cast<size_t>(c)];
          ASSERT_EQ(std::isnan(want), input == 1) << at;  // the NaN block poisons input 1's products only
          if (std::isnan(want)) {
            ASSERT_TRUE(std::isnan(got)) << at << ": row " << c;
          } else {
            ASSERT_EQ(core::f32_to_bits(got), core::f32_to_bits(want)) << at << ": row " << c;
          }
        }
      }
    }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, Int8LinearTest,
                         ::testing::Values(DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1),
                         [](const auto& p) { return std::string(dtype_name(p.param)); });

// ---- the K-quants, with super-block inputs ----

class Int8SuperTest : public ::testing::TestWithParam<DType> {};

// linear with int8 activations is the documented arithmetic bit for bit (AVX2 or portable), close
// to the exact product, batch-invariant and independent of the thread count; a decode of a row
// equals that row of a prefill.
TEST_P(Int8SuperTest, IsTheDocumentedArithmeticCloseToExactAndBatchInvariant) {
  const DType t = GetParam();
  const int64_t n = 7, in = 1024, out = 37;
  StoredMatrix w(t, out, in, 161);
  auto bias = randn(static_cast<size_t>(out), 162);
  Linear layer{w.m, Vector{bias.data(), out}};
  auto x = randn(static_cast<size_t>(n * in), 163);
  std::vector<float> y(static_cast<size_t>(n * out), std::nanf(""));
  cpu::linear(layer, x.data(), n, y.data(), ActivationMode::Int8);

  std::vector<cpu::Int8Super> xs(static_cast<size_t>(n * in / 256));
  std::vector<int8_t> xq(static_cast<size_t>(n * in));
  cpu::quantize_int8_super(x.data(), n * in, xs.data(), xq.data());
  const size_t row_bytes = dtype_row_bytes(t, in);
  std::vector<double> exact(y.size());
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < out; ++c) {
      const float want = int8_super_reference(t, xs.data() + r * in / 256, xq.data() + r * in,
                                              w.bytes.data() + static_cast<size_t>(c) * row_bytes, in) +
                         bias[static_cast<size_t>(c)];
      ASSERT_EQ(core::f32_to_bits(y[static_cast<size_t>(r * out + c)]), core::f32_to_bits(want)) << r << " " << c;
      double e = bias[static_cast<size_t>(c)];
      for (int64_t i = 0; i < in; ++i)
        e += static_cast<double>(x[static_cast<size_t>(r * in + i)]) * w.values[static_cast<size_t>(c * in + i)];
      exact[static_cast<size_t>(r * out + c)] = e;
    }
  EXPECT_LT(rel_error(y, exact), 1e-2);  // activations rounded to 8 bits a super-block

  std::vector<float> single(static_cast<size_t>(out));
  for (int64_t r = 0; r < n; ++r) {
    cpu::linear(layer, x.data() + r * in, 1, single.data(), ActivationMode::Int8);
    EXPECT_EQ(0, std::memcmp(single.data(), y.data() + r * out, single.size() * sizeof(float))) << "row " << r;
  }
#if defined(_OPENMP)
  const int threads = omp_get_max_threads();
  const int64_t big = 203;  // above the threading threshold
  StoredMatrix wb(t, big, in, 164);
  Linear lb{wb.m, {}};
  std::vector<float> yb[2];
  for (int run = 0; run < 2; ++run) {
    omp_set_num_threads(run == 0 ? 1 : 3);
    yb[run].assign(static_cast<size_t>(n * big), std::nanf(""));
    cpu::linear(lb, x.data(), n, yb[run].data(), ActivationMode::Int8);
  }
  omp_set_num_threads(threads);
  EXPECT_EQ(0, std::memcmp(yb[0].data(), yb[1].data(), yb[0].size() * sizeof(float)));
#endif
}

// Decode's row kernels (AVX2, and whichever int8_super_rows_product dispatches to) and prefill's
// prepared tiles, every row count and input-row count that matters, an input super-block holding a
// NaN: the documented arithmetic bit for bit, nothing written past the rows.
TEST_P(Int8SuperTest, RowKernelsAndTilesAreTheDocumentedArithmetic) {
  const DType t = GetParam();
  const int64_t in = 1024, n = 9, ldy = 19;
  auto x = randn(static_cast<size_t>(n * in), 181, 2.0f);
  x[static_cast<size_t>(5 * in + 600)] = std::nanf("");  // input row 5, super-block 2
  std::vector<cpu::Int8Super> xs(static_cast<size_t>(n * in / 256));
  std::vector<int8_t> xq(static_cast<size_t>(n * in));
  cpu::quantize_int8_super(x.data(), n * in, xs.data(), xq.data());
  const size_t row_bytes = dtype_row_bytes(t, in);
  const auto check = [&](const std::string& at, int64_t r, const std::byte* w, int64_t c, float got) {
    const float want = int8_super_reference(t, xs.data() + r * in / 256, xq.data() + r * in,
                                            w + static_cast<size_t>(c) * row_bytes, in);
    ASSERT_EQ(std::isnan(want), r == 5) << at;
    if (std::isnan(want))
      ASSERT_TRUE(std::isnan(got)) << at;
    else
      ASSERT_EQ(core::f32_to_bits(got), core::f32_to_bits(want)) << at << ": " << got << " vs " << want;
  };
  using RowKernel = void (*)(DType, const cpu::Int8Super*, const int8_t*, const std::byte*, int64_t, int64_t, float*,
                             cpu::Prefetcher&);
  std::vector<std::pair<const char*, RowKernel>> kernels = {{"dispatched", cpu::int8_super_rows_product}};
  if (cpu::cpu_has_avx2_fma_f16c()) kernels.emplace_back("AVX2", cpu::avx2::int8_super_rows_product);
  for (int64_t rows : {1, 2, 3, 5, 16, 21}) {
    const auto w = test::random_blocks(t, rows, in, 182 + static_cast<uint32_t>(rows));
    for (const auto& [name, kernel] : kernels)
      for (int64_t r = 0; r < n; ++r) {
        std::vector<float> y(static_cast<size_t>(rows) + 1, -1.0f);
        cpu::Prefetcher none;
        kernel(t, xs.data() + r * in / 256, xq.data() + r * in, w.data(), rows, in, y.data(), none);
        const std::string at = std::string(name) + ", " + std::to_string(rows) + " rows, input " + std::to_string(r);
        ASSERT_EQ(y.back(), -1.0f) << at << ": wrote past the last row";
        for (int64_t c = 0; c < rows; ++c) check(at + ", row " + std::to_string(c), r, w.data(), c, y[static_cast<size_t>(c)]);
      }
    if (!cpu::cpu_has_avx2_fma_f16c() || rows > 16) continue;
    cpu::AlignedVector<std::byte> prepared(cpu::int8_prepared_bytes(t, in));
    cpu::avx2::int8_super_prepare(t, w.data(), rows, in, prepared.data());
    for (int64_t count : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{4}, n}) {
      std::vector<float> y(static_cast<size_t>(count * ldy), -1.0f);
      cpu::avx2::int8_super_prepared_products(t, prepared.data(), rows, in, xs.data(), xq.data(), count, y.data(), ldy);
      for (int64_t r = 0; r < count; ++r)
        for (int64_t c = 0; c < ldy; ++c) {
          const std::string at = "tiles, " + std::to_string(rows) + " rows, " + std::to_string(count) +
                                 " input rows: row " + std::to_string(r) + ", column " + std::to_string(c);
          if (c >= rows)
            ASSERT_EQ(y[static_cast<size_t>(r * ldy + c)], -1.0f) << at << " was written";
          else
            check(at, r, w.data(), c, y[static_cast<size_t>(r * ldy + c)]);
        }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, Int8SuperTest, ::testing::Values(DType::Q4_K, DType::Q5_K, DType::Q6_K),
                         [](const auto& p) { return std::string(dtype_name(p.param)); });

}  // namespace
}  // namespace kvinfer
