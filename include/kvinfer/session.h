#pragma once
// Session: the scratch memory of one forward pass. One per thread; it runs a shared Model
// over the KvCache it is given.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kvinfer/kv_cache.h"
#include "kvinfer/model.h"

namespace kvinfer {

struct ForwardScratch;  // src/models/scratch.h

enum class Logits { Last, All };

class Session {
 public:
  explicit Session(std::shared_ptr<const Model> model);
  ~Session();
  Session(Session&&) noexcept;
  Session& operator=(Session&&) noexcept;

  // The returned logits live in the session's scratch memory: valid until its next call.
  //
  // Runs all of `ids` in one batched pass at positions kv.size() .. kv.size()+n-1, appends
  // their K/V and returns logits: (vocab) for the last position, or (n, vocab) with
  // Logits::All. A prompt longer than kv.remaining() throws and leaves the cache unchanged.
  std::span<const float> prefill(KvCache& kv, std::span<const int32_t> ids, Logits which = Logits::Last);
  // One new position: computes Q/K/V for `id` only and attends over the cache. (vocab) logits.
  std::span<const float> decode(KvCache& kv, int32_t id);
  //
  // Either call throws, leaving the cache as it was, when its logits hold a NaN or Inf (they are
  // always scanned); with LoadOptions::check_finite the residual stream is checked after every
  // block too, and the error names the first layer and block where a NaN or Inf appeared.

  const Model& model() const { return *model_; }

 private:
  std::span<const float> forward(KvCache& kv, std::span<const int32_t> ids, Logits which);
  void check_logits(KvCache& kv, int64_t start, std::span<const int32_t> ids, std::span<const float> logits) const;

  std::shared_ptr<const Model> model_;
  std::unique_ptr<ForwardScratch> scratch_;
};

}  // namespace kvinfer
