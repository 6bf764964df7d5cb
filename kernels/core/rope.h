#pragma once
// Rotary position embedding: the scalar math shared by the CPU backend and the CUDA kernels.
//
// Frequencies follow HF transformers: inv_freq[i] = 1 / theta^(2i / d), computed in f32, then
// adjusted by the rope scaling (linear: / factor; llama3: per-band, see llama3_inv_freq);
// angle = f32(position) × inv_freq[i] (one f32 product, as HF's f32 matmul of two vectors).
#include <cmath>

#include "host_device.h"

namespace kvinfer::core {

KVI_HD float rope_default_inv_freq(int i, int head_dim, float theta) {
  float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
  return 1.0f / powf(theta, exponent);
}

// Llama 3.1 "llama3" scaling: long wavelengths are divided by `factor`, short ones kept, and
// the band in between interpolated smoothly.
KVI_HD float llama3_inv_freq(float inv_freq, float factor, float low_freq_factor, float high_freq_factor,
                             float original_max_positions) {
  const float kPi = 3.14159265358979323846f;
  float low_freq_wavelen = original_max_positions / low_freq_factor;
  float high_freq_wavelen = original_max_positions / high_freq_factor;
  float wavelen = 2.0f * kPi / inv_freq;
  if (wavelen > low_freq_wavelen) return inv_freq / factor;
  if (wavelen < high_freq_wavelen) return inv_freq;
  float smooth = (original_max_positions / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
  return (1.0f - smooth) * inv_freq / factor + smooth * inv_freq;
}

// base^(2i / d) in f32, HF's `base ** (arange(0, d, 2) / d)`: the default inverse frequency is its
// reciprocal; YaRN and LongRoPE scale it before taking the reciprocal.
KVI_HD float rope_pos_freq(int i, int dim, float theta) {
  return powf(theta, static_cast<float>(2 * i) / static_cast<float>(dim));
}

// YaRN (Peng et al. 2023) as HF's _compute_yarn_parameters, each step an f32 tensor op there:
// frequency i blends the interpolated 1 / (factor · pos_freq) and the original 1 / pos_freq by
// ramp = clamp((i - low) / range, 0, 1) (0 below the correction range: original, 1 above it).
KVI_HD float yarn_ramp(int i, float low, float range) {
  const float r = (static_cast<float>(i) - low) / range;
  return r < 0.0f ? 0.0f : (r > 1.0f ? 1.0f : r);
}
KVI_HD float yarn_inv_freq(float pos_freq, float factor, float ramp) {
  const float extrapolation = 1.0f / pos_freq;
  const float interpolation = 1.0f / (factor * pos_freq);
  const float extrapolation_factor = 1.0f - ramp;
  return interpolation * (1.0f - extrapolation_factor) + extrapolation * extrapolation_factor;
}

// Rotates the pair (x0, x1) by the angle whose cosine and sine are given:
// HF's q*cos + rotate_half(q)*sin for the half-split layout, where x0 = q[i], x1 = q[i + d/2].
KVI_HD void rope_rotate(float& x0, float& x1, float cos_a, float sin_a) {
  float r0 = x0 * cos_a - x1 * sin_a;
  float r1 = x1 * cos_a + x0 * sin_a;
  x0 = r0;
  x1 = r1;
}

}  // namespace kvinfer::core
