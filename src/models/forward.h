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
