// Mixture-of-experts ops on the CPU (cpu_ops.h): routing, the experts grouped by the rows that
// chose them, the shared expert's gate.
#include <cstring>
#include <vector>

#include "core/moe.h"
#include "cpu/cpu_ops.h"

namespace kvinfer::cpu {

void moe_route(const float* logits, int64_t n, int64_t experts, int64_t k, bool normalize, int32_t* ids,
               float* weights) {
  for (int64_t t = 0; t < n; ++t)
    core::route_top_k(logits + t * experts, static_cast<int>(experts), static_cast<int>(k), normalize, ids + t * k,
                      weights + t * k);
}

void moe_experts(const MoeWeights& m, const float* x, int64_t n, int64_t hidden, const int32_t* ids,
                 const float* weights, int64_t k, const MoeScratch& s, float* out, ActivationMode activations) {
  std::memset(out, 0, static_cast<size_t>(n * hidden) * sizeof(float));
  std::vector<int64_t> rows;    // (<= n) the rows that chose expert e
  std::vector<float> shares;    // (<= n) their weights for it
  for (int64_t e = 0; e < m.experts(); ++e) {
    rows.clear();
    shares.clear();
    for (int64_t t = 0; t < n; ++t)
      for (int64_t j = 0; j < k; ++j)
        if (ids[t * k + j] == e) rows.push_back(t), shares.push_back(weights[t * k + j]);
    if (rows.empty()) continue;  // never read
    const auto rn = static_cast<int64_t>(rows.size());
    const auto i = static_cast<size_t>(e);
    const int64_t inter = m.gate[i].weight.rows;
    for (int64_t r = 0; r < rn; ++r)  // x_e (rn, hidden): the rows, gathered
      std::memcpy(s.x + r * hidden, x + rows[static_cast<size_t>(r)] * hidden, static_cast<size_t>(hidden) * sizeof(float));
    const LinearInto gate_up[] = {{&m.gate[i], s.gate}, {&m.up[i], s.up}};
    linears(gate_up, s.x, rn, activations);        // (rn, inter) ×2
    silu_mul(s.gate, s.up, s.gate, rn * inter);          // (rn, inter)
    linear(m.down[i], s.gate, rn, s.y, activations);  // (rn, hidden)
    // Rows' adds in expert order: ids are sorted by expert, so this is each row's j order.
    for (int64_t r = 0; r < rn; ++r) {
      float* o = out + rows[static_cast<size_t>(r)] * hidden;
      const float* y = s.y + r * hidden;
      const float w = shares[static_cast<size_t>(r)];
      for (int64_t c = 0; c < hidden; ++c) o[c] += y[c] * w;
    }
  }
}

void add_gated(float* out, const float* gate, const float* y, int64_t n, int64_t dim) {
  for (int64_t t = 0; t < n; ++t) {
    const float g = core::sigmoid(gate[t]);
    for (int64_t c = 0; c < dim; ++c) out[t * dim + c] += g * y[t * dim + c];
  }
}

}  // namespace kvinfer::cpu
