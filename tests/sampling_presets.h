#pragma once
// llama.cpp's sampling defaults (kvinfer's are greedy): what the sampler tests sample with.
#include "kvinfer/sampler.h"

namespace kvinfer::test {

inline SamplingParams llama_cpp_sampling() {
  SamplingParams p;
  p.temperature = 0.8f;
  p.top_k = 40;
  p.top_p = 0.95f;
  p.min_p = 0.05f;
  return p;
}

}  // namespace kvinfer::test
