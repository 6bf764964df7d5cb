#pragma once
// The attention factors HF transformers 5.24 derives for YaRN and LongRoPE when a config does not
// state one (modeling_rope_utils.py), in double as Python computes them; both parsers
// (config_json.cpp, gguf_config.cpp) use them. The forward pass multiplies cos and sin by the
// result rounded to f32 (RopeScaling::attention_factor).
#include <cmath>
#include <cstdint>

namespace kvinfer {

// YaRN's get_mscale: 0.1 · mscale · ln(scale) + 1, or 1 for scale <= 1.
inline double yarn_get_mscale(double scale, double mscale = 1.0) {
  return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

// _compute_yarn_parameters: mscale and mscale_all_dim (0: absent) as a ratio when both are set.
inline double yarn_attention_factor(double factor, double mscale, double mscale_all_dim) {
  if (mscale != 0.0 && mscale_all_dim != 0.0) return yarn_get_mscale(factor, mscale) / yarn_get_mscale(factor, mscale_all_dim);
  return yarn_get_mscale(factor);
}

// _compute_longrope_parameters: sqrt(1 + ln(factor) / ln(original_max)), or 1 for factor <= 1.
inline double longrope_attention_factor(double factor, int64_t original_max_position_embeddings) {
  if (factor <= 1.0) return 1.0;
  return std::sqrt(1.0 + std::log(factor) / std::log(static_cast<double>(original_max_position_embeddings)));
}

}  // namespace kvinfer
