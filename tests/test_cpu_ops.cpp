// Every CPU op against an independent double-precision reference, on fresh random inputs with
// shapes that are not multiples of the 8-lane dot product.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <iostream>
#include <limits>
#include <random>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "core/convert.h"
#include "core/online_softmax.h"
#include "core/quant.h"
#include "core/rope.h"
#include "cpu/cpu_features.h"
#include "cpu/cpu_ops.h"
#include "cpu/linear_int8.h"
#include "cpu/elementwise_avx2.h"

namespace kvinfer {
namespace {

std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// max |got - want| / max |want|: a relative error that is not fooled by entries near zero.
double rel_error(const std::vector<float>& got, const std::vector<double>& want) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    err = std::max(err, std::fabs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::fabs(want[i]));
  }
  return err / scale;
}

// The f16 fields where ggml keeps them.
static_assert(core::half_fields(DType::Q6_K).size() == 1 && core::half_fields(DType::Q6_K)[0] == 208);
static_assert(core::half_fields(DType::Q4_K).size() == 2 && core::half_fields(DType::Q4_K)[1] == 2);
static_assert(core::half_fields(DType::Q8_0).size() == 1 && core::half_fields(DType::Q8_0)[0] == 0);

// Random blocks of a quantised type: random bytes (every code and packed scale pattern), with
// f16 scales of ±[0.002, 0.02) so that the values stay in a weight-like range.
std::vector<std::byte> random_blocks(DType t, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::byte> b(rows * dtype_row_bytes(t, cols));
  for (auto& x : b) x = static_cast<std::byte>(rng() & 0xFF);
  std::uniform_real_distribution<float> scale(0.002f, 0.02f);
  for (size_t block = 0; block < b.size(); block += static_cast<size_t>(dtype_block(t).bytes))
    for (size_t off : core::half_fields(t)) {
      const uint16_t h = core::f32_to_f16(rng() % 2 ? scale(rng) : -scale(rng));
      b[block + off] = static_cast<std::byte>(h & 0xFF);
      b[block + off + 1] = static_cast<std::byte>(h >> 8);
    }
  return b;
}

// Columns of a test matrix: `plain` for f32/f16/bf16 (not a multiple of the 8-lane dot), two
// K-quant blocks (sixteen 32-value blocks) for the quantised types.
int64_t cols_for(DType t, int64_t plain) { return is_quantized(t) ? 512 : plain; }

// A weight matrix stored in `dtype`, plus its exact f32 values (the rounded ones).
struct StoredMatrix {
  std::vector<std::byte> bytes;
  std::vector<float> values;
  Matrix m;
  StoredMatrix(DType dtype, int64_t rows, int64_t cols, uint32_t seed) {
    auto v = randn(static_cast<size_t>(rows * cols), seed, 0.5f);
    if (is_quantized(dtype)) {
      bytes = random_blocks(dtype, rows, cols, seed);
    } else {
      bytes.resize(v.size() * dtype_size(dtype));
      cpu::from_f32(dtype, v.data(), bytes.data(), rows * cols);
    }
    values.resize(v.size());
    cpu::to_f32(dtype, bytes.data(), values.data(), rows * cols);
    m = Matrix{dtype, bytes.data(), rows, cols};
  }
};

class LinearTest : public ::testing::TestWithParam<DType> {};

TEST_P(LinearTest, MatchesDoubleReferenceWithBias) {
  const int64_t n = 5, in = cols_for(GetParam(), 37), out = 19;
  StoredMatrix w(GetParam(), out, in, 1);
  auto bias = randn(static_cast<size_t>(out), 2);
  Linear layer{w.m, Vector{bias.data(), out}};
  auto x = randn(static_cast<size_t>(n * in), 3);
  std::vector<float> y(static_cast<size_t>(n * out), std::nanf(""));  // poisoned
  cpu::linear(layer, x.data(), n, y.data());
  std::vector<double> want(y.size());
  for (int64_t t = 0; t < n; ++t)
    for (int64_t o = 0; o < out; ++o) {
      double acc = bias[static_cast<size_t>(o)];
      for (int64_t i = 0; i < in; ++i)
        acc += static_cast<double>(x[static_cast<size_t>(t * in + i)]) * w.values[static_cast<size_t>(o * in + i)];
      want[static_cast<size_t>(t * out + o)] = acc;
    }
  EXPECT_LT(rel_error(y, want), 1e-6);
}

// The batch-invariance that cache-on == cache-off rests on: row t of an n-row product is the
// same bits as the product of row t alone.
TEST_P(LinearTest, RowsAreBitIdenticalToSingleRowCalls) {
  // Quantised: n · in · out above linear's threading threshold, so that the n-row call runs on
  // the OpenMP team (one row buffer per thread); the 1-row calls take the decode kernels.
  const int64_t n = 13, in = cols_for(GetParam(), 67), out = is_quantized(GetParam()) ? 200 : 23;
  StoredMatrix w(GetParam(), out, in, 4);
  Linear layer{w.m, {}};
  auto x = randn(static_cast<size_t>(n * in), 5);
  std::vector<float> batched(static_cast<size_t>(n * out)), single(static_cast<size_t>(out));
  cpu::linear(layer, x.data(), n, batched.data());
  for (int64_t t = 0; t < n; ++t) {
    cpu::linear(layer, x.data() + t * in, 1, single.data());
    for (int64_t o = 0; o < out; ++o)
      ASSERT_EQ(core::f32_to_bits(batched[static_cast<size_t>(t * out + o)]),
                core::f32_to_bits(single[static_cast<size_t>(o)]))
          << "row " << t << " col " << o;
  }
}

// Every output element is dot(x row, widened weight row) in dot()'s order, whichever kernel
// computes it (the AVX2 tiles of 3 input × 4 weight rows, or a single product): checked on every
// tile shape and remainder, bit for bit.
TEST_P(LinearTest, EveryElementIsTheDotOfItsRows) {
  const int64_t in = cols_for(GetParam(), 45);
  for (int64_t n : {1, 2, 3, 4, 7}) {
    for (int64_t out : {1, 4, 5, 16, 19, 37}) {
      StoredMatrix w(GetParam(), out, in, static_cast<uint32_t>(40 + n * 100 + out));
      Linear layer{w.m, {}};
      auto x = randn(static_cast<size_t>(n * in), static_cast<uint32_t>(41 + n));
      std::vector<float> y(static_cast<size_t>(n * out));
      cpu::linear(layer, x.data(), n, y.data());
      for (int64_t t = 0; t < n; ++t)
        for (int64_t o = 0; o < out; ++o)
          ASSERT_EQ(core::f32_to_bits(y[static_cast<size_t>(t * out + o)]),
                    core::f32_to_bits(cpu::dot(x.data() + t * in, w.values.data() + o * in, in)))
              << "n " << n << " out " << out << " row " << t << " col " << o;
    }
  }
}

// Threads split blocks of weight rows and never a product: 1 and 3 threads give the same bits.
TEST_P(LinearTest, BitIdenticalWhateverTheThreadCount) {
#if defined(_OPENMP)
  const int64_t n = 9, in = cols_for(GetParam(), 301), out = 203;  // above the threading threshold
  StoredMatrix w(GetParam(), out, in, 50);
  auto bias = randn(static_cast<size_t>(out), 51);
  Linear layer{w.m, Vector{bias.data(), out}};
  auto x = randn(static_cast<size_t>(n * in), 52);
  std::vector<float> y[2];
  const int threads = omp_get_max_threads();
  for (int run = 0; run < 2; ++run) {
    omp_set_num_threads(run == 0 ? 1 : 3);
    y[run].assign(static_cast<size_t>(n * out), std::nanf(""));
    cpu::linear(layer, x.data(), n, y[run].data());
  }
  omp_set_num_threads(threads);
  EXPECT_EQ(0, std::memcmp(y[0].data(), y[1].data(), y[0].size() * sizeof(float)));
#else
  GTEST_SKIP() << "built without OpenMP: one thread only";
#endif
}

// ---- 8-bit activations (cpu/linear_int8.h) ----------------------------------------------------

// The documented arithmetic, spelled out: codes of weight row c and input row t, exact integer
// partial sums over groups of 4, scaled, then the fixed tree (and Q4_1's offset term).
float int8_reference(DType t, const cpu::Int8Block* xb, const int8_t* xq, const std::byte* row, int64_t in) {
  const size_t block_bytes = dtype_block(t).bytes;
  float acc[8] = {}, off = 0.0f;
  for (int64_t b = 0; b < in / 32; ++b) {
    const std::byte* block = row + static_cast<size_t>(b) * block_bytes;
    const auto byte = [&](size_t i) { return static_cast<uint8_t>(block[i]); };
    int32_t w[32];  // the weight codes: Q8_0 bytes from offset 2; Q4 nibbles after d (and m)
    const size_t qs = t == DType::Q4_1 ? 4 : 2;
    for (size_t j = 0; j < 32; ++j) {
      if (t == DType::Q8_0) {
        w[j] = static_cast<int8_t>(byte(2 + j));
      } else {
        const int nibble = j < 16 ? byte(qs + j) & 0x0F : byte(qs + j - 16) >> 4;
        w[j] = nibble - (t == DType::Q4_0 ? 8 : 0);
      }
    }
    const float d = core::f16_to_f32(static_cast<uint16_t>(byte(0) | (byte(1) << 8)));
    const float p = d * xb[b].d;
    for (int l = 0; l < 8; ++l) {
      int32_t partial = 0;
      for (int j = 4 * l; j < 4 * l + 4; ++j) partial += w[j] * xq[32 * b + j];
      const float term = p * static_cast<float>(partial);
      acc[l] = acc[l] + term;
    }
    if (t == DType::Q4_1) {
      const float term = core::f16_to_f32(static_cast<uint16_t>(byte(2) | (byte(3) << 8))) * xb[b].ds;
      off = off + term;
    }
  }
  return (((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]))) + off;
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
  cpu::linear(layer, x.data(), n, y.data(), /*int8_activations=*/true);

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
    cpu::linear(layer, x.data() + r * in, 1, single.data(), true);
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
    cpu::linear(lb, x.data(), n, yb[run].data(), true);
  }
  omp_set_num_threads(threads);
  EXPECT_EQ(0, std::memcmp(yb[0].data(), yb[1].data(), yb[0].size() * sizeof(float)));
#endif
}

INSTANTIATE_TEST_SUITE_P(Dtypes, Int8LinearTest, ::testing::Values(DType::Q8_0, DType::Q4_0, DType::Q4_1),
                         [](const auto& p) { return std::string(dtype_name(p.param)); });

INSTANTIATE_TEST_SUITE_P(Dtypes, LinearTest,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0,
                                           DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q4_K, DType::Q5_K,
                                           DType::Q6_K),
                         [](const auto& p) { return std::string(dtype_name(p.param)); });

TEST(CpuOps, RmsNormMatchesDoubleReference) {
  const int64_t n = 3, dim = 45;
  auto x = randn(static_cast<size_t>(n * dim), 6, 3.0f);
  auto w = randn(static_cast<size_t>(dim), 7);
  std::vector<float> y(x.size(), std::nanf(""));
  cpu::rms_norm(x.data(), w.data(), n, dim, 1e-5f, y.data());
  std::vector<double> want(y.size());
  for (int64_t t = 0; t < n; ++t) {
    double ss = 0;
    for (int64_t i = 0; i < dim; ++i) ss += static_cast<double>(x[static_cast<size_t>(t * dim + i)]) * x[static_cast<size_t>(t * dim + i)];
    double inv = 1.0 / std::sqrt(ss / static_cast<double>(dim) + 1e-5);
    for (int64_t i = 0; i < dim; ++i)
      want[static_cast<size_t>(t * dim + i)] = w[static_cast<size_t>(i)] * x[static_cast<size_t>(t * dim + i)] * inv;
  }
  EXPECT_LT(rel_error(y, want), 2e-6);
}

// torch.nn.LayerNorm: biased variance, weight and bias; rows of large offset and spread.
TEST(CpuOps, LayerNormMatchesDoubleReference) {
  const int64_t n = 3, dim = 45;
  auto x = randn(static_cast<size_t>(n * dim), 20, 3.0f);
  for (size_t i = 0; i < x.size(); ++i) x[i] += 5.0f * static_cast<float>(i / static_cast<size_t>(dim));  // row means 0, 5, 10
  auto w = randn(static_cast<size_t>(dim), 21), b = randn(static_cast<size_t>(dim), 22);
  std::vector<float> y(x.size(), std::nanf(""));
  cpu::layer_norm(x.data(), w.data(), b.data(), n, dim, 1e-5f, y.data());
  std::vector<double> want(y.size());
  for (int64_t t = 0; t < n; ++t) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < dim; ++i) mean += x[static_cast<size_t>(t * dim + i)];
    mean /= static_cast<double>(dim);
    for (int64_t i = 0; i < dim; ++i) var += std::pow(x[static_cast<size_t>(t * dim + i)] - mean, 2);
    const double inv = 1.0 / std::sqrt(var / static_cast<double>(dim) + 1e-5);
    for (int64_t i = 0; i < dim; ++i) {
      const auto k = static_cast<size_t>(t * dim + i);
      want[k] = (x[k] - mean) * inv * w[static_cast<size_t>(i)] + b[static_cast<size_t>(i)];
    }
  }
  EXPECT_LT(rel_error(y, want), 2e-6);
  // sum: f32 partial sums, error bounded by a few ulps of the sum of magnitudes.
  double sum = 0, magnitude = 0;
  for (int64_t i = 0; i < dim; ++i) sum += x[static_cast<size_t>(i)], magnitude += std::fabs(x[static_cast<size_t>(i)]);
  EXPECT_NEAR(cpu::sum(x.data(), dim), sum, 1e-6 * magnitude);
}

// HF's gelu_new, over a range that reaches both tails (tanh saturates beyond |x| ~ 5).
TEST(CpuOps, GeluTanhMatchesDoubleReference) {
  auto x = randn(257, 23, 4.0f);
  std::vector<float> out(x.size(), std::nanf(""));
  cpu::gelu_tanh(x.data(), out.data(), static_cast<int64_t>(x.size()));
  std::vector<double> want(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    want[i] = 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
  }
  EXPECT_LT(rel_error(out, want), 1e-6);
  cpu::gelu_tanh(x.data(), x.data(), static_cast<int64_t>(x.size()));  // in place
  EXPECT_EQ(x, out);
}

TEST(CpuOps, RopeMatchesDoubleReferenceUpToLongPositions) {
  const int64_t heads = 3, hd = 24, n = 4;
  std::vector<float> inv_freq(static_cast<size_t>(hd / 2));
  for (int i = 0; i < hd / 2; ++i) inv_freq[static_cast<size_t>(i)] = core::rope_default_inv_freq(i, hd, 10000.0f);
  for (int64_t start : {0, 1000, 16000}) {
    auto x = randn(static_cast<size_t>(n * heads * hd), static_cast<uint32_t>(8 + start));
    auto y = x;
    cpu::rope(y.data(), n, heads, hd, start, inv_freq.data());
    std::vector<double> want(x.size());
    for (int64_t t = 0; t < n; ++t)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < hd / 2; ++i) {
          // The angle is defined as the f32 product (as HF); rotation in double.
          double a = static_cast<double>(static_cast<float>(start + t) * inv_freq[static_cast<size_t>(i)]);
          size_t b = static_cast<size_t>((t * heads + h) * hd);
          double x0 = x[b + static_cast<size_t>(i)], x1 = x[b + static_cast<size_t>(i + hd / 2)];
          want[b + static_cast<size_t>(i)] = x0 * std::cos(a) - x1 * std::sin(a);
          want[b + static_cast<size_t>(i + hd / 2)] = x1 * std::cos(a) + x0 * std::sin(a);
        }
    EXPECT_LT(rel_error(y, want), 1e-6) << "start " << start;
  }
}

TEST(CpuOps, RopeFrequenciesMatchDoubleFormulas) {
  const int hd = 64;
  for (int i = 0; i < hd / 2; ++i) {
    double want = 1.0 / std::pow(500000.0, 2.0 * i / hd);
    float got = core::rope_default_inv_freq(i, hd, 500000.0f);
    EXPECT_NEAR(got / want, 1.0, 1e-6) << i;
    // llama3: the three bands of Llama 3.1 (factor 8, low 1, high 4, original 8192).
    double wavelen = 2 * M_PI / want, scaled;
    if (wavelen < 8192.0 / 4) scaled = want;
    else if (wavelen > 8192.0 / 1) scaled = want / 8;
    else {
      double s = (8192.0 / wavelen - 1) / (4 - 1);
      scaled = (1 - s) * want / 8 + s * want;
    }
    EXPECT_NEAR(core::llama3_inv_freq(got, 8.0f, 1.0f, 4.0f, 8192.0f) / scaled, 1.0, 1e-5) << i;
  }
}

TEST(CpuOps, SiluMulMatchesDoubleReference) {
  auto g = randn(101, 9, 4.0f), u = randn(101, 10);
  std::vector<float> out(101, std::nanf(""));
  cpu::silu_mul(g.data(), u.data(), out.data(), 101);
  std::vector<double> want(101);
  for (size_t i = 0; i < 101; ++i) want[i] = g[i] / (1.0 + std::exp(-static_cast<double>(g[i]))) * u[i];
  EXPECT_LT(rel_error(out, want), 1e-6);
}

// Attention over a cache of 29 positions for 3 query rows, GQA group 3 (6 heads over 2 KV
// heads), with and without a sliding window, against a double-precision softmax.
TEST(CpuOps, AttentionMatchesDoubleReferenceWithGqaAndWindow) {
  ModelConfig cfg;
  cfg.num_layers = 2;
  cfg.num_heads = 6;
  cfg.num_kv_heads = 2;
  cfg.head_dim = 20;
  const int64_t ctx = 29, n = 3, start = ctx - n, hd = 20, heads = 6, kvh = 2;
  for (DType dtype : {DType::F32, DType::F16, DType::BF16}) {
    for (int64_t window : {0, 7}) {
      KvCache kv(cfg, 32, dtype);
      auto k = randn(static_cast<size_t>(ctx * kvh * hd), 11), v = randn(k.size(), 12);
      cpu::store_kv(kv, 1, 0, ctx, k.data(), v.data());
      // What the cache holds (rounded for bf16) is what the reference must attend over.
      std::vector<float> kr(k.size()), vr(v.size());
      for (size_t i = 0; i < k.size(); ++i) {
        float kv_pair[2];
        cpu::from_f32(dtype, &k[i], reinterpret_cast<std::byte*>(&kv_pair[0]), 1);
        cpu::to_f32(dtype, reinterpret_cast<const std::byte*>(&kv_pair[0]), &kr[i], 1);
        cpu::from_f32(dtype, &v[i], reinterpret_cast<std::byte*>(&kv_pair[1]), 1);
        cpu::to_f32(dtype, reinterpret_cast<const std::byte*>(&kv_pair[1]), &vr[i], 1);
      }
      auto q = randn(static_cast<size_t>(n * heads * hd), 13);
      std::vector<float> out(q.size(), std::nanf(""));
      cpu::attention(kv, 1, q.data(), n, start, heads, window, out.data());

      std::vector<double> want(out.size(), 0.0);
      for (int64_t t = 0; t < n; ++t)
        for (int64_t h = 0; h < heads; ++h) {
          const int64_t g = h / (heads / kvh), pos = start + t;
          const int64_t first = window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0;
          std::vector<double> s;
          double mx = -1e300, sum = 0;
          for (int64_t j = first; j <= pos; ++j) {
            double d = 0;
            for (int64_t i = 0; i < hd; ++i)
              d += static_cast<double>(q[static_cast<size_t>((t * heads + h) * hd + i)]) *
                   kr[static_cast<size_t>((j * kvh + g) * hd + i)];
            s.push_back(d / std::sqrt(static_cast<double>(hd)));
            mx = std::max(mx, s.back());
          }
          for (double& e : s) sum += (e = std::exp(e - mx));
          for (int64_t j = first; j <= pos; ++j)
            for (int64_t i = 0; i < hd; ++i)
              want[static_cast<size_t>((t * heads + h) * hd + i)] +=
                  s[static_cast<size_t>(j - first)] / sum * vr[static_cast<size_t>((j * kvh + g) * hd + i)];
        }
      EXPECT_LT(rel_error(out, want), 2e-6) << dtype_name(dtype) << " window " << window;
    }
  }
}

// Attention is, bit for bit, the algorithm in attention.cpp's comments, whichever kernel runs it
// (the AVX2 loops read K and V rows in the cache's dtype and widen them in registers): scores
// dot(q, widened K row) · scale, base-2 softmax weights, probabilities, then Σ p · V row as
// products added in position order. Head dims with and without a tail of < 8 values.
TEST(CpuOps, AttentionIsDotsThenAWeightedSumOfWidenedRows) {
  for (int64_t hd : {72, 45}) {
    ModelConfig cfg;
    cfg.num_layers = 1;
    cfg.num_heads = 4;
    cfg.num_kv_heads = 2;
    cfg.head_dim = hd;
    const int64_t ctx = 23, n = 2, start = ctx - n, heads = 4, kvh = 2;
    for (DType dtype : {DType::F32, DType::F16, DType::BF16}) {
      KvCache kv(cfg, ctx, dtype);
      const auto k = randn(static_cast<size_t>(ctx * kvh * hd), 33), v = randn(k.size(), 34);
      cpu::store_kv(kv, 0, 0, ctx, k.data(), v.data());
      const auto q = randn(static_cast<size_t>(n * heads * hd), 35);
      std::vector<float> out(q.size(), std::nanf(""));
      cpu::attention(kv, 0, q.data(), n, start, heads, 0, out.data());
      const size_t row_bytes = static_cast<size_t>(hd) * dtype_size(dtype);
      auto widened = [&](const std::byte* base, int64_t j) {
        std::vector<float> r(static_cast<size_t>(hd));
        cpu::to_f32(dtype, base + static_cast<size_t>(j) * row_bytes, r.data(), hd);
        return r;
      };
      const float scale = core::kLog2e / std::sqrt(static_cast<float>(hd));
      for (int64_t t = 0; t < n; ++t)
        for (int64_t h = 0; h < heads; ++h) {
          const int64_t g = h / (heads / kvh), pos = start + t;
          const float* qh = q.data() + (t * heads + h) * hd;
          std::vector<float> s;
          float mx = -INFINITY;
          for (int64_t j = 0; j <= pos; ++j) {
            s.push_back(cpu::dot(qh, widened(kv.k(0, g), j).data(), hd) * scale);
            mx = std::max(mx, s.back());
          }
          core::OnlineSoftmax softmax;
          softmax.rescale(mx);
          float sum = 0.0f;
          for (float& e : s) sum += (e = softmax.weight(e));
          softmax.add(sum);
          std::vector<float> want(static_cast<size_t>(hd), 0.0f);
          for (int64_t j = 0; j <= pos; ++j) {
            const float p = s[static_cast<size_t>(j)] * softmax.inv_sum();
            const auto vr = widened(kv.v(0, g), j);
            for (int64_t d = 0; d < hd; ++d) {
              const float term = p * vr[static_cast<size_t>(d)];
              want[static_cast<size_t>(d)] += term;
            }
          }
          for (int64_t d = 0; d < hd; ++d)
            ASSERT_EQ(core::f32_to_bits(out[static_cast<size_t>((t * heads + h) * hd + d)]),
                      core::f32_to_bits(want[static_cast<size_t>(d)]))
                << dtype_name(dtype) << " hd " << hd << " row " << t << " head " << h << " dim " << d;
        }
    }
  }
}

// Threads split the (row, head) pairs of attention; each is computed alone, so the result does
// not depend on the thread count (nor on n: the cache-on == cache-off tests).
TEST(CpuOps, AttentionIsBitIdenticalWhateverTheThreadCount) {
#if defined(_OPENMP)
  ModelConfig cfg;
  cfg.num_layers = 1;
  cfg.num_heads = 8;
  cfg.num_kv_heads = 2;
  cfg.head_dim = 64;
  const int64_t ctx = 300, n = 4, heads = 8;
  for (DType dtype : {DType::F32, DType::F16}) {
    KvCache kv(cfg, ctx, dtype);
    auto k = randn(static_cast<size_t>(ctx * 2 * 64), 30), v = randn(k.size(), 31);
    cpu::store_kv(kv, 0, 0, ctx, k.data(), v.data());
    auto q = randn(static_cast<size_t>(n * heads * 64), 32);
    std::vector<float> out[2];
    const int threads = omp_get_max_threads();
    for (int run = 0; run < 2; ++run) {
      omp_set_num_threads(run == 0 ? 1 : 3);
      out[run].assign(q.size(), std::nanf(""));
      cpu::attention(kv, 0, q.data(), n, ctx - n, heads, 0, out[run].data());
    }
    omp_set_num_threads(threads);
    EXPECT_EQ(0, std::memcmp(out[0].data(), out[1].data(), q.size() * sizeof(float))) << dtype_name(dtype);
  }
#else
  GTEST_SKIP() << "built without OpenMP: one thread only";
#endif
}

TEST(CpuOps, EmbeddingGathersAndWidensRows) {
  StoredMatrix table(DType::BF16, 10, 6, 14);
  const int32_t ids[] = {7, 0, 9, 7};
  std::vector<float> out(4 * 6, std::nanf(""));
  cpu::embed(table.m, ids, out.data());
  for (size_t t = 0; t < 4; ++t)
    for (size_t i = 0; i < 6; ++i) EXPECT_EQ(out[t * 6 + i], table.values[static_cast<size_t>(ids[t]) * 6 + i]);
}

// ---- silu_mul, gelu_tanh and the AVX2 exp ----------------------------------------------------------

// |got − want| in units of the float ulp at want (2^-149 in the subnormal range); ±inf counts as
// ±2^128, one ulp above FLT_MAX, so an overflow boundary off by a rounding costs 1 ulp.
double ulps(float got, double want) {
  if (std::isnan(want) || std::isnan(got)) return std::isnan(want) && std::isnan(got) ? 0 : HUGE_VAL;
  const double g = std::isinf(got) ? std::copysign(0x1p128, got) : got;
  const double w = std::fabs(want) >= 0x1p128 ? std::copysign(0x1p128, want) : want;
  int e = 0;
  std::frexp(w, &e);  // |w| in [2^(e-1), 2^e)
  return std::fabs(g - w) / std::ldexp(1.0, std::max(e - 1, -126) - 23);
}

float from_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

// exp_f32 (the AVX2 kernels' exp) over a stride through every float bit pattern (NaNs, infinities,
// subnormals, both signs), dense random values over [-104, 89] where the result is finite and
// nonzero, and the edges, against exp in double. Every 2^32 pattern, run once: ≤ 0.94 ulp.
TEST(CpuOps, Avx2ExpIsWithin2UlpOverTheFloatRange) {
  if (!cpu::cpu_has_avx2_fma_f16c()) GTEST_SKIP() << "CPU lacks AVX2+FMA+F16C (or KVINFER_NO_AVX2 is set)";
  std::vector<float> x;
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 4099) x.push_back(from_bits(static_cast<uint32_t>(b)));
  std::mt19937 rng(31);
  std::uniform_real_distribution<float> d(-104.0f, 89.0f);
  for (int i = 0; i < (1 << 20); ++i) x.push_back(d(rng));
  for (float v : {0.0f, -0.0f, 88.72283f, 88.72284f, 88.7f, 89.0f, 104.0f, -87.33654f, -87.34f, -103.2789f, -103.9721f,
                  -104.0f, -105.0f, 0.34657359f, -0.34657359f, 1e-10f, -1e-40f, 1e30f, -1e30f, FLT_MAX, -FLT_MAX})
    x.push_back(v);
  std::vector<float> y(x.size());
  cpu::avx2::exp_f32(x.data(), y.data(), static_cast<int64_t>(x.size()));
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < x.size(); ++i)
    if (const double e = ulps(y[i], std::exp(static_cast<double>(x[i]))); !(e <= worst)) worst = e, at = i;
  std::cout << "exp_f32: max error " << worst << " ulp over " << x.size() << " values\n";
  EXPECT_LE(worst, 2.0) << "x = " << x[at] << " gives " << y[at] << ", exp = " << std::exp(static_cast<double>(x[at]));
  const float specials[] = {INFINITY, -INFINITY, NAN, 89.0f, -105.0f, 0.0f};
  float got[6];
  cpu::avx2::exp_f32(specials, got, 6);
  EXPECT_EQ(got[0], INFINITY);
  EXPECT_EQ(got[1], 0.0f);
  EXPECT_TRUE(std::isnan(got[2]));
  EXPECT_EQ(got[3], INFINITY);
  EXPECT_EQ(got[4], 0.0f);
  EXPECT_EQ(got[5], 1.0f);
}

// HF's gelu_new in double. 0.5·v·(1 + tanh(u)) as written where u ≥ -1 (1 + tanh(u) ≥ 0.23: at
// most 3 of double's 53 bits cancel); below, where it cancels (to 0 in double once u < -19), the
// equal v / (1 + e^-2u), which does not.
double gelu_ref(double v) {
  const double u = std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v);
  return u >= -1 ? 0.5 * v * (1.0 + std::tanh(u)) : v / (1.0 + std::exp(-2 * u));
}

// The two forms of gelu_ref agree where both are accurate (guards the reference itself).
TEST(CpuOps, GeluReferenceFormsAgree) {
  for (double v = -2.5; v <= 2.5; v += 1.0 / 64) {
    const double u = std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v);
    EXPECT_NEAR(0.5 * v * (1.0 + std::tanh(u)), v / (1.0 + std::exp(-2 * u)), 1e-14 * std::fabs(v)) << v;
  }
}

// Where the result is not tiny, the float formulas' roundings are all relative: the exp (≤ 2 ulp
// AVX2, glibc's expf ≤ 1 ulp), 1 + e, the quotient and the product, each ≤ ½ ulp, so ≤ ~4.5 ulp
// = 2.7e-7 in all; gelu's −2u, whose absolute error becomes a relative one, is computed in
// double. Allowed 1e-6 relative. Near zero they are not: e^-g overflows for g < -88.72, giving
// ±0 where |silu(g)| ≤ 88.73·e^-88.72 ≈ 2.6e-37 (gelu: e^-2u overflows for x < -10.06, where
// |gelu(x)| ≤ 3e-38), and a subnormal quotient or product is off by up to 2^-150 ≈ 7e-46. Hence
// an absolute allowance of 1e-36 (times |up| for silu_mul): a few times the largest of these,
// and still ≤ 1e-6 of any result above 1e-30, so every value that matters meets the relative
// bound. ±inf (also a reference beyond FLT_MAX) and NaN must match exactly; so must the sign of a
// zero reference.
void expect_close(const char* op, float in, float got, double want, double abs_allowance, double& worst_rel) {
  if (std::fabs(want) > FLT_MAX) want = std::copysign(HUGE_VAL, want);  // overflows in float: ±inf
  if (std::isnan(want) || std::isinf(want) || want == 0) {
    if (std::isnan(want)) EXPECT_TRUE(std::isnan(got)) << op << "(" << in << ") = " << got << ", want NaN";
    else EXPECT_TRUE(got == want && std::signbit(got) == std::signbit(want)) << op << "(" << in << ") = " << got << ", want " << want;
    return;
  }
  const double err = std::fabs(static_cast<double>(got) - want);
  EXPECT_LE(err, 1e-6 * std::fabs(want) + abs_allowance) << op << "(" << in << ") = " << got << ", want " << want;
  if (std::fabs(want) > 1e-30) worst_rel = std::max(worst_rel, err / std::fabs(want));
}

// Random values of both signs, never zero: uniform over ±[lo, hi] or, with log_scale, with
// log-uniform magnitudes.
std::vector<float> random_signed(size_t n, uint32_t seed, float lo, float hi, bool log_scale = false) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(log_scale ? std::log(lo) : lo, log_scale ? std::log(hi) : hi);
  std::vector<float> v(n);
  for (auto& x : v) {
    do x = log_scale ? std::exp(d(rng)) : d(rng);
    while (x == 0);
    if (rng() & 1) x = -x;
  }
  return v;
}

// Inputs over [-10, 10], [-100, 100], ±[1e-38, 1e-3] (log-uniform: tiny and subnormal-adjacent),
// then the special values, on whichever path this machine takes (run the suite with
// KVINFER_NO_AVX2=1 for the other).
std::vector<float> elementwise_inputs(uint32_t seed) {
  std::vector<float> x = random_signed(4001, seed, 0.0f, 10.0f);
  for (const auto& r : {random_signed(4001, seed + 1, 0.0f, 100.0f), random_signed(4001, seed + 2, 1e-38f, 1e-3f, true),
                        random_signed(1001, seed + 3, 1e-45f, 1e-38f, true)})
    x.insert(x.end(), r.begin(), r.end());
  for (float v : {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 88.7f, -88.7f, 104.0f, -104.0f, 88.72284f, -88.72284f, -10.06f,
                  -10.1f, 5.0f, -5.0f, -1.5f, 1e13f, -1e13f, 3e38f, -3e38f})
    x.push_back(v);
  return x;
}

TEST(CpuOps, SiluMulMatchesDoubleReferenceOverRangesAndSpecialValues) {
  const auto g = elementwise_inputs(41);
  const auto u = random_signed(g.size(), 45, 0.01f, 4.0f);
  std::vector<float> out(g.size(), std::nanf(""));
  cpu::silu_mul(g.data(), u.data(), out.data(), static_cast<int64_t>(g.size()));
  double worst = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const double gd = g[i];
    expect_close("silu_mul", g[i], out[i], gd / (1.0 + std::exp(-gd)) * u[i], 1e-36 * std::max(1.0f, std::fabs(u[i])), worst);
  }
  std::cout << "silu_mul: max relative error " << worst << (cpu::cpu_has_avx2_fma_f16c() ? " (AVX2)\n" : " (portable)\n");
  // Tiny up too: products far below the float range must come out as (signed) tiny values or 0.
  const auto tiny = random_signed(g.size(), 46, 1e-38f, 1e-3f, true);
  cpu::silu_mul(g.data(), tiny.data(), out.data(), static_cast<int64_t>(g.size()));
  for (size_t i = 0; i < g.size(); ++i) {
    const double gd = g[i];
    expect_close("silu_mul", g[i], out[i], gd / (1.0 + std::exp(-gd)) * tiny[i], 1e-36, worst);
  }
}

TEST(CpuOps, GeluTanhMatchesDoubleReferenceOverRangesAndSpecialValues) {
  const auto x = elementwise_inputs(51);
  std::vector<float> out(x.size(), std::nanf(""));
  cpu::gelu_tanh(x.data(), out.data(), static_cast<int64_t>(x.size()));
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) expect_close("gelu_tanh", x[i], out[i], gelu_ref(x[i]), 1e-36, worst);
  std::cout << "gelu_tanh: max relative error " << worst << (cpu::cpu_has_avx2_fma_f16c() ? " (AVX2)\n" : " (portable)\n");
  // Dense over the range where gelu goes from ≈ x·e^2u to ≈ 0 (the exp's arguments up to 88).
  std::vector<float> dense;
  for (float v = -10.1f; v < 0.0f; v += 1.0f / 1024) dense.push_back(v);
  out.assign(dense.size(), 0.0f);
  cpu::gelu_tanh(dense.data(), out.data(), static_cast<int64_t>(dense.size()));
  for (size_t i = 0; i < dense.size(); ++i) expect_close("gelu_tanh", dense[i], out[i], gelu_ref(dense[i]), 1e-36, worst);
}

// Batch invariance of the element-wise ops: an element's bits are a function of its input alone,
// whether it sits in the vector body of a long array, alone (n = 1), or at any tail position
// (n % 8 = 1..7), and in place.
TEST(CpuOps, ElementwiseResultsDoNotDependOnPositionOrLength) {
  const auto x = elementwise_inputs(61);
  const auto u = random_signed(x.size(), 62, 0.01f, 4.0f);
  const auto n = static_cast<int64_t>(x.size());
  std::vector<float> gelu(x.size()), silu(x.size()), ex(x.size());
  cpu::gelu_tanh(x.data(), gelu.data(), n);
  cpu::silu_mul(x.data(), u.data(), silu.data(), n);
  const bool simd = cpu::cpu_has_avx2_fma_f16c();
  if (simd) cpu::avx2::exp_f32(x.data(), ex.data(), n);
  auto same = [](float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; };
  std::vector<float> xb(16), ub(16), ob(16);
  for (size_t i = 0; i < x.size(); i += 7) {
    for (int64_t len = 1; len <= 15; ++len) {  // element i last of len values: tail slot (len - 1) % 8
      std::fill(xb.begin(), xb.end(), 3.0f), std::fill(ub.begin(), ub.end(), 0.5f);
      xb[static_cast<size_t>(len - 1)] = x[i], ub[static_cast<size_t>(len - 1)] = u[i];
      const auto last = static_cast<size_t>(len - 1);
      cpu::gelu_tanh(xb.data(), ob.data(), len);
      ASSERT_TRUE(same(ob[last], gelu[i])) << "gelu_tanh(" << x[i] << ") at " << last << " of " << len;
      cpu::silu_mul(xb.data(), ub.data(), ob.data(), len);
      ASSERT_TRUE(same(ob[last], silu[i])) << "silu_mul(" << x[i] << ") at " << last << " of " << len;
      if (simd) {
        cpu::avx2::exp_f32(xb.data(), ob.data(), len);
        ASSERT_TRUE(same(ob[last], ex[i])) << "exp_f32(" << x[i] << ") at " << last << " of " << len;
      }
    }
  }
  auto in_place = x;
  cpu::gelu_tanh(in_place.data(), in_place.data(), n);
  EXPECT_EQ(0, std::memcmp(in_place.data(), gelu.data(), gelu.size() * sizeof(float)));
  in_place = x;
  cpu::silu_mul(in_place.data(), u.data(), in_place.data(), n);
  EXPECT_EQ(0, std::memcmp(in_place.data(), silu.data(), silu.size() * sizeof(float)));
}

}  // namespace
}  // namespace kvinfer
