#pragma once
// Online softmax (Milakov & Gimelshein 2018; FlashAttention) and the split combine of
// Flash-Decoding: the scalar math of attention's softmax-weighted sum when the scores arrive
// block by block, shared by the CPU backend and the CUDA kernels.
//
// Scores are in the base-2 domain, s = (q·k) · scale · log2(e), so that exp(x · scale) = exp2(s)
// (one multiply folded into q, and exp2 is the hardware's native exponential).
//
// A state that has seen no unmasked score has m = -inf and l = 0. Every function below keeps
// such a state (a block masked entirely by the causal mask or the window, an empty split)
// from contributing anything and from producing NaN: its reference max is 0, never -inf, so no
// (-inf) - (-inf) is formed, and exp2(-inf - finite) = 0.
#include <cmath>

#include "host_device.h"

namespace kvinfer::core {

constexpr float kLog2e = 1.4426950408889634f;

// The max that scores are measured from: m itself, or 0 while nothing has been seen.
KVI_HD float softmax_ref(float m) { return m == -INFINITY ? 0.0f : m; }

// Running state of one row: o_acc = Σ exp2(s_i - softmax_ref(m)) · v_i is kept by the caller.
struct OnlineSoftmax {
  float m = -INFINITY;  // max score seen so far
  float l = 0.0f;       // Σ exp2(s_i - softmax_ref(m)) over the scores seen

  // A block of scores whose max is block_max (-inf when all of them are masked) arrives.
  // Rescales l and returns the factor the caller multiplies its accumulator o_acc by; the
  // block's weights are then weight(s_i), and their sum goes to add().
  KVI_HD float rescale(float block_max) {
    const float m_new = fmaxf(m, block_max);
    const float alpha = exp2f(m - softmax_ref(m_new));  // 0 when m was -inf: o_acc and l are 0
    m = m_new;
    l *= alpha;
    return alpha;
  }
  // exp2(s - m): 0 for a masked score (-inf).
  KVI_HD float weight(float s) const { return exp2f(s - softmax_ref(m)); }
  KVI_HD void add(float weight_sum) { l += weight_sum; }
  // The factor that turns o_acc into the softmax-weighted mean; 0 when nothing was seen.
  KVI_HD float inv_sum() const { return l > 0.0f ? 1.0f / l : 0.0f; }
};

// Split combine. Split s holds (m_s, l_s, o_s), o_s unnormalised as above. With M = max_s m_s
// and w_s = combine_weight(m_s, M), the merged output is Σ_s w_s o_s / Σ_s w_s l_s.
// An empty split (m_s = -inf) gets weight 0; if every split is empty, M = -inf and all weights
// are 0, so the merged l is 0 and inv_sum() gives an output of 0, not NaN.
KVI_HD float combine_weight(float m_split, float m_max) { return exp2f(m_split - softmax_ref(m_max)); }

// Merges partial b into partial a: (a, o_a) becomes the state of the union of their scores.
// o_a and o_b hold d floats each.
KVI_HD void merge_partial(OnlineSoftmax& a, float* o_a, const OnlineSoftmax& b, const float* o_b, int d) {
  const float m = fmaxf(a.m, b.m);
  const float wa = combine_weight(a.m, m);
  const float wb = combine_weight(b.m, m);
  for (int i = 0; i < d; ++i) o_a[i] = o_a[i] * wa + o_b[i] * wb;
  a.l = a.l * wa + b.l * wb;
  a.m = m;
}

}  // namespace kvinfer::core
