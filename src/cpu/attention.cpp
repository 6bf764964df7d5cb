#include <algorithm>
#include <cmath>
#include <vector>

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
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  std::vector<float> scores(static_cast<size_t>(start + n));  // (positions)
  std::vector<float> row(static_cast<size_t>(hd));             // (head_dim) one widened K or V row
  for (int64_t t = 0; t < n; ++t) {
    const int64_t pos = start + t;
    const int64_t first = window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0;
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t g = h / group;
      const float* qh = q + (t * heads + h) * hd;
      float* oh = out + (t * heads + h) * hd;
      // Scores in position order, then softmax (max-subtracted) and the weighted sum of V rows,
      // all in the same order for every call: results do not depend on n.
      float max_score = -INFINITY;
      for (int64_t j = first; j <= pos; ++j) {
        to_f32(kv.dtype(), kv.k(layer, g) + static_cast<size_t>(j) * row_bytes, row.data(), hd);
        float s = dot(qh, row.data(), hd) * scale;
        scores[static_cast<size_t>(j)] = s;
        max_score = std::max(max_score, s);
      }
      float sum = 0.0f;
      for (int64_t j = first; j <= pos; ++j) {
        float e = std::exp(scores[static_cast<size_t>(j)] - max_score);
        scores[static_cast<size_t>(j)] = e;
        sum += e;
      }
      std::fill(oh, oh + hd, 0.0f);
      for (int64_t j = first; j <= pos; ++j) {
        const float p = scores[static_cast<size_t>(j)] / sum;
        to_f32(kv.dtype(), kv.v(layer, g) + static_cast<size_t>(j) * row_bytes, row.data(), hd);
        for (int64_t d = 0; d < hd; ++d) oh[d] += p * row[static_cast<size_t>(d)];
      }
    }
  }
}

}  // namespace kvinfer::cpu
