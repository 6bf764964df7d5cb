#pragma once
// The weights of a decoder-only transformer (the Llama family or GPT-2), as the forward pass sees them.
// Every pointer lives on the model's device: in the mapped checkpoint (or host memory) for the
// CPU, in device memory for CUDA (see src/cuda/upload.cpp).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <type_traits>
#include <vector>

#include "kvinfer/dtype.h"

namespace kvinfer {

// A (rows, cols) matrix in its stored dtype: HF Linear weights are (out, in). Row-major, or on
// the CPU, where its decode kernels read them so, with each block of 16 rows packed chunk by chunk
// (cpu/packed_rows.h): the same bytes reordered within each block.
struct Matrix {
  DType dtype = DType::F32;
  const std::byte* data = nullptr;
  int64_t rows = 0, cols = 0;
  bool packed = false;  // blocks of 16 rows in cpu/packed_rows.h's order (CPU weights only)
  // Quantised rows are whole blocks (cols a multiple of the block size; the loader checks).
  uint64_t row_bytes() const { return dtype_row_bytes(dtype, cols); }
  uint64_t bytes() const { return static_cast<uint64_t>(rows) * row_bytes(); }
};

// An f32 vector (norm weights, biases, rope frequencies); empty when absent.
struct Vector {
  const float* data = nullptr;
  int64_t n = 0;
  bool empty() const { return n == 0; }
  uint64_t bytes() const { return static_cast<uint64_t>(n) * sizeof(float); }
};

// A linear layer y = x·Wᵀ + b.
struct Linear {
  Matrix weight;
  Vector bias;  // (out) or empty
};

// One product of a call that multiplies one input by several layers (ops::linears): y (n, out)
// = x (n, in) · layer.weightᵀ (+ b).
// What the ids given to an embedding lookup are: token ids, or positions (GPT-2's learned
// position table). A CUDA graph's decode step reads either from device memory.
enum class EmbedIds { Tokens, Positions };

struct LinearInto {
  const Linear* layer;
  float* y;
};

// A mixture-of-experts feed-forward block (Mixtral, Qwen2-MoE): the router scores every expert
// for each token, the top k are run, each a SwiGLU MLP. Empty (no experts) in a dense layer.
// Each expert's matrices are their own views: per-expert checkpoint tensors, or row blocks of a
// stacked (experts, rows, cols) tensor (GGUF's ffn_*_exps, HF's fused experts.gate_up_proj).
struct MoeWeights {
  Linear router;                   // (experts, hidden)
  std::vector<Linear> gate, up;    // (experts) × (expert_inter, hidden)
  std::vector<Linear> down;        // (experts) × (hidden, expert_inter)
  int64_t experts() const { return static_cast<int64_t>(gate.size()); }
  bool empty() const { return gate.empty(); }
};

// GPT-2's fused c_attn is bound as q, k, v (its three row blocks), c_fc as up, its mlp.c_proj as
// down; it has no gate. Its LayerNorms add the *_norm_bias vectors.
// A mixture-of-experts layer keeps its experts in `moe`; gate/up/down then hold its shared expert
// (Qwen2-MoE; (shared_inter, hidden) ×2, (hidden, shared_inter)), or nothing (Mixtral), and
// shared_expert_gate scales that expert's output by sigmoid(shared_expert_gate · x).
struct LayerWeights {
  Vector attn_norm;       // (hidden)
  Vector attn_norm_bias;  // (hidden), LayerNorm only
  Linear q, k, v, o;      // (heads·hd, hidden), (kv·hd, hidden) ×2, (hidden, heads·hd)
  Vector ffn_norm;        // (hidden)
  Vector ffn_norm_bias;   // (hidden), LayerNorm only
  Linear gate, up, down;  // (inter, hidden) ×2, (hidden, inter); gate empty for GPT-2
  // Qwen3, Gemma 3: per-head RMSNorm of q and k; Gemma 2/3: the norms after each block (on its
  // output, before the residual add). Empty where the family has none. Gemma's (1 + w) is
  // folded in at load: every norm here multiplies by its weight.
  Vector q_norm, k_norm;             // (head_dim) each
  Vector post_attn_norm, post_ffn_norm;  // (hidden) each
  MoeWeights moe;             // empty in a dense layer
  Linear shared_expert_gate;  // (1, hidden), Qwen2-MoE's MoE layers only
};

struct ModelWeights {
  std::shared_ptr<const void> storage;  // owns what the pointers point into
  Matrix embed;                         // (vocab, hidden)
  Matrix pos_embed;                     // (max_positions, hidden), GPT-2's learned positions only
  std::vector<LayerWeights> layers;     // (num_layers)
  Vector final_norm;                    // (hidden)
  Vector final_norm_bias;               // (hidden), LayerNorm only
  Linear lm_head;                       // (vocab, hidden), no bias; the embedding when tied
  Vector rope_inv_freq;                 // (head_dim / 2), scaling applied
  Vector rope_local_inv_freq;           // (head_dim / 2) Gemma 3's sliding layers; empty: rope_inv_freq
};

// Calls f(Matrix&) or f(Vector&) for every tensor of w (the tied LM head too); const-ness
// follows w.
template <typename W, typename F>
  requires std::is_same_v<std::remove_const_t<W>, ModelWeights>
void for_each_tensor(W& w, F&& f) {
  f(w.embed);
  f(w.pos_embed);
  for (auto& L : w.layers) {
    f(L.attn_norm);
    f(L.attn_norm_bias);
    for (auto* l : {&L.q, &L.k, &L.v, &L.o, &L.gate, &L.up, &L.down}) {
      f(l->weight);
      f(l->bias);
    }
    f(L.ffn_norm);
    f(L.ffn_norm_bias);
    f(L.q_norm);
    f(L.k_norm);
    f(L.post_attn_norm);
    f(L.post_ffn_norm);
    for (auto* l : {&L.moe.router, &L.shared_expert_gate}) {
      f(l->weight);
      f(l->bias);
    }
    for (auto* experts : {&L.moe.gate, &L.moe.up, &L.moe.down})
      for (auto& l : *experts) {
        f(l.weight);
        f(l.bias);
      }
  }
  f(w.final_norm);
  f(w.final_norm_bias);
  f(w.lm_head.weight);
  f(w.rope_inv_freq);
  f(w.rope_local_inv_freq);
}

// Bytes of every tensor the model holds, once each (the tied LM head is the embedding): what
// Model::weight_bytes() reports, and what load checks against the memory available.
uint64_t model_weight_bytes(const ModelWeights& w, bool tied);

}  // namespace kvinfer
