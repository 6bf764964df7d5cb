// The mixture-of-experts feed-forward block (Mixtral: Jiang et al. 2024; Qwen2-MoE; Qwen3-MoE), as
// transformers' MixtralSparseMoeBlock, Qwen2MoeSparseMoeBlock and Qwen3MoeSparseMoeBlock compute it:
//   p = softmax(W_router · h);  E = the k largest p  (renormalised to sum 1: Mixtral, norm_topk_prob)
//   y = Σ_{e ∈ E} p_e · W_down,e · (silu(W_gate,e · h) ⊙ W_up,e · h)
//   Qwen2-MoE:  y += sigmoid(w_shared_gate · h) · SwiGLU_shared(h)
//   x += y
#include "models/forward.h"

namespace kvinfer {

void moe_block(const ModelConfig& cfg, const LayerWeights& L, ForwardScratch& s, const float* h, int64_t n, float* x) {
  const ops::Exec& e = s.exec;
  const Device dev = e.device;
  const int64_t hidden = cfg.hidden_size, experts = L.moe.experts(), k = cfg.num_experts_per_tok;
  float* gate = s.gate.reserve(dev, n * k * cfg.moe_intermediate_size);  // (n·k, expert_inter); llama_forward sized it
  float* up = s.up.reserve(dev, n * k * cfg.moe_intermediate_size);      // (n·k, expert_inter)
  float* out = s.moe_out.reserve(dev, n * hidden);                       // (n, hidden)
  float* shared = nullptr;
  float* shared_gate = nullptr;
  if (L.gate.weight.data != nullptr) {  // Qwen2-MoE's shared expert, a dense SwiGLU of its own width
    const int64_t width = L.gate.weight.rows;
    shared = s.shared.reserve(dev, n * hidden);       // (n, hidden)
    shared_gate = s.shared_gate.reserve(dev, n);      // (n)
    ops::linears(e, {{&L.gate, gate}, {&L.up, up}}, h, n);
    ops::silu_mul(e, gate, up, gate, n * width);
    ops::linear(e, L.down, gate, n, shared);
    ops::linear(e, L.shared_expert_gate, h, n, shared_gate);
  }
  float* logits = s.router.reserve(dev, n * experts);  // (n, experts)
  // (n, k) weights, then (n, k) int32 ids: one buffer, so that one device allocation holds both.
  float* weights = s.routes.reserve(dev, 2 * n * k);
  auto* ids = reinterpret_cast<int32_t*>(weights + n * k);
  ops::linear(e, L.moe.router, h, n, logits);
  ops::moe_route(e, logits, n, experts, k, cfg.norm_topk_prob, ids, weights);
  const MoeScratch scratch{s.moe_x.reserve(dev, n * hidden), gate, up, s.moe_y.reserve(dev, n * k * hidden)};
  ops::moe_experts(e, L.moe, h, n, hidden, ids, weights, k, scratch, out);
  if (shared) ops::add_gated(e, out, shared_gate, shared, n, hidden);
  ops::add(e, x, out, n * hidden);
}

}  // namespace kvinfer
