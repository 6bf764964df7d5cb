#include <algorithm>
#include <bit>
#include <cmath>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "core/rope.h"
#include "cpu/cpu_features.h"
#include "cpu/cpu_ops.h"
#include "cpu/elementwise_avx2.h"
#include "cpu/packed_rows.h"

namespace kvinfer::cpu {

namespace {

// Below this many values an op stays on one thread: waking the team costs a few µs, as much as
// the op itself. A prefill's rows (or a long vector's chunks) are shared out above it; each
// value is computed the same way on either path. The exp of silu_mul and gelu_tanh, and the
// RMS norm's two passes over a row, cost several times what add does a value: they are shared
// out from 8k values (a batch of a few sequences' rows: SiLU over 16 × 1536 values took 3 % of a
// decode step on one thread).
constexpr int64_t kParallelMinValues = 1 << 16;
constexpr int64_t kParallelMinCostly = 1 << 13;
constexpr int64_t kChunk = 1 << 14;  // values of a flat op's share, at most

// f(begin, end) over [0, n): from `least` values on, the team takes chunks of at most kChunk,
// whole 16s, at least one per thread; one call below.
template <class F>
void chunked(int64_t n, F f, int64_t least = kParallelMinValues) {
  if (n < least) return f(int64_t{0}, n);
  int threads = 1;
#if defined(_OPENMP)
  threads = omp_get_max_threads();
#endif
  const int64_t chunk = std::min(kChunk, (n / threads + 15) / 16 * 16);
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < n; b += chunk) f(b, std::min(n, b + chunk));
}

}  // namespace

void rms_norm(const float* x, const float* weight, int64_t n, int64_t dim, float eps, float* y) {
#pragma omp parallel for schedule(static) if (n > 1 && n * dim >= kParallelMinCostly)
  for (int64_t t = 0; t < n; ++t) {
    const float* xr = x + t * dim;
    float* yr = y + t * dim;
    float mean_sq = dot(xr, xr, dim) / static_cast<float>(dim);
    float inv = 1.0f / std::sqrt(mean_sq + eps);
    for (int64_t i = 0; i < dim; ++i) yr[i] = weight[i] * (xr[i] * inv);
  }
}

void layer_norm(const float* x, const float* weight, const float* bias, int64_t n, int64_t dim, float eps, float* y) {
#pragma omp parallel for schedule(static) if (n > 1 && n * dim >= kParallelMinValues)
  for (int64_t t = 0; t < n; ++t) {
    const float* xr = x + t * dim;
    float* yr = y + t * dim;
    const float mean = sum(xr, dim) / static_cast<float>(dim);
    for (int64_t i = 0; i < dim; ++i) yr[i] = xr[i] - mean;  // deviations first (in place is fine)
    const float inv = 1.0f / std::sqrt(dot(yr, yr, dim) / static_cast<float>(dim) + eps);
    for (int64_t i = 0; i < dim; ++i) yr[i] = yr[i] * inv * weight[i] + bias[i];
  }
}

void rope(float* x, int64_t n, int64_t heads, int64_t head_dim, int64_t start, const float* inv_freq,
          RopeLayout layout, int64_t rotary_dim, float attention_factor) {
  rope_qk(x, heads, nullptr, 0, n, head_dim, start, inv_freq, layout, rotary_dim, attention_factor);
}

void rope_qk(float* q, int64_t q_heads, float* k, int64_t k_heads, int64_t n, int64_t head_dim, int64_t start,
             const float* inv_freq, RopeLayout layout, int64_t rotary_dim, float attention_factor) {
  const int64_t half = (rotary_dim > 0 ? rotary_dim : head_dim) / 2;  // pairs rotated per head
  // Pair i is (i, i + half) or (2i, 2i + 1): only where its two values sit differs, the angle
  // and the rotation are the same operations in the same order.
  const int64_t stride = layout == RopeLayout::HalfSplit ? 1 : 2;   // x0 of pair i is xh[stride·i]
  const int64_t offset = layout == RopeLayout::HalfSplit ? half : 1;  // x1 is offset further on
  const auto rotate = [&](float* x, int64_t heads, int64_t t, int64_t i, float c, float s) {
    for (int64_t h = 0; h < heads; ++h) {
      float* xh = x + (t * heads + h) * head_dim;
      core::rope_rotate(xh[stride * i], xh[stride * i + offset], c, s);
    }
  };
#pragma omp parallel for schedule(static) if (n > 1 && n * (q_heads + k_heads) * head_dim >= kParallelMinValues)
  for (int64_t t = 0; t < n; ++t) {
    const float pos = static_cast<float>(start + t);
    for (int64_t i = 0; i < half; ++i) {
      const float angle = pos * inv_freq[i];
      // HF: cos(angle) · attention_scaling, each rounded to f32 (× 1 changes no bit).
      const float c = static_cast<float>(std::cos(static_cast<double>(angle))) * attention_factor;
      const float s = static_cast<float>(std::sin(static_cast<double>(angle))) * attention_factor;
      rotate(q, q_heads, t, i, c, s);
      rotate(k, k_heads, t, i, c, s);
    }
  }
}

// silu_mul and gelu_tanh: the AVX2/FMA kernels (elementwise_avx2.h) where the CPU has them, the
// loops below otherwise. Both compute each element from its own input alone.
void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  const bool simd = cpu_has_avx2_fma_f16c();
  chunked(n, [&](int64_t b, int64_t e) {
    if (simd) return avx2::silu_mul(gate + b, up + b, out + b, e - b);
    for (int64_t i = b; i < e; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
  }, kParallelMinCostly);
}

// 0.5·x·(1 + tanh(u)) = x / (1 + e^-2u): no cancellation for x < 0, where the result is ≈ x·e^2u.
// In double, like the AVX2 kernel's −2u, since an absolute error in 2u is a relative error of
// the result there.
void gelu_tanh(const float* x, float* out, int64_t n) {
  const bool simd = cpu_has_avx2_fma_f16c();
  chunked(n, [&](int64_t b, int64_t e) {
    if (simd) return avx2::gelu_tanh(x + b, out + b, e - b);
    constexpr double k = 1.595769121605730711759;  // 2·sqrt(2/π)
    constexpr double kc = k * 0.044715;
    for (int64_t i = b; i < e; ++i) {
      const double v = x[i];
      out[i] = static_cast<float>(v / (1.0 + std::exp(-v * (k + kc * v * v))));
    }
  }, kParallelMinCostly);
}

void add(float* x, const float* y, int64_t n) {
  chunked(n, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) x[i] += y[i];
  });
}

// Each head is a row of rms_norm (in place: a row's mean square is taken before it is written).
void head_rms_norm(float* x, const float* weight, int64_t rows, int64_t head_dim, float eps) {
  rms_norm(x, weight, rows, head_dim, eps, x);
}

// gelu_tanh's bits (its AVX2 kernel or loop, per chunk), then times up.
void gelu_tanh_mul(const float* gate, const float* up, float* out, int64_t n) {
  gelu_tanh(gate, out, n);
  chunked(n, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) out[i] *= up[i];
  });
}

void scale(float* x, int64_t n, float factor) {
  chunked(n, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) x[i] *= factor;
  });
}

// As HF: x / cap, tanh, times cap, each rounded to f32.
void softcap(float* x, int64_t n, float cap) {
  chunked(n, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) x[i] = std::tanh(x[i] / cap) * cap;
  }, kParallelMinCostly);
}

void embed(const Matrix& table, std::span<const int32_t> ids, float* out) {
  const size_t row_bytes = dtype_row_bytes(table.dtype, table.cols);
  std::vector<std::byte> row(table.packed ? row_bytes : 0);  // (row_bytes) a packed row, unpacked
  for (size_t t = 0; t < ids.size(); ++t) {
    const std::byte* src = table.data + static_cast<size_t>(ids[t]) * row_bytes;
    if (table.packed) {  // a tied LM head's table (packed_rows.h)
      unpack_rows(table, ids[t], 1, row.data());
      src = row.data();
    }
    to_f32(table.dtype, src, out + static_cast<int64_t>(t) * table.cols, table.cols);
  }
}

int64_t first_nonfinite(const float* x, int64_t n) {
  // A float is NaN or ±Inf exactly when its exponent bits are all ones. Blocks are tested with a
  // branch-free OR (which vectorises), and only a block that holds one is searched. A batch's
  // logits (16 × 49152 values) are shared out: each chunk's first, then the least of those.
  constexpr uint32_t kExponent = 0x7f800000u;
  constexpr int64_t kBlock = 256;
  const auto nonfinite = [](float v) { return (std::bit_cast<uint32_t>(v) & kExponent) == kExponent; };
  const auto first_in = [&](int64_t from, int64_t to) -> int64_t {
    for (int64_t b = from; b < to; b += kBlock) {
      const int64_t e = std::min(to, b + kBlock);
      uint32_t any = 0;
      for (int64_t i = b; i < e; ++i) any |= static_cast<uint32_t>(nonfinite(x[i]));
      if (any == 0) continue;
      for (int64_t i = b; i < e; ++i)
        if (nonfinite(x[i])) return i;
    }
    return n;
  };
  int64_t first = n;
#pragma omp parallel for schedule(static) reduction(min : first) if (n >= 4 * kParallelMinValues)
  for (int64_t b = 0; b < n; b += 4 * kChunk) first = std::min(first, first_in(b, std::min(n, b + 4 * kChunk)));
  return first < n ? first : -1;
}

}  // namespace kvinfer::cpu
