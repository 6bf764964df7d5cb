#pragma once
// Session: the scratch memory of one forward pass. One per thread; it runs a shared Model
// over the KvCache it is given.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kvinfer/kv_cache.h"
#include "kvinfer/model.h"
#include "kvinfer/sampler.h"
#include "kvinfer/export.h"

KVINFER_PUBLIC_BEGIN
namespace kvinfer {

enum class Logits { Last, All };

// One sequence's part of Session::batch(): its ids, appended to its own cache.
struct BatchItem {
  KvCache* kv = nullptr;
  std::span<const int32_t> ids;  // at least one
  Logits logits = Logits::Last;  // the logits of its last position, or of all its positions
};

struct SessionOptions {
  // CPU threads of this session's forward passes; 0: the model's (Model::threads()).
  int threads = 0;
  // prefill() runs longer inputs as chunks of this many positions, one after another (the same
  // bits as one pass: a row's result never depends on its batch), asking its cancel callback
  // between chunks. At least 1.
  int64_t prefill_chunk_tokens = 512;
};

class Session {
 public:
  explicit Session(std::shared_ptr<const Model> model, const SessionOptions& options = {});
  ~Session();
  Session(Session&&) noexcept;
  Session& operator=(Session&&) noexcept;

  // The returned logits live in the session's scratch memory: valid until its next call.
  //
  // Runs all of `ids` in one batched pass at positions kv.size() .. kv.size()+n-1, appends
  // their K/V and returns logits: (vocab) for the last position, or (n, vocab) with
  // Logits::All. A prompt longer than kv.remaining() throws and leaves the cache unchanged.
  // Inputs longer than SessionOptions::prefill_chunk_tokens run chunk by chunk; `cancel` is
  // asked before each chunk after the first, and true throws Error (kind Cancelled) with the
  // cache as it was.
  std::span<const float> prefill(KvCache& kv, std::span<const int32_t> ids, Logits which = Logits::Last,
                                 const CancelCallback& cancel = {});
  // One new position: computes Q/K/V for `id` only and attends over the cache. (vocab) logits.
  std::span<const float> decode(KvCache& kv, int32_t id);
  //
  // Either call throws, leaving the cache as it was, when its logits hold a NaN or Inf (they are
  // always scanned); with LoadOptions::check_finite the residual stream is checked after every
  // block too, and the error names the first layer and block where a NaN or Inf appeared.
  // "As it was" holds bit for bit on a sliding-window model too: a call that wrote further than
  // its cache's rings can rewind (more than min(window, 512) positions) has the cache's positions
  // computed again from their token ids (KvCache::tokens()) before it throws.

  // ---- many sequences in one pass (continuous batching: kvinfer/scheduler.h) ----
  //
  // Runs every item's ids in one forward pass, each at positions kv->size() .. of its own cache
  // (prefill chunks and decode tokens mixed): the products read each weight once for all the
  // items' tokens, attention reads each item's own cache. Returns the host logits, item after
  // item: one row (vocab) per item, or its n rows with Logits::All. Batch invariance: every
  // item's logits and K/V are bit-identical to what prefill/decode of that item alone give, in
  // any batch (docs/batching.md). The items are checked first (distinct caches, as prefill
  // checks one); any failure, a NaN or Inf in any item's logits included, leaves every cache as
  // it was. No chunking and no cancel: the caller sizes the batch (Scheduler does).
  std::span<const float> batch(std::span<const BatchItem> items);

  // ---- without copying the logits (what a decode loop wants on a GPU) ----
  //
  // step() runs `ids` exactly as prefill(kv, ids) does (one batched pass, the logits of the last
  // position only, the same checks, errors and undo), but leaves the logits where they were
  // computed: on CUDA only a device scan's result (12 bytes) comes back, not vocab floats.
  // Then sample() picks the next id and logits() copies them when they are wanted after all.
  // Runs in chunks and asks `cancel` as prefill() does.
  void step(KvCache& kv, std::span<const int32_t> ids, const CancelCallback& cancel = {});
  void step(KvCache& kv, int32_t id) { step(kv, std::span<const int32_t>(&id, 1)); }

  // The next id from the last row of the last call's logits (prefill, decode or step), chosen by
  // `sampler` wherever the logits are: the same id, draw and last_candidates() as
  // sampler.sample(logits last row) on the host, for any parameters (docs/sampling.md, "On the
  // device"). Does not accept the id into the sampler's history. On CUDA after step(): greedy
  // without bias or penalties costs nothing more; otherwise bias and penalties are applied and the
  // top-k set selected on the device, and only those k (id, logit) pairs come back (4 + 8k bytes)
  // for the sampler's remaining steps. The row is copied instead (and sampled on the host) when
  // the top-k set would exceed 1024 tokens (top_k 0 or above 1024, with a larger vocabulary), or
  // when bias or penalties make a logit NaN or +inf (the sampler's errors then). Throws if no
  // call has succeeded since the last one that threw, on a sampler for another vocabulary, or on
  // the sampler's errors.
  int32_t sample(Sampler& sampler);

  // The last call's logits on the host: (vocab), or (n, vocab) after prefill with Logits::All.
  // After step() on CUDA they are copied on the first request. Valid until the next call; throws
  // when there are none (as sample()).
  std::span<const float> logits();

  const Model& model() const { return *model_; }

 private:
  // prefill() and step(): forward() chunk by chunk, undoing every chunk when one fails.
  std::span<const float> chunked(KvCache& kv, std::span<const int32_t> ids, Logits which, bool copy,
                                 const CancelCallback& cancel);
  // copy: the logits come to the host (prefill, decode); otherwise only a device scan (step).
  std::span<const float> forward(KvCache& kv, std::span<const int32_t> ids, Logits which, bool copy);
  // The forward pass over items already checked, with their commit, logits checks and undo.
  std::span<const float> run(std::span<const BatchItem> items, bool copy);
  std::span<const float> run_checked(bool copy);  // run() less the undo, over scratch_->batch
  // Undo: kv back to its first n positions (n <= kv.size()), as they were: truncate(n) while the
  // sliding-window rings still hold them, else computed again from kv.tokens(), bit for bit (a
  // call that wrote more than a ring's rewind allows overwrote them); empty if that fails too.
  void restore(KvCache& kv, int64_t n);
  std::span<const float> copy_logits(std::span<const float> device);  // to scratch_->logits_host

  // What the last successful call produced; reset when a call starts.
  struct LastLogits {
    std::span<const float> device;  // (rows, vocab) on the model's device (the host on the CPU)
    std::span<const float> host;    // their host copy (the same span on the CPU); empty until made
    bool scanned = false;           // CUDA step(): argmax and max_value hold the scan of the row
    int32_t argmax = 0;
    float max_value = 0.0f;
  };

  std::shared_ptr<const Model> model_;
  SessionOptions options_;
  struct Scratch;  // a forward pass's buffers (src/models/forward.h)
  std::unique_ptr<Scratch> scratch_;
  LastLogits last_;
  bool restoring_ = false;  // restore() is computing positions again: its passes undo nothing
};

}  // namespace kvinfer
KVINFER_PUBLIC_END
