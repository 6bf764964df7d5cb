#include <algorithm>
#include <cmath>
#include <vector>

#include "core/online_softmax.h"
#include "cpu/attention_avx2.h"
#include "cpu/cpu_features.h"
#include "cpu/cpu_ops.h"
#include "cpu/elementwise_avx2.h"

namespace kvinfer::cpu {

void store_kv(KvCache& kv, int64_t layer, int64_t start, int64_t n, const float* k, const float* v) {
  const int64_t hd = kv.head_dim(), kvh = kv.num_kv_heads();
  const size_t esz = dtype_size(kv.dtype());
  // A prefill's rows are narrowed on the team (each value on its own either way).
#pragma omp parallel for schedule(static) if (n > 1 && n * kvh * hd >= (1 << 15))
  for (int64_t t = 0; t < n; ++t)
    for (int64_t g = 0; g < kvh; ++g) {
      const size_t dst = static_cast<size_t>((start + t) * hd) * esz;
      from_f32(kv.dtype(), k + (t * kvh + g) * hd, kv.k(layer, g) + dst, hd);
      from_f32(kv.dtype(), v + (t * kvh + g) * hd, kv.v(layer, g) + dst, hd);
    }
}

void attention(const KvCache& kv, int64_t layer, const float* q, int64_t n, int64_t start, int64_t heads,
               int64_t window, float* out) {
  const int64_t hd = kv.head_dim();
  const int64_t group = heads / kv.num_kv_heads();
  const size_t row_bytes = static_cast<size_t>(hd) * dtype_size(kv.dtype());
  // Scores in the base-2 domain (kernels/core/online_softmax.h, shared with the CUDA kernels):
  // exp(q·k / sqrt(hd) - max) = exp2(s - max) with s = q·k · scale.
  const float scale = core::kLog2e / std::sqrt(static_cast<float>(hd));
  const bool f32 = kv.dtype() == DType::F32;
  const bool simd = cpu_has_avx2_fma_f16c();
  // Every (row, head) pair is computed on its own, in the same order whatever n or the thread
  // count is. A decode's heads are shared out in contiguous runs (a KV head's query heads
  // together). A prefill's pairs go to the threads in turn: a causal prefill's later rows attend
  // to more positions, so contiguous shares would leave the first thread idle, and in turn each
  // thread keeps to the same heads of every row. One 512-row layer, 16 heads, 2 threads, the
  // schedules alternated in one process: 28 ms in contiguous shares against 14 ms in turn; in a
  // slower minute, 31 ms with whole rows in turn against 27 ms. Small calls stay on one thread
  // (a team costs more).
  const int64_t pairs = n * heads;
  const double macs = static_cast<double>(pairs) * static_cast<double>(start + n) * static_cast<double>(hd);
  [[maybe_unused]] const bool parallel = macs >= static_cast<double>(1 << 16);  // read by the OpenMP pragmas only
#pragma omp parallel if (parallel)
  {
    std::vector<float> scores(static_cast<size_t>(start + n));  // (positions) scores, then probabilities
    std::vector<float> row(f32 || simd ? 0 : static_cast<size_t>(hd));  // (head_dim) one widened K or V row
    // Row j of K or V for KV head g, as f32: in place for an f32 cache, widened otherwise.
    auto kv_row = [&](const std::byte* base, int64_t j) {
      const std::byte* src = base + static_cast<size_t>(j) * row_bytes;
      if (f32) return reinterpret_cast<const float*>(src);
      to_f32(kv.dtype(), src, row.data(), hd);
      return static_cast<const float*>(row.data());
    };
    auto one_pair = [&](int64_t i) {
      const int64_t t = i / heads, h = i % heads, g = h / group;
      const int64_t pos = start + t;
      const int64_t first = window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0;
      const float* qh = q + (t * heads + h) * hd;
      float* oh = out + (t * heads + h) * hd;
      const std::byte* kh = kv.k(layer, g);
      const std::byte* vh = kv.v(layer, g);
      // One block of all positions, in position order: scores and their max, the weights and
      // their sum, then the weighted sum of V rows. Nothing depends on n.
      if (simd)  // K rows widened in registers: the same bits as dot() on the widened row
        avx2::attention_scores(kv.dtype(), qh, kh, first, pos, hd, scale, scores.data());
      else
        for (int64_t j = first; j <= pos; ++j) scores[static_cast<size_t>(j)] = dot(qh, kv_row(kh, j), hd) * scale;
      float block_max = -INFINITY;
      for (int64_t j = first; j <= pos; ++j) block_max = std::max(block_max, scores[static_cast<size_t>(j)]);
      core::OnlineSoftmax softmax;
      softmax.rescale(block_max);
      float sum = 0.0f;  // the weights' sum: 8 lanes and a fixed tree on AVX2, in order otherwise
      if (simd) {
        sum = avx2::softmax_weights(scores.data() + first, pos - first + 1, core::softmax_ref(softmax.m));
      } else {
        for (int64_t j = first; j <= pos; ++j) {
          float w = softmax.weight(scores[static_cast<size_t>(j)]);
          scores[static_cast<size_t>(j)] = w;
          sum += w;
        }
      }
      softmax.add(sum);
      const float inv_sum = softmax.inv_sum();
      for (int64_t j = first; j <= pos; ++j) scores[static_cast<size_t>(j)] *= inv_sum;  // the probabilities
      if (simd) {
        avx2::attention_values(kv.dtype(), scores.data(), vh, first, pos, hd, oh);
      } else {
        std::fill(oh, oh + hd, 0.0f);
        for (int64_t j = first; j <= pos; ++j) {
          const float p = scores[static_cast<size_t>(j)];
          const float* vr = kv_row(vh, j);
          for (int64_t d = 0; d < hd; ++d) oh[d] += p * vr[d];
        }
      }
    };
    if (n > 1) {
#pragma omp for schedule(static, 1)
      for (int64_t i = 0; i < pairs; ++i) one_pair(i);
    } else {
#pragma omp for schedule(static)
      for (int64_t i = 0; i < pairs; ++i) one_pair(i);
    }
  }
}

}  // namespace kvinfer::cpu
