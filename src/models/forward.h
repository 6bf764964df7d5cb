#pragma once
// The forward passes: the Llama family (Llama, Mistral, Qwen2) and GPT-2, on the CPU or CUDA.
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "cuda/device_memory.h"
#include "kvinfer/config.h"
#include "kvinfer/kv_cache.h"
#include "kvinfer/session.h"
#include "models/weights.h"
#include "ops/ops.h"

namespace kvinfer {

// An f32 activation buffer on the session's device, grown on demand, contents not preserved.
class Activations {
 public:
  float* reserve(Device device, int64_t n);
  const void* device_data() const { return device_.get(); }  // null until reserved on CUDA

 private:
  std::vector<float> host_;
  DeviceBuffer device_;
};

// Activations of one forward call over n positions; reused across calls.
struct ForwardScratch {
  ops::Exec exec;
  std::shared_ptr<void> cuda_context;  // owns exec.cuda
  Activations x;                       // (n, hidden) residual stream
  Activations h;                       // (n, hidden) normed input of a sub-layer / its output
  Activations q;                       // (n, heads, head_dim)
  Activations k;                       // (n, kv_heads, head_dim)
  Activations v;                       // (n, kv_heads, head_dim)
  Activations att;                     // (n, heads, head_dim)
  Activations gate;                    // (n, intermediate)
  Activations up;                      // (n, intermediate)
  Activations logits;                  // (rows, vocab) on the device
  std::vector<int32_t> positions;      // (n) GPT-2: the positions of the call's tokens
  std::vector<float> logits_host;      // (rows, vocab) CUDA: the host copy Session hands out
  std::vector<float> logits_chunks;    // (n, vocab) a chunked prefill's rows with Logits::All
};

// Runs ids at positions kv.size().. through every layer, writes their K/V into kv (the caller
// commits them) and returns the logits of the last position or of all positions, on the
// session's device. Host work beside the enqueued ops depends only on shapes: a CUDA decode step
// may be captured as a graph and replayed without calling these again.
std::span<const float> llama_forward(const ModelConfig& cfg, const ModelWeights& w, ForwardScratch& s, KvCache& kv,
                                     std::span<const int32_t> ids, Logits which);
std::span<const float> gpt2_forward(const ModelConfig& cfg, const ModelWeights& w, ForwardScratch& s, KvCache& kv,
                                    std::span<const int32_t> ids, Logits which);

// LoadOptions::check_finite: when s.exec.check_finite is set, throws kvinfer::Error if the
// residual stream x (n, hidden) of the call's tokens `ids` at positions start.. holds a NaN or
// Inf, naming `where` ("layer 3 (attention block)"), the position, the token and the value.
// The device memory a decode step's work uses beyond the weights: its graph's key
// (cuda_backend::decode_step).
std::vector<const void*> step_key(const ForwardScratch& s, const KvCache& kv);

void check_residual(const ForwardScratch& s, const float* x, std::span<const int32_t> ids, int64_t hidden,
                    int64_t start, std::string_view where);

// The logits of the last row of x (n, hidden), or of every row: the final norm, then the LM
// head, on the session's device.
std::span<const float> final_logits(const ModelConfig& cfg, const ModelWeights& w, ForwardScratch& s, const float* x,
                                    int64_t n, Logits which);

}  // namespace kvinfer
