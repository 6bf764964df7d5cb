// SiLU, GELU and the AVX2 exp behind them (cpu/elementwise_avx2.h) against double-precision
// references over the whole float range and special values, on whichever path the CPU takes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "core/convert.h"
#include "cpu/cpu_features.h"
#include "cpu/cpu_ops.h"
#include "cpu/elementwise_avx2.h"
#include "cpu_test_util.h"

namespace kvinfer {
namespace {

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

// exp2_f32 (attention's softmax weights) the same way, against exp2 in double: every 4099th bit
// pattern, dense random values over [-150, 128] and the edges of the range.
TEST(CpuOps, Avx2Exp2IsWithin2UlpOverTheFloatRange) {
  if (!cpu::cpu_has_avx2_fma_f16c()) GTEST_SKIP() << "CPU lacks AVX2+FMA+F16C (or KVINFER_NO_AVX2 is set)";
  std::vector<float> x;
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 4099) x.push_back(from_bits(static_cast<uint32_t>(b)));
  std::mt19937 rng(37);
  std::uniform_real_distribution<float> d(-150.0f, 128.0f);
  for (int i = 0; i < (1 << 20); ++i) x.push_back(d(rng));
  for (float v : {0.0f, -0.0f, 0.5f, -0.5f, 127.99999f, 128.0f, 129.0f, -126.0f, -126.5f, -148.5f, -149.0f, -149.5f,
                  -150.0f, -151.0f, -152.0f, 1e-10f, -1e-40f, 1e30f, -1e30f, FLT_MAX, -FLT_MAX})
    x.push_back(v);
  std::vector<float> y(x.size());
  cpu::avx2::exp2_f32(x.data(), y.data(), static_cast<int64_t>(x.size()));
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < x.size(); ++i)
    if (const double e = ulps(y[i], std::exp2(static_cast<double>(x[i]))); !(e <= worst)) worst = e, at = i;
  std::cout << "exp2_f32: max error " << worst << " ulp over " << x.size() << " values\n";
  EXPECT_LE(worst, 2.0) << "x = " << x[at] << " gives " << y[at] << ", exp2 = " << std::exp2(static_cast<double>(x[at]));
  const float specials[] = {INFINITY, -INFINITY, NAN, 128.0f, -151.0f, 0.0f, 1.0f, -1.0f};
  float got[8];
  cpu::avx2::exp2_f32(specials, got, 8);
  EXPECT_EQ(got[0], INFINITY);
  EXPECT_EQ(got[1], 0.0f);
  EXPECT_TRUE(std::isnan(got[2]));
  EXPECT_EQ(got[3], INFINITY);
  EXPECT_EQ(got[4], 0.0f);
  EXPECT_EQ(got[5], 1.0f);
  EXPECT_EQ(got[6], 2.0f);
  EXPECT_EQ(got[7], 0.5f);
}

// softmax_weights: each weight is exp2_f32(s − ref), the sum is the documented 8-lane order, for
// every length of tail.
TEST(CpuOps, Avx2SoftmaxWeightsAreExp2AndTheirLaneSum) {
  if (!cpu::cpu_has_avx2_fma_f16c()) GTEST_SKIP() << "CPU lacks AVX2+FMA+F16C (or KVINFER_NO_AVX2 is set)";
  std::mt19937 rng(41);
  std::normal_distribution<float> d(0.0f, 4.0f);
  for (int64_t n : {1, 7, 8, 9, 16, 29, 1000}) {
    std::vector<float> s(static_cast<size_t>(n) + 1, 123.0f);  // one guard value past the end
    for (int64_t i = 0; i < n; ++i) s[static_cast<size_t>(i)] = d(rng);
    const float ref = *std::max_element(s.begin(), s.end() - 1);
    std::vector<float> diff(static_cast<size_t>(n)), want(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) diff[static_cast<size_t>(i)] = s[static_cast<size_t>(i)] - ref;
    cpu::avx2::exp2_f32(diff.data(), want.data(), n);
    float lane[8] = {};
    for (int64_t i = 0; i < n; ++i) lane[i % 8] = lane[i % 8] + want[static_cast<size_t>(i)];
    const float sum = ((lane[0] + lane[4]) + (lane[1] + lane[5])) + ((lane[2] + lane[6]) + (lane[3] + lane[7]));
    EXPECT_EQ(core::f32_to_bits(cpu::avx2::softmax_weights(s.data(), n, ref)), core::f32_to_bits(sum)) << n;
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(core::f32_to_bits(s[static_cast<size_t>(i)]), core::f32_to_bits(want[static_cast<size_t>(i)])) << n << " " << i;
    EXPECT_EQ(s.back(), 123.0f) << "wrote past the end, n = " << n;
  }
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

// A prefill's element-wise work is shared out on the team above 64k values (rows for the norms
// and rope, chunks of 16k values otherwise): on 3 threads, every value has the bits it has when
// its row or a short piece is computed alone, on one thread.
TEST(CpuOps, OpsSharedOutOnThreadsGiveEachValueItsBits) {
  const auto piece = elementwise_inputs(71);
  const auto m = static_cast<int64_t>(piece.size());
  std::vector<float> x, u;
  for (uint32_t r = 0; r < 16; ++r) {  // 16 pieces: above the threshold
    x.insert(x.end(), piece.begin(), piece.end());
    const auto ur = random_signed(piece.size(), 72 + r, 0.01f, 4.0f);
    u.insert(u.end(), ur.begin(), ur.end());
  }
  const auto n = static_cast<int64_t>(x.size());
#if defined(_OPENMP)
  const int threads = omp_get_max_threads();
  omp_set_num_threads(3);
#endif
  std::vector<float> gelu(x.size()), silu(x.size()), sum = x;
  cpu::gelu_tanh(x.data(), gelu.data(), n);
  cpu::silu_mul(x.data(), u.data(), silu.data(), n);
  cpu::add(sum.data(), u.data(), n);
  const int64_t rows = 96, dim = 1024;  // the norms and rope: 96 rows of 1024 values
  const auto a = random_signed(static_cast<size_t>(rows * dim), 81, 0.0f, 2.0f);
  const auto w = random_signed(static_cast<size_t>(dim), 82, 0.0f, 1.0f);
  const auto b = random_signed(static_cast<size_t>(dim), 83, 0.0f, 1.0f);
  std::vector<float> inv_freq(32), rms(a.size()), ln(a.size()), roped = a;
  for (size_t i = 0; i < inv_freq.size(); ++i) inv_freq[i] = std::pow(10000.0f, -static_cast<float>(i) / 32.0f);
  cpu::rms_norm(a.data(), w.data(), rows, dim, 1e-5f, rms.data());
  cpu::layer_norm(a.data(), w.data(), b.data(), rows, dim, 1e-5f, ln.data());
  cpu::rope(roped.data(), rows, dim / 64, 64, 5, inv_freq.data());
#if defined(_OPENMP)
  omp_set_num_threads(threads);
#endif
  std::vector<float> got(static_cast<size_t>(m));
  for (int64_t p = 0; p < n; p += m) {
    cpu::gelu_tanh(x.data() + p, got.data(), m);
    ASSERT_EQ(0, std::memcmp(got.data(), gelu.data() + p, got.size() * sizeof(float))) << "gelu_tanh, piece " << p / m;
    cpu::silu_mul(x.data() + p, u.data() + p, got.data(), m);
    ASSERT_EQ(0, std::memcmp(got.data(), silu.data() + p, got.size() * sizeof(float))) << "silu_mul, piece " << p / m;
    std::copy(x.begin() + p, x.begin() + p + m, got.begin());
    cpu::add(got.data(), u.data() + p, m);
    ASSERT_EQ(0, std::memcmp(got.data(), sum.data() + p, got.size() * sizeof(float))) << "add, piece " << p / m;
  }
  std::vector<float> row(static_cast<size_t>(dim));
  for (int64_t t = 0; t < rows; ++t) {
    const float* at = a.data() + t * dim;
    cpu::rms_norm(at, w.data(), 1, dim, 1e-5f, row.data());
    ASSERT_EQ(0, std::memcmp(row.data(), rms.data() + t * dim, row.size() * sizeof(float))) << "rms_norm, row " << t;
    cpu::layer_norm(at, w.data(), b.data(), 1, dim, 1e-5f, row.data());
    ASSERT_EQ(0, std::memcmp(row.data(), ln.data() + t * dim, row.size() * sizeof(float))) << "layer_norm, row " << t;
    std::copy(at, at + dim, row.begin());
    cpu::rope(row.data(), 1, dim / 64, 64, 5 + t, inv_freq.data());
    ASSERT_EQ(0, std::memcmp(row.data(), roped.data() + t * dim, row.size() * sizeof(float))) << "rope, row " << t;
  }
}

// The first NaN or ±Inf of a vector (the check of every call's logits): the same index as a plain
// scan, for vectors short and long (a batch's logits are shared out between the threads in
// chunks: with one planted in each of two chunks, the earlier wins), on 1 and several threads.
TEST(CpuOps, FirstNonfiniteIsThePlainScansIndex) {
  const float bad[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                       -std::numeric_limits<float>::infinity()};
  for (int threads : test::thread_counts()) {
    const test::ScopedThreads scoped(threads);
    for (int64_t n : {0, 1, 255, 257, 1000, 300000, 1 << 20}) {
      std::vector<float> x(static_cast<size_t>(n), 1.5f);
      EXPECT_EQ(cpu::first_nonfinite(x.data(), n), -1) << n;
      std::mt19937 rng(static_cast<uint32_t>(n));
      for (int trial = 0; trial < 4 && n > 0; ++trial) {
        std::fill(x.begin(), x.end(), -2.25f);
        const int64_t late = std::uniform_int_distribution<int64_t>(0, n - 1)(rng);
        const int64_t early = std::uniform_int_distribution<int64_t>(0, late)(rng);
        x[static_cast<size_t>(late)] = bad[trial % 3];
        x[static_cast<size_t>(early)] = bad[(trial + 1) % 3];
        x[static_cast<size_t>(n - 1)] = FLT_MAX;  // large but finite
        const int64_t want = early == n - 1 ? (late == n - 1 ? -1 : late) : early;
        EXPECT_EQ(cpu::first_nonfinite(x.data(), n), want) << "n " << n << " threads " << threads;
      }
    }
  }
}

}  // namespace
}  // namespace kvinfer
