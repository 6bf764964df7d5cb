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

  // Each layer reads its own span: the context, or its window (Gemma and Qwen2 mix windowed and
  // global layers). Not plan_kv_bytes: a ring's rows are not the positions a step reads.
  const ModelConfig& c = model.config();
  const uint64_t layer_row = kv_layer_bytes_per_token(c, kv_dtype);  // K and V of one layer and position
  b.kv_write = kv_bytes_per_token(c, kv_dtype);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const int64_t window = c.layer_window(l), read = window > 0 ? std::min(context, window) : context;
    b.positions_read = std::max(b.positions_read, read);  // the most any layer reads
    uint64_t bytes = 0;
    if (__builtin_mul_overflow(layer_row, static_cast<uint64_t>(read), &bytes) ||
        __builtin_add_overflow(b.kv_read, bytes, &b.kv_read))
      throw Error(ErrorKind::InvalidArgument,
                  fmt::format("decode_step_bytes: the KV bytes read at context {} overflow 64 bits", context));
  }
  uint64_t total = 0;
  if (__builtin_add_overflow(b.weights(), b.kv_read, &total) || __builtin_add_overflow(total, b.kv_write, &total))
    throw Error(ErrorKind::InvalidArgument, "decode_step_bytes: the bytes of a step overflow 64 bits");
  return b;
}

}  // namespace kvinfer
