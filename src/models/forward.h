#pragma once
// The forward passes: the Llama family (Llama, Mistral, Qwen2, Qwen3), Gemma 2/3 and GPT-2, on the CPU or CUDA.
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

// One sequence's part of a forward call: its ids at positions start .. start+n-1 of its own cache,
// rows row .. row+n-1 of the call's activations.
struct BatchSegment {
  KvCache* kv;
  std::span<const int32_t> ids;
  int64_t start;  // kv->size() when the call began
  int64_t row;    // the first of its rows among the call's
  Logits which;   // the logits of its last row, or of all its rows
  int64_t n() const { return static_cast<int64_t>(ids.size()); }
};

// Activations of one forward call over n rows (of one or many sequences); reused across calls.
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
  // Mixture-of-experts layers (moe_block.cpp):
  Activations router;                  // (n, experts) router logits
  Activations routes;                  // (n, k) f32 weights, then (n, k) int32 expert ids in the same bytes
  Activations moe_x;                   // (n, hidden) the rows one expert takes, gathered (CPU)
  Activations moe_y;                   // (n·k, hidden) expert outputs
  Activations moe_out;                 // (n, hidden) the block's output
  Activations shared;                  // (n, hidden) Qwen2-MoE: the shared expert's output
  Activations shared_gate;             // (n) Qwen2-MoE: its gate logit
  Activations logits;                  // (rows, vocab) on the device
  std::vector<int32_t> ids;            // (n) the call's token ids, segment after segment
  std::vector<int64_t> segment_rows;   // (segments) the rows of each: exec.segments
  std::vector<SequenceRows> sequences;  // (segments) each one's cache, start and rows, for attention
  std::vector<int64_t> logit_rows;     // (segments) the rows of each the LM head sees
  std::vector<BatchSegment> batch;     // (segments) Session's last call
  std::vector<int32_t> positions;      // (n) GPT-2: the positions of the call's tokens
  std::vector<float> logits_host;      // (rows, vocab) CUDA: the host copy Session hands out
  std::vector<float> logits_chunks;    // (n, vocab) a chunked prefill's rows with Logits::All
};


// Runs every segment's ids through every layer in one pass: the products see all the call's rows
// at once (each weight read once), rope, the K/V store and attention run per segment over its
// own cache. Writes their K/V (the caller commits them) and returns the wanted logits, segment
// after segment, on the session's device. Every row's result is that of the same row alone: the
// row-wise ops never mix rows (the CPU backend's products are batch-invariant, cpu_ops.h).
// Host work beside the enqueued ops depends only on shapes: a CUDA decode step may be captured
// as a graph and replayed without calling these again.
std::span<const float> llama_forward(const ModelConfig& cfg, const ModelWeights& w, ForwardScratch& s,
                                     std::span<const BatchSegment> batch);
std::span<const float> gpt2_forward(const ModelConfig& cfg, const ModelWeights& w, ForwardScratch& s,
                                    std::span<const BatchSegment> batch);
// Gemma 2 and Gemma 3 (gemma.cpp).
std::span<const float> gemma_forward(const ModelConfig& cfg, const ModelWeights& w, ForwardScratch& s,
                                     std::span<const BatchSegment> batch);
// The feed-forward block of a mixture-of-experts layer over h (n, hidden), the normed residual
// stream, added into x (n, hidden): the router's top k experts of each row, weighted and summed,
// plus Qwen2-MoE's gated shared expert. Uses s.gate and s.up for up to n·max(k·expert_inter,
// shared_inter) values (llama_forward reserves them).
void moe_block(const ModelConfig& cfg, const LayerWeights& L, ForwardScratch& s, const float* h, int64_t n, float* x);

// The rows of a call over `batch` (the sum of its segments' lengths), after placing s.ids (the
// segments' ids one after another) and s.exec.segments. Checks that they are laid out row after row.
int64_t gather_ids(ForwardScratch& s, std::span<const BatchSegment> batch);

// The device memory a decode step's work uses beyond the weights: its graph's key
// (cuda_backend::decode_step).
std::vector<const void*> step_key(const ForwardScratch& s, const KvCache& kv);

// LoadOptions::check_finite: when s.exec.check_finite is set, throws kvinfer::Error if the
// residual stream x (rows, hidden) of the call holds a NaN or Inf, naming `where` ("layer 3
// (attention block)"), the position, the token and the value.
void check_residual(const ForwardScratch& s, const float* x, std::span<const BatchSegment> batch, int64_t hidden,
                    std::string_view where);

// The wanted logits of x (rows, hidden): each segment's last row, or all its rows; the final
// norm, then the LM head over all of them at once, on the session's device.
std::span<const float> final_logits(const ModelConfig& cfg, const ModelWeights& w, ForwardScratch& s, const float* x,
                                    std::span<const BatchSegment> batch);

}  // namespace kvinfer
