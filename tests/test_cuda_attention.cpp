// The CUDA attention kernels (kernels/attention_decode.cu, attention_prefill.cu and
// attention_prefill_mma.cu) against the CPU backend (cpu::attention) on fresh random inputs, and
// against a double-precision reference on a subset. Skips with a message where no CUDA device
// exists; the argument checks, which throw before touching the device, run everywhere.
//
// Pass rules (FlashAttention's, adapted):
//  - every case: max|gpu - cpu| / max|cpu| <= kRelTol. Both sides widen the same cache values and
//    accumulate in f32, differing only in summation order and rounding: the kernels' source run
//    under a host emulation of CUDA gave at most 6.2e-6 (16K positions). A wrong index, mask or
//    rescale is an O(1e-2..1) error.
//  - fp64 subset: the GPU's distance to the fp64 reference is at most twice the naive f32 CPU
//    kernel's, plus a floor of kRefFloor · max|ref|: where few positions are attended both sides
//    are within a few ulps (emulation: GPU up to 1.4e-6 · max|ref|, CPU 4e-7) and the ratio alone
//    measures luck. The floor leaves room for the device's exp2f (2 ulp).
//  - prefill with an f16 or bf16 cache runs on tensor cores (kernels/attention_prefill_mma.cu),
//    whose operands q · scale and the weights P are rounded to the cache's type: its distance to
//    the CPU is that rounding's, so it is held to kRelTol16Units · u (u: the type's unit
//    roundoff, 2^-11 f16, 2^-8 bf16), and to FlashAttention's rule on every case: its distance
//    to fp64 is at most twice that of a naive kernel at the same precision (naive16_row: q and
//    the normalised P rounded to the cache type, f32 sums), plus a floor of u / 2 · max|ref|.
// KVINFER_TEST_VERBOSE=1 prints the tensor-core kernel's measured errors, case by case.
// Outputs and workspace are poisoned with NaN before each call, as are the cache rows the
// kernels must not read (past the context; before the window, for decode).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cpu/cpu_ops.h"
#include "cuda_check.h"
#include "cuda_ops.h"
#include "core/kv_cache_access.h"
#include "core/kv_quant.h"
#include "kvinfer/kvinfer.h"

namespace kvinfer {
namespace {

constexpr double kRelTol = 1e-4;
constexpr double kRefFloor = 4e-6;
// Tensor-core prefill, in units of the cache type's unit roundoff u: against the CPU (f32 q and
// weights; the simulation gave at most 2.3 u), and the floor of the fp64 rule: with few rows
// checked the max error is a small sample, and the kernel to the naive kernel measured up to 2.2
// (n = 1, f16) while over 0.9 on average.
constexpr double kRelTol16Units = 4;
constexpr double kRefFloor16Units = 0.5;

#define SKIP_WITHOUT_DEVICE()                                                                   \
  do {                                                                                          \
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: attention kernels not run"; \
  } while (0)

template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t count) : bytes_(std::max<size_t>(count, 1) * sizeof(T)) {
    CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p_), bytes_));
    CUDA_CHECK(cudaMemset(p_, 0xFF, bytes_));  // NaN for float: unwritten output shows
  }
  ~DeviceArray() { cudaFree(p_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  T* get() const { return p_; }
  size_t bytes() const { return bytes_; }

 private:
  T* p_ = nullptr;
  size_t bytes_;
};

enum class Kernel { Decode, Prefill };

struct Shape {
  int64_t kv_heads, group, head_dim;
  DType dtype;
  int64_t start, n, window;
  bool codes_at_8 = false;  // 8-bit caches: the code blocks 8 bytes past a 16-byte boundary
  ScoreOptions scores = {};  // Gemma: the scores' scale and soft-cap (fp64 references ignore them: ref_stride 0)
  int64_t heads() const { return kv_heads * group; }
};

std::string describe(Kernel kernel, const Shape& s) {
  return std::string(kernel == Kernel::Decode ? "decode" : "prefill") + " kv_heads " + std::to_string(s.kv_heads) +
         " group " + std::to_string(s.group) + " head_dim " + std::to_string(s.head_dim) + " " +
         std::string(dtype_name(s.dtype)) + " start " + std::to_string(s.start) + " n " + std::to_string(s.n) +
         " window " + std::to_string(s.window) + (s.codes_at_8 ? " (codes 8-byte aligned)" : "");
}

struct Outcome {
  double rel_to_cpu = 0;
  double gpu_to_ref = -1, cpu_to_ref = -1, ref_scale = 0;  // fp64 subset, when computed
  double naive16_to_ref = -1;                              // likewise, for the tensor-core kernel
};

// The prefill kernel for this cache type runs on tensor cores (16-bit operands).
bool uses_mma(Kernel kernel, DType dt) { return kernel == Kernel::Prefill && (dt == DType::F16 || dt == DType::BF16); }

// The unit roundoff of a 16-bit type.
double unit_roundoff(DType dt) { return dt == DType::BF16 ? 0x1p-8 : 0x1p-11; }

std::vector<float> uniform(std::mt19937& rng, size_t count, float a) {
  std::uniform_real_distribution<float> u(-a, a);
  std::vector<float> x(count);
  for (auto& e : x) e = u(rng);
  return x;
}

// x (n, a multiple of b) ← H x / b in fp64, blockwise (b = core::kv_rotation_block(n)): the
// query of an 8-bit cache, whose keys are stored rotated (kernels/core/kv_quant.h). Written from
// the definition (H's entry (i, j) within a block is (-1)^popcount(i & j)), not the butterfly.
std::vector<double> rotated_query(const float* x, int64_t n) {
  const int64_t b = core::kv_rotation_block(static_cast<int>(n));
  std::vector<double> y(static_cast<size_t>(n), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = i / b * b; j < (i / b + 1) * b; ++j)
      y[static_cast<size_t>(i)] += (std::popcount(static_cast<uint64_t>(i & j) % b) % 2 ? -1.0 : 1.0) * x[j];
  for (double& e : y) e /= static_cast<double>(b);
  return y;
}

// fp64 attention for row t, head h over the widened cache: out (head_dim). An 8-bit cache's rows
// are their codes times their scales, its K rows rotated: the query is rotated to match.
std::vector<double> reference_row(const KvCache& kv, const Shape& s, const std::vector<float>& q, int64_t t,
                                  int64_t h) {
  const int64_t hd = s.head_dim, pos = s.start + t, g = h / s.group;
  const int64_t first = s.window > 0 ? std::max<int64_t>(0, pos - s.window + 1) : 0;
  const size_t row_bytes = static_cast<size_t>(hd) * dtype_size(s.dtype);
  const float* k_scales = kv_k_scales(kv, 0, g);  // null but for 8-bit caches
  const float* v_scales = kv_v_scales(kv, 0, g);
  auto scale = [](const float* scales, int64_t j) { return scales ? static_cast<double>(scales[j]) : 1.0; };
  std::vector<float> k(static_cast<size_t>(hd)), v(static_cast<size_t>(hd));
  std::vector<double> score(static_cast<size_t>(pos - first + 1)), out(static_cast<size_t>(hd), 0.0);
  const float* q_row = q.data() + (t * s.heads() + h) * hd;
  const std::vector<double> qh =
      is_scaled_kv(s.dtype) ? rotated_query(q_row, hd) : std::vector<double>(q_row, q_row + hd);
  double mx = -INFINITY;
  for (int64_t j = first; j <= pos; ++j) {
    cpu::to_f32(s.dtype, kv_k(kv, 0, g) + static_cast<size_t>(j) * row_bytes, k.data(), hd);
    double d = 0;
    for (int64_t i = 0; i < hd; ++i) d += qh[static_cast<size_t>(i)] * k[static_cast<size_t>(i)];
    score[static_cast<size_t>(j - first)] = d * scale(k_scales, j) / std::sqrt(static_cast<double>(hd));
    mx = std::max(mx, score[static_cast<size_t>(j - first)]);
  }
  double sum = 0;
  for (auto& e : score) sum += (e = std::exp(e - mx));
  for (int64_t j = first; j <= pos; ++j) {
    cpu::to_f32(s.dtype, kv_v(kv, 0, g) + static_cast<size_t>(j) * row_bytes, v.data(), hd);
    const double p = score[static_cast<size_t>(j - first)] / sum * scale(v_scales, j);
    for (int64_t i = 0; i < hd; ++i) out[static_cast<size_t>(i)] += p * v[static_cast<size_t>(i)];
  }
  return out;
}

float round_to(DType dt, float x) {
  std::byte b[2];
  cpu::from_f32(dt, &x, b, 1);
  float y;
  cpu::to_f32(dt, b, &y, 1);
  return y;
}

// A naive kernel at the tensor-core kernel's precision, for row t, head h: q rounded to the cache
// type, scores and softmax in f32, the normalised weights rounded to the cache type, P V summed in
// f32 (as a framework's f16/bf16 matmul - softmax - matmul with f32 accumulation).
std::vector<double> naive16_row(const KvCache& kv, const Shape& s, const std::vector<float>& q, int64_t t,
                                int64_t h) {
  const int64_t hd = s.head_dim, pos = s.start + t, g = h / s.group;
  const int64_t first = s.window > 0 ? std::max<int64_t>(0, pos - s.window + 1) : 0;
  const size_t row_bytes = static_cast<size_t>(hd) * dtype_size(s.dtype);
  std::vector<float> k(static_cast<size_t>(hd)), v(static_cast<size_t>(hd)), qr(static_cast<size_t>(hd));
  std::vector<float> score(static_cast<size_t>(pos - first + 1)), out(static_cast<size_t>(hd), 0.0f);
  for (int64_t i = 0; i < hd; ++i) qr[static_cast<size_t>(i)] = round_to(s.dtype, q[static_cast<size_t>((t * s.heads() + h) * hd + i)]);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  float mx = -INFINITY;
  for (int64_t j = first; j <= pos; ++j) {
    cpu::to_f32(s.dtype, kv_k(kv, 0, g) + static_cast<size_t>(j) * row_bytes, k.data(), hd);
    float d = 0;
    for (int64_t i = 0; i < hd; ++i) d += qr[static_cast<size_t>(i)] * k[static_cast<size_t>(i)];
    score[static_cast<size_t>(j - first)] = d * scale;
    mx = std::max(mx, score[static_cast<size_t>(j - first)]);
  }
  float sum = 0;
  for (auto& e : score) sum += (e = std::exp(e - mx));
  for (int64_t j = first; j <= pos; ++j) {
    cpu::to_f32(s.dtype, kv_v(kv, 0, g) + static_cast<size_t>(j) * row_bytes, v.data(), hd);
    const float p = round_to(s.dtype, score[static_cast<size_t>(j - first)] / sum);
    for (int64_t i = 0; i < hd; ++i) out[static_cast<size_t>(i)] += p * v[static_cast<size_t>(i)];
  }
  return {out.begin(), out.end()};
}

// Runs one call on the CPU and the GPU. ref_stride > 0: fp64 reference on every ref_stride-th row.
Outcome run(Kernel kernel, const Shape& s, int64_t ref_stride = 0) {
  const int64_t hd = s.head_dim, kvh = s.kv_heads, heads = s.heads(), ctx = s.start + s.n;
  const int64_t capacity = ctx + 5;  // poisoned rows after the context
  ModelConfig cfg;
  cfg.num_layers = 1;
  cfg.num_heads = heads;
  cfg.num_kv_heads = kvh;
  cfg.head_dim = hd;
  KvCache kv(cfg, capacity, s.dtype);
  std::mt19937 rng(static_cast<uint32_t>(s.group * 1000003 + hd * 7919 + s.start * 31 + s.n + s.window));
  auto k = uniform(rng, static_cast<size_t>(ctx * kvh * hd), 1.0f);  // (ctx, kv_heads, hd)
  auto v = uniform(rng, static_cast<size_t>(ctx * kvh * hd), 1.0f);
  if (is_scaled_kv(s.dtype)) {
    // Rows of different magnitudes (K 0.5 .. 2, V 0.25 .. 4), so that each row's scale matters.
    std::mt19937 rows_rng(static_cast<uint32_t>(hd + s.start));
    std::uniform_real_distribution<float> e(-1.0f, 1.0f);
    for (int64_t r = 0; r < ctx * kvh; ++r) {
      const float fk = std::exp2(e(rows_rng)), fv = std::exp2(2 * e(rows_rng));
      for (int64_t i = 0; i < hd; ++i) k[static_cast<size_t>(r * hd + i)] *= fk, v[static_cast<size_t>(r * hd + i)] *= fv;
    }
  }
  cpu::store_kv(kv, 0, 0, ctx, k.data(), v.data());
  const std::vector<float> nan_rows(static_cast<size_t>(std::max(ctx, capacity - ctx) * kvh * hd),
                                    std::numeric_limits<float>::quiet_NaN());
  cpu::store_kv(kv, 0, ctx, capacity - ctx, nan_rows.data(), nan_rows.data());
  const int64_t first = s.window > 0 ? std::max<int64_t>(0, s.start - s.window + 1) : 0;
  // Decode never needs the rows before its window; the CPU reads none of them either.
  if (kernel == Kernel::Decode && first > 0) cpu::store_kv(kv, 0, 0, first, nan_rows.data(), nan_rows.data());
  // |q| up to 6: scores with a standard deviation of ~2, so the softmax is neither flat nor one-hot.
  const auto q = uniform(rng, static_cast<size_t>(s.n * heads * hd), 6.0f);  // (n, heads, hd)
  std::vector<float> want(q.size()), got(q.size());
  cpu::attention(kv, 0, q.data(), s.n, s.start, heads, s.window, want.data(), false, s.scores);

  const size_t block_bytes = static_cast<size_t>(kvh * capacity * hd) * dtype_size(s.dtype);
  const size_t lead = s.codes_at_8 ? 8 : 0;  // where the rows start in their (256-byte aligned) blocks
  DeviceArray<std::byte> k_d(block_bytes + lead), v_d(block_bytes + lead);
  CUDA_CHECK(cudaMemcpy(k_d.get() + lead, kv_k(kv, 0, 0), block_bytes, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(v_d.get() + lead, kv_v(kv, 0, 0), block_bytes, cudaMemcpyHostToDevice));
  // An 8-bit cache's scales, (kv_heads, capacity) each.
  const bool scaled = is_scaled_kv(s.dtype);
  const size_t scale_count = scaled ? static_cast<size_t>(kvh * capacity) : 0;
  DeviceArray<float> ks_d(scale_count), vs_d(scale_count);
  if (scaled) {
    CUDA_CHECK(cudaMemcpy(ks_d.get(), kv_k_scales(kv, 0, 0), scale_count * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(vs_d.get(), kv_v_scales(kv, 0, 0), scale_count * sizeof(float), cudaMemcpyHostToDevice));
  }
  DeviceArray<float> q_d(q.size()), out_d(q.size());
  CUDA_CHECK(cudaMemcpy(q_d.get(), q.data(), q.size() * sizeof(float), cudaMemcpyHostToDevice));
  cuda::AttentionParams p;
  p.q = q_d.get();
  p.k = k_d.get() + lead;
  p.v = v_d.get() + lead;
  if (scaled) p.k_scales = ks_d.get(), p.v_scales = vs_d.get();
  p.out = out_d.get();
  p.kv_dtype = s.dtype;
  p.n = s.n;
  p.start = s.start;
  p.heads = heads;
  p.kv_heads = kvh;
  p.head_dim = hd;
  p.capacity = capacity;
  p.rows = capacity;
  p.window = s.window;
  p.scale = s.scores.scale;
  p.softcap = s.scores.softcap;
  if (kernel == Kernel::Decode) {
    DeviceArray<std::byte> ws(cuda::attention_decode_workspace_bytes(heads, hd, capacity));
    cuda::attention_decode(p, ws.get(), ws.bytes(), nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
  } else {
    cuda::attention_prefill(p, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
  }
  CUDA_CHECK(cudaMemcpy(got.data(), out_d.get(), got.size() * sizeof(float), cudaMemcpyDeviceToHost));

  Outcome o;
  double err = 0, scale = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return Outcome{INFINITY};
    err = std::max(err, std::abs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::abs(static_cast<double>(want[i])));
  }
  o.rel_to_cpu = err / scale;
  if (ref_stride <= 0) return o;
  o.gpu_to_ref = o.cpu_to_ref = 0;
  const bool mma = uses_mma(kernel, s.dtype);
  if (mma) o.naive16_to_ref = 0;
  for (int64_t t = 0; t < s.n; t += ref_stride)
    for (int64_t h = 0; h < heads; ++h) {
      const auto ref = reference_row(kv, s, q, t, h);
      const auto naive = mma ? naive16_row(kv, s, q, t, h) : std::vector<double>();
      for (int64_t i = 0; i < hd; ++i) {
        const size_t at = static_cast<size_t>((t * heads + h) * hd + i);
        const double r = ref[static_cast<size_t>(i)];
        o.gpu_to_ref = std::max(o.gpu_to_ref, std::abs(got[at] - r));
        o.cpu_to_ref = std::max(o.cpu_to_ref, std::abs(want[at] - r));
        if (mma) o.naive16_to_ref = std::max(o.naive16_to_ref, std::abs(naive[static_cast<size_t>(i)] - r));
        o.ref_scale = std::max(o.ref_scale, std::abs(r));
      }
    }
  return o;
}

// The tensor-core kernel is checked against fp64 on every case: every row up to 64 rows, then
// about 64 of them.
void expect_close(Kernel kernel, const Shape& s, int64_t ref_stride = 0) {
  if (uses_mma(kernel, s.dtype)) {
    if (ref_stride <= 0) ref_stride = std::max<int64_t>(1, s.n / 64);
    const Outcome o = run(kernel, s, ref_stride);
    EXPECT_LE(o.rel_to_cpu, kRelTol16Units * unit_roundoff(s.dtype)) << describe(kernel, s);
    EXPECT_LE(o.gpu_to_ref, 2 * o.naive16_to_ref + kRefFloor16Units * unit_roundoff(s.dtype) * o.ref_scale)
        << describe(kernel, s) << ": gpu to fp64 " << o.gpu_to_ref << ", naive " << dtype_name(s.dtype)
        << " kernel to fp64 " << o.naive16_to_ref << ", scale " << o.ref_scale;
    if (std::getenv("KVINFER_TEST_VERBOSE"))
      std::printf("%s: rel_to_cpu %.3g (%.2f u), gpu/naive16 to fp64 %.3g / %.3g = %.2f\n", describe(kernel, s).c_str(),
                  o.rel_to_cpu, o.rel_to_cpu / unit_roundoff(s.dtype), o.gpu_to_ref, o.naive16_to_ref,
                  o.gpu_to_ref / o.naive16_to_ref);
    return;
  }
  const Outcome o = run(kernel, s, ref_stride);
  EXPECT_LE(o.rel_to_cpu, kRelTol) << describe(kernel, s);
  if (ref_stride > 0) {
    EXPECT_LE(o.gpu_to_ref, 2 * o.cpu_to_ref + kRefFloor * o.ref_scale)
        << describe(kernel, s) << ": gpu to fp64 " << o.gpu_to_ref << ", cpu to fp64 " << o.cpu_to_ref;
  }
}

constexpr DType kDtypes[] = {DType::F32, DType::F16, DType::BF16};

// Every group size × head_dim, each with every cache dtype, with and without a window. Head dims
// below a kernel's capacity (8, 16, 80, 96: padded to 32, 64 or 128 in shared memory) and groups
// above the 64 heads a decode block serves (65, 96: two chunks of heads) included. Contexts are a
// few hundred positions (several splits for decode), so that the sweep stays quick where the
// kernels run under the CUDA simulation.
class CudaAttentionSweep : public ::testing::TestWithParam<std::tuple<int64_t, int64_t>> {};

TEST_P(CudaAttentionSweep, DecodeMatchesCpu) {
  SKIP_WITHOUT_DEVICE();
  const auto [group, hd] = GetParam();
  const int64_t kvh = group >= 64 ? 1 : 2;
  int64_t i = 0;
  for (DType dt : kDtypes)
    for (int64_t window : {int64_t{0}, int64_t{157}}) {
      const int64_t start = 250 + 61 * (i++) + group;  // not a tile multiple; several splits
      expect_close(Kernel::Decode, {kvh, group, hd, dt, start, 1, window}, i == 1 ? 1 : 0);
    }
}

TEST_P(CudaAttentionSweep, PrefillMatchesCpu) {
  SKIP_WITHOUT_DEVICE();
  const auto [group, hd] = GetParam();
  const int64_t kvh = group >= 64 ? 1 : 2;
  // n · group (query, head) rows: several row blocks, and at least two key tiles at every n.
  const int64_t n = group >= 64 ? 9 : group >= 12 ? 40 : 70;
  for (DType dt : kDtypes)
    for (int64_t window : {int64_t{0}, int64_t{23}}) {
      expect_close(Kernel::Prefill, {kvh, group, hd, dt, 0, n, window}, dt == DType::BF16 ? 5 : 0);
      expect_close(Kernel::Prefill, {kvh, group, hd, dt, 45, n / 2 + 2, window});
    }
}

INSTANTIATE_TEST_SUITE_P(GroupsAndHeadDims, CudaAttentionSweep,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 5, 7, 8, 12, 16, 64, 65, 96),
                                            ::testing::Values(8, 16, 32, 64, 80, 96, 128, 256)),
                         [](const auto& test) {
                           return "group" + std::to_string(std::get<0>(test.param)) + "_hd" +
                                  std::to_string(std::get<1>(test.param));
                         });

// The tensor-core prefill kernel (f16 and bf16 caches): head_dim 64/128/256 × groups 1, 4, 8 ×
// n 1, 17, 100, without and with a window, the cache type alternating. Starts past 0 put the
// rows' keys in several tiles (and in a tile the window begins inside); n = 1 reads a whole
// cache's worth of keys for one row.
class CudaAttentionMma : public ::testing::TestWithParam<std::tuple<int64_t, int64_t>> {};

TEST_P(CudaAttentionMma, PrefillMatchesFp64AndCpu) {
  SKIP_WITHOUT_DEVICE();
  const auto [group, hd] = GetParam();
  int i = 0;
  for (int64_t n : {1, 17, 100})
    for (int64_t window : {int64_t{0}, int64_t{37}}) {
      const DType dt = (i++ + group) % 2 == 0 ? DType::F16 : DType::BF16;
      const int64_t start = n == 1 ? 150 : n == 17 ? 70 : 0;
      expect_close(Kernel::Prefill, {2, group, hd, dt, start, n, window});
    }
}

// A warp's last row on the first key of a tile (its position a multiple of the kernel's 64-key
// tiles): a warp that skipped that tile (its "any row attends a key of it" test off by one) would
// drop the row's own key, the diagonal. Every row checked against fp64.
TEST_P(CudaAttentionMma, ARowWhoseOwnKeyStartsATileAttendsIt) {
  SKIP_WITHOUT_DEVICE();
  const auto [group, hd] = GetParam();
  const int64_t start = 64 - 15 / group;  // the first warp's last row: position start + 15 / group = 64
  for (const DType dt : {DType::F16, DType::BF16}) expect_close(Kernel::Prefill, {2, group, hd, dt, start, 80, 0}, 1);
}

INSTANTIATE_TEST_SUITE_P(GroupsAndHeadDims, CudaAttentionMma,
                         ::testing::Combine(::testing::Values(1, 4, 8), ::testing::Values(64, 128, 256)),
                         [](const auto& test) {
                           return "group" + std::to_string(std::get<0>(test.param)) + "_hd" +
                                  std::to_string(std::get<1>(test.param));
                         });

// Groups larger than a decode block serves, over several KV heads: each KV head's heads in chunks
// (65 = 33 + 32 and 130 = 44 + 44 + 42 heads where a block holds 64; more, smaller chunks where
// the device's shared memory holds fewer), with many splits; and the same shapes through prefill.
TEST(CudaAttention, LargeGroupsOverSeveralKvHeads) {
  SKIP_WITHOUT_DEVICE();
  for (int64_t group : {65, 130})
    for (int64_t hd : {40, 256}) {
      expect_close(Kernel::Decode, {3, group, hd, DType::BF16, 1200, 1, 0}, 1);
      expect_close(Kernel::Decode, {3, group, hd, DType::F32, 1200, 1, 300});
      expect_close(Kernel::Prefill, {3, group, hd, DType::F16, 20, 3, 0}, 1);
    }
}

// Short contexts (one split, partial tiles, the direct-output path) and windows of 1 and 2.
TEST(CudaAttention, DecodeShortContextsAndTinyWindows) {
  SKIP_WITHOUT_DEVICE();
  for (int64_t start : {0, 1, 31, 32, 33, 63, 64, 65, 127, 128, 129, 200})
    for (int64_t window : {0, 1, 2, 33})
      for (int64_t group : {1, 7}) expect_close(Kernel::Decode, {2, group, 64, DType::BF16, start, 1, window}, 1);
}

// Long contexts: many splits, combine over up to the maximum split count.
TEST(CudaAttention, DecodeLongContexts) {
  SKIP_WITHOUT_DEVICE();
  for (int64_t group : {1, 7, 8})
    for (int64_t window : {0, 4000}) expect_close(Kernel::Decode, {8, group, 128, DType::BF16, 16396, 1, window}, 1);
  expect_close(Kernel::Decode, {1, 64, 64, DType::F16, 16400, 1, 0}, 1);
  expect_close(Kernel::Decode, {1, 5, 256, DType::F32, 20011, 1, 0}, 1);
}

TEST(CudaAttention, PrefillThousandsOfPositions) {
  SKIP_WITHOUT_DEVICE();
  expect_close(Kernel::Prefill, {2, 4, 128, DType::BF16, 1500, 1000, 0}, 37);
  expect_close(Kernel::Prefill, {2, 4, 128, DType::BF16, 1500, 1000, 700}, 37);
  expect_close(Kernel::Prefill, {1, 7, 64, DType::F16, 0, 2100, 0}, 97);
  expect_close(Kernel::Prefill, {4, 1, 256, DType::F32, 3, 1, 0}, 1);  // n == 1 through prefill
}

// 8-bit caches (int8, fp8: codes and a scale per row, the K rows rotated): decode (several
// splits) and prefill (the f32 tile kernel) against the CPU on the same codes and scales, and
// against fp64 (the query rotated) on a subset; GQA groups 1, 3, 7 and one over a decode block's
// 64 heads; head dims that are multiples of 16 (16-byte copies) and not (8 and 40: 8-byte
// copies), with and without a window; rotation blocks of 8 (8, 40), 32 (96), 64 and 128.
class CudaAttentionEightBit : public ::testing::TestWithParam<std::tuple<int64_t, int64_t>> {};

TEST_P(CudaAttentionEightBit, DecodeMatchesCpu) {
  SKIP_WITHOUT_DEVICE();
  const auto [group, hd] = GetParam();
  int64_t i = 0;
  for (DType dt : {DType::I8, DType::FP8})
    for (int64_t window : {int64_t{0}, int64_t{157}}) {
      const int64_t start = 250 + 61 * (i++) + group;  // not a tile multiple; several splits
      expect_close(Kernel::Decode, {2, group, hd, dt, start, 1, window}, i == 1 || i == 4 ? 1 : 0);
    }
}

TEST_P(CudaAttentionEightBit, PrefillMatchesCpu) {
  SKIP_WITHOUT_DEVICE();
  const auto [group, hd] = GetParam();
  const int64_t n = group >= 7 ? 40 : 70;
  for (DType dt : {DType::I8, DType::FP8})
    for (int64_t window : {int64_t{0}, int64_t{23}}) {
      expect_close(Kernel::Prefill, {2, group, hd, dt, 0, n, window}, window == 0 ? 7 : 0);
      expect_close(Kernel::Prefill, {2, group, hd, dt, 245, n / 2 + 2, window});
    }
}

INSTANTIATE_TEST_SUITE_P(GroupsAndHeadDims, CudaAttentionEightBit,
                         ::testing::Combine(::testing::Values(1, 3, 7), ::testing::Values(8, 40, 64, 96, 128)),
                         [](const auto& test) {
                           return "group" + std::to_string(std::get<0>(test.param)) + "_hd" +
                                  std::to_string(std::get<1>(test.param));
                         });

// 8-bit codes 8 bytes past a 16-byte boundary (as a cache's code blocks may lie, after its scales)
// take 8-byte copies in decode even where head_dim allows 16; head_dim 256; a group over the 64
// heads of a decode block; long contexts.
TEST(CudaAttention, EightBitAlignmentsLargeGroupsAndLongContexts) {
  SKIP_WITHOUT_DEVICE();
  for (DType dt : {DType::I8, DType::FP8}) {
    expect_close(Kernel::Decode, {2, 3, 64, dt, 300, 1, 0, true}, 1);
    expect_close(Kernel::Prefill, {2, 3, 64, dt, 40, 30, 0, true}, 3);
    expect_close(Kernel::Decode, {2, 4, 256, dt, 333, 1, 100}, 1);
    expect_close(Kernel::Prefill, {2, 4, 256, dt, 7, 33, 0}, 4);
    expect_close(Kernel::Decode, {1, 65, 128, dt, 700, 1, 0}, 1);
    expect_close(Kernel::Prefill, {1, 65, 128, dt, 20, 3, 0}, 1);
    expect_close(Kernel::Decode, {2, 7, 128, dt, 9000, 1, 0}, 1);
    expect_close(Kernel::Decode, {2, 7, 128, dt, 9000, 1, 2000});
  }
}

// The device alone, from the f32 K and V rows to the output: cuda::store_kv codes the rows (the
// keys rotated), decode and prefill attend them (the queries rotated), and the result is exact
// attention over the f32 rows (fp64) to within the 8-bit codes' error. Unlike the tests above,
// this needs no CPU cache: a convention both devices got wrong the same way (a key stored
// unrotated, a query left unrotated) fails here. The keys have a few large channels, as a
// model's do. The bounds are 2.5× the largest error measured in the simulation (int8 / fp8: 6e-3
// / 3.5e-2 relative to max |exact|); a query left unrotated measured 1.2 to 5.6, keys stored
// unrotated 0.35 to 0.55.
TEST(CudaAttention, EightBitStoreAndAttendOnTheDeviceApproximateExactAttention) {
  SKIP_WITHOUT_DEVICE();
  const int64_t kvh = 2, group = 3, heads = kvh * group, ctx = 150;
  for (int64_t hd : {96, 128})
    for (DType dt : {DType::I8, DType::FP8}) {
      std::mt19937 rng(static_cast<uint32_t>(hd * 3 + (dt == DType::FP8)));
      auto k = uniform(rng, static_cast<size_t>(ctx * kvh * hd), 1.0f);  // (ctx, kv_heads, hd)
      auto v = uniform(rng, k.size(), 1.0f);
      for (int64_t r = 0; r < ctx * kvh; ++r)
        for (int64_t d : {5, 17, 60}) k[static_cast<size_t>(r * hd + d)] *= 12.0f;  // the large channels
      DeviceArray<float> k_d(k.size()), v_d(v.size());
      CUDA_CHECK(cudaMemcpy(k_d.get(), k.data(), k.size() * sizeof(float), cudaMemcpyHostToDevice));
      CUDA_CHECK(cudaMemcpy(v_d.get(), v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice));
      const size_t codes = static_cast<size_t>(kvh * ctx * hd), scales = static_cast<size_t>(kvh * ctx);
      DeviceArray<std::byte> kc_d(codes), vc_d(codes);
      DeviceArray<float> ks_d(scales), vs_d(scales);
      cuda::store_kv(dt, k_d.get(), v_d.get(), ctx, kvh, hd, 0, ctx, kc_d.get(), vc_d.get(), nullptr, nullptr,
                     ks_d.get(), vs_d.get());
      for (const auto& [start, n] : {std::pair<int64_t, int64_t>{ctx - 1, 1}, {0, ctx}}) {
        // |q| up to 0.5: with the large channels, scores of a standard deviation of ~2.
        const auto q = uniform(rng, static_cast<size_t>(n * heads * hd), 0.5f);
        DeviceArray<float> q_d(q.size()), out_d(q.size());
        CUDA_CHECK(cudaMemcpy(q_d.get(), q.data(), q.size() * sizeof(float), cudaMemcpyHostToDevice));
        cuda::AttentionParams p;
        p.q = q_d.get(), p.k = kc_d.get(), p.v = vc_d.get(), p.k_scales = ks_d.get(), p.v_scales = vs_d.get();
        p.out = out_d.get(), p.kv_dtype = dt, p.n = n, p.start = start, p.heads = heads, p.kv_heads = kvh;
        p.head_dim = hd, p.capacity = ctx, p.rows = ctx;
        if (n == 1) {
          DeviceArray<std::byte> ws(cuda::attention_decode_workspace_bytes(heads, hd, ctx));
          cuda::attention_decode(p, ws.get(), ws.bytes(), nullptr);
        } else {
          cuda::attention_prefill(p, nullptr);
        }
        CUDA_CHECK(cudaDeviceSynchronize());
        std::vector<float> got(q.size());
        CUDA_CHECK(cudaMemcpy(got.data(), out_d.get(), got.size() * sizeof(float), cudaMemcpyDeviceToHost));
        double err = 0, scale = 0;
        for (int64_t t = 0; t < n; ++t)
          for (int64_t h = 0; h < heads; ++h) {
            const int64_t pos = start + t, g = h / group;
            const float* qh = q.data() + (t * heads + h) * hd;
            std::vector<double> score(static_cast<size_t>(pos + 1)), out(static_cast<size_t>(hd), 0.0);
            double mx = -INFINITY, sum = 0;
            for (int64_t j = 0; j <= pos; ++j) {
              const float* kj = k.data() + (j * kvh + g) * hd;
              double d = 0;
              for (int64_t i = 0; i < hd; ++i) d += static_cast<double>(qh[i]) * kj[i];
              mx = std::max(mx, score[static_cast<size_t>(j)] = d / std::sqrt(static_cast<double>(hd)));
            }
            for (auto& e : score) sum += (e = std::exp(e - mx));
            for (int64_t j = 0; j <= pos; ++j)
              for (int64_t i = 0; i < hd; ++i)
                out[static_cast<size_t>(i)] += score[static_cast<size_t>(j)] / sum * v[static_cast<size_t>((j * kvh + g) * hd + i)];
            for (int64_t i = 0; i < hd; ++i) {
              const double want = out[static_cast<size_t>(i)], have = got[static_cast<size_t>((t * heads + h) * hd + i)];
              err = std::isfinite(have) ? std::max(err, std::abs(have - want)) : INFINITY;
              scale = std::max(scale, std::abs(want));
            }
          }
        const double bound = dt == DType::I8 ? 1.5e-2 : 9e-2;
        EXPECT_LE(err / scale, bound) << dtype_name(dt) << " head_dim " << hd << (n == 1 ? " decode" : " prefill");
        if (std::getenv("KVINFER_TEST_VERBOSE"))
          std::printf("%s head_dim %lld %s: max |gpu - exact| / max |exact| = %.3g\n", std::string(dtype_name(dt)).c_str(),
                      static_cast<long long>(hd), n == 1 ? "decode" : "prefill", err / scale);
      }
    }
}

// A row with a NaN or an infinity gets a NaN scale (kernels/core/kv_quant.h): the queries that
// attend it come out NaN, as on the CPU, and the others stay finite and the CPU's, in decode and
// in prefill (whose tiles hold keys that some of their rows mask: a masked key's weight is 0,
// whatever its scale).
TEST(CudaAttention, EightBitNonFiniteRowsReachOnlyTheQueriesThatAttendThem) {
  SKIP_WITHOUT_DEVICE();
  const int64_t hd = 64, kvh = 2, group = 3, heads = kvh * group, ctx = 100, capacity = 128, window = 20;
  ModelConfig cfg;
  cfg.num_layers = 1, cfg.num_heads = heads, cfg.num_kv_heads = kvh, cfg.head_dim = hd;
  std::mt19937 rng(5);
  for (DType dt : {DType::I8, DType::FP8}) {
    KvCache kv(cfg, capacity, dt);
    auto k = uniform(rng, static_cast<size_t>(ctx * kvh * hd), 1.0f), v = uniform(rng, k.size(), 1.0f);
    k[static_cast<size_t>((50 * kvh + 0) * hd + 3)] = INFINITY;  // K row of position 50, KV head 0
    v[static_cast<size_t>((60 * kvh + 1) * hd + 5)] = NAN;       // V row of position 60, KV head 1
    cpu::store_kv(kv, 0, 0, ctx, k.data(), v.data());
    // The device's cache made by the device's store_kv from the same rows: the non-finite rows'
    // scales must come out non-finite there too, or their queries would read finite zeros.
    const size_t codes = static_cast<size_t>(kvh * capacity * hd), scales = static_cast<size_t>(kvh * capacity);
    DeviceArray<std::byte> k_d(codes), v_d(codes);
    DeviceArray<float> ks_d(scales), vs_d(scales), k_in(k.size()), v_in(v.size());
    CUDA_CHECK(cudaMemcpy(k_in.get(), k.data(), k.size() * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(v_in.get(), v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice));
    cuda::store_kv(dt, k_in.get(), v_in.get(), ctx, kvh, hd, 0, capacity, k_d.get(), v_d.get(), nullptr, nullptr,
                   ks_d.get(), vs_d.get());
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> ks(scales), vs(scales);
    CUDA_CHECK(cudaMemcpy(ks.data(), ks_d.get(), scales * sizeof(float), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(vs.data(), vs_d.get(), scales * sizeof(float), cudaMemcpyDeviceToHost));
    EXPECT_FALSE(std::isfinite(ks[50])) << dtype_name(dt) << ": K row of position 50 (holding +inf), KV head 0";
    EXPECT_FALSE(std::isfinite(vs[capacity + 60])) << dtype_name(dt) << ": V row of position 60 (a NaN), KV head 1";
    for (int64_t g = 0; g < kvh; ++g)  // and every written scale the CPU's bits
      for (int64_t p = 0; p < ctx; ++p) {
        const size_t at = static_cast<size_t>(g * capacity + p);
        ASSERT_EQ(std::memcmp(&ks[at], kv_k_scales(kv, 0, g) + p, 4), 0) << dtype_name(dt) << " K " << g << "," << p;
        ASSERT_EQ(std::memcmp(&vs[at], kv_v_scales(kv, 0, g) + p, 4), 0) << dtype_name(dt) << " V " << g << "," << p;
      }
    for (const auto& [start, n] : {std::pair<int64_t, int64_t>{0, ctx}, {55, 1}, {75, 1}, {85, 1}}) {
      const auto q = uniform(rng, static_cast<size_t>(n * heads * hd), 2.0f);
      std::vector<float> want(q.size()), got(q.size());
      cpu::attention(kv, 0, q.data(), n, start, heads, window, want.data());
      DeviceArray<float> q_d(q.size()), out_d(q.size());
      CUDA_CHECK(cudaMemcpy(q_d.get(), q.data(), q.size() * sizeof(float), cudaMemcpyHostToDevice));
      cuda::AttentionParams p;
      p.q = q_d.get(), p.k = k_d.get(), p.v = v_d.get(), p.k_scales = ks_d.get(), p.v_scales = vs_d.get();
      p.out = out_d.get(), p.kv_dtype = dt, p.n = n, p.start = start, p.heads = heads, p.kv_heads = kvh;
      p.head_dim = hd, p.capacity = capacity, p.rows = capacity, p.window = window;
      if (n == 1) {
        DeviceArray<std::byte> ws(cuda::attention_decode_workspace_bytes(heads, hd, capacity));
        cuda::attention_decode(p, ws.get(), ws.bytes(), nullptr);
      } else {
        cuda::attention_prefill(p, nullptr);
      }
      CUDA_CHECK(cudaDeviceSynchronize());
      CUDA_CHECK(cudaMemcpy(got.data(), out_d.get(), got.size() * sizeof(float), cudaMemcpyDeviceToHost));
      int64_t nonfinite = 0;
      for (int64_t t = 0; t < n; ++t)
        for (int64_t h = 0; h < heads; ++h) {
          const int64_t pos = start + t, bad = h / group == 0 ? 50 : 60;  // the row KV head h / group holds
          const bool attends = pos >= bad && pos - bad < window;
          for (int64_t i = 0; i < hd; ++i) {
            const size_t at = static_cast<size_t>((t * heads + h) * hd + i);
            const std::string where = std::string(dtype_name(dt)) + " position " + std::to_string(pos) + " head " +
                                      std::to_string(h) + " dim " + std::to_string(i);
            ASSERT_EQ(std::isfinite(want[at]), !attends) << "the CPU: " << where;
            ASSERT_EQ(std::isfinite(got[at]), !attends) << where;
            if (attends) {
              ++nonfinite;
            } else {
              ASSERT_NEAR(got[at], want[at], 1e-4 * (1 + std::abs(want[at]))) << where;
            }
          }
        }
      if (start == 0) {
        EXPECT_GT(nonfinite, 0);
      }
    }
  }
}

// Gemma's scores: scaled by query_pre_attn_scalar^-0.5 (here 24^-0.5 for head_dim 16, 128^-0.5 for
// 64) and soft-capped to c · tanh(s / c) before the mask and softmax, c = 1.5: with |q| up to 6
// most scores exceed the cap. Every kernel (decode; prefill on the f32/8-bit kernel and on tensor
// cores), with and without a window, against the CPU (test_cpu_ops checks the CPU against fp64).
// Without the cap in a kernel the outputs differ by O(1): each check fails.
TEST(CudaAttention, SoftCappedAndScaledScoresMatchCpu) {
  SKIP_WITHOUT_DEVICE();
  for (DType dt : {DType::F32, DType::F16, DType::BF16, DType::I8})
    for (int64_t hd : {16, 64})
      for (int64_t window : {int64_t{0}, int64_t{5}}) {
        const ScoreOptions scores{hd == 16 ? 0.20412415f : 0.088388346f, 1.5f};
        for (Kernel kernel : {Kernel::Decode, Kernel::Prefill}) {
          const Shape s{2, 3, hd, dt, kernel == Kernel::Decode ? 40 : 7, kernel == Kernel::Decode ? 1 : 33, window,
                        false, scores};
          const Outcome o = run(kernel, s);
          const double tol = uses_mma(kernel, dt) ? kRelTol16Units * unit_roundoff(dt) : kRelTol;
          EXPECT_LE(o.rel_to_cpu, tol) << describe(kernel, s) << " softcap 1.5";
        }
      }
}

TEST(CudaAttention, DecodeRefusesTooSmallWorkspace) {
  SKIP_WITHOUT_DEVICE();
  DeviceArray<std::byte> buf(1 << 20);
  cuda::AttentionParams p;
  p.q = p.out = reinterpret_cast<float*>(buf.get());
  p.k = p.v = buf.get();
  p.kv_dtype = DType::BF16;
  p.n = 1, p.start = 4000, p.heads = 8, p.kv_heads = 1, p.head_dim = 64, p.capacity = 4096, p.rows = 4096;
  try {
    cuda::attention_decode(p, buf.get(), 16, nullptr);
    FAIL() << "a 16-byte workspace was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("workspace"), std::string::npos) << e.what();
  }
}

// Argument checks throw before any CUDA call, so they run without a device. The pointers are
// never dereferenced.
TEST(CudaAttention, RefusesBadArguments) {
  alignas(16) static float dummy[64];
  const auto good = [] {
    cuda::AttentionParams p;
    p.q = p.out = dummy;
    p.k = p.v = dummy;
    p.n = 1, p.start = 10, p.heads = 8, p.kv_heads = 2, p.head_dim = 128, p.capacity = 16, p.rows = 16;
    return p;
  };
  const auto expect_error = [](auto call, const std::string& needle) {
    try {
      call();
      ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  const auto decode = [](cuda::AttentionParams p) { return [p] { cuda::attention_decode(p, nullptr, 0, nullptr); }; };
  const auto prefill = [](cuda::AttentionParams p) { return [p] { cuda::attention_prefill(p, nullptr); }; };
  auto p = good();
  p.n = 2;
  expect_error(decode(p), "n must be 1");
  for (int64_t hd : {0, 4, 12, 100, 264, -8}) {
    p = good(), p.head_dim = hd;
    const std::string needle = "head_dim " + std::to_string(hd) + " is not supported: it must be a multiple of 8";
    expect_error(decode(p), needle);
    expect_error(prefill(p), needle);
  }
  // head_dim 96 and a group of 65 pass the checks: the call fails at the position check after them.
  p = good(), p.head_dim = 96, p.heads = 130, p.kv_heads = 2, p.start = 16;
  expect_error(decode(p), "capacity 16");
  p.start = 10, p.n = 7;
  expect_error(prefill(p), "capacity 16");
  p = good(), p.heads = 9;
  expect_error(decode(p), "multiple of kv_heads");
  expect_error(prefill(p), "multiple of kv_heads");
  p = good(), p.v = nullptr;
  expect_error(decode(p), "non-null");
  expect_error(prefill(p), "non-null");
  p = good(), p.k = reinterpret_cast<const std::byte*>(dummy) + 4;
  expect_error(decode(p), "16-byte aligned");
  p = good(), p.start = 16;
  expect_error(decode(p), "capacity 16");
  p = good(), p.n = 7;
  expect_error(prefill(p), "capacity 16");
  p = good(), p.n = 0;
  expect_error(prefill(p), "at least 1");
  // Rows: from 1 to the capacity, and enough for every position one call reads (a ring's
  // window + piece - 1); a graph's step may read any position below the capacity.
  for (int64_t rows : {0, 17}) {
    p = good(), p.rows = rows;
    expect_error(decode(p), "rows " + std::to_string(rows) + " must be from 1 to the capacity 16");
    expect_error(prefill(p), "rows " + std::to_string(rows) + " must be from 1 to the capacity 16");
  }
  p = good(), p.rows = 9;  // no window: positions 0 .. 10
  expect_error(decode(p), "positions 0 .. 10 read at once are more than the 9 rows");
  p.window = 5, p.n = 6;  // window 5: positions 6 .. 15 (n = 5 would read 9)
  expect_error(prefill(p), "positions 6 .. 15 read at once are more than the 9 rows");
  p = good(), p.rows = 4, p.window = 5, p.start = 3, p.start_on_device = reinterpret_cast<const int32_t*>(dummy);
  expect_error(decode(p), "positions 11 .. 15 read at once are more than the 4 rows");
  // 8-bit caches: scales required; codes 8-byte aligned suffice (the call then fails later, at
  // the position check), 4-byte aligned do not.
  for (DType dt : {DType::I8, DType::FP8}) {
    p = good(), p.kv_dtype = dt;
    const std::string needle = "an " + std::string(dtype_name(dt)) + " cache needs k_scales and v_scales";
    expect_error(decode(p), needle);
    expect_error(prefill(p), needle);
    p.k_scales = p.v_scales = dummy;
    p.v_scales = nullptr;
    expect_error(decode(p), needle);
    p.v_scales = dummy + 1;
    p.k = reinterpret_cast<const std::byte*>(dummy) + 8, p.start = 16;
    expect_error(decode(p), "capacity 16");
    p.start = 10, p.n = 7;
    expect_error(prefill(p), "capacity 16");
    p = good(), p.kv_dtype = dt, p.k_scales = p.v_scales = dummy;
    p.v = reinterpret_cast<const std::byte*>(dummy) + 4;
    expect_error(decode(p), "8-byte aligned");
    expect_error(prefill(p), "8-byte aligned");
  }
}

}  // namespace
}  // namespace kvinfer
