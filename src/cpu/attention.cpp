#include <algorithm>
#include <cmath>
#include <vector>

#include "core/online_softmax.h"
#include "cpu/cpu_ops.h"

namespace kvinfer::cpu {

void store_kv(KvCache& kv, int64_t layer, int64_t start, int64_t n, const float* k, const float* v) {
  const int64_t hd = kv.head_dim(), kvh = kv.num_kv_heads();
  const size_t esz = dtype_size(kv.dtype());
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
  std::vector<float> scores(static_cast<size_t>(start + n));  // (positions)
  std::vector<float> row(static_cast<size_t>(hd));             // (head_dim) one widened K or V row
  for (int64_t t = 0; t < n; ++t) {
    const int64_t pos = start + t;
    const int64_t first = window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0;
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t g = h / group;
      const float* qh = q + (t * heads + h) * hd;
      float* oh = out + (t * heads + h) * hd;
      // One block of all positions, in position order: scores and their max, the weights and
      // their sum, then the weighted sum of V rows. Nothing depends on n.
      float block_max = -INFINITY;
      for (int64_t j = first; j <= pos; ++j) {
        to_f32(kv.dtype(), kv.k(layer, g) + static_cast<size_t>(j) * row_bytes, row.data(), hd);
        float s = dot(qh, row.data(), hd) * scale;
        scores[static_cast<size_t>(j)] = s;
        block_max = std::max(block_max, s);
      }
      core::OnlineSoftmax softmax;
      softmax.rescale(block_max);
      float sum = 0.0f;
      for (int64_t j = first; j <= pos; ++j) {
        float w = softmax.weight(scores[static_cast<size_t>(j)]);
        scores[static_cast<size_t>(j)] = w;
        sum += w;
      }
      softmax.add(sum);
      const float inv_sum = softmax.inv_sum();
      std::fill(oh, oh + hd, 0.0f);
      for (int64_t j = first; j <= pos; ++j) {
        const float p = scores[static_cast<size_t>(j)] * inv_sum;
        to_f32(kv.dtype(), kv.v(layer, g) + static_cast<size_t>(j) * row_bytes, row.data(), hd);
        for (int64_t d = 0; d < hd; ++d) oh[d] += p * row[static_cast<size_t>(d)];
      }
    }
  }
}

}  // namespace kvinfer::cpu
