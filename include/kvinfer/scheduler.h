#pragma once
// Scheduler: continuous batching over one model. Requests wait in a queue, join the running set
// as others finish, and every step() runs one batched forward pass (Session::batch) over a token
// of every decoding sequence and chunks of the prompts still prefilling. Each sequence keeps its
// own contiguous KvCache, and its tokens and logits are bit-identical to generating it alone
// (generate_tokens / generate with the same options): the batch never changes a result.
//
// Policy (docs/batching.md):
//  - Admission is first come, first served: the oldest queued request is admitted when a
//    sequence slot is free and its whole cache (prompt + max_new_tokens positions, at most the
//    context length) fits in the KV budget; nothing overtakes it. A running sequence never runs
//    out of memory: its cache is reserved whole when it is admitted.
//  - A step runs one token of every decoding sequence first, so decoding never stalls behind a
//    long prompt; what is left of step_tokens goes to prefill chunks, the oldest prompt first.
//  - Shared prefixes: with prefix_cache_bytes, finished prompts' K/V are kept (least recently
//    used evicted first); a new prompt that starts with a kept one copies those rows instead of
//    computing them (the same bits).
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "kvinfer/dtype.h"
#include "kvinfer/error.h"
#include "kvinfer/export.h"
#include "kvinfer/generate.h"
#include "kvinfer/model.h"

KVINFER_PUBLIC_BEGIN
namespace kvinfer {

struct SchedulerOptions {
  // Tokens one step runs, decode tokens and prefill chunks together: the size of its products.
  // At least max_sequences (every running sequence decodes in every step).
  int64_t step_tokens = 256;
  int64_t max_sequences = 32;  // sequences running at once (prefilling or decoding)
  int64_t max_queued = 256;    // requests waiting for a slot; submit() refuses more with ErrorKind::Busy
  // Bytes of KV cache for the running sequences and the prefix cache together; 0: 90 % of what
  // is left when the scheduler is made, the smaller of the model's memory figure less its
  // weights and caches and the memory its device has available then (unlimited when unknown).
  uint64_t kv_budget_bytes = 0;
  std::optional<DType> kv_dtype = {};  // default: KvCache's default for the model
  uint64_t prefix_cache_bytes = 0;  // K/V of shared prompt prefixes kept for reuse; 0: none
  int64_t prefix_min_tokens = 16;   // shorter prompts are not kept
  int threads = 0;                  // the session's CPU threads (SessionOptions::threads)
};

struct SchedulerRequest {
  std::vector<int32_t> prompt;  // at least one id
  // max_new_tokens, stop_ids, ignore_eos, sampling; stop_strings with text; cancel is asked
  // before every step. use_kv_cache must be true and speculative off.
  GenerateOptions options;
  bool text = false;  // stream text (the model's tokenizer): pieces as generate() gives them
};

using RequestId = uint64_t;

struct SequenceResult {
  RequestId id = 0;
  // What generate_tokens (or generate, with text) returns for the same request alone; its
  // stats.ttft_seconds and prefill_seconds count from submit().
  GenerateResult result;
  int64_t prefix_tokens = 0;   // prompt positions copied from the prefix cache
  double queue_seconds = 0;    // submit() to admission
  std::optional<Error> error;  // why it failed (result then holds what came before)
};

// Run on the thread in step(): each generated id with its text piece ("" for token requests, and
// while a character or a possible stop string is incomplete); false stops (StopReason::Callback).
using SequenceTokenCallback = std::function<bool(int32_t id, std::string_view piece)>;
using SequenceDoneCallback = std::function<void(const SequenceResult&)>;

struct SchedulerStats {
  int64_t queued = 0, prefilling = 0, decoding = 0;  // now
  int64_t steps = 0;
  int64_t last_step_tokens = 0, last_step_sequences = 0;
  int64_t prompt_tokens = 0;     // computed by forward passes (prefix hits excluded)
  int64_t generated_tokens = 0;  // sampled
  int64_t completed = 0, cancelled = 0, failed = 0, refused = 0;
  uint64_t kv_bytes_in_use = 0;  // running sequences' caches + the prefix cache
  uint64_t kv_budget_bytes = 0;  // UINT64_MAX when unlimited
  int64_t prefix_lookups = 0, prefix_hits = 0, prefix_tokens_reused = 0;
  uint64_t prefix_cache_bytes = 0;
  int64_t prefix_entries = 0;
  double busy_seconds = 0;  // spent in steps' forward passes
};

class Scheduler {
 public:
  explicit Scheduler(std::shared_ptr<const Model> model, const SchedulerOptions& options = {});
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Thread-safe. Queues the request and returns its id; the callbacks run later, in step().
  // Throws at once for a request that can never run (ErrorKind InvalidArgument; ContextFull for
  // a prompt beyond the context length; OutOfMemory for a cache beyond the whole KV budget) and
  // with ErrorKind::Busy when max_queued requests are waiting.
  RequestId submit(SchedulerRequest request, SequenceTokenCallback on_token = {}, SequenceDoneCallback on_done = {});
  // Thread-safe: the request ends with StopReason::Cancelled at the next step (queued or
  // running). False when no such request is waiting or running.
  bool cancel(RequestId id);

  // Runs one step: admits what fits, runs one batched forward pass, samples, streams and
  // finishes sequences. False when there was nothing to do. One thread at a time.
  bool step();
  // Steps until no request is queued or running.
  void run_until_idle();
  // Thread-safe: blocks until a request is queued or running, or `timeout` passes, or wake().
  bool wait_for_work(std::chrono::milliseconds timeout);
  void wake();  // thread-safe: ends a wait_for_work

  SchedulerStats stats() const;  // thread-safe
  const SchedulerOptions& options() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace kvinfer
KVINFER_PUBLIC_END
