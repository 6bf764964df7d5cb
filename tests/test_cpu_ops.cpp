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
#include <string>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "core/convert.h"
#include "core/online_softmax.h"
#include "core/quant.h"
#include "core/rope.h"
#include "cpu/aligned.h"
#include "cpu/cpu_features.h"
#include "cpu/cpu_ops.h"
#include "cpu/elementwise_avx2.h"
#include "cpu_test_util.h"
#include "core/kv_cache_access.h"
#include "core/kv_quant.h"
#include "kvinfer/error.h"

namespace kvinfer {
namespace {

using test::cols_for;
using test::randn;
using test::rel_error;
using test::StoredMatrix;

// The f16 fields where ggml keeps them.
static_assert(core::half_fields(DType::Q6_K).size() == 1 && core::half_fields(DType::Q6_K)[0] == 208);
static_assert(core::half_fields(DType::Q4_K).size() == 2 && core::half_fields(DType::Q4_K)[1] == 2);
static_assert(core::half_fields(DType::Q8_0).size() == 1 && core::half_fields(DType::Q8_0)[0] == 0);

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

// The pair order of bf16 products (cpu_ops.h), spelled out: each whole 16 values' 8 at even places,
// then their 8 at odd places, the rest in place.
std::vector<float> pair_order(const float* v, int64_t n) {
  std::vector<float> out(v, v + n);
  for (int64_t k = 0; k + 16 <= n; k += 16)
    for (int64_t j = 0; j < 16; ++j) out[static_cast<size_t>(k + j)] = v[k + (j < 8 ? 2 * j : 2 * (j - 8) + 1)];
  return out;
}

// Whether every element of y (n, out) has the bits of dot(x row, w row) (bf16: of both rows in the
// pair order); the first that does not is named, with `what`.
::testing::AssertionResult EachIsTheDotOfItsRows(const std::vector<float>& y, const std::vector<float>& x,
                                                const std::vector<float>& w, int64_t n, int64_t in, int64_t out,
                                                bool pairs, const std::string& what) {
  for (int64_t t = 0; t < n; ++t)
    for (int64_t o = 0; o < out; ++o) {
      const float* xr = x.data() + t * in;
      const float* wr = w.data() + o * in;
      const float want =
          pairs ? cpu::dot(pair_order(xr, in).data(), pair_order(wr, in).data(), in) : cpu::dot(xr, wr, in);
      const float got = y[static_cast<size_t>(t * out + o)];
      if (core::f32_to_bits(got) != core::f32_to_bits(want))
        return ::testing::AssertionFailure() << what << " row " << t << " col " << o << ": " << got << " != " << want;
    }
  return ::testing::AssertionSuccess();
}

// Every output element is dot(x row, widened weight row) in dot()'s order (bf16: of both rows in
// the pair order), whichever kernel computes it (the AVX-512 tiles of 6 input × 8 weight rows,
// the AVX2 tiles of 3 × 4, a single product, a decode kernel): checked on every tile shape and
// remainder, bit for bit.
TEST_P(LinearTest, EveryElementIsTheDotOfItsRows) {
  const bool pairs = GetParam() == DType::BF16;
  for (int64_t in : {cols_for(GetParam(), 45), cols_for(GetParam(), 64)}) {
    for (int64_t n : {1, 2, 3, 4, 7, 13}) {
      for (int64_t out : {1, 4, 5, 16, 19, 37}) {
        StoredMatrix w(GetParam(), out, in, static_cast<uint32_t>(40 + n * 100 + out));
        Linear layer{w.m, {}};
        auto x = randn(static_cast<size_t>(n * in), static_cast<uint32_t>(41 + n));
        std::vector<float> y(static_cast<size_t>(n * out));
        cpu::linear(layer, x.data(), n, y.data());
        ASSERT_TRUE(EachIsTheDotOfItsRows(y, x, w.values, n, in, out, pairs,
                                          "in " + std::to_string(in) + " n " + std::to_string(n)));
      }
    }
  }
}

// Prefill's long rows and many input rows, and a batch's few. linear takes the input in slices of about equal size
// (at most 128 rows of 1024 values, so 259 rows go in 87, 87 and 85; quantised types take rows of
// 512 values, 256 a slice, so 259 and 401 rows go in two); on AVX-512 machines its tiles
// (linear_avx512.h) take the values in runs of at most 576 and the input rows in groups of 48,
// keep their accumulators in memory between runs, and read f32 weight rows in place whatever
// their alignment: the weights below start at a cache line, then 4 bytes further on. Every
// element still has dot()'s bits. Elsewhere this checks the AVX2 tiles, or the portable loops, on
// the same shapes.
TEST_P(LinearTest, LongRowsAndManyInputRowsKeepTheDotsBits) {
  const bool pairs = GetParam() == DType::BF16;
  const int64_t out = 40;  // 2 blocks of 16 rows and one of 8
  struct Shape {
    int64_t in;
    std::vector<int64_t> ns;
  };
  // 1200 values: three AVX-512 runs of unequal length (linear_avx512.h). 17 and 48 rows: a small
  // batch, whose narrower weights the AVX-512 tiles widen run by run (block_products_widening).
  for (const Shape& shape :
       {Shape{cols_for(GetParam(), 1024), {17, 48, 50, 97, 259}}, Shape{cols_for(GetParam(), 1030), {17, 50, 97}},
        Shape{cols_for(GetParam(), 1200), {6, 48, 50}}, Shape{cols_for(GetParam(), 264), {401}}}) {
    const int64_t in = shape.in;
    StoredMatrix w(GetParam(), out, in, static_cast<uint32_t>(in));
    cpu::AlignedVector<std::byte> aligned(w.bytes.size() + 4);  // 64-byte aligned
    for (const size_t offset : {size_t{0}, size_t{4}}) {
      std::copy(w.bytes.begin(), w.bytes.end(), aligned.begin() + static_cast<std::ptrdiff_t>(offset));
      for (int64_t n : shape.ns) {
        Linear layer{Matrix{GetParam(), aligned.data() + offset, out, in}, {}};
        auto x = randn(static_cast<size_t>(n * in), static_cast<uint32_t>(n + in));
        std::vector<float> y(static_cast<size_t>(n * out), std::nanf(""));
        cpu::linear(layer, x.data(), n, y.data());
        ASSERT_TRUE(EachIsTheDotOfItsRows(y, x, w.values, n, in, out, pairs,
                                          "in " + std::to_string(in) + " n " + std::to_string(n) + " offset " +
                                              std::to_string(offset)));
      }
    }
  }
}

// A batch of a few sequences (up to 48 rows) on AVX-512 machines: the tiles widen each run of 8
// weight rows just before they take it (block_products_widening), in runs of whole blocks of the
// stored type: 1536 values go in three runs of 512 (two K-quant blocks each), 1600 (f16, bf16)
// in three runs of 544 and 512. Every element still has dot()'s bits, on every tile shape.
TEST_P(LinearTest, SmallBatchesKeepTheDotsBitsOverSeveralRuns) {
  const bool pairs = GetParam() == DType::BF16;
  const int64_t in = is_quantized(GetParam()) ? 1536 : 1600, out = 37;
  StoredMatrix w(GetParam(), out, in, 77);
  Linear layer{w.m, {}};
  for (int64_t n : {2, 5, 16, 31, 48}) {
    auto x = randn(static_cast<size_t>(n * in), static_cast<uint32_t>(n));
    std::vector<float> y(static_cast<size_t>(n * out), std::nanf(""));
    cpu::linear(layer, x.data(), n, y.data());
    ASSERT_TRUE(EachIsTheDotOfItsRows(y, x, w.values, n, in, out, pairs, "n " + std::to_string(n)));
  }
}

TEST(CpuOps, SplitPairsIsThePairOrder) {
  for (int64_t n : {0, 5, 16, 45, 64}) {
    const auto x = randn(static_cast<size_t>(n), 47);
    std::vector<float> got(static_cast<size_t>(n), std::nanf(""));
    cpu::split_pairs(x.data(), got.data(), n);
    EXPECT_EQ(got, pair_order(x.data(), n)) << n;
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

// One call over several products of one input (q, k, v) gives each the bits of its own linear()
// call: weight types that take different kernels side by side, decode and prefill, exact, 15- and
// 8-bit activations, 1 and 3 threads.
TEST(CpuOps, LinearsGivesEachProductTheBitsOfLinear) {
  const int64_t in = 512;
  const DType types[3] = {DType::Q4_1, DType::F16, DType::Q8_0};
  const int64_t outs[3] = {203, 37, 64};
  std::vector<StoredMatrix> w;
  std::vector<std::vector<float>> bias;
  std::vector<Linear> layers;
  for (int p = 0; p < 3; ++p) {
    w.emplace_back(types[p], outs[p], in, 80 + static_cast<uint32_t>(p));
    bias.push_back(randn(static_cast<size_t>(outs[p]), 90 + static_cast<uint32_t>(p)));
  }
  for (int p = 0; p < 3; ++p) layers.push_back(Linear{w[static_cast<size_t>(p)].m, Vector{bias[static_cast<size_t>(p)].data(), outs[p]}});
  layers[1].bias = {};
#if defined(_OPENMP)
  const int threads = omp_get_max_threads();
  const int thread_counts[2] = {1, 3};
#else
  const int thread_counts[1] = {1};
#endif
  for (int64_t n : {1, 5})
    for (ActivationMode mode : {ActivationMode::Exact, ActivationMode::Int15, ActivationMode::Int8})
      for (int th : thread_counts) {
#if defined(_OPENMP)
        omp_set_num_threads(th);
#endif
        const auto x = randn(static_cast<size_t>(n * in), 95);
        std::vector<float> together[3], alone[3];
        std::vector<LinearInto> products;
        for (size_t p = 0; p < 3; ++p) {
          together[p].assign(static_cast<size_t>(n * outs[p]), std::nanf(""));
          alone[p].assign(together[p].size(), std::nanf(""));
          products.push_back({&layers[p], together[p].data()});
          cpu::linear(layers[p], x.data(), n, alone[p].data(), mode);
        }
        cpu::linears(products, x.data(), n, mode);
        for (size_t p = 0; p < 3; ++p)
          EXPECT_EQ(0, std::memcmp(together[p].data(), alone[p].data(), alone[p].size() * sizeof(float)))
              << "product " << p << " n " << n << " " << activation_mode_name(mode) << " threads " << th;
      }
#if defined(_OPENMP)
  omp_set_num_threads(threads);
#endif
  StoredMatrix narrow(DType::F32, 8, in / 2, 99);
  Linear other{narrow.m, {}};
  std::vector<float> y(64);
  const auto x = randn(static_cast<size_t>(in), 96);
  const LinearInto mismatched[2] = {{&layers[0], y.data()}, {&other, y.data()}};
  EXPECT_THROW(cpu::linears(mismatched, x.data(), 1), Error);
}

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

// Partial rotary (Phi-4-mini: the first rotary_dim of each head, pairs (i, i + rotary_dim/2)) and
// YaRN / LongRoPE's attention factor (cos and sin scaled): against a double reference in both
// layouts; the dimensions past rotary_dim keep their bits; factor 1 gives plain rope's bits.
TEST(CpuOps, RopePartialRotaryAndAttentionFactorMatchDoubleReference) {
  const int64_t heads = 3, hd = 16, rot = 12, n = 5;
  std::vector<float> inv_freq(static_cast<size_t>(rot / 2));
  for (int i = 0; i < rot / 2; ++i) inv_freq[static_cast<size_t>(i)] = core::rope_default_inv_freq(i, rot, 10000.0f);
  for (const RopeLayout layout : {RopeLayout::HalfSplit, RopeLayout::Interleaved})
    for (const float factor : {1.0f, 1.1386294f, 0.75f})
      for (int64_t start : {0, 4000}) {
        SCOPED_TRACE(testing::Message() << "layout " << static_cast<int>(layout) << " factor " << factor << " start " << start);
        const auto x = randn(static_cast<size_t>(n * heads * hd), static_cast<uint32_t>(21 + start));
        auto y = x;
        cpu::rope(y.data(), n, heads, hd, start, inv_freq.data(), layout, rot, factor);
        std::vector<double> want(x.begin(), x.end());
        for (int64_t t = 0; t < n; ++t)
          for (int64_t h = 0; h < heads; ++h)
            for (int64_t i = 0; i < rot / 2; ++i) {
              const double a = static_cast<float>(start + t) * inv_freq[static_cast<size_t>(i)];
              const size_t b = static_cast<size_t>((t * heads + h) * hd);
              const size_t i0 = b + static_cast<size_t>(layout == RopeLayout::HalfSplit ? i : 2 * i);
              const size_t i1 = b + static_cast<size_t>(layout == RopeLayout::HalfSplit ? i + rot / 2 : 2 * i + 1);
              const double c = std::cos(a) * factor, s = std::sin(a) * factor;
              want[i0] = x[i0] * c - x[i1] * s;
              want[i1] = x[i1] * c + x[i0] * s;
            }
        EXPECT_LT(rel_error(y, want), 1e-6);
        for (int64_t r = 0; r < n * heads; ++r)  // the pass-through dimensions
          EXPECT_EQ(0, std::memcmp(y.data() + r * hd + rot, x.data() + r * hd + rot, (hd - rot) * sizeof(float)));
      }
  // Factor 1 and rotary_dim = head_dim (or 0): the bits of plain rope.
  std::vector<float> full(static_cast<size_t>(hd / 2));
  for (int i = 0; i < hd / 2; ++i) full[static_cast<size_t>(i)] = core::rope_default_inv_freq(i, hd, 10000.0f);
  const auto x = randn(static_cast<size_t>(n * heads * hd), 77);
  auto plain = x, scaled = x;
  cpu::rope(plain.data(), n, heads, hd, 300, full.data());
  cpu::rope(scaled.data(), n, heads, hd, 300, full.data(), RopeLayout::HalfSplit, hd, 1.0f);
  EXPECT_EQ(0, std::memcmp(plain.data(), scaled.data(), plain.size() * sizeof(float)));
}

// YaRN's frequencies (core::yarn_ramp / yarn_inv_freq) against HF's formula in double: below the
// correction range the original frequency, above it the interpolated one, a linear blend between.
TEST(CpuOps, YarnFrequenciesMatchDoubleFormula) {
  const int dim = 32;
  const double base = 10000.0, factor = 4.0, low = 0.0, high = 3.0;
  for (int i = 0; i < dim / 2; ++i) {
    const double pos = std::pow(base, 2.0 * i / dim);
    const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
    const double want = (1.0 / (factor * pos)) * ramp + (1.0 / pos) * (1.0 - ramp);
    const float got = core::yarn_inv_freq(core::rope_pos_freq(i, dim, static_cast<float>(base)), static_cast<float>(factor),
                                          core::yarn_ramp(i, static_cast<float>(low), static_cast<float>(high - low)));
    EXPECT_NEAR(got / want, 1.0, 1e-6) << i;
    if (i == 0) {
      EXPECT_EQ(got, core::rope_default_inv_freq(0, dim, static_cast<float>(base)));
    }
  }
}

// q and k rotated together (the batched attention's rope_qk) get the bits rope gives each alone,
// in either layout, for a decode row and for a prefill long enough to share out.
TEST(CpuOps, RopeQkGivesEachTheBitsOfRope) {
  const int64_t qh = 9, kh = 3, hd = 64;
  std::vector<float> inv_freq(static_cast<size_t>(hd / 2));
  for (int i = 0; i < hd / 2; ++i) inv_freq[static_cast<size_t>(i)] = core::rope_default_inv_freq(i, hd, 10000.0f);
  for (const RopeLayout layout : {RopeLayout::HalfSplit, RopeLayout::Interleaved})
    for (int64_t n : {1, 97}) {
      auto q = randn(static_cast<size_t>(n * qh * hd), 3), k = randn(static_cast<size_t>(n * kh * hd), 4);
      auto q_alone = q, k_alone = k;
      cpu::rope(q_alone.data(), n, qh, hd, 17, inv_freq.data(), layout);
      cpu::rope(k_alone.data(), n, kh, hd, 17, inv_freq.data(), layout);
      cpu::rope_qk(q.data(), qh, k.data(), kh, n, hd, 17, inv_freq.data(), layout);
      EXPECT_EQ(0, std::memcmp(q.data(), q_alone.data(), q.size() * sizeof(float))) << "n " << n;
      EXPECT_EQ(0, std::memcmp(k.data(), k_alone.data(), k.size() * sizeof(float))) << "n " << n;
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

// Qwen3 / Gemma 3's per-head RMSNorm: rms_norm's bits on each head as a row, in place; and
// Gemma's GeGLU, embedding scale and soft-cap against double references.
TEST(CpuOps, HeadRmsNormGeluTanhMulScaleSoftcap) {
  const int64_t rows = 6, hd = 24;
  auto x = randn(static_cast<size_t>(rows * hd), 21), w = randn(static_cast<size_t>(hd), 22);
  std::vector<float> y(x.size()), in_place = x;
  cpu::rms_norm(x.data(), w.data(), rows, hd, 1e-6f, y.data());
  cpu::head_rms_norm(in_place.data(), w.data(), rows, hd, 1e-6f);
  EXPECT_EQ(in_place, y);
  std::vector<double> want(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < hd; ++i) ss += static_cast<double>(x[r * hd + i]) * x[r * hd + i];
    for (int64_t i = 0; i < hd; ++i) want[r * hd + i] = w[i] * x[r * hd + i] / std::sqrt(ss / hd + 1e-6);
  }
  EXPECT_LT(rel_error(in_place, want), 1e-6);

  auto g = randn(101, 23), u = randn(101, 24);
  std::vector<float> out(101), capped = g, scaled = g;
  cpu::gelu_tanh_mul(g.data(), u.data(), out.data(), 101);
  cpu::softcap(capped.data(), 101, 0.5f);
  cpu::scale(scaled.data(), 101, 3.0f);
  std::vector<double> geglu(101), cap(101), sc(101);
  for (size_t i = 0; i < 101; ++i) {
    const double v = g[i];
    geglu[i] = 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))) * u[i];
    cap[i] = 0.5 * std::tanh(v / 0.5);
    sc[i] = 3.0 * v;
  }
  EXPECT_LT(rel_error(out, geglu), 1e-6);
  EXPECT_LT(rel_error(capped, cap), 1e-6);
  EXPECT_LT(rel_error(scaled, sc), 1e-7);
}

// Attention over a cache of 29 positions for 3 query rows (a prefill) and 1 (a decode step), GQA
// group 3 (6 heads over 2 KV heads), with and without a sliding window, against a double-precision
// softmax; and with Gemma's scores (ScoreOptions: scale 0.3, soft-cap 1.5, most scores capped).
TEST(CpuOps, AttentionMatchesDoubleReferenceWithGqaAndWindow) {
  ModelConfig cfg;
  cfg.num_layers = 2;
  cfg.num_heads = 6;
  cfg.num_kv_heads = 2;
  cfg.head_dim = 20;
  const int64_t ctx = 29, hd = 20, heads = 6, kvh = 2;
  for (const ScoreOptions so : {ScoreOptions{}, ScoreOptions{0.3f, 1.5f}})
  for (int64_t n : {3, 1})
  for (DType dtype : {DType::F32, DType::F16, DType::BF16}) {
    const int64_t start = ctx - n;
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
      cpu::attention(kv, 1, q.data(), n, start, heads, window, out.data(), false, so);
      const double scale = so.scale > 0 ? so.scale : 1 / std::sqrt(static_cast<double>(hd));

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
            s.push_back(d * scale);
            if (so.softcap > 0) s.back() = so.softcap * std::tanh(s.back() / so.softcap);
            mx = std::max(mx, s.back());
          }
          for (double& e : s) sum += (e = std::exp(e - mx));
          for (int64_t j = first; j <= pos; ++j)
            for (int64_t i = 0; i < hd; ++i)
              want[static_cast<size_t>((t * heads + h) * hd + i)] +=
                  s[static_cast<size_t>(j - first)] / sum * vr[static_cast<size_t>((j * kvh + g) * hd + i)];
        }
      EXPECT_LT(rel_error(out, want), 2e-6) << dtype_name(dtype) << " window " << window << " n " << n
                                            << " softcap " << so.softcap;
    }
  }
}

// Attention is, bit for bit, the algorithm in attention.cpp's comments, whichever kernel runs it
// (the AVX2 loops read K and V rows in the cache's dtype and widen them in registers; an AVX-512
// prefill takes up to 48 queries at once, in tiles): scores dot(q, widened K row) · scale,
// base-2 softmax weights (on AVX2 the vector exp2 and an 8-lane sum), probabilities, then
// Σ p · V row as products added in position order. Head dims with and without a tail of < 8
// values; a prefill of 70 rows after 80 cached positions: several units of queries, several 64-row
// chunks of K and V, rows that attend to positions the first rows of their unit do not; decode
// steps (one row) at 23 and 150 positions, whose query heads share K and V rows on AVX-512
// machines: 2 query heads a KV head, and 7 (tiles of 3, 3 and 1), head dims 72, 48 and 45 (32 +
// 32 + 8 columns, 32 + 16, none: whose decode stays per pair).
TEST(CpuOps, AttentionIsDotsThenAWeightedSumOfWidenedRows) {
  struct Shape {
    int64_t hd, ctx, n, heads, kvh;
  };
  for (const Shape shape : {Shape{72, 23, 2, 4, 2}, Shape{45, 23, 2, 4, 2}, Shape{72, 150, 70, 4, 2},
                            Shape{45, 150, 70, 4, 2}, Shape{72, 23, 1, 4, 2}, Shape{45, 150, 1, 4, 2},
                            Shape{72, 150, 1, 4, 2}, Shape{72, 150, 1, 7, 1}, Shape{48, 150, 1, 7, 1}}) {
    const int64_t hd = shape.hd, heads = shape.heads, kvh = shape.kvh;
    ModelConfig cfg;
    cfg.num_layers = 1;
    cfg.num_heads = heads;
    cfg.num_kv_heads = kvh;
    cfg.head_dim = hd;
    const int64_t ctx = shape.ctx, n = shape.n, start = ctx - n;
    for (DType dtype : {DType::F32, DType::F16, DType::BF16, DType::I8, DType::FP8}) {
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
          // An 8-bit cache's keys are rotated, so its queries are (core::rotate_query); its rows
          // are codes: each score times its K row's scale, each probability times its V row's.
          std::vector<float> qr(q.begin() + (t * heads + h) * hd, q.begin() + (t * heads + h + 1) * hd);
          if (is_scaled_kv(dtype)) core::rotate_query(qr.data(), static_cast<int>(hd));
          const float* qh = qr.data();
          std::vector<float> s;
          float mx = -INFINITY;
          const float* ks = kv_k_scales(kv, 0, g);
          const float* vs = kv_v_scales(kv, 0, g);
          for (int64_t j = 0; j <= pos; ++j) {
            s.push_back(cpu::dot(qh, widened(kv_k(kv, 0, g), j).data(), hd) * scale);
            if (ks) s.back() *= ks[j];
            mx = std::max(mx, s.back());
          }
          core::OnlineSoftmax softmax;
          softmax.rescale(mx);
          float sum = 0.0f;
          if (cpu::cpu_has_avx2_fma_f16c()) {  // the AVX2 exp2, and the weights' sum in 8 lanes
            std::vector<float> shifted(s.size());
            for (size_t j = 0; j < s.size(); ++j) shifted[j] = s[j] - core::softmax_ref(softmax.m);
            cpu::avx2::exp2_f32(shifted.data(), s.data(), static_cast<int64_t>(s.size()));
            float lane[8] = {};
            for (size_t j = 0; j < s.size(); ++j) lane[j % 8] = lane[j % 8] + s[j];
            sum = ((lane[0] + lane[4]) + (lane[1] + lane[5])) + ((lane[2] + lane[6]) + (lane[3] + lane[7]));
          } else {
            for (float& e : s) sum += (e = softmax.weight(e));
          }
          softmax.add(sum);
          std::vector<float> want(static_cast<size_t>(hd), 0.0f);
          for (int64_t j = 0; j <= pos; ++j) {
            float p = s[static_cast<size_t>(j)] * softmax.inv_sum();
            if (vs) p *= vs[j];
            const auto vr = widened(kv_v(kv, 0, g), j);
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
// not depend on the thread count (nor on n: the cache-on == cache-off tests): 1 to 4 threads,
// prefill rows and a decode row, every cache dtype. A decode step's KV heads go to the threads
// whole where they divide evenly and in three passes otherwise: 2 KV heads (whole on 1 and 2
// threads, three passes on 3 and 4) and 3 KV heads of 3 query heads each, as the default model
// (on 2 threads two whole heads and the third in passes).
TEST(CpuOps, AttentionIsBitIdenticalWhateverTheThreadCount) {
#if defined(_OPENMP)
  for (const int64_t kvh : {2, 3}) {
    const int64_t ctx = 300, heads = kvh == 2 ? 8 : 9, hd = 64;
    ModelConfig cfg;
    cfg.num_layers = 1;
    cfg.num_heads = heads;
    cfg.num_kv_heads = kvh;
    cfg.head_dim = hd;
    for (int64_t n : {4, 1})
      for (DType dtype : {DType::F32, DType::F16, DType::BF16, DType::I8, DType::FP8}) {
        KvCache kv(cfg, ctx, dtype);
        auto k = randn(static_cast<size_t>(ctx * kvh * hd), 30), v = randn(k.size(), 31);
        cpu::store_kv(kv, 0, 0, ctx, k.data(), v.data());
        auto q = randn(static_cast<size_t>(n * heads * hd), 32);
        const int threads = omp_get_max_threads();
        std::vector<float> first;
        for (int team : {1, 2, 3, 4}) {
          omp_set_num_threads(team);
          std::vector<float> out(q.size(), std::nanf(""));
          cpu::attention(kv, 0, q.data(), n, ctx - n, heads, 0, out.data());
          if (first.empty())
            first = out;
          else
            EXPECT_EQ(0, std::memcmp(first.data(), out.data(), q.size() * sizeof(float)))
                << dtype_name(dtype) << " KV heads " << kvh << " n " << n << " threads " << team;
        }
        omp_set_num_threads(threads);
      }
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
}  // namespace
}  // namespace kvinfer

