// The bytes one decode step must read (decode_bytes.h).
#include "models/decode_bytes.h"

#include <algorithm>
#include <functional>
#include <vector>

#include <fmt/format.h>

#include "kvinfer/error.h"
#include "kvinfer/kv_plan.h"
#include "models/model_internal.h"
#include "models/weights.h"

namespace kvinfer {

DecodeStepBytes decode_step_bytes(const Model& model, int64_t context, DType kv_dtype) {
  if (context < 1)
    throw Error(ErrorKind::InvalidArgument, fmt::format("decode_step_bytes: context {} is not a position count >= 1 (the new token counts)",
                            context));
  const ModelWeights& w = model_weights(model);
  DecodeStepBytes b;
  const auto vec = [](const Vector& v) { return v.bytes(); };
  for (const LayerWeights& L : w.layers) {
    b.norms_biases += vec(L.attn_norm) + vec(L.attn_norm_bias) + vec(L.ffn_norm) + vec(L.ffn_norm_bias) +
                      vec(L.q_norm) + vec(L.k_norm) + vec(L.post_attn_norm) + vec(L.post_ffn_norm);
    for (const Linear* l : {&L.q, &L.k, &L.v, &L.o, &L.gate, &L.up, &L.down, &L.moe.router, &L.shared_expert_gate}) {
      b.layer_matrices += l->weight.bytes();
      b.norms_biases += vec(l->bias);
    }
    // A mixture-of-experts layer: the token's num_experts_per_tok experts, the largest ones.
    std::vector<uint64_t> experts;  // (experts) matrix bytes of each
    for (size_t e = 0; e < L.moe.gate.size(); ++e)
      experts.push_back(L.moe.gate[e].weight.bytes() + L.moe.up[e].weight.bytes() + L.moe.down[e].weight.bytes());
    std::sort(experts.begin(), experts.end(), std::greater<>());
    const auto used = std::min(experts.size(), static_cast<size_t>(model.config().num_experts_per_tok));
    for (size_t e = 0; e < used; ++e) b.layer_matrices += experts[e];
  }
  b.norms_biases += vec(w.final_norm) + vec(w.final_norm_bias);
  b.lm_head = w.lm_head.weight.bytes();  // a tied head is the embedding: counted here only
  b.embedding_rows = w.embed.row_bytes() + (w.pos_embed.data ? w.pos_embed.row_bytes() : 0);

  const ModelConfig& c = model.config();
  b.positions_read = c.sliding_window ? std::min(context, *c.sliding_window) : context;
  b.kv_write = kv_bytes_per_token(c, kv_dtype);
  b.kv_read = plan_kv_bytes(c, b.positions_read, kv_dtype);  // throws on overflow
  if (!c.sliding_layers.empty()) {  // sliding and global layers (Gemma, Qwen2's window): each its own
    const uint64_t layer_row = b.kv_write / static_cast<uint64_t>(c.num_layers);  // K and V of one layer
    b.kv_read = 0;
    b.positions_read = 0;
    for (int64_t l = 0; l < c.num_layers; ++l) {
      const int64_t window = c.layer_window(l), read = window > 0 ? std::min(context, window) : context;
      b.positions_read = std::max(b.positions_read, read);  // the most any layer reads
      b.kv_read += layer_row * static_cast<uint64_t>(read);
    }
  }
  uint64_t total = 0;
  if (__builtin_add_overflow(b.weights(), b.kv_read, &total) || __builtin_add_overflow(total, b.kv_write, &total))
    throw Error(ErrorKind::InvalidArgument, "decode_step_bytes: the bytes of a step overflow 64 bits");
  return b;
}

}  // namespace kvinfer
