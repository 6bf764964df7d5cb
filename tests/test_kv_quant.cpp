// The 8-bit KV cache types (int8 and fp8 E4M3, one f32 scale per row, keys rotated): the codes
// and the rotation against definitions computed here independently, hostile rows, the SIMD
// widening against the scalar one, attention over a quantised cache against a double-precision
// reference, and the cache's bytes, copies and saved state.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>
#include <vector>

#include "core/convert.h"
#include "core/kv_cache_access.h"
#include "core/kv_quant.h"
#include "cpu/convert_avx2.h"
#include "cpu/cpu_ops.h"
#include "cpu_test_util.h"
#include "kvinfer/kvinfer.h"
#include "reference.h"

namespace kvinfer {
namespace {

using test::randn;
using test::rel_error;

// Every finite E4M3 value, from its definition: (−1)^s · 2^(e−7) · (1 + m/8), or 2^−6 · m/8 for e = 0.
double e4m3_definition(int code) {
  const int s = code >> 7, e = (code >> 3) & 15, m = code & 7;
  const double mag = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
  return s ? -mag : mag;
}

// The blockwise Walsh–Hadamard matrix from its definition: within a block of b (the largest
// power of two dividing n), H[i][j] = (−1)^popcount(i & j); zero across blocks.
double hadamard(int64_t n, int64_t i, int64_t j) {
  const int64_t b = n & -n;
  if (i / b != j / b) return 0.0;
  return std::popcount(static_cast<uint64_t>((i % b) & (j % b))) % 2 ? -1.0 : 1.0;
}

// A stored key back from its rotation: Hᵀ y / b (H is symmetric and HᵀH = b·I).
std::vector<double> unrotate(const std::vector<double>& y) {
  const auto n = static_cast<int64_t>(y.size());
  std::vector<double> x(y.size(), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) x[static_cast<size_t>(i)] += hadamard(n, j, i) * y[static_cast<size_t>(j)];
  for (double& e : x) e /= static_cast<double>(n & -n);
  return x;
}

TEST(KvQuant, E4m3DecodesEveryCodeByItsDefinition) {
  for (int c = 0; c < 256; ++c) {
    const float f = core::e4m3_to_f32(static_cast<uint8_t>(c));
    if ((c & 0x7f) == 0x7f) {
      EXPECT_TRUE(std::isnan(f)) << c;
      continue;
    }
    EXPECT_EQ(static_cast<double>(f), e4m3_definition(c)) << c;
    EXPECT_EQ(std::signbit(f), c >= 128) << c;
    EXPECT_EQ(core::f32_to_e4m3(f), c) << "round trip of code " << c;
  }
}

// f32 → E4M3 against the nearest of the 253 finite values by search (ties: the even code),
// saturating at ±448: every value between codes, every midpoint, and random values over the range.
TEST(KvQuant, E4m3EncodesToTheNearestEvenCodeAndSaturates) {
  std::vector<std::pair<double, int>> values;  // the non-negative finite values, ascending
  for (int c = 0; c < 0x7f; ++c) values.push_back({e4m3_definition(c), c});
  auto nearest = [&](float x) {
    const double a = std::fabs(static_cast<double>(x));
    int best = 0x7e;
    if (a < 448.0) {
      double best_err = INFINITY;
      for (auto [v, c] : values) {
        const double err = std::fabs(v - a);
        if (err < best_err || (err == best_err && c % 2 == 0)) best_err = err, best = c;
      }
    }
    return static_cast<uint8_t>((std::signbit(x) ? 0x80 : 0) | best);
  };
  std::vector<float> xs;
  for (size_t i = 0; i + 1 < values.size(); ++i) {
    const double lo = values[i].first, hi = values[i + 1].first;
    for (double t : {0.25, 0.5, 0.75}) xs.push_back(static_cast<float>(lo + (hi - lo) * t));
    xs.push_back(std::nextafter(static_cast<float>((lo + hi) / 2), 0.0f));
    xs.push_back(std::nextafter(static_cast<float>((lo + hi) / 2), 1e9f));
  }
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> exp(-12.0f, 9.5f);
  for (int i = 0; i < 20000; ++i) xs.push_back(std::exp2(exp(rng)));
  for (float x : {448.0f, 449.0f, 464.0f, 480.0f, 1e6f, FLT_MAX, INFINITY, 1e-30f, 1e-40f, 0.0f}) xs.push_back(x);
  for (float x : xs)
    for (float s : {1.0f, -1.0f}) ASSERT_EQ(core::f32_to_e4m3(s * x), nearest(s * x)) << s * x;
  EXPECT_EQ(core::f32_to_e4m3(NAN), 0x7f);
  EXPECT_EQ(core::f32_to_e4m3(-INFINITY), 0xfe);  // saturated, as finite inputs above 448
}

// int8 codes round x / amax · 127 to nearest, ties to even.
TEST(KvQuant, Int8CodesRoundToNearestEven) {
  const float amax = 127.0f;  // x / amax · 127 == x exactly
  for (float x : {0.5f, 1.5f, 2.5f, -0.5f, -2.5f, 126.5f, 3.49f, 3.51f, 127.0f, -127.0f})
    EXPECT_EQ(static_cast<int8_t>(core::kv_code(x, amax, false)), static_cast<int8_t>(std::nearbyint(x))) << x;
}

// One row through the public definition: amax, its scale, then every code.
void expect_row_reads_back(const std::vector<float>& x, bool fp8, double tolerance) {
  std::vector<uint8_t> codes(x.size());
  float scale = -1;
  core::quantize_kv_row(x.data(), static_cast<int>(x.size()), fp8, codes.data(), &scale);
  double amax = 0;
  for (float v : x) amax = std::max(amax, std::fabs(static_cast<double>(v)));
  for (size_t d = 0; d < x.size(); ++d) {
    const double back = static_cast<double>(core::kv_code_value(codes[d], fp8)) * scale;
    EXPECT_LE(std::fabs(back - x[d]), tolerance * amax) << "value " << x[d] << " (fp8 " << fp8 << ")";
  }
}

// Hostile rows, as kernels/core/kv_quant.h documents them: huge and tiny finite rows keep their
// relative precision (x / amax never overflows); an all-zero row has scale 0; a row with a NaN
// or an infinity gets a NaN scale and zero codes, so that it reads back as NaN.
TEST(KvQuant, HostileRowsAreHandledAsDocumented) {
  for (bool fp8 : {false, true}) {
    const double tol = fp8 ? 1.0 / 16 : 0.5 / 127;  // half a step of the 8-bit grid, relative to amax
    for (float magnitude : {1.0f, 3e38f, FLT_MAX, 1e-30f, 1e-20f}) {
      std::vector<float> x = randn(64, 5);
      for (float& v : x) v = std::clamp(v, -3.0f, 3.0f) / 3.0f * magnitude;
      expect_row_reads_back(x, fp8, tol);
    }
    std::vector<uint8_t> codes(8, 0xAB);
    float scale = -1;
    const std::vector<float> zero(8, 0.0f);
    core::quantize_kv_row(zero.data(), 8, fp8, codes.data(), &scale);
    EXPECT_EQ(scale, 0.0f);
    EXPECT_EQ(codes, std::vector<uint8_t>(8, 0));
    for (float bad : {NAN, INFINITY, -INFINITY}) {
      std::vector<float> x = {1.0f, bad, -2.0f, 0.5f};
      codes.assign(4, 0xAB);
      core::quantize_kv_row(x.data(), 4, fp8, codes.data(), &scale);
      EXPECT_TRUE(std::isnan(scale)) << bad;
      EXPECT_EQ(codes, std::vector<uint8_t>(4, 0)) << bad;
    }
    // Subnormal rows: the scale itself is subnormal, so rounding it costs up to 127 (448) times
    // the smallest subnormal besides the 8-bit step (documented: such rows are numerically zero).
    const std::vector<float> tiny = {1e-40f, -3e-41f, 7e-42f};
    core::quantize_kv_row(tiny.data(), 3, fp8, codes.data(), &scale);
    for (size_t d = 0; d < 3; ++d)
      EXPECT_LE(std::fabs(static_cast<double>(core::kv_code_value(codes[d], fp8)) * scale - tiny[d]),
                tol * 1e-40 + 448 * static_cast<double>(std::numeric_limits<float>::denorm_min()));
  }
}

// A key row's rotation (kernels/core/kv_quant.h) against the blockwise Hadamard matrix's
// definition, and a rotated query's scores against a rotated key equal to the plain ones.
TEST(KvQuant, KeysRotateByTheBlockwiseHadamardTransform) {
  for (int n : {1, 3, 16, 64, 80, 96, 128, 256}) {
    const auto x = randn(static_cast<size_t>(n), 7), q = randn(static_cast<size_t>(n), 8);
    std::vector<float> y = x, qr = q;
    core::hadamard_rotate(y.data(), n);
    core::rotate_query(qr.data(), n);
    double plain = 0, rotated = 0, norm = 0;
    for (int i = 0; i < n; ++i) {
      double want = 0;
      for (int j = 0; j < n; ++j) want += hadamard(n, i, j) * x[static_cast<size_t>(j)];
      EXPECT_NEAR(y[static_cast<size_t>(i)], want, 1e-5 * (n & -n)) << "n " << n << " i " << i;
      plain += static_cast<double>(q[static_cast<size_t>(i)]) * x[static_cast<size_t>(i)];
      rotated += static_cast<double>(qr[static_cast<size_t>(i)]) * y[static_cast<size_t>(i)];
      norm += std::fabs(static_cast<double>(q[static_cast<size_t>(i)]) * x[static_cast<size_t>(i)]);
    }
    EXPECT_NEAR(rotated, plain, 1e-6 * norm) << "n " << n;
  }
}

// Why keys are rotated: int8 keys whose large values sit in a few channels, the same in every
// row (as real models' do), lose far less of their scores when rotated first. (fp8 keeps each
// value's relative precision, so on these keys rotation costs it; on the default model's keys
// it halves fp8's KL: docs/kv-cache.md.)
TEST(KvQuant, RotatedInt8KeysKeepScoresOfKeysWithOutlierChannels) {
  const int hd = 64, rows = 200;
  double err_rotated = 0, err_plain = 0;
  std::vector<float> work(hd), qr(hd);
  std::vector<uint8_t> codes(hd);
  auto value = [&](int d) { return static_cast<double>(core::kv_code_value(codes[static_cast<size_t>(d)], false)); };
  for (int r = 0; r < rows; ++r) {
    auto k = randn(hd, static_cast<uint32_t>(100 + r)), q = randn(hd, static_cast<uint32_t>(1000 + r));
    k[3] += 25.0f;  // two outlier channels
    k[40] -= 18.0f;
    double exact = 0, plain = 0, rotated = 0;
    for (int d = 0; d < hd; ++d) exact += static_cast<double>(q[d]) * k[d];
    float scale = 0;
    core::quantize_kv_row(k.data(), hd, false, codes.data(), &scale);  // the row as it is
    for (int d = 0; d < hd; ++d) plain += static_cast<double>(q[d]) * value(d) * scale;
    core::quantize_kv_key_row(k.data(), hd, false, codes.data(), &scale, work.data());  // rotated
    qr = q;
    core::rotate_query(qr.data(), hd);
    for (int d = 0; d < hd; ++d) rotated += static_cast<double>(qr[d]) * value(d) * scale;
    err_plain += (plain - exact) * (plain - exact);
    err_rotated += (rotated - exact) * (rotated - exact);
  }
  EXPECT_LT(err_rotated * 9.0, err_plain) << "rotated " << std::sqrt(err_rotated / rows) << ", plain "
                                          << std::sqrt(err_plain / rows);
}

// A key whose rotation overflows f32 reads back as NaN (as a non-finite row); one just below
// keeps its precision.
TEST(KvQuant, KeysWhoseRotationOverflowsReadBackAsNaN) {
  for (bool fp8 : {false, true}) {
    std::vector<float> work(64);
    std::vector<uint8_t> codes(64, 0xAB);
    float scale = 0;
    const std::vector<float> huge(64, 3e38f);  // their sum: +inf
    core::quantize_kv_key_row(huge.data(), 64, fp8, codes.data(), &scale, work.data());
    EXPECT_TRUE(std::isnan(scale)) << fp8;
    EXPECT_EQ(codes, std::vector<uint8_t>(64, 0)) << fp8;
    const std::vector<float> large(64, 5e36f);  // sum 3.2e38: finite
    core::quantize_kv_key_row(large.data(), 64, fp8, codes.data(), &scale, work.data());
    EXPECT_TRUE(std::isfinite(scale)) << fp8;
    EXPECT_EQ(core::kv_code_value(codes[0], fp8) * scale, 64 * 5e36f) << fp8;  // all of it in the first value
  }
}

// The AVX2 widening of the codes (to_f32) gives the scalar definition's bits for all 256 codes.
TEST(KvQuant, SimdWideningOfEveryCodeIsExact) {
  std::vector<std::byte> all(256 + 7);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::byte>(i & 0xff);
  for (DType t : {DType::I8, DType::FP8}) {
    std::vector<float> fast(all.size()), slow(all.size());
    cpu::to_f32(t, all.data(), fast.data(), static_cast<int64_t>(all.size()));
    cpu::to_f32_scalar(t, all.data(), slow.data(), static_cast<int64_t>(all.size()));
    for (size_t i = 0; i < all.size(); ++i)
      ASSERT_EQ(core::f32_to_bits(fast[i]), core::f32_to_bits(slow[i])) << dtype_name(t) << " code " << (i & 0xff);
  }
}

// Attention over an 8-bit cache, GQA 3 and a sliding window, prefill rows and a decode row:
// (a) against a double-precision softmax over what the cache holds (code × scale): the same
//     2e-6 the f32 cache meets against its own reference;
// (b) against the unquantised K and V: the error the 8 bits cost, bounded.
TEST(KvQuant, AttentionMatchesDoubleReferenceOfTheQuantisedRows) {
  const int64_t ctx = 150, heads = 6, kvh = 2, group = 3;
  for (int64_t hd : {int64_t{64}, int64_t{96}}) {  // one rotation block of 64; three of 32
    for (DType dtype : {DType::I8, DType::FP8}) {
      ModelConfig cfg;
      cfg.num_layers = 1;
      cfg.num_heads = heads;
      cfg.num_kv_heads = kvh;
      cfg.head_dim = hd;
      KvCache kv(cfg, ctx, dtype);
      const auto k = randn(static_cast<size_t>(ctx * kvh * hd), 41), v = randn(k.size(), 42);
      cpu::store_kv(kv, 0, 0, ctx, k.data(), v.data());
      std::vector<double> kq(k.size()), vq(v.size());  // what the cache holds, (pos, kvh, hd)
      for (int64_t j = 0; j < ctx; ++j)
        for (int64_t g = 0; g < kvh; ++g) {
          std::vector<double> rotated(static_cast<size_t>(hd));
          for (int64_t d = 0; d < hd; ++d) {
            const size_t i = static_cast<size_t>((j * kvh + g) * hd + d), at = static_cast<size_t>(j * hd + d);
            rotated[static_cast<size_t>(d)] =
                core::kv_code_value(static_cast<uint8_t>(kv_k(kv, 0, g)[at]), dtype == DType::FP8) *
                static_cast<double>(kv_k_scales(kv, 0, g)[j]);
            vq[i] = core::kv_code_value(static_cast<uint8_t>(kv_v(kv, 0, g)[at]), dtype == DType::FP8) *
                    static_cast<double>(kv_v_scales(kv, 0, g)[j]);
          }
          const std::vector<double> key = unrotate(rotated);  // the key the codes stand for
          std::copy(key.begin(), key.end(), kq.begin() + (j * kvh + g) * hd);
        }
      auto reference = [&](const std::vector<float>& q, int64_t n, int64_t window, const std::vector<double>& kr,
                           const std::vector<double>& vr) {
        std::vector<double> out(static_cast<size_t>(n * heads * hd), 0.0);
        for (int64_t t = 0; t < n; ++t)
          for (int64_t h = 0; h < heads; ++h) {
            const int64_t g = h / group, pos = ctx - n + t;
            const int64_t first = window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0;
            std::vector<double> s;
            double mx = -1e300, sum = 0;
            for (int64_t j = first; j <= pos; ++j) {
              double dsum = 0;
              for (int64_t d = 0; d < hd; ++d)
                dsum += static_cast<double>(q[static_cast<size_t>((t * heads + h) * hd + d)]) *
                        kr[static_cast<size_t>((j * kvh + g) * hd + d)];
              s.push_back(dsum / std::sqrt(static_cast<double>(hd)));
              mx = std::max(mx, s.back());
            }
            for (double& e : s) sum += (e = std::exp(e - mx));
            for (int64_t j = first; j <= pos; ++j)
              for (int64_t d = 0; d < hd; ++d)
                out[static_cast<size_t>((t * heads + h) * hd + d)] +=
                    s[static_cast<size_t>(j - first)] / sum * vr[static_cast<size_t>((j * kvh + g) * hd + d)];
          }
        return out;
      };
      const std::vector<double> k_exact(k.begin(), k.end()), v_exact(v.begin(), v.end());
      for (int64_t n : {int64_t{70}, int64_t{1}})
        for (int64_t window : {int64_t{0}, int64_t{9}}) {
          const auto q = randn(static_cast<size_t>(n * heads * hd), static_cast<uint32_t>(43 + n));
          std::vector<float> out(q.size(), std::nanf(""));
          cpu::attention(kv, 0, q.data(), n, ctx - n, heads, window, out.data());
          EXPECT_LT(rel_error(out, reference(q, n, window, kq, vq)), 2e-6)
              << dtype_name(dtype) << " n " << n << " window " << window;
          // int8 keeps about 8 bits of each row; E4M3 about 4 (3 mantissa bits).
          EXPECT_LT(rel_error(out, reference(q, n, window, k_exact, v_exact)), dtype == DType::I8 ? 0.02 : 0.1)
              << dtype_name(dtype) << " n " << n << " window " << window;
        }
    }
  }
}

// A K row holding a NaN reads back as NaN: every query that attends to it gets a NaN output
// (the forward pass's non-finite check then names it), those that do not are untouched.
TEST(KvQuant, ANonFiniteRowPoisonsOnlyTheQueriesThatAttendToIt) {
  ModelConfig cfg;
  cfg.num_layers = 1;
  cfg.num_heads = 2;
  cfg.num_kv_heads = 1;
  cfg.head_dim = 16;
  for (DType dtype : {DType::I8, DType::FP8}) {
    KvCache kv(cfg, 40, dtype);
    auto k = randn(40 * 16, 3), v = randn(40 * 16, 4);
    k[20 * 16 + 5] = NAN;
    cpu::store_kv(kv, 0, 0, 40, k.data(), v.data());
    const auto q = randn(2 * 16, 5);
    std::vector<float> out(q.size());
    cpu::attention(kv, 0, q.data(), 1, 39, 2, 0, out.data());  // attends to position 20
    EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](float x) { return std::isnan(x); })) << dtype_name(dtype);
    cpu::attention(kv, 0, q.data(), 1, 39, 2, 10, out.data());  // a window of 10: not to 20
    EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](float x) { return std::isfinite(x); })) << dtype_name(dtype);
  }
}

// bytes() is the plan, scales included: 2 × layers × kv_heads × tokens × (head_dim + 4).
TEST(KvQuant, CacheBytesAreThePlanWithTheScales) {
  ModelConfig cfg;
  cfg.num_layers = 3;
  cfg.num_heads = 4;
  cfg.num_kv_heads = 2;
  cfg.head_dim = 24;
  for (DType dtype : {DType::I8, DType::FP8}) {
    EXPECT_EQ(kv_bytes_per_token(cfg, dtype), 2u * 3 * 2 * (24 + 4));
    KvCache kv(cfg, 37, dtype);
    EXPECT_EQ(kv.bytes(), plan_kv_bytes(cfg, 37, dtype));
    EXPECT_EQ(kv.bytes(), 37u * 2 * 3 * 2 * (24 + 4));
    // The scales' block, then the codes' block, end to end, inside the allocation.
    const auto* first_scale = reinterpret_cast<const std::byte*>(kv_k_scales(kv, 0, 0));
    const auto* last_row = kv_v(kv, 2, 1) + 36 * 24;
    EXPECT_EQ(static_cast<uint64_t>(last_row + 24 - first_scale), kv.bytes());
  }
  EXPECT_EQ(parse_dtype("int8"), DType::I8);
  EXPECT_EQ(parse_dtype("fp8"), DType::FP8);
  EXPECT_EQ(parse_dtype("e4m3"), DType::FP8);
  EXPECT_THROW(parse_dtype("q8_0"), Error);
  EXPECT_THROW(KvCache(cfg, 8, DType::Q8_0), Error);
}

// An 8-bit cache saved and restored, or forked, continues with the bits of the uninterrupted
// run: the scales travel with the rows (KV state files, copy, assign_prefix).
TEST(KvQuant, SavedAndForkedCachesContinueBitForBit) {
  const auto model = Model::load(test::model_dir("llama_gqa4"), {.device = Device::CPU});
  const std::vector<int32_t> prompt = test::Reference("llama_gqa4").prompt_ids;
  const std::vector<int32_t> next = {5, 17, 3, 42};
  const auto file = std::filesystem::path(::testing::TempDir()) / "kv_quant_state.kvs";
  for (DType dtype : {DType::I8, DType::FP8}) {
    Session s(model);
    KvCache kv(*model, 64, dtype);
    s.prefill(kv, prompt);
    save_kv_state(kv, *model, file);
    KvCache fork = kv.copy();
    std::vector<std::vector<float>> want;
    for (int32_t id : next) {
      const auto l = s.decode(kv, id);
      want.emplace_back(l.begin(), l.end());
    }
    KvCache restored = load_kv_state(*model, file);
    EXPECT_EQ(restored.dtype(), dtype);
    for (KvCache* c : {&restored, &fork})
      for (size_t i = 0; i < next.size(); ++i) {
        const auto l = s.decode(*c, next[i]);
        ASSERT_EQ(0, std::memcmp(l.data(), want[i].data(), want[i].size() * sizeof(float)))
            << dtype_name(dtype) << " step " << i << (c == &fork ? " (fork)" : " (restored)");
      }
  }
  std::filesystem::remove(file);
}

}  // namespace
}  // namespace kvinfer
