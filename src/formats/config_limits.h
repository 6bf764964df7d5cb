#pragma once
// Limits a model's config is held to beyond "a positive size" (docs/reliability.md): far above
// every published model, low enough that a hostile config cannot make per-layer work unbounded.
#include <cstdint>

namespace kvinfer {

// Layers (num_hidden_layers, n_layer, GGUF block_count). The deepest published decoders have
// about 130 (Llama 3.1 405B: 126).
inline constexpr int64_t kMaxLayers = 4096;

}  // namespace kvinfer
