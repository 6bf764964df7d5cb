#pragma once
// Mixture-of-experts routing: the scalar math shared by the CPU backend and the CUDA kernels.
//
// As transformers 5.24's MixtralTopKRouter and Qwen2MoeTopKRouter: p = softmax(router logits) in
// f32, the k largest p, optionally renormalised to sum 1 (Mixtral always; Qwen2-MoE per
// norm_topk_prob). Ties go to the lower expert index (a stable selection; torch.topk leaves
// them unspecified). The chosen pairs are then sorted by expert index: the order in which their
// weighted outputs are added, as HF's loop over the experts that were hit adds them.
#include <cmath>
#include <cstdint>

#include "host_device.h"

namespace kvinfer::core {

// The most experts a model may have: a CUDA kernel's parameter block carries one pointer per
// expert (kernels/moe.cu); config readers refuse more.
inline constexpr int kMaxExperts = 256;

// p_e = exp(logit_e - max) / sum, the sum over the experts in index order.
KVI_HD float route_prob(const float* logits, int e, float max, float sum) { return expf(logits[e] - max) / sum; }

// One token: ids (k) and weights (k) of its chosen experts from logits (experts), sorted by
// expert index. k <= experts <= kMaxExperts.
KVI_HD void route_top_k(const float* logits, int experts, int k, bool normalize, int32_t* ids, float* weights) {
  float max = logits[0];
  for (int e = 1; e < experts; ++e) max = logits[e] > max ? logits[e] : max;
  float sum = 0.0f;
  for (int e = 0; e < experts; ++e) sum += expf(logits[e] - max);
  // Selection, largest first: pass j takes the largest p not yet taken (strictly larger: the
  // lower index wins a tie). The probabilities are recomputed, the same bits each pass.
  for (int j = 0; j < k; ++j) {
    int best = -1;
    float best_p = 0.0f;
    for (int e = 0; e < experts; ++e) {
      bool taken = false;
      for (int i = 0; i < j; ++i) taken = taken || ids[i] == e;
      if (taken) continue;
      const float p = route_prob(logits, e, max, sum);
      if (best < 0 || p > best_p) best = e, best_p = p;
    }
    ids[j] = best;
    weights[j] = best_p;
  }
  if (normalize) {
    float total = 0.0f;  // in selection order, as torch sums the topk values
    for (int j = 0; j < k; ++j) total += weights[j];
    for (int j = 0; j < k; ++j) weights[j] /= total;
  }
  for (int j = 1; j < k; ++j)  // insertion sort by expert index: k is small
    for (int i = j; i > 0 && ids[i - 1] > ids[i]; --i) {
      const int32_t id = ids[i];
      const float w = weights[i];
      ids[i] = ids[i - 1], weights[i] = weights[i - 1];
      ids[i - 1] = id, weights[i - 1] = w;
    }
}

// sigmoid(x) = 1 / (1 + exp(-x)), as torch computes it in f32: Qwen2-MoE's shared-expert gate.
KVI_HD float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

}  // namespace kvinfer::core
