#pragma once
// The weights of a decoder-only transformer of the Llama family, as the forward pass sees them.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "kvinfer/dtype.h"

namespace kvinfer {

// A (rows, cols) row-major matrix in its stored dtype: HF Linear weights are (out, in).
struct Matrix {
  DType dtype = DType::F32;
  const std::byte* data = nullptr;  // into a mapped checkpoint
  int64_t rows = 0, cols = 0;
  uint64_t bytes() const { return static_cast<uint64_t>(rows * cols) * dtype_size(dtype); }
};

// A linear layer y = x·Wᵀ + b; bias is empty when the layer has none.
struct Linear {
  Matrix weight;
  std::vector<float> bias;  // (out) or empty
};

struct LayerWeights {
  std::vector<float> attn_norm;  // (hidden)
  Linear q, k, v, o;             // (heads·hd, hidden), (kv·hd, hidden) ×2, (hidden, heads·hd)
  std::vector<float> ffn_norm;   // (hidden)
  Linear gate, up, down;         // (inter, hidden) ×2, (hidden, inter)
};

struct ModelWeights {
  std::shared_ptr<const void> storage;  // keeps the mapped files alive
  Matrix embed;                         // (vocab, hidden)
  std::vector<LayerWeights> layers;     // (num_layers)
  std::vector<float> final_norm;        // (hidden)
  Linear lm_head;                       // (vocab, hidden), no bias; the embedding when tied
  std::vector<float> rope_inv_freq;     // (head_dim / 2), scaling applied
};

}  // namespace kvinfer
