// The GEMV kernels (kernels/gemv.cu) and cuda_backend::linear's two paths: n <= 8 reads the
// weights in place, n > 8 dequantises bounded tiles for cuBLAS. References: the product in double
// of cpu::to_f32's values (the CPU's dequantisation, bit-identical to ggml's), and cpu::linear.
// Random blocks cover every code and 6-bit scale pattern (random bytes) with random finite f16
// block scales. Outputs are poisoned (NaN) before each call. Skips where no CUDA device exists.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "core/convert.h"
#include "core/quant.h"
#include "cpu/cpu_ops.h"
#include "cuda/cuda_backend.h"
#include "cuda_check.h"
#include "cuda_test_buffer.h"
#include "cuda_gemv.h"
#include "cuda_ops.h"
#include "kvinfer/device.h"
#include "kvinfer/error.h"

namespace kvinfer_test {
namespace {

using kvinfer::DType;
namespace cpu = kvinfer::cpu;
namespace cuda = kvinfer::cuda;
namespace backend = kvinfer::cuda_backend;

constexpr DType kAllTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_1,
                               DType::Q5_0, DType::Q5_1, DType::Q4_K, DType::Q5_K, DType::Q6_K};
constexpr DType kQuantTypes[] = {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0,
                                 DType::Q5_1, DType::Q4_K, DType::Q5_K, DType::Q6_K};
constexpr double kU32 = 0x1p-24;  // unit roundoff of f32
constexpr double kU16 = 0x1p-11;  // unit roundoff of f16


std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// A random finite f16: any sign and mantissa; the exponent field anything but 31 when `wide`,
// else 13 .. 17 (magnitudes 2^-2 .. 2^3), so that every block weighs in the product and a
// wrong value anywhere shows.
uint16_t random_half(std::mt19937& rng, bool wide) {
  const auto bits = static_cast<uint16_t>(rng());
  const uint16_t exponent = wide ? static_cast<uint16_t>(rng() % 31) : static_cast<uint16_t>(13 + rng() % 5);
  return static_cast<uint16_t>((bits & 0x83FFu) | (exponent << 10));
}

// W (rows, cols) of type t: quantised blocks of random bytes (every code, high bit and 6-bit
// scale pattern) with random finite f16 d (and m / dmin); f32/f16/bf16 values uniform in [-1, 1].
std::vector<std::byte> random_matrix(DType t, int64_t rows, int64_t cols, uint32_t seed, bool wide_scales = false) {
  std::mt19937 rng(seed);
  if (!kvinfer::is_quantized(t)) {
    const auto v = random_floats(static_cast<size_t>(rows * cols), seed);
    std::vector<std::byte> out(v.size() * kvinfer::dtype_size(t));
    cpu::from_f32(t, v.data(), out.data(), rows * cols);
    return out;
  }
  std::vector<std::byte> m(static_cast<size_t>(rows) * kvinfer::dtype_row_bytes(t, cols));
  for (auto& b : m) b = static_cast<std::byte>(rng());
  const auto block = kvinfer::dtype_block(t);
  for (size_t at = 0; at < m.size(); at += block.bytes)
    for (size_t offset : kvinfer::core::half_fields(t)) {
      const uint16_t h = random_half(rng, wide_scales);
      std::memcpy(m.data() + at + offset, &h, sizeof h);
    }
  return m;
}

std::vector<float> widen(DType t, const std::vector<std::byte>& w, int64_t count) {
  std::vector<float> out(static_cast<size_t>(count));
  cpu::to_f32(t, w.data(), out.data(), count);
  return out;
}

// The product in double of W's f32 values and x, and for each output the bound of an f32 dot
// product of those k terms (+ bias): |ŷ − y| ≤ γ_{k+1} · Σ|w·x| (+ |b|), γ_m = m·u / (1 − m·u).
struct Reference {
  std::vector<double> y, bound;  // (n, rows)
};
Reference reference(const std::vector<float>& w32, int64_t rows, int64_t cols, const std::vector<float>& x, int64_t n,
                    const float* bias, double u_extra = 0.0) {
  Reference r{std::vector<double>(static_cast<size_t>(n * rows)), std::vector<double>(static_cast<size_t>(n * rows))};
  const double m = static_cast<double>(cols + 1) * kU32, gamma = m / (1 - m) + u_extra;
  for (int64_t t = 0; t < n; ++t)
    for (int64_t i = 0; i < rows; ++i) {
      double s = 0, a = 0;
      for (int64_t j = 0; j < cols; ++j) {
        const double p = static_cast<double>(w32[i * cols + j]) * x[t * cols + j];
        s += p, a += std::fabs(p);
      }
      if (bias) s += bias[i], a += std::fabs(bias[i]);
      r.y[t * rows + i] = s;
      r.bound[t * rows + i] = gamma * a;
    }
  return r;
}

// Outputs beyond their bound (NaN counts), and the norm-wise relative error ‖ŷ − y‖ / ‖y‖.
struct Check {
  int64_t beyond = 0;
  double rel = 0;
};
Check check(const std::vector<float>& got, const Reference& ref) {
  Check c;
  double diff = 0, norm = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double e = std::fabs(got[i] - ref.y[i]);
    c.beyond += !(e <= ref.bound[i]);
    diff += e * e, norm += ref.y[i] * ref.y[i];
  }
  c.rel = std::sqrt(diff / norm);
  return c;
}

// Columns for the tests: the K-quants' 256-value blocks, the small formats' 32 (3 and 33 blocks:
// a partial last chunk; rows 54 and 594 bytes apart for Q4_0, so rows start unaligned) and any
// count for f32/f16/bf16 (67: the scalar path).
std::vector<int64_t> test_cols(DType t) {
  const int64_t block = kvinfer::dtype_block(t).elements;
  if (block == 256) return {256, 768, 2048};
  if (block == 32) return {96, 256, 768, 1056, 2048};
  return {67, 256, 768, 2048};
}

class CudaGemv : public ::testing::Test {
 protected:
  void SetUp() override {
    if (kvinfer::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: the GEMV kernels are not run";
    CUDA_CHECK(cudaStreamCreate(&stream_));
  }
  void TearDown() override {
    if (stream_) cudaStreamDestroy(stream_);
  }
  // cuda::gemv into a poisoned y; returns y.
  std::vector<float> gemv(DType t, const DeviceBuffer& w, int64_t rows, int64_t cols, const float* x, int64_t n,
                          const float* bias) {
    DeviceBuffer y(static_cast<size_t>(n * rows) * sizeof(float));
    cuda::gemv(t, w.ptr, rows, cols, x, n, bias, y.as<float>(), stream_);
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    return y.to_host<float>();
  }
  cudaStream_t stream_ = nullptr;
};

// Every dtype, n = 1, 2, 3, 8, rows 1, 33 (not a warp multiple), 300, with and without a bias.
// The f32 dot products differ from the double reference by at most γ_{k+1}·Σ|w·x| each (the
// classical bound, whatever the summation order): every output is checked against its bound,
// and the norm-wise error is reported. A wrong code, scale or offset moves outputs by O(Σ|w·x|).
TEST_F(CudaGemv, MatchesTheDoubleReferenceForEveryDtype) {
  uint32_t seed = 1;
  for (DType t : kAllTypes)
    for (int64_t cols : test_cols(t))
      for (int64_t rows : {1, 33, 300})
        for (int64_t n : {1, 2, 3, 8}) {
          if (rows == 300 && cols == 2048 && n != 8 && n != 1) continue;  // the sim's time: the rest covers it
          ++seed;
          const bool with_bias = (n + rows) % 2 == 0;
          const auto w = random_matrix(t, rows, cols, seed);
          const auto x = random_floats(static_cast<size_t>(n * cols), seed + 1000);
          const auto bias = random_floats(static_cast<size_t>(rows), seed + 2000);
          DeviceBuffer d_w(w), d_x(x), d_bias(bias);
          const auto y = gemv(t, d_w, rows, cols, d_x.as<float>(), n, with_bias ? d_bias.as<float>() : nullptr);
          const auto ref =
              reference(widen(t, w, rows * cols), rows, cols, x, n, with_bias ? bias.data() : nullptr);
          const Check c = check(y, ref);
          EXPECT_EQ(c.beyond, 0) << kvinfer::dtype_name(t) << " rows " << rows << " cols " << cols << " n " << n
                                 << (with_bias ? " bias" : "") << ": relative error " << c.rel;
        }
}

// The raw ggml blocks of tests/data/quant (6 rows × 512 values of each quantised type) and their
// values as the gguf Python package dequantises them: a reference made without any of kvinfer's
// decoders (the CPU's scalar one is the kernels' own, core/quant.h).
std::vector<char> read_fixture(DType t, const char* ext) {
  const auto path = std::filesystem::path(KVINFER_TEST_DATA) / "quant" / (std::string(kvinfer::dtype_name(t)) + ext);
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << path;
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Every quantised type decoded on the device as gguf decodes it, bit for bit: by the GEMV (one-hot
// inputs pick single weights: w · 1 plus zeros is exact), by the quantised embedding gather and by
// the prefill's f16 dequantisation (gguf's values rounded to f16).
TEST_F(CudaGemv, DecodesEveryQuantisedTypeAsGguf) {
  constexpr int64_t kRows = 6, kCols = 512;
  for (DType t : kQuantTypes) {
    const std::vector<char> bin = read_fixture(t, ".bin"), f32 = read_fixture(t, ".f32");
    ASSERT_EQ(bin.size(), static_cast<size_t>(kRows) * kvinfer::dtype_row_bytes(t, kCols)) << kvinfer::dtype_name(t);
    ASSERT_EQ(f32.size(), static_cast<size_t>(kRows * kCols) * sizeof(float));
    std::vector<float> want(static_cast<size_t>(kRows * kCols));
    std::memcpy(want.data(), f32.data(), f32.size());
    DeviceBuffer d_w(std::vector<std::byte>(reinterpret_cast<const std::byte*>(bin.data()),
                                            reinterpret_cast<const std::byte*>(bin.data()) + bin.size()));
    const auto differs = [&](float got, size_t at) { return std::memcmp(&got, &want[at], sizeof got) != 0; };
    // GEMV: x rows one-hot at columns c .. c+7, so y[r][i] = w[i][c + r] (as a value: a sum that
    // starts at +0 turns a -0 weight into +0).
    for (int64_t c = 0; c < kCols; c += 8) {
      std::vector<float> x(static_cast<size_t>(8 * kCols), 0.0f);
      for (int64_t r = 0; r < 8; ++r) x[static_cast<size_t>(r * kCols + c + r)] = 1.0f;
      DeviceBuffer d_x(x);
      const auto y = gemv(t, d_w, kRows, kCols, d_x.as<float>(), 8, nullptr);
      for (int64_t r = 0; r < 8; ++r)
        for (int64_t i = 0; i < kRows; ++i)
          ASSERT_EQ(y[static_cast<size_t>(r * kRows + i)], want[static_cast<size_t>(i * kCols + c + r)])
              << kvinfer::dtype_name(t) << " GEMV: row " << i << " column " << c + r;
    }
    // The embedding gather: every row, in reverse order.
    DeviceBuffer d_ids(std::vector<int32_t>{5, 4, 3, 2, 1, 0});
    DeviceBuffer d_rows(static_cast<size_t>(kRows * kCols) * sizeof(float));
    cuda::embed_quantized(t, d_w.ptr, kRows, kCols, d_ids.as<int32_t>(), kRows, d_rows.as<float>(), stream_);
    DeviceBuffer d_f16(static_cast<size_t>(kRows * kCols) * sizeof(uint16_t));
    cuda::dequantize_f16(t, d_w.ptr, kRows, kCols, d_f16.ptr, stream_);
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    const auto rows = d_rows.to_host<float>();
    const auto halves = d_f16.to_host<uint16_t>();
    for (int64_t i = 0; i < kRows; ++i)
      for (int64_t j = 0; j < kCols; ++j) {
        const auto at = static_cast<size_t>(i * kCols + j);
        ASSERT_FALSE(differs(rows[static_cast<size_t>((kRows - 1 - i) * kCols + j)], at))
            << kvinfer::dtype_name(t) << " embedding: row " << i << " column " << j;
        ASSERT_EQ(halves[at], kvinfer::core::f32_to_f16(want[at]))
            << kvinfer::dtype_name(t) << " f16 tile: row " << i << " column " << j;
      }
  }
}

// Against the CPU backend's product (cpu::linear: its own fixed-order f32 dot): both are within
// their bound of the exact product, so within twice the bound of each other.
TEST_F(CudaGemv, MatchesCpuLinear) {
  const int64_t rows = 33, cols = 768;
  for (DType t : kAllTypes)
    for (int64_t n : {1, 8}) {
      const auto w = random_matrix(t, rows, cols, 7);
      const auto x = random_floats(static_cast<size_t>(n * cols), 8);
      const auto bias = random_floats(static_cast<size_t>(rows), 9);
      DeviceBuffer d_w(w), d_x(x), d_bias(bias);
      const auto y = gemv(t, d_w, rows, cols, d_x.as<float>(), n, d_bias.as<float>());
      std::vector<float> cpu_y(y.size());
      const kvinfer::Linear layer{.weight = {.dtype = t, .data = w.data(), .rows = rows, .cols = cols},
                                  .bias = {.data = bias.data(), .n = rows}};
      cpu::linear(layer, x.data(), n, cpu_y.data());
      Reference ref = reference(widen(t, w, rows * cols), rows, cols, x, n, bias.data());
      for (size_t i = 0; i < y.size(); ++i) ref.y[i] = cpu_y[i], ref.bound[i] *= 2;
      const Check c = check(y, ref);
      EXPECT_EQ(c.beyond, 0) << kvinfer::dtype_name(t) << " n " << n << ": relative error " << c.rel;
    }
}

// Block scales anywhere in f16's finite range (subnormal to 65504): the products stay finite in
// f32 and within the bound.
TEST_F(CudaGemv, ExtremeBlockScales) {
  const int64_t rows = 33, cols = 768, n = 2;
  for (DType t : kQuantTypes) {
    const auto w = random_matrix(t, rows, cols, 11, /*wide_scales=*/true);
    const auto x = random_floats(static_cast<size_t>(n * cols), 12);
    DeviceBuffer d_w(w), d_x(x);
    const auto y = gemv(t, d_w, rows, cols, d_x.as<float>(), n, nullptr);
    const Check c = check(y, reference(widen(t, w, rows * cols), rows, cols, x, n, nullptr));
    EXPECT_EQ(c.beyond, 0) << kvinfer::dtype_name(t) << ": relative error " << c.rel;
  }
}

// x not 16-byte aligned (the scalar loads), and W of f32/f16/bf16 not aligned either.
TEST_F(CudaGemv, UnalignedInputs) {
  const int64_t rows = 33, cols = 256, n = 3;
  for (DType t : kAllTypes) {
    const auto w = random_matrix(t, rows, cols, 13);
    std::vector<std::byte> w_shifted(w.size() + 4);
    std::memcpy(w_shifted.data() + 4, w.data(), w.size());
    const auto x = random_floats(static_cast<size_t>(n * cols + 1), 14);
    DeviceBuffer d_w(w_shifted), d_x(x);
    DeviceBuffer y(static_cast<size_t>(n * rows) * sizeof(float));
    cuda::gemv(t, d_w.as<std::byte>() + 4, rows, cols, d_x.as<float>() + 1, n, nullptr, y.as<float>(), stream_);
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    const std::vector<float> x_used(x.begin() + 1, x.end());
    const Check c = check(y.to_host<float>(), reference(widen(t, w, rows * cols), rows, cols, x_used, n, nullptr));
    EXPECT_EQ(c.beyond, 0) << kvinfer::dtype_name(t) << ": relative error " << c.rel;
  }
}

// The reduction order depends on the shape only: two calls give the same bits.
TEST_F(CudaGemv, IsDeterministic) {
  const int64_t rows = 300, cols = 2048, n = 8;
  for (DType t : {DType::F32, DType::Q4_K, DType::Q5_0}) {
    const auto w = random_matrix(t, rows, cols, 15);
    const auto x = random_floats(static_cast<size_t>(n * cols), 16);
    DeviceBuffer d_w(w), d_x(x);
    const auto a = gemv(t, d_w, rows, cols, d_x.as<float>(), n, nullptr);
    const auto b = gemv(t, d_w, rows, cols, d_x.as<float>(), n, nullptr);
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << kvinfer::dtype_name(t);
  }
}

// cuda_backend::linear, n <= 8: the GEMV with the bias fused (the same bits as cuda::gemv), and
// no dequantised copy of the weights: the session holds no dequantisation scratch afterwards.
TEST_F(CudaGemv, BackendLinearUpToEightRowsReadsTheWeightsInPlace) {
  auto ctx = backend::create_context();
  const int64_t rows = 300, cols = 512;
  for (DType t : kAllTypes)
    for (int64_t n : {1, 8}) {
      const auto w = random_matrix(t, rows, cols, 17);
      const auto x = random_floats(static_cast<size_t>(n * cols), 18);
      const auto bias = random_floats(static_cast<size_t>(rows), 19);
      DeviceBuffer d_w(w), d_x(x), d_bias(bias), d_y(static_cast<size_t>(n * rows) * sizeof(float));
      const kvinfer::Linear layer{.weight = {.dtype = t, .data = d_w.as<std::byte>(), .rows = rows, .cols = cols},
                                  .bias = {.data = d_bias.as<float>(), .n = rows}};
      backend::linear(*ctx, layer, d_x.as<float>(), n, d_y.as<float>());
      std::vector<float> y(static_cast<size_t>(n * rows));
      backend::to_host(*ctx, d_y.as<float>(), y.data(), n * rows);
      const auto direct = gemv(t, d_w, rows, cols, d_x.as<float>(), n, d_bias.as<float>());
      EXPECT_EQ(std::memcmp(y.data(), direct.data(), y.size() * sizeof(float)), 0) << kvinfer::dtype_name(t);
    }
  EXPECT_EQ(backend::dequant_scratch_bytes(*ctx), 0u);
}

// cuda_backend::linear, n > 8 on quantised weights: tiles of rows dequantised to f16 and
// multiplied by cuBLAS into their columns of y. Tile bounds of 64 rows (5 tiles of 300 rows)
// and 37 rows (9 tiles, each starting at an unaligned column of y). Both operands are rounded to
// f16 (|δ| ≤ u16 each), so each output is within (2·u16 + u16² + γ) · Σ|w·x| + |b| of the exact
// product; the scratch never exceeds the bound.
TEST_F(CudaGemv, BackendLinearPrefillDequantisesBoundedTiles) {
  const int64_t rows = 300, cols = 512;
  for (int64_t tile_rows : {64, 37}) {
    auto ctx = backend::create_context();
    const uint64_t tile_bytes = static_cast<uint64_t>(tile_rows * cols) * sizeof(uint16_t);
    backend::set_dequant_tile_bytes(*ctx, tile_bytes);
    for (DType t : kQuantTypes)
      for (int64_t n : {9, 40}) {
        const auto w = random_matrix(t, rows, cols, 21);
        const auto x = random_floats(static_cast<size_t>(n * cols), 22);
        const auto bias = random_floats(static_cast<size_t>(rows), 23);
        DeviceBuffer d_w(w), d_x(x), d_bias(bias), d_y(static_cast<size_t>(n * rows) * sizeof(float));
        const kvinfer::Linear layer{.weight = {.dtype = t, .data = d_w.as<std::byte>(), .rows = rows, .cols = cols},
                                    .bias = {.data = d_bias.as<float>(), .n = rows}};
        backend::linear(*ctx, layer, d_x.as<float>(), n, d_y.as<float>());
        std::vector<float> y(static_cast<size_t>(n * rows));
        backend::to_host(*ctx, d_y.as<float>(), y.data(), n * rows);
        const auto ref =
            reference(widen(t, w, rows * cols), rows, cols, x, n, bias.data(), 2 * kU16 + kU16 * kU16);
        const Check c = check(y, ref);
        EXPECT_EQ(c.beyond, 0) << kvinfer::dtype_name(t) << " n " << n << " tile " << tile_rows
                               << ": relative error " << c.rel;
        // And against the CPU backend: a few f16 roundings apart.
        std::vector<float> cpu_y(y.size());
        const kvinfer::Linear host{.weight = {.dtype = t, .data = w.data(), .rows = rows, .cols = cols},
                                   .bias = {.data = bias.data(), .n = rows}};
        cpu::linear(host, x.data(), n, cpu_y.data());
        double diff = 0, norm = 0;
        for (size_t i = 0; i < y.size(); ++i)
          diff += (y[i] - cpu_y[i]) * static_cast<double>(y[i] - cpu_y[i]), norm += cpu_y[i] * double{cpu_y[i]};
        EXPECT_LE(std::sqrt(diff / norm), 8 * kU16) << kvinfer::dtype_name(t) << " n " << n;
      }
    EXPECT_EQ(backend::dequant_scratch_bytes(*ctx), tile_bytes);
  }
}

// The memory check counts one bounded tile, not the f16 copy of the largest quantised matrix.
TEST(CudaGemvScratch, SessionScratchCountsOneTileNotTheLargestMatrix) {
  kvinfer::ModelWeights w;
  w.lm_head.weight = {.dtype = DType::Q4_K, .data = nullptr, .rows = 49152, .cols = 2048};  // f16: 192 MiB
  w.layers.resize(1);
  w.layers[0].down.weight = {.dtype = DType::Q6_K, .data = nullptr, .rows = 2048, .cols = 5632};  // 22 MiB
  EXPECT_EQ(backend::session_scratch_bytes(w), backend::kCublasWorkspaceBytes + backend::kDequantTileBytes);
  EXPECT_EQ(backend::dequant_tile_rows(49152, 2048, backend::kDequantTileBytes), 4096);
  EXPECT_EQ(backend::dequant_tile_rows(2048, 5632, backend::kDequantTileBytes), 1472);  // 1489 rounded to 64s
  EXPECT_EQ(backend::dequant_tile_rows(300, 512, 37 * 512 * 2), 37);
  EXPECT_EQ(backend::dequant_tile_rows(10, 512, 1), 1);      // at least one row
  EXPECT_EQ(backend::dequant_tile_rows(10, 512, 1 << 30), 10);  // at most the matrix
  // A small model: its largest quantised matrix, whole.
  kvinfer::ModelWeights small;
  small.lm_head.weight = {.dtype = DType::Q8_0, .data = nullptr, .rows = 100, .cols = 64};
  EXPECT_EQ(backend::session_scratch_bytes(small), backend::kCublasWorkspaceBytes + 100 * 64 * 2);
}

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
TEST(CudaGemvArguments, RejectsBadArgumentsWithClearErrors) {
  using ::testing::HasSubstr;
  auto* p = reinterpret_cast<float*>(uintptr_t{256});  // never dereferenced: checks come first
  EXPECT_THAT(message([&] { cuda::gemv(DType::Q4_0, p, 4, 64, p, 0, nullptr, p, nullptr); }),
              HasSubstr("n must be in 1 .. 8, got 0"));
  EXPECT_THAT(message([&] { cuda::gemv(DType::Q4_0, p, 4, 64, p, 9, nullptr, p, nullptr); }),
              HasSubstr("n must be in 1 .. 8, got 9"));
  EXPECT_THAT(message([&] { cuda::gemv(DType::Q4_K, p, 4, 160, p, 1, nullptr, p, nullptr); }),
              HasSubstr("multiple of the q4_k block size 256"));
  EXPECT_THAT(message([&] { cuda::gemv(DType::F16, p, 0, 8, p, 1, nullptr, p, nullptr); }),
              HasSubstr("rows must be in 1 .. 2^31 - 1"));
  EXPECT_THAT(message([&] { cuda::gemv(DType::F16, nullptr, 4, 8, p, 1, nullptr, p, nullptr); }),
              HasSubstr("non-null"));
}

}  // namespace
}  // namespace kvinfer_test
