#pragma once
// The fewest bytes one batch-1 decode step must move through memory, for a loaded model at a
// context length: the floor a memory-bound step cannot beat (docs/benchmarks.md, "The decode
// floor"). Library-internal: kvinfer-bench and the GPU benchmarks report it.
#include <cstdint>

#include "kvinfer/dtype.h"
#include "kvinfer/model.h"

namespace kvinfer {

struct DecodeStepBytes {
  uint64_t layer_matrices = 0;  // q, k, v, o, gate, up, down of every layer, in their stored dtype;
                                // of a mixture-of-experts layer the router and k experts (the largest)
  uint64_t norms_biases = 0;    // every norm weight and bias, every projection bias (f32)
  uint64_t lm_head = 0;         // the LM head whole, once (the token embedding when tied)
  uint64_t embedding_rows = 0;  // one row of the token embedding (and one of GPT-2's positions)
  int64_t positions_read = 0;   // the most positions a layer attends: the context, or the window
  uint64_t kv_read = 0;         // K and V of the positions each layer attends, every layer
  uint64_t kv_write = 0;        // the new position's K and V, every layer

  // The weights a step reads: Model::step_weight_bytes().
  uint64_t weights() const { return layer_matrices + norms_biases + lm_head + embedding_rows; }
  uint64_t total() const { return weights() + kv_read + kv_write; }
};

// Bytes of the decode step that attends `context` positions (the new token's included, so
// context >= 1: the step that decodes token P + 1 after a P-token prompt attends P + 1), with a
// KV cache of dtype kv_dtype (f32, f16, bf16, int8 or fp8):
//   weights as stored (quantised blocks as stored: dtype_row_bytes), each read once, the LM head
//   once even when tied, one embedding row;
//   KV read  = Σ over layers of kv_layer_bytes_per_token × min(context, the layer's window), the
//              context for a layer without one (an 8-bit row's scale included);
//   KV write = kv_bytes_per_token.
// Activations (a few hidden-sized vectors) and the logits written (vocab × 4 bytes) are left
// out. Throws kvinfer::Error for context < 1, a quantised kv_dtype, or 64-bit overflow.
DecodeStepBytes decode_step_bytes(const Model& model, int64_t context, DType kv_dtype);

}  // namespace kvinfer
