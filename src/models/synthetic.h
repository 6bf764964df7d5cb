#pragma once
// Models without a checkpoint: the shapes of well-known models, with random weights built in
// memory. For benchmarks and tests, where the cost of a forward pass depends on the shape only
// (the tokens random weights produce are meaningless, but deterministic).
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kvinfer/config.h"
#include "kvinfer/dtype.h"
#include "kvinfer/model.h"

namespace kvinfer {

struct SyntheticShape {
  std::string name;         // "gpt2", "gpt2-medium", "llama-1b", ...
  std::string description;  // "GPT-2 small, 124M parameters: 12 layers, hidden 768, 12 heads"
  ModelConfig config;
};

// Every named shape, in a fixed order.
const std::vector<SyntheticShape>& synthetic_shapes();
// The config of a named shape; throws kvinfer::Error listing the known names.
ModelConfig synthetic_config(std::string_view name);

struct RandomModelOptions {
  // The projections' and embeddings' dtype: f32, f16, bf16, or ggml's q8_0, q4_0, q4_1 (rows of
  // whole 32-value blocks), q4_k, q5_k or q6_k (rows of whole 256-value super-blocks), quantised as
  // ggml's reference quantisers do (src/core/quantize.h). Every matrix has the one dtype (a
  // llama.cpp Q4_K_M file mixes in Q6_K; this is "pure" Q4_K).
  DType weight_dtype = DType::F32;
  uint64_t seed = 0;
  Device device = Device::Auto;
  int device_index = 0;           // LoadOptions::device_index
  LoadProgress on_progress = {};  // bytes of weights made (or uploaded) of the total
  ActivationMode activations = ActivationMode::Exact;  // LoadOptions::activations
  int threads = 0;                // LoadOptions::threads (and the threads that make the weights)
};

// A model of shape `config` with random weights: matrices ~ U(-a, a) with std 0.02 (HF's
// initializer_range), norm weights 1 + U, biases U at std 0.02 (norms and biases stay f32).
// Quantised weight types quantise those values block by block. Built in parallel, the same bytes
// for a seed whatever the thread count. Throws on an invalid config or dtype, or a matrix whose
// column count is not a whole number of blocks of a quantised dtype (e.g. q4_k on a shape whose
// hidden size is not a multiple of 256: gpt2-xl, smollm2-135m).
std::shared_ptr<const Model> random_model(const ModelConfig& config, const RandomModelOptions& options = {});

}  // namespace kvinfer
