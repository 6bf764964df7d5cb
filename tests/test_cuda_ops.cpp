// The elementwise kernels and the cuBLAS GEMM against the CPU backend (src/cpu/), their
// reference, on random inputs, with every output poisoned (NaN) before the call and shapes that
// are not multiples of any block size. Skips with a message where no CUDA device exists.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/convert.h"
#include "core/kv_code_load.h"
#include "core/kv_quant.h"
#include "core/kv_cache_access.h"
#include "core/quantize.h"
#include "core/rope.h"
#include "cpu/cpu_ops.h"
#include "cuda/cublas_loader.h"
#include "cuda/cuda_backend.h"
#include "cuda_check.h"
#include "cuda_test_buffer.h"
#include "cuda_gemm.h"
#include "cuda_moe.h"
#include "cuda_ops.h"
#include "kvinfer/device.h"
#include "kvinfer/generate.h"
#include "test_files.h"

namespace kvinfer_test {
namespace {

using kvinfer::DType;
namespace cpu = kvinfer::cpu;
namespace cuda = kvinfer::cuda;

constexpr DType kDtypes[] = {DType::F32, DType::F16, DType::BF16};
constexpr DType kQuantTypes[] = {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0,
                                 DType::Q5_1, DType::Q4_K, DType::Q5_K, DType::Q6_K};
constexpr double kU32 = 0x1p-24;  // unit roundoff of f32


std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<std::byte> narrow(DType t, const std::vector<float>& v) {
  std::vector<std::byte> out(v.size() * kvinfer::dtype_size(t));
  cpu::from_f32(t, v.data(), out.data(), static_cast<int64_t>(v.size()));
  return out;
}

std::vector<float> widen(DType t, const std::vector<std::byte>& b) {
  std::vector<float> out(b.size() / kvinfer::dtype_size(t));
  cpu::to_f32(t, b.data(), out.data(), static_cast<int64_t>(out.size()));
  return out;
}

// A (rows, 512) matrix of quantised type t: the first `use` rows of tests/data/quant/<t>.bin
// repeated. Rows 0-2 are quantised random data, 3 zeros, 4 huge and tiny scales, 5 random bit
// patterns (values beyond f16's range: not for the f16 GEMM).
std::vector<std::byte> quant_matrix(DType t, int64_t rows, int64_t use = 6) {
  constexpr int64_t kFixtureRows = 6, kCols = 512;
  const auto path = std::filesystem::path(KVINFER_TEST_DATA) / "quant" / (std::string(kvinfer::dtype_name(t)) + ".bin");
  const std::string bin = kvinfer::test::read_bytes(path);
  const size_t row_bytes = kvinfer::dtype_row_bytes(t, kCols);
  EXPECT_EQ(bin.size(), kFixtureRows * row_bytes);
  std::vector<std::byte> m(static_cast<size_t>(rows) * row_bytes);
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(m.data() + static_cast<size_t>(r) * row_bytes, bin.data() + static_cast<size_t>(r % use) * row_bytes,
                row_bytes);
  return m;
}

double max_rel_err(const std::vector<float>& gpu, const std::vector<float>& ref) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    err = std::max(err, std::fabs(static_cast<double>(gpu[i]) - ref[i]));
    if (std::isnan(gpu[i])) return INFINITY;
    scale = std::max(scale, std::fabs(static_cast<double>(ref[i])));
  }
  return err / scale;
}

class CudaOps : public ::testing::Test {
 protected:
  void SetUp() override {
    if (kvinfer::cuda_device_count() == 0)
      GTEST_SKIP() << "no CUDA device: the CUDA elementwise kernels and cuBLAS GEMM are not run";
    CUDA_CHECK(cudaStreamCreate(&stream_));
  }
  void TearDown() override {
    if (stream_) cudaStreamDestroy(stream_);
  }
  void sync() { CUDA_CHECK(cudaStreamSynchronize(stream_)); }
  cudaStream_t stream_ = nullptr;
};

TEST_F(CudaOps, EmbedWidensTheRowsOfEveryDtype) {
  const int64_t vocab = 32001, hidden = 67;
  const std::vector<int32_t> ids = {0, 32000, 17, 17, 31999, 4242, 1};
  for (DType t : kDtypes) {
    const auto table = narrow(t, random_floats(static_cast<size_t>(vocab * hidden), 1));
    DeviceBuffer d_table(table), d_ids(ids), d_out(ids.size() * hidden * sizeof(float));
    cuda::embed(t, d_table.ptr, vocab, hidden, d_ids.as<int32_t>(), std::ssize(ids), d_out.as<float>(), stream_);
    sync();
    std::vector<float> ref(ids.size() * hidden);
    cpu::embed({.dtype = t, .data = table.data(), .rows = vocab, .cols = hidden}, ids, ref.data());
    EXPECT_EQ(d_out.to_host<float>(), ref) << kvinfer::dtype_name(t);  // widening is exact
  }
}

// Every f16 bit pattern (±0, subnormals, normals, ±inf, NaNs) widened on the device as the CPU
// widens it. On a GPU the kernels widen with one cvt.f32.f16 (core::f16_to_f32): exact, so the
// same bits, except that a NaN need only stay a NaN.
TEST_F(CudaOps, EmbedWidensEveryF16BitPattern) {
  constexpr int64_t kPatterns = int64_t{1} << 16;
  std::vector<uint16_t> table(kPatterns);
  for (int64_t i = 0; i < kPatterns; ++i) table[static_cast<size_t>(i)] = static_cast<uint16_t>(i);
  const std::vector<int32_t> ids = {0};
  DeviceBuffer d_table(table), d_ids(ids), d_out(kPatterns * sizeof(float));
  cuda::embed(DType::F16, d_table.ptr, 1, kPatterns, d_ids.as<int32_t>(), 1, d_out.as<float>(), stream_);
  sync();
  const auto got = d_out.to_host<float>();
  std::vector<float> want(kPatterns);
  cpu::to_f32(DType::F16, reinterpret_cast<const std::byte*>(table.data()), want.data(), kPatterns);
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i])) {
      ASSERT_TRUE(std::isnan(got[i])) << "f16 0x" << std::hex << i;
      continue;
    }
    uint32_t g = 0, w = 0;
    std::memcpy(&g, &got[i], 4);
    std::memcpy(&w, &want[i], 4);
    ASSERT_EQ(g, w) << "f16 0x" << std::hex << i << ": " << got[i] << " on the device, " << want[i] << " on the CPU";
  }
}

TEST_F(CudaOps, EmbedNeverReadsOutsideTheTable) {
  // Ids are validated on the host; a bad one that slips through gives a NaN row, not a read.
  const int64_t vocab = 5, hidden = 300;
  const std::vector<int32_t> ids = {-1, 5, 2};
  DeviceBuffer d_table(random_floats(vocab * hidden, 2)), d_ids(ids), d_out(ids.size() * hidden * sizeof(float));
  cuda::embed(DType::F32, d_table.ptr, vocab, hidden, d_ids.as<int32_t>(), 3, d_out.as<float>(), stream_);
  sync();
  const auto out = d_out.to_host<float>();
  for (int64_t j = 0; j < 2 * hidden; ++j) ASSERT_TRUE(std::isnan(out[j])) << j;
  for (int64_t j = 2 * hidden; j < 3 * hidden; ++j) ASSERT_FALSE(std::isnan(out[j])) << j;
}

// Sums of squares: the CPU adds up to dim/8 terms in sequence (≤ ~512·u relative error), the
// GPU ≤ dim/512 + 10; the square root halves that. 4e-5 per element covers dim 4097 with room.
TEST_F(CudaOps, RmsNormMatchesCpu) {
  for (int64_t dim : {1, 31, 4096, 4097}) {
    const int64_t n = 3;
    const auto x = random_floats(static_cast<size_t>(n * dim), 3, -2.0f, 2.0f);
    const auto w = random_floats(static_cast<size_t>(dim), 4, 0.5f, 1.5f);
    DeviceBuffer d_x(x), d_w(w), d_y(x.size() * sizeof(float));
    cuda::rms_norm(d_x.as<float>(), d_w.as<float>(), n, dim, 1e-5f, d_y.as<float>(), stream_);
    sync();
    std::vector<float> ref(x.size());
    cpu::rms_norm(x.data(), w.data(), n, dim, 1e-5f, ref.data());
    const auto y = d_y.to_host<float>();
    for (size_t i = 0; i < y.size(); ++i)
      ASSERT_NEAR(y[i], ref[i], 4e-5 * std::fabs(ref[i])) << "dim " << dim << " i " << i;
  }
}

// Both sides take the mean, then the mean of squared deviations, in f32, in different orders: the
// CPU adds dim/8 terms in sequence per lane (cpu::sum, cpu::dot), the GPU ~dim/threads per thread
// then a tree (≤ 2·log2(512) levels); the output steps are rounded alike (no FMA on either side).
// Recursive summation of m terms errs by ≤ (m - 1)·u·Σ|x|, so the mean and the variance each
// carry ≤ (dim/8 + 40)·u relative to mean|x| and to the variance. With x in [-1, 3] (rows with a
// mean, as a residual stream has), w in [0.5, 1.5], b in [-0.5, 0.5], both errors propagate into
// y with factors ≤ ~1 of max|y| (worked out: 0.5 and 0.4), so max|gpu − cpu| / max|cpu| is held
// to 2·(dim/8 + 40)·u: 6.6e-5 at dim 4097, 5e-6 at dim 31, exact at dim 1 (y = bias). The kernel's
// order replayed on the CPU (200 seeds, these dims) stays below 5e-7. Unbiased variance (÷ dim − 1)
// would be 1e-4 off at dim 4097 and 1.6e-2 at dim 31: it fails. dims up to 4096 (768: GPT-2) keep
// the row in registers, 4097 and 6001 re-read it. In place (y == x) must give the same bits.
TEST_F(CudaOps, LayerNormMatchesCpu) {
  for (int64_t dim : {1, 31, 768, 2048, 4096, 4097, 6001}) {
    const int64_t n = 3;
    const auto x = random_floats(static_cast<size_t>(n * dim), 23, -1.0f, 3.0f);
    const auto w = random_floats(static_cast<size_t>(dim), 24, 0.5f, 1.5f);
    const auto b = random_floats(static_cast<size_t>(dim), 25, -0.5f, 0.5f);
    DeviceBuffer d_x(x), d_w(w), d_b(b), d_y(x.size() * sizeof(float));
    cuda::layer_norm(d_x.as<float>(), d_w.as<float>(), d_b.as<float>(), n, dim, 1e-5f, d_y.as<float>(), stream_);
    cuda::layer_norm(d_x.as<float>(), d_w.as<float>(), d_b.as<float>(), n, dim, 1e-5f, d_x.as<float>(), stream_);
    sync();
    std::vector<float> ref(x.size());
    cpu::layer_norm(x.data(), w.data(), b.data(), n, dim, 1e-5f, ref.data());
    const auto y = d_y.to_host<float>();
    const double tol = 2.0 * (static_cast<double>(dim) / 8.0 + 40.0) * kU32;
    EXPECT_LE(max_rel_err(y, ref), dim == 1 ? 0.0 : tol) << "dim " << dim;
    EXPECT_EQ(d_x.to_host<float>(), y) << "in place, dim " << dim;
  }
}

// Double-precision reference of both layouts: the angle is HF's f32 product, the rest double.
std::vector<float> rope_reference(std::vector<float> x, int64_t n, int64_t heads, int64_t hd, int64_t start,
                                  const std::vector<float>& inv_freq, cuda::RopeLayout layout) {
  const int64_t half = hd / 2;
  for (int64_t t = 0; t < n; ++t)
    for (int64_t i = 0; i < half; ++i) {
      const double a = static_cast<float>(start + t) * inv_freq[static_cast<size_t>(i)];
      for (int64_t h = 0; h < heads; ++h) {
        float* xh = x.data() + (t * heads + h) * hd;
        float& x0 = layout == cuda::RopeLayout::HalfSplit ? xh[i] : xh[2 * i];
        float& x1 = layout == cuda::RopeLayout::HalfSplit ? xh[i + half] : xh[2 * i + 1];
        const double r0 = x0 * std::cos(a) - x1 * std::sin(a), r1 = x1 * std::cos(a) + x0 * std::sin(a);
        x0 = static_cast<float>(r0), x1 = static_cast<float>(r1);
      }
    }
  return x;
}

// |x| ≤ 1: cos/sin rounded to f32 (u each), two products and a sum (FMA-contracted on the GPU,
// not on the CPU): ≤ ~4u·(|x0| + |x1|) ≈ 5e-7. Positions up to 131K: a fast __sinf would be off
// by 1e-3 there, and so would any angle not formed as one f32 product.
TEST_F(CudaOps, RopeMatchesCpuAndDoubleReferenceAtLongPositions) {
  const double kTol = 1e-6;
  const int64_t n = 7, heads = 11;
  for (int64_t hd : {6, 64, 128})
    for (int64_t start : {0, 16380, 131067})
      for (auto layout : {cuda::RopeLayout::HalfSplit, cuda::RopeLayout::Interleaved}) {
        std::vector<float> inv_freq(static_cast<size_t>(hd / 2));
        for (int i = 0; i < hd / 2; ++i)
          inv_freq[i] = kvinfer::core::rope_default_inv_freq(i, static_cast<int>(hd), 1e4f);
        const auto x = random_floats(static_cast<size_t>(n * heads * hd), 5);
        DeviceBuffer d_x(x), d_f(inv_freq);
        cuda::rope(d_x.as<float>(), n, heads, hd, start, d_f.as<float>(), layout, stream_);
        sync();
        const auto y = d_x.to_host<float>();
        const auto ref = rope_reference(x, n, heads, hd, start, inv_freq, layout);
        const bool half_split = layout == cuda::RopeLayout::HalfSplit;
        for (size_t i = 0; i < y.size(); ++i)
          ASSERT_NEAR(y[i], ref[i], kTol) << "hd " << hd << " start " << start << " half_split " << half_split;
        if (half_split) {
          auto cpu_y = x;
          cpu::rope(cpu_y.data(), n, heads, hd, start, inv_freq.data());
          for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], cpu_y[i], kTol) << "vs cpu, hd " << hd;
        }
      }
}

// Partial rotary and the attention factor (YaRN, LongRoPE): the first rotary_dim values of each
// head rotate with cos and sin scaled, the rest keep their bits; against the CPU (same
// definition; the GPU contracts the rotation into FMAs) and a double reference. Factor 1 with
// rotary_dim = head_dim is plain rope, bit for bit.
TEST_F(CudaOps, RopePartialRotaryAndAttentionFactorMatchCpuAndDoubleReference) {
  const double kTol = 2e-6;  // factors up to 1.2 on |x| <= 1
  const int64_t n = 7, heads = 11, hd = 128, rot = 96;
  std::vector<float> inv_freq(static_cast<size_t>(rot / 2));
  for (int i = 0; i < rot / 2; ++i) inv_freq[i] = kvinfer::core::rope_default_inv_freq(i, static_cast<int>(rot), 1e4f);
  for (auto layout : {cuda::RopeLayout::HalfSplit, cuda::RopeLayout::Interleaved})
    for (const float factor : {1.0f, 1.2079f})
      for (int64_t start : {0, 16380}) {
        const auto x = random_floats(static_cast<size_t>(n * heads * hd), 9);
        DeviceBuffer d_x(x), d_f(inv_freq);
        cuda::rope(d_x.as<float>(), n, heads, hd, start, d_f.as<float>(), layout, stream_, nullptr, rot, factor);
        sync();
        const auto y = d_x.to_host<float>();
        const bool half_split = layout == cuda::RopeLayout::HalfSplit;
        auto cpu_y = x;
        cpu::rope(cpu_y.data(), n, heads, hd, start, inv_freq.data(),
                  half_split ? kvinfer::RopeLayout::HalfSplit : kvinfer::RopeLayout::Interleaved, rot, factor);
        for (int64_t r = 0; r < n * heads; ++r)
          for (int64_t d = 0; d < hd; ++d) {
            const size_t i = static_cast<size_t>(r * hd + d);
            if (d >= rot) {
              ASSERT_EQ(y[i], x[i]) << "pass-through dim " << d;
              continue;
            }
            ASSERT_NEAR(y[i], cpu_y[i], kTol) << "dim " << d << " start " << start << " half_split " << half_split;
          }
        // Double reference: the rotation of the CPU's f32 angle, scaled.
        for (int64_t t = 0; t < n; ++t)
          for (int64_t h = 0; h < heads; ++h)
            for (int64_t i = 0; i < rot / 2; ++i) {
              const double a = static_cast<float>(start + t) * inv_freq[static_cast<size_t>(i)];
              const size_t b = static_cast<size_t>((t * heads + h) * hd);
              const size_t i0 = b + static_cast<size_t>(half_split ? i : 2 * i);
              const size_t i1 = b + static_cast<size_t>(half_split ? i + rot / 2 : 2 * i + 1);
              const double c = std::cos(a) * factor, s = std::sin(a) * factor;
              ASSERT_NEAR(y[i0], x[i0] * c - x[i1] * s, kTol);
              ASSERT_NEAR(y[i1], x[i1] * c + x[i0] * s, kTol);
            }
      }
  std::vector<float> full(static_cast<size_t>(hd / 2));
  for (int i = 0; i < hd / 2; ++i) full[i] = kvinfer::core::rope_default_inv_freq(i, static_cast<int>(hd), 1e4f);
  const auto x = random_floats(static_cast<size_t>(n * heads * hd), 10);
  DeviceBuffer a(x), b(x), d_f(full);
  cuda::rope(a.as<float>(), n, heads, hd, 77, d_f.as<float>(), cuda::RopeLayout::HalfSplit, stream_);
  cuda::rope(b.as<float>(), n, heads, hd, 77, d_f.as<float>(), cuda::RopeLayout::HalfSplit, stream_, nullptr, hd, 1.0f);
  sync();
  EXPECT_EQ(a.to_host<float>(), b.to_host<float>());
}

// expf (≤ 2 ulp), one division, one product against glibc's exp: a few u relative.
TEST_F(CudaOps, SiluMulMatchesCpuAlignedUnalignedAndInPlace) {
  for (int64_t n : {1, 4096, 4097})
    for (int64_t offset : {0, 1}) {  // offset 1: pointers not 16-byte aligned (scalar path)
      const auto gate = random_floats(static_cast<size_t>(n + 1), 6, -8.0f, 8.0f);
      const auto up = random_floats(static_cast<size_t>(n + 1), 7);
      std::vector<float> ref(gate.size());
      cpu::silu_mul(gate.data(), up.data(), ref.data(), n + 1);
      DeviceBuffer d_g(gate), d_u(up), d_out(gate.size() * sizeof(float));
      cuda::silu_mul(d_g.as<float>() + offset, d_u.as<float>() + offset, d_out.as<float>() + offset, n, stream_);
      cuda::silu_mul(d_g.as<float>() + offset, d_u.as<float>() + offset, d_g.as<float>() + offset, n, stream_);
      sync();
      const auto out = d_out.to_host<float>(), in_place = d_g.to_host<float>();
      for (int64_t i = offset; i < n + offset; ++i) {
        ASSERT_NEAR(out[i], ref[i], 1e-6 * std::fabs(ref[i])) << "n " << n << " i " << i;
        ASSERT_EQ(in_place[i], out[i]) << "in place, n " << n << " i " << i;
      }
    }
}

// Every product and sum is rounded in the CPU's order (no FMA), so only tanhf differs: CUDA's
// and glibc's are each within 2 ulp, ≤ 4·2^-24 apart for |tanh| in [0.5, 1). Where x ≪ 0,
// 1 + tanh cancels and that absolute difference, times 0.5·|x|, is the whole error: ≤ 1.2e-7·|x|,
// allowed 2.4e-7·|x|; elsewhere a few u relative, allowed 1e-6·|ref|. GELU with erf instead of
// the tanh form is 1e-4 .. 5e-4 off near |x| = 2 and fails. Inputs in [-12, 12], then huge ones:
// x³ overflows to ±inf and the result is x (or -0), on both sides.
TEST_F(CudaOps, GeluTanhMatchesCpuAlignedUnalignedInPlaceAndLargeValues) {
  const float specials[] = {3e38f, -3e38f, 1e30f, -1e30f, 1e13f, -1e13f, 1e4f,   -1e4f,
                            100.0f, -100.0f, -8.5f, -5.25f, 7e-39f, -1e-20f, 2.5f, -2.5f};
  for (int64_t n : {1, 4096, 4097})
    for (int64_t offset : {0, 1}) {  // offset 1: pointers not 16-byte aligned (scalar path)
      auto x = random_floats(static_cast<size_t>(n + 1), 26, -12.0f, 12.0f);
      if (n > 16) std::copy(std::begin(specials), std::end(specials), x.begin() + 1);
      std::vector<float> ref(x.size());
      cpu::gelu_tanh(x.data(), ref.data(), n + 1);
      DeviceBuffer d_x(x), d_out(x.size() * sizeof(float));
      cuda::gelu_tanh(d_x.as<float>() + offset, d_out.as<float>() + offset, n, stream_);
      cuda::gelu_tanh(d_x.as<float>() + offset, d_x.as<float>() + offset, n, stream_);
      sync();
      const auto out = d_out.to_host<float>(), in_place = d_x.to_host<float>();
      for (int64_t i = offset; i < n + offset; ++i) {
        const double tol = 1e-6 * std::fabs(ref[i]) + 2.4e-7 * std::fabs(x[i]);
        ASSERT_NEAR(out[i], ref[i], tol) << "n " << n << " i " << i << " x " << x[i];
        ASSERT_EQ(in_place[i], out[i]) << "in place, n " << n << " i " << i;
      }
    }
}

// Qwen3's and Gemma 3's per-head RMSNorm: a warp a row, in place, against the CPU (rms_norm's bits
// per head) and an fp64 reference. rows × head_dim from 1 × 8 to 37 × 256 (rows past a block's 8,
// head_dim below, at and above a warp's 32). Dropping the weight or the root fails it by O(1).
TEST_F(CudaOps, HeadRmsNormMatchesCpuAndFp64InPlace) {
  for (auto [rows, hd] : {std::pair<int64_t, int64_t>{1, 8}, {3, 16}, {9, 64}, {37, 128}, {5, 256}}) {
    const auto x = random_floats(static_cast<size_t>(rows * hd), 41, -3.0f, 3.0f);
    const auto w = random_floats(static_cast<size_t>(hd), 42, 0.5f, 1.5f);
    DeviceBuffer d_x(x), d_w(w);
    cuda::head_rms_norm(d_x.as<float>(), d_w.as<float>(), rows, hd, 1e-6f, stream_);
    sync();
    std::vector<float> cpu_y = x;
    cpu::head_rms_norm(cpu_y.data(), w.data(), rows, hd, 1e-6f);
    const auto y = d_x.to_host<float>();
    for (int64_t r = 0; r < rows; ++r) {
      double ss = 0;
      for (int64_t i = 0; i < hd; ++i) ss += static_cast<double>(x[r * hd + i]) * x[r * hd + i];
      const double inv = 1.0 / std::sqrt(ss / static_cast<double>(hd) + 1e-6);
      for (int64_t i = 0; i < hd; ++i) {
        const size_t at = static_cast<size_t>(r * hd + i);
        const double ref = w[static_cast<size_t>(i)] * (x[at] * inv);
        ASSERT_NEAR(y[at], ref, 2e-6 * std::fabs(ref) + 1e-7) << "rows " << rows << " hd " << hd << " at " << at;
        ASSERT_NEAR(cpu_y[at], ref, 2e-6 * std::fabs(ref) + 1e-7) << "cpu, rows " << rows << " hd " << hd;
      }
    }
  }
}

// Gemma's GeGLU, embedding scale and soft-cap against the CPU: gelu_tanh's tolerance (tanhf) for
// GeGLU, exact for the scale (one rounded product), 2 ulp of tanh for the soft-cap.
TEST_F(CudaOps, GeluTanhMulScaleAndSoftcapMatchCpu) {
  const int64_t n = 4097;
  const auto gate = random_floats(static_cast<size_t>(n), 51, -8.0f, 8.0f);
  const auto up = random_floats(static_cast<size_t>(n), 52, -2.0f, 2.0f);
  std::vector<float> ref(static_cast<size_t>(n));
  cpu::gelu_tanh_mul(gate.data(), up.data(), ref.data(), n);
  DeviceBuffer d_g(gate), d_u(up);
  cuda::gelu_tanh_mul(d_g.as<float>(), d_u.as<float>(), d_g.as<float>(), n, stream_);  // in place
  sync();
  const auto got = d_g.to_host<float>();
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], ref[i], 1e-6 * std::fabs(ref[i]) + 2.4e-7 * std::fabs(gate[i] * up[i])) << i;

  auto x = random_floats(static_cast<size_t>(n), 53, -20.0f, 20.0f);
  std::vector<float> scaled = x, capped = x;
  cpu::scale(scaled.data(), n, 25.298221f);
  cpu::softcap(capped.data(), n, 2.0f);
  DeviceBuffer d_s(x), d_c(x);
  cuda::scale(d_s.as<float>(), n, 25.298221f, stream_);
  cuda::softcap(d_c.as<float>(), n, 2.0f, stream_);
  sync();
  const auto s = d_s.to_host<float>(), c = d_c.to_host<float>();
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(s[i], scaled[i]) << i;
    ASSERT_NEAR(c[i], capped[i], 5e-7f) << i << " x " << x[i];
    ASSERT_NEAR(capped[i], 2.0 * std::tanh(x[i] / 2.0), 5e-7) << i;
  }
}

// The Context wrappers pass their arguments through in order (weight before bias) and run on
// the Context's stream: the same bits as the launchers called directly.
TEST_F(CudaOps, BackendLayerNormAndGeluTanhEqualTheLaunchers) {
  auto ctx = kvinfer::cuda_backend::create_context();
  const int64_t n = 5, dim = 768;
  const auto x = random_floats(static_cast<size_t>(n * dim), 27, -3.0f, 3.0f);
  const auto w = random_floats(static_cast<size_t>(dim), 28, 0.5f, 1.5f);
  const auto b = random_floats(static_cast<size_t>(dim), 29, -0.5f, 0.5f);
  DeviceBuffer d_x(x), d_w(w), d_b(b), d_y(x.size() * sizeof(float)), d_g(x.size() * sizeof(float));
  const kvinfer::Vector weight{.data = d_w.as<float>(), .n = dim}, bias{.data = d_b.as<float>(), .n = dim};
  kvinfer::cuda_backend::layer_norm(*ctx, d_x.as<float>(), weight, bias, n, dim, 1e-5f, d_y.as<float>());
  kvinfer::cuda_backend::gelu_tanh(*ctx, d_x.as<float>(), d_g.as<float>(), n * dim);
  std::vector<float> y(x.size()), g(x.size());
  kvinfer::cuda_backend::to_host(*ctx, d_y.as<float>(), y.data(), n * dim);
  kvinfer::cuda_backend::to_host(*ctx, d_g.as<float>(), g.data(), n * dim);
  DeviceBuffer d_y2(x.size() * sizeof(float)), d_g2(x.size() * sizeof(float));
  cuda::layer_norm(d_x.as<float>(), d_w.as<float>(), d_b.as<float>(), n, dim, 1e-5f, d_y2.as<float>(), stream_);
  cuda::gelu_tanh(d_x.as<float>(), d_g2.as<float>(), n * dim, stream_);
  sync();
  EXPECT_EQ(y, d_y2.to_host<float>());
  EXPECT_EQ(g, d_g2.to_host<float>());
}

TEST_F(CudaOps, AddAndAddBiasAreExact) {
  for (int64_t n : {1, 4096, 4097})
    for (int64_t offset : {0, 1}) {
      const auto x = random_floats(static_cast<size_t>(n + 1), 8), y = random_floats(static_cast<size_t>(n + 1), 9);
      DeviceBuffer d_x(x), d_y(y);
      cuda::add(d_x.as<float>() + offset, d_y.as<float>() + offset, n, stream_);
      sync();
      auto ref = x;
      cpu::add(ref.data() + offset, y.data() + offset, n);
      EXPECT_EQ(d_x.to_host<float>(), ref) << "n " << n << " offset " << offset;
    }
  const int64_t rows = 3, cols = 4097;
  const auto y = random_floats(static_cast<size_t>(rows * cols), 10), bias = random_floats(cols, 11);
  DeviceBuffer d_y(y), d_b(bias);
  cuda::add_bias(d_y.as<float>(), d_b.as<float>(), rows, cols, stream_);
  sync();
  auto ref = y;
  for (int64_t r = 0; r < rows; ++r) cpu::add(ref.data() + r * cols, bias.data(), cols);
  EXPECT_EQ(d_y.to_host<float>(), ref);
}

TEST_F(CudaOps, ConvertFromF32IsBitExactIncludingSpecialValues) {
  auto src = random_floats(4097, 12, -70000.0f, 70000.0f);
  const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 65504.0f, 65520.0f, 6e-8f, 3e-8f, 1e-40f,
                            1.0f + 0x1p-11f, 1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-11f, 3e38f};
  std::copy(std::begin(specials), std::end(specials), src.begin());
  for (DType t : kDtypes) {
    DeviceBuffer d_src(src), d_out(src.size() * kvinfer::dtype_size(t));
    cuda::convert_from_f32(t, d_src.as<float>(), d_out.ptr, std::ssize(src), stream_);
    sync();
    EXPECT_EQ(d_out.to_host<std::byte>(), narrow(t, src)) << kvinfer::dtype_name(t);
  }
}

TEST_F(CudaOps, StoreKvMatchesCpuCacheAndWritesNothingElse) {
  kvinfer::ModelConfig cfg;
  cfg.num_layers = 2, cfg.num_kv_heads = 3, cfg.head_dim = 67;
  const int64_t capacity = 37, start = 30, n = 7, layer = 1, hd = cfg.head_dim, kvh = cfg.num_kv_heads;
  const auto k = random_floats(static_cast<size_t>(n * kvh * hd), 13), v = random_floats(k.size(), 14);
  auto is_poison = [](std::byte b) { return b == std::byte{0xFF}; };
  for (DType t : kDtypes) {
    const size_t esz = kvinfer::dtype_size(t), row = static_cast<size_t>(hd) * esz;
    kvinfer::KvCache kv(cfg, capacity, t, kvinfer::Device::CPU);
    cpu::store_kv(kv, layer, start, n, k.data(), v.data());
    DeviceBuffer d_k(k), d_v(v), d_kl(kvh * capacity * row), d_vl(kvh * capacity * row);
    cuda::store_kv(t, d_k.as<float>(), d_v.as<float>(), n, kvh, hd, start, capacity, d_kl.ptr, d_vl.ptr, stream_);
    sync();
    const auto kl = d_kl.to_host<std::byte>(), vl = d_vl.to_host<std::byte>();
    for (int64_t g = 0; g < kvh; ++g)
      for (int64_t p = 0; p < capacity; ++p) {
        const size_t off = static_cast<size_t>(g * capacity + p) * row;
        if (p < start) {  // untouched: still poison
          ASSERT_TRUE(std::all_of(kl.begin() + off, kl.begin() + off + row, is_poison)) << g << "," << p;
          ASSERT_TRUE(std::all_of(vl.begin() + off, vl.begin() + off + row, is_poison)) << g << "," << p;
          continue;
        }
        const auto name = kvinfer::dtype_name(t);
        ASSERT_EQ(std::memcmp(kl.data() + off, kv_k(kv, layer, g) + p * row, row), 0) << name << " K " << g << "," << p;
        ASSERT_EQ(std::memcmp(vl.data() + off, kv_v(kv, layer, g) + p * row, row), 0) << name << " V " << g << "," << p;
      }
  }
}

// Rows (n, kv_heads, hd) for an 8-bit cache: random rows of several magnitudes, then hostile ones
// at fixed places: huge (±3e38, and FLT_MAX), tiny (1e-30), subnormal (down to the smallest),
// huge next to tiny (codes that round to 0 and, in fp8, to subnormal codes), all zeros, -0, a NaN,
// +inf, -inf, and ties (values whose code lies exactly halfway).
std::vector<float> hostile_kv_rows(int64_t n, int64_t kvh, int64_t hd, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n * kvh * hd));
  const float magnitudes[] = {1.0f, 1e-3f, 80.0f, 3e5f};
  for (int64_t r = 0; r < n * kvh; ++r)
    for (int64_t d = 0; d < hd; ++d) x[static_cast<size_t>(r * hd + d)] = u(rng) * magnitudes[r % 4];
  const int64_t rows = n * kvh;
  auto row = [&](int64_t r) { return x.data() + (r % rows) * hd; };
  auto fill = [&](int64_t r, auto value) {
    for (int64_t d = 0; d < hd; ++d) row(r)[d] = value(d);
  };
  fill(1, [&](int64_t d) { return (d % 2 ? -3e38f : 3e38f) * (0.5f + 0.5f * std::fabs(u(rng))); });
  fill(2, [&](int64_t d) { return d == hd / 2 ? std::numeric_limits<float>::max() : u(rng) * 3e38f; });
  fill(3, [&](int64_t) { return u(rng) * 1e-30f; });
  fill(4, [&](int64_t) { return u(rng) * 1e-40f; });  // subnormal
  fill(5, [&](int64_t d) { return d == 0 ? std::numeric_limits<float>::denorm_min() : 0.0f; });
  fill(6, [&](int64_t d) { return d == 1 ? 3e38f : u(rng) * 1e-30f; });   // codes that underflow
  fill(7, [&](int64_t d) { return d == 0 ? 1.0f : u(rng) * 0x1p-8f; });   // fp8 subnormal codes
  fill(8, [&](int64_t) { return 0.0f; });
  fill(9, [&](int64_t d) { return d % 3 == 0 ? -0.0f : 0.0f; });
  fill(10, [&](int64_t d) { return d == hd - 1 ? NAN : u(rng); });
  fill(11, [&](int64_t d) { return d == 0 ? INFINITY : u(rng); });
  fill(12, [&](int64_t d) { return d == hd / 3 ? -INFINITY : u(rng) * 3e38f; });
  // Ties: amax 127 (or 448 in fp8 terms) and halves between codes.
  fill(13, [&](int64_t d) { return d == 0 ? 127.0f : static_cast<float>(d % 64) - 31.5f; });
  fill(14, [&](int64_t d) { return d == 0 ? -448.0f : (static_cast<float>(d % 32) + 0.5f) * 13.0f; });
  return x;
}

// The 8-bit caches' store_kv against the CPU's (cpu::store_kv, and core::quantize_kv_key_row and
// core::quantize_kv_row directly): codes and scales the same bits, on random and hostile rows, at
// head dims below, at and above a warp's 32 lanes: 8, 64, 128, 256 (one rotation block), 96 (three
// of 32), 67 (no rotation: blocks of 1), and 2048 (6 warps a block: their rows fill 48 KiB of
// shared memory); through a device position (CUDA graphs) too; nothing else written. The K rows are stored rotated, the V rows as they are: a row of huge values whose
// rotation overflows f32 gets a NaN scale and zero codes as a K row, a finite scale as a V row.
TEST_F(CudaOps, StoreKvEightBitMatchesCpuCodesAndScalesBitForBit) {
  for (DType t : {DType::I8, DType::FP8})
    for (int64_t hd : {8, 64, 67, 96, 128, 256, 2048}) {
      kvinfer::ModelConfig cfg;
      cfg.num_layers = 2, cfg.num_kv_heads = 3, cfg.head_dim = hd;
      const int64_t capacity = 37, start = 30, n = 7, layer = 1, kvh = cfg.num_kv_heads;
      const auto k = hostile_kv_rows(n, kvh, hd, 15), v = hostile_kv_rows(n, kvh, hd, 16);
      kvinfer::KvCache kv(cfg, capacity, t, kvinfer::Device::CPU);
      cpu::store_kv(kv, layer, start, n, k.data(), v.data());
      const size_t row = static_cast<size_t>(hd);
      const bool fp8 = t == DType::FP8;
      // The core functions' codes and scales of input row r (t, g) = (r / kvh, r % kvh).
      std::vector<uint8_t> k_codes(static_cast<size_t>(n * kvh) * row), v_codes(k_codes.size());
      std::vector<float> k_sc(static_cast<size_t>(n * kvh)), v_sc(k_sc.size()), work(row);
      for (size_t r = 0; r < k_sc.size(); ++r) {
        kvinfer::core::quantize_kv_key_row(k.data() + r * row, static_cast<int>(hd), fp8, k_codes.data() + r * row,
                                           &k_sc[r], work.data());
        kvinfer::core::quantize_kv_row(v.data() + r * row, static_cast<int>(hd), fp8, v_codes.data() + r * row, &v_sc[r]);
      }
      for (bool on_device : {false, true}) {
        const std::string what = std::string(kvinfer::dtype_name(t)) + " head_dim " + std::to_string(hd) +
                                 (on_device ? " (device position)" : "");
        DeviceBuffer d_k(k), d_v(v), d_kl(kvh * capacity * row), d_vl(kvh * capacity * row);
        DeviceBuffer d_ks(kvh * capacity * sizeof(float)), d_vs(kvh * capacity * sizeof(float));
        DeviceBuffer d_start(std::vector<int32_t>{static_cast<int32_t>(start)});
        // With the device position, the host's start is another valid one: the kernel must not use it.
        cuda::store_kv(t, d_k.as<float>(), d_v.as<float>(), n, kvh, hd, on_device ? 0 : start, capacity, d_kl.ptr,
                       d_vl.ptr, stream_, on_device ? d_start.as<int32_t>() : nullptr, d_ks.as<float>(),
                       d_vs.as<float>());
        sync();
        const auto kl = d_kl.to_host<std::byte>(), vl = d_vl.to_host<std::byte>();
        const auto ks = d_ks.to_host<uint32_t>(), vs = d_vs.to_host<uint32_t>();
        for (int64_t g = 0; g < kvh; ++g)
          for (int64_t p = 0; p < capacity; ++p) {
            const size_t off = static_cast<size_t>(g * capacity + p) * row, at = static_cast<size_t>(g * capacity + p);
            if (p < start) {  // untouched: still poison
              auto poison = [](std::byte b) { return b == std::byte{0xFF}; };
              ASSERT_TRUE(std::all_of(kl.begin() + off, kl.begin() + off + row, poison)) << what << " " << g << "," << p;
              ASSERT_TRUE(std::all_of(vl.begin() + off, vl.begin() + off + row, poison)) << what << " " << g << "," << p;
              ASSERT_EQ(ks[at], 0xFFFFFFFFu) << what;
              ASSERT_EQ(vs[at], 0xFFFFFFFFu) << what;
              continue;
            }
            ASSERT_EQ(std::memcmp(kl.data() + off, kv_k(kv, layer, g) + p * row, row), 0) << what << " K codes " << g << "," << p;
            ASSERT_EQ(std::memcmp(vl.data() + off, kv_v(kv, layer, g) + p * row, row), 0) << what << " V codes " << g << "," << p;
            ASSERT_EQ(std::memcmp(&ks[at], kv_k_scales(kv, layer, g) + p, 4), 0) << what << " K scale " << g << "," << p;
            ASSERT_EQ(std::memcmp(&vs[at], kv_v_scales(kv, layer, g) + p, 4), 0) << what << " V scale " << g << "," << p;
            const size_t r = static_cast<size_t>((p - start) * kvh + g);  // the input row
            ASSERT_EQ(std::memcmp(kl.data() + off, k_codes.data() + r * row, row), 0) << what << " K codes (core) " << r;
            ASSERT_EQ(std::memcmp(vl.data() + off, v_codes.data() + r * row, row), 0) << what << " V codes (core) " << r;
            ASSERT_EQ(std::memcmp(&ks[at], &k_sc[r], 4), 0) << what << " K scale (core) " << r;
            ASSERT_EQ(std::memcmp(&vs[at], &v_sc[r], 4), 0) << what << " V scale (core) " << r;
          }
      }
      // The hostile rows came out as the header says (so that they test what they claim): the V
      // rows are coded as they are.
      const int64_t t0 = start;  // row r of the input is (t, g) = (r / kvh, r % kvh)
      auto v_scale = [&](int64_t r) { return kv_v_scales(kv, layer, r % kvh)[t0 + r / kvh]; };
      auto k_scale = [&](int64_t r) { return kv_k_scales(kv, layer, r % kvh)[t0 + r / kvh]; };
      auto k_row = [&](int64_t r) { return kv_k(kv, layer, r % kvh) + (t0 + r / kvh) * hd; };
      EXPECT_TRUE(std::isnan(v_scale(10)) && std::isnan(v_scale(11)) && std::isnan(v_scale(12)));
      EXPECT_EQ(v_scale(8), 0.0f);
      EXPECT_EQ(v_scale(9), 0.0f);
      EXPECT_GT(v_scale(4), 0.0f);
      EXPECT_LT(v_scale(4), 1e-40f);
      // The K rows: non-finite and zero rows stay so after the rotation, subnormal ones stay
      // subnormal (sums of subnormals are exact) and keep a positive scale; the ±3e38 row
      // (row 1) overflows in the rotation's first stage, unless it has none (head_dim 67).
      EXPECT_TRUE(std::isnan(k_scale(10)) && std::isnan(k_scale(11)) && std::isnan(k_scale(12)));
      EXPECT_EQ(k_scale(8), 0.0f);
      EXPECT_EQ(k_scale(9), 0.0f);
      EXPECT_GT(k_scale(4), 0.0f);
      EXPECT_TRUE(std::isfinite(v_scale(1)) && v_scale(1) > 1e35f);
      if (kvinfer::core::kv_rotation_block(static_cast<int>(hd)) > 1) {
        EXPECT_TRUE(std::isnan(k_scale(1))) << hd;
        EXPECT_TRUE(std::all_of(k_row(1), k_row(1) + hd, [](std::byte b) { return b == std::byte{0}; })) << hd;
      } else {
        EXPECT_TRUE(std::isfinite(k_scale(1))) << hd;  // not rotated
      }
    }
}

// The attention kernels' widening of 8 codes (kernels/core/kv_code_load.h) is core::kv_code_value,
// bit for bit, for all 256 codes of both types (NaN codes: NaN with the code's sign).
TEST(CudaKvCodes, WideningIsKvCodeValueForEveryCode) {
  for (bool fp8 : {false, true})
    for (uint32_t c0 = 0; c0 < 256; c0 += 8) {
      uint32_t w[2] = {};
      for (uint32_t i = 0; i < 8; ++i) w[i / 4] |= (c0 + i) << (8 * (i % 4));
      float x[8];
      if (fp8) kvinfer::core::widen8_e4m3(w, x);
      else kvinfer::core::widen8_i8(w, x);
      for (uint32_t i = 0; i < 8; ++i) {
        const float want = kvinfer::core::kv_code_value(static_cast<uint8_t>(c0 + i), fp8);
        EXPECT_EQ(kvinfer::core::f32_to_bits(x[i]), kvinfer::core::f32_to_bits(want))
            << (fp8 ? "fp8" : "int8") << " code " << c0 + i << ": " << x[i] << " vs " << want;
      }
    }
}

TEST_F(CudaOps, ArgmaxMatchesCpuWithTiesAndLargeVocabularies) {
  DeviceBuffer d_out(sizeof(int32_t));
  auto gpu_argmax = [&](const std::vector<float>& logits) {
    DeviceBuffer d_l(logits);
    CUDA_CHECK(cudaMemset(d_out.ptr, 0xFF, sizeof(int32_t)));
    cuda::argmax(d_l.as<float>(), std::ssize(logits), d_out.as<int32_t>(), stream_);
    sync();
    return d_out.to_host<int32_t>()[0];
  };
  for (int64_t vocab : {1, 31, 1025, 32001, 262147}) {
    auto logits = random_floats(static_cast<size_t>(vocab), 15, -10.0f, 10.0f);
    EXPECT_EQ(gpu_argmax(logits), kvinfer::argmax(logits)) << "vocab " << vocab;
    logits.back() = 11.0f;  // the last index, in the last thread's stride
    EXPECT_EQ(gpu_argmax(logits), vocab - 1) << "vocab " << vocab;
    if (vocab < 3) continue;
    // Ties in different lanes, warps and strides: the lowest index wins.
    for (int64_t i : {vocab / 3 + 1, vocab / 2, vocab - 1}) logits[static_cast<size_t>(i)] = 12.0f;
    EXPECT_EQ(gpu_argmax(logits), vocab / 3 + 1) << "ties, vocab " << vocab;
    logits[static_cast<size_t>(vocab / 2)] = NAN;  // NaN never wins
    EXPECT_EQ(gpu_argmax(logits), kvinfer::argmax(logits)) << "NaN, vocab " << vocab;
  }
  EXPECT_EQ(gpu_argmax(std::vector<float>(70000, -INFINITY)), 0);
}

// Relative error max|gpu − cpu| / max|cpu| with inputs uniform in [-1, 1]:
//  - f32 (CUBLAS_COMPUTE_32F, no TF32): both sides round each product and partial sum in f32;
//    the errors walk randomly, ~u·sqrt(k) relative; we allow 16·u·sqrt(k) (k = 4097: 6e-5).
//    TF32 (u = 2^-11 on both operands) would give ~2e-4 and fail.
//  - f16/bf16: the GPU narrows x to the weights' dtype. Against the CPU fed the same narrowed x,
//    only the f32 accumulation differs (tensor-core accumulation is not guaranteed RNE: 4× the
//    f32 bound). Against plain cpu::linear, each x_j carries |δ_j| ≤ u_lowp (bf16 2^-8, f16 2^-11);
//    the error Σ w_j x_j δ_j has std ≤ u/√3·‖w∘x‖₂ ≈ u/√3·std(y), its max over the outputs is
//    ≈ 0.7u·max|y|; we allow 2u (+ the f32 bound).
TEST_F(CudaOps, GemmMatchesCpuLinearForEveryDtype) {
  // cuBLAS as kvinfer loads it (at run time: no test links libcublas), one handle on the test's stream.
  const cuda::CublasApi& blas = cuda::cublas();
  cublasHandle_t handle = nullptr;
  ASSERT_EQ(blas.create(&handle), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(blas.set_stream(handle, stream_), CUBLAS_STATUS_SUCCESS);  // cuda::gemm leaves the binding to its caller
  struct Shape { int64_t n, out, in; };
  for (Shape s : {Shape{1, 32001, 67}, Shape{3, 1001, 4097}, Shape{17, 257, 1031}})
    for (DType t : kDtypes) {
      const auto w = narrow(t, random_floats(static_cast<size_t>(s.out * s.in), 16));
      const auto x = random_floats(static_cast<size_t>(s.n * s.in), 17);
      DeviceBuffer d_w(w), d_x(x), d_y(static_cast<size_t>(s.n * s.out) * sizeof(float));
      DeviceBuffer d_lowp(x.size() * kvinfer::dtype_size(t));
      cuda::gemm(handle, t, d_w.ptr, s.out, s.in, d_x.as<float>(), s.n, d_y.as<float>(),
                 t == DType::F32 ? nullptr : d_lowp.ptr, stream_);
      sync();
      const auto y = d_y.to_host<float>();
      const kvinfer::Linear layer{.weight = {.dtype = t, .data = w.data(), .rows = s.out, .cols = s.in}, .bias = {}};
      std::vector<float> ref(y.size()), ref_narrowed(y.size());
      cpu::linear(layer, x.data(), s.n, ref.data());
      const auto x_narrowed = widen(t, narrow(t, x));
      cpu::linear(layer, x_narrowed.data(), s.n, ref_narrowed.data());
      const double tol32 = 16 * kU32 * std::sqrt(static_cast<double>(s.in));
      const double u = t == DType::BF16 ? 0x1p-8 : t == DType::F16 ? 0x1p-11 : 0.0;
      const char* what = kvinfer::dtype_name(t).data();
      EXPECT_LE(max_rel_err(y, ref_narrowed), t == DType::F32 ? tol32 : 4 * tol32) << what << " in " << s.in;
      EXPECT_LE(max_rel_err(y, ref), 2 * u + tol32) << what << " in " << s.in;
    }
  blas.destroy(handle);
}

// The dequantisation kernel uses kernels/core/quant.h as the CPU does: the f16 it writes is
// cpu::to_f32's value rounded to nearest even, bit for bit, whatever the type.
TEST_F(CudaOps, DequantizeF16IsTheCpuValueRounded) {
  const int64_t rows = 257, cols = 512;
  for (DType t : kQuantTypes) {
    const auto w = quant_matrix(t, rows);
    DeviceBuffer d_w(w), d_out(static_cast<size_t>(rows * cols) * sizeof(uint16_t));
    cuda::dequantize_f16(t, d_w.ptr, rows, cols, d_out.ptr, stream_);
    sync();
    const auto got = d_out.to_host<uint16_t>();
    std::vector<float> ref(static_cast<size_t>(rows * cols));
    cpu::to_f32(t, w.data(), ref.data(), rows * cols);
    size_t mismatches = 0;
    for (size_t i = 0; i < ref.size(); ++i) mismatches += got[i] != kvinfer::core::f32_to_f16(ref[i]);
    EXPECT_EQ(mismatches, 0u) << kvinfer::dtype_name(t);
  }
}

TEST_F(CudaOps, EmbedQuantizedIsBitIdenticalToCpu) {
  const int64_t vocab = 37, hidden = 512;
  const std::vector<int32_t> ids = {0, 36, 5, 5, 4, 17, 1};
  for (DType t : kQuantTypes) {
    const auto table = quant_matrix(t, vocab);
    DeviceBuffer d_table(table), d_ids(ids), d_out(ids.size() * hidden * sizeof(float));
    cuda::embed_quantized(t, d_table.ptr, vocab, hidden, d_ids.as<int32_t>(), std::ssize(ids), d_out.as<float>(),
                          stream_);
    sync();
    std::vector<float> ref(ids.size() * hidden);
    cpu::embed({.dtype = t, .data = table.data(), .rows = vocab, .cols = hidden}, ids, ref.data());
    const auto got = d_out.to_host<float>();
    EXPECT_EQ(std::memcmp(got.data(), ref.data(), ref.size() * sizeof(float)), 0) << kvinfer::dtype_name(t);
  }
  // An id outside the table (missed by the host checks) gives a NaN row, not a read.
  const std::vector<int32_t> bad = {-1, 37};
  const auto table = quant_matrix(DType::Q4_K, vocab);
  DeviceBuffer d_table(table), d_ids(bad), d_out(bad.size() * hidden * sizeof(float));
  cuda::embed_quantized(DType::Q4_K, d_table.ptr, vocab, hidden, d_ids.as<int32_t>(), 2, d_out.as<float>(), stream_);
  sync();
  for (float v : d_out.to_host<float>()) ASSERT_TRUE(std::isnan(v));
}

// cuda_backend::linear on quantised weights for n > 8 (n <= 8 takes the GEMV, test_cuda_gemv.cpp):
// the matrix is dequantised to f16 scratch, a tile at a time, and goes through the f16 GEMM. Against the CPU fed the same f16 operands (w rounded to f16, x narrowed)
// only the accumulation differs (4× the f32 bound of GemmMatchesCpuLinearForEveryDtype); against
// plain cpu::linear both operands carry an f16 rounding: 2u each (u = 2^-11) + that bound.
TEST_F(CudaOps, BackendLinearOnQuantizedWeightsMatchesCpu) {
  auto ctx = kvinfer::cuda_backend::create_context();
  const int64_t n = 17, out = 301, in = 512;
  for (DType t : kQuantTypes) {
    const auto w = quant_matrix(t, out, 4);
    const auto x = random_floats(static_cast<size_t>(n * in), 21);
    std::vector<float> bias_host = random_floats(static_cast<size_t>(out), 22);
    DeviceBuffer d_w(w), d_x(x), d_bias(bias_host), d_y(static_cast<size_t>(n * out) * sizeof(float));
    const kvinfer::Linear dev{.weight = {.dtype = t, .data = d_w.as<std::byte>(), .rows = out, .cols = in},
                              .bias = {.data = d_bias.as<float>(), .n = out}};
    kvinfer::cuda_backend::linear(*ctx, dev, d_x.as<float>(), n, d_y.as<float>());
    std::vector<float> y(static_cast<size_t>(n * out));
    kvinfer::cuda_backend::to_host(*ctx, d_y.as<float>(), y.data(), n * out);

    const kvinfer::Linear host{.weight = {.dtype = t, .data = w.data(), .rows = out, .cols = in},
                               .bias = {.data = bias_host.data(), .n = out}};
    std::vector<float> ref(y.size()), ref_f16(y.size());
    cpu::linear(host, x.data(), n, ref.data());
    std::vector<float> w32(static_cast<size_t>(out * in));
    cpu::to_f32(t, w.data(), w32.data(), out * in);
    const auto w16 = narrow(DType::F16, w32);
    const auto x16 = widen(DType::F16, narrow(DType::F16, x));
    const kvinfer::Linear host16{.weight = {.dtype = DType::F16, .data = w16.data(), .rows = out, .cols = in},
                                 .bias = host.bias};
    cpu::linear(host16, x16.data(), n, ref_f16.data());
    const double tol32 = 16 * kU32 * std::sqrt(static_cast<double>(in));
    EXPECT_LE(max_rel_err(y, ref_f16), 4 * tol32) << kvinfer::dtype_name(t);
    EXPECT_LE(max_rel_err(y, ref), 4 * 0x1p-11 + tol32) << kvinfer::dtype_name(t);
  }
}

// The message of the kvinfer::Error that f() throws, or "no error".
template <typename F>
std::string message(F&& f) {
  try {
    f();
  } catch (const kvinfer::Error& e) {
    return std::string(e.what());
  }
  return std::string("no error");
}

// Argument checks run on the host before any CUDA call: no device needed.
TEST(CudaOpsArguments, LaunchersRejectBadArgumentsWithClearErrors) {
  using ::testing::HasSubstr;
  auto* p = reinterpret_cast<float*>(uintptr_t{256});  // never dereferenced: checks come first
  EXPECT_THAT(message([&] { cuda::rope(p, 1, 1, 7, 0, p, cuda::RopeLayout::HalfSplit, nullptr); }),
              HasSubstr("head_dim must be even, got 7"));
  EXPECT_THAT(message([&] { cuda::rope(p, 1, 1, 8, 0, p, cuda::RopeLayout::HalfSplit, nullptr, nullptr, 10); }),
              HasSubstr("rotary_dim must be even and in [2, head_dim = 8], got 10"));
  EXPECT_THAT(message([&] { cuda::embed(DType::F16, nullptr, 10, 4, nullptr, 1, p, nullptr); }),
              HasSubstr("table is a null pointer"));
  EXPECT_THAT(message([&] { cuda::rms_norm(p, p, 0, 4, 1e-6f, p, nullptr); }), HasSubstr("n must be positive, got 0"));
  // rows: a ring's (position p in row p mod rows); one call's positions must fit in them at once.
  EXPECT_THAT(message([&] { cuda::store_kv(DType::F32, p, p, 10, 1, 8, 6, 9, p, p, nullptr); }),
              HasSubstr("n = 10 positions do not fit the cache's 9 rows at once"));
  EXPECT_THAT(message([&] { cuda::store_kv(DType::F32, p, p, 4, 1, 8, -1, 9, p, p, nullptr); }),
              HasSubstr("position start = -1 is negative"));
  EXPECT_THAT(message([&] { cuda::store_kv(DType::I8, p, p, 4, 1, 8, 0, 9, p, p, nullptr, nullptr, p, nullptr); }),
              HasSubstr("an int8 cache needs k_scales and v_scales"));
  // An 8-bit cache's K rows are rotated in shared memory: a row of 12288 floats (48 KiB) at most.
  EXPECT_THAT(message([&] { cuda::store_kv(DType::FP8, p, p, 1, 1, 12289, 0, 9, p, p, nullptr, nullptr, p, p); }),
              HasSubstr("head_dim 12289 is too large for an fp8 cache"));
  EXPECT_THAT(message([&] { cuda::argmax(p, 0, nullptr, nullptr); }), HasSubstr("out is a null pointer"));
  EXPECT_THAT(message([&] { cuda::dequantize_f16(DType::Q4_K, p, 4, 160, p, nullptr); }),
              HasSubstr("multiple of the q4_k block size 256"));
  EXPECT_THAT(message([&] { cuda::dequantize_f16(DType::BF16, p, 4, 256, p, nullptr); }),
              HasSubstr("bf16 is not a quantised type"));
  EXPECT_THAT(message([&] { cuda::embed_quantized(DType::Q8_0, p, 10, 32, nullptr, 1, p, nullptr); }),
              HasSubstr("non-null"));
  EXPECT_THAT(message([&] { cuda::embed(DType::Q8_0, p, 10, 32, reinterpret_cast<int32_t*>(p), 1, p, nullptr); }),
              HasSubstr("q8_0"));
  EXPECT_THAT(message([&] { cuda::gemm(reinterpret_cast<cublasHandle_t>(uintptr_t{256}), DType::Q6_K, p, 8, 256, p,
                                       1, p, p, nullptr); }),
              HasSubstr("q6_k"));
  auto fake_handle = reinterpret_cast<cublasHandle_t>(uintptr_t{256});
  EXPECT_THAT(message([&] { cuda::gemm(fake_handle, DType::BF16, p, 8, 8, p, 1, p, nullptr, nullptr); }),
              HasSubstr("x_lowp is a null pointer"));
}

TEST(CudaOpsArguments, LayerNormAndGeluTanhRejectBadArgumentsWithClearErrors) {
  using ::testing::HasSubstr;
  auto* p = reinterpret_cast<float*>(uintptr_t{256});  // never dereferenced: checks come first
  EXPECT_THAT(message([&] { cuda::layer_norm(p, p, nullptr, 2, 8, 1e-5f, p, nullptr); }),
              HasSubstr("cuda::layer_norm: bias is a null pointer"));
  EXPECT_THAT(message([&] { cuda::layer_norm(p, nullptr, p, 2, 8, 1e-5f, p, nullptr); }),
              HasSubstr("weight is a null pointer"));
  EXPECT_THAT(message([&] { cuda::layer_norm(p, p, p, 2, 0, 1e-5f, p, nullptr); }),
              HasSubstr("dim must be positive, got 0"));
  EXPECT_THAT(message([&] { cuda::layer_norm(p, p, p, 0, 8, 1e-5f, p, nullptr); }),
              HasSubstr("n must be positive, got 0"));
  EXPECT_THAT(message([&] { cuda::layer_norm(p, p, p, 1, 8, -1.0f, p, nullptr); }), HasSubstr("eps must be >= 0"));
  EXPECT_THAT(message([&] { cuda::layer_norm(p, p, p, int64_t{1} << 31, 8, 1e-5f, p, nullptr); }),
              HasSubstr("exceeds the grid"));
  EXPECT_THAT(message([&] { cuda::gelu_tanh(nullptr, p, 4, nullptr); }),
              HasSubstr("cuda::gelu_tanh: x is a null pointer"));
  EXPECT_THAT(message([&] { cuda::gelu_tanh(p, nullptr, 4, nullptr); }), HasSubstr("out is a null pointer"));
  EXPECT_THAT(message([&] { cuda::gelu_tanh(p, p, -3, nullptr); }), HasSubstr("n must be positive, got -3"));
}

// ---- mixture of experts (kernels/moe.cu) against src/cpu/moe.cpp ------------------------------

// Routing on the device: the same experts as the CPU, the weights within a few ulp (expf).
TEST_F(CudaOps, MoeRouteMatchesCpu) {
  for (bool normalize : {true, false})
    for (auto [experts, k] : {std::pair{4, 2}, {8, 2}, {60, 4}, {256, 8}}) {
      const int64_t n = 37;
      const auto logits = random_floats(static_cast<size_t>(n * experts), static_cast<uint32_t>(experts + k), -4.0f, 4.0f);
      std::vector<int32_t> ids(static_cast<size_t>(n * k));
      std::vector<float> w(ids.size());
      cpu::moe_route(logits.data(), n, experts, k, normalize, ids.data(), w.data());
      DeviceBuffer d_logits(logits), d_ids(ids.size() * sizeof(int32_t)), d_w(w.size() * sizeof(float));
      cuda::moe_route(d_logits.as<float>(), n, experts, k, normalize, d_ids.as<int32_t>(), d_w.as<float>(), stream_);
      sync();
      EXPECT_EQ(d_ids.to_host<int32_t>(), ids) << experts << " experts, k " << k;
      EXPECT_LE(max_rel_err(d_w.to_host<float>(), w), 8 * kU32) << experts << " experts, k " << k;
    }
}

// Every (row, expert) pair on the device against the CPU's grouped experts, for every weight
// type, one row (decode) and several; the device picks each pair's expert from the routed ids.
TEST_F(CudaOps, MoeExpertsMatchCpuForEveryWeightType) {
  auto ctx = kvinfer::cuda_backend::create_context();
  const int64_t experts = 5, k = 2, hidden = 512, inter = 256;
  std::vector<DType> types(std::begin(kDtypes), std::end(kDtypes));
  for (DType t : kQuantTypes)  // the types quantize_row writes (not Q5_0/Q5_1: core::dequantize_group alike)
    if (kvinfer::can_quantize(t)) types.push_back(t);
#ifdef KVINFER_TEST_SANITIZED
  // Under the sanitizers (8 s a type): a float, a narrowed float, a block and a K-quant type;
  // every type runs in the simulation build.
  types = {DType::F32, DType::BF16, DType::Q4_0, DType::Q4_K};
#endif
  for (DType t : types)
    for (int64_t n : {1, 7, 40}) {  // 40 rows: a prefill, grouped by expert (cuBLAS for the larger groups)
      const auto bytes_of = [&](const std::vector<float>& v, int64_t rows, int64_t cols) {
        std::vector<std::byte> b(static_cast<size_t>(rows) * kvinfer::dtype_row_bytes(t, cols));
        for (int64_t r = 0; r < rows; ++r) {
          std::byte* row = b.data() + static_cast<size_t>(r) * kvinfer::dtype_row_bytes(t, cols);
          if (kvinfer::is_quantized(t))
            kvinfer::quantize_row(t, v.data() + r * cols, row, cols);
          else
            cpu::from_f32(t, v.data() + r * cols, row, cols);
        }
        return b;
      };
      std::vector<std::vector<std::byte>> host;  // (experts × 3) stored matrices
      std::vector<std::unique_ptr<DeviceBuffer>> dev;
      kvinfer::MoeWeights hm, dm;
      for (int64_t e = 0; e < experts; ++e)
        for (int part = 0; part < 3; ++part) {
          const int64_t rows = part == 2 ? hidden : inter, cols = part == 2 ? inter : hidden;
          host.push_back(bytes_of(random_floats(static_cast<size_t>(rows * cols), static_cast<uint32_t>(e * 3 + part), -0.2f, 0.2f),
                                  rows, cols));
          dev.push_back(std::make_unique<DeviceBuffer>(host.back()));
          const kvinfer::Linear h{.weight = {.dtype = t, .data = host.back().data(), .rows = rows, .cols = cols},
                                  .bias = {}};
          const kvinfer::Linear d{.weight = {.dtype = t, .data = dev.back()->as<std::byte>(), .rows = rows, .cols = cols},
                                  .bias = {}};
          (part == 0 ? hm.gate : part == 1 ? hm.up : hm.down).push_back(h);
          (part == 0 ? dm.gate : part == 1 ? dm.up : dm.down).push_back(d);
        }
      const auto x = random_floats(static_cast<size_t>(n * hidden), 31);
      const auto logits = random_floats(static_cast<size_t>(n * experts), 32, -3.0f, 3.0f);
      std::vector<int32_t> ids(static_cast<size_t>(n * k));
      std::vector<float> w(ids.size());
      cpu::moe_route(logits.data(), n, experts, k, true, ids.data(), w.data());
      std::vector<float> sx(static_cast<size_t>(n * hidden)), sg(static_cast<size_t>(n * k * inter)), su(sg.size()),
          sy(static_cast<size_t>(n * k * hidden)), ref(static_cast<size_t>(n * hidden));
      cpu::moe_experts(hm, x.data(), n, hidden, ids.data(), w.data(), k, {sx.data(), sg.data(), su.data(), sy.data()},
                       ref.data());
      DeviceBuffer d_x(x), d_ids(ids), d_w(w), d_g(sg.size() * 4), d_u(su.size() * 4), d_y(sy.size() * 4),
          d_out(ref.size() * 4);
      kvinfer::cuda_backend::moe_experts(*ctx, dm, d_x.as<float>(), n, hidden, d_ids.as<int32_t>(), d_w.as<float>(), k,
                                         {nullptr, d_g.as<float>(), d_u.as<float>(), d_y.as<float>()},
                                         d_out.as<float>());
      std::vector<float> out(ref.size());
      kvinfer::cuda_backend::to_host(*ctx, d_out.as<float>(), out.data(), static_cast<int64_t>(out.size()));
      const double tol32 = 16 * kU32 * std::sqrt(static_cast<double>(hidden));
      // A group of more than 8 rows goes through cuBLAS, its input narrowed to the weights' dtype
      // (f16 for quantised weights): that type's rounding, twice (two products), on top.
      const double narrowed = n <= 8 || t == DType::F32 ? 0 : t == DType::BF16 ? 0x1p-8 : 0x1p-11;
      EXPECT_LE(max_rel_err(out, ref), 4 * tol32 + 4 * narrowed) << kvinfer::dtype_name(t) << ", n " << n;
    }
}

TEST_F(CudaOps, AddGatedMatchesCpuBitForBit) {
  const int64_t n = 5, dim = 333;
  auto out = random_floats(static_cast<size_t>(n * dim), 41);
  const auto gate = random_floats(static_cast<size_t>(n), 42, -6.0f, 6.0f);
  const auto y = random_floats(static_cast<size_t>(n * dim), 43);
  DeviceBuffer d_out(out), d_gate(gate), d_y(y);
  cuda::add_gated(d_out.as<float>(), d_gate.as<float>(), d_y.as<float>(), n, dim, stream_);
  sync();
  cpu::add_gated(out.data(), gate.data(), y.data(), n, dim);
  const auto got = d_out.to_host<float>();
  // sigmoid's expf may differ from glibc's by an ulp: then so may the product.
  EXPECT_LE(max_rel_err(got, out), 4 * kU32);
}

}  // namespace
}  // namespace kvinfer_test
