#pragma once
// Greedy generation: prefill the prompt, then decode one token at a time until an EOS id,
// max_new_tokens, or a full cache.
#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "kvinfer/kv_cache.h"
#include "kvinfer/session.h"

namespace kvinfer {

struct GenerateOptions {
  int64_t max_new_tokens = 256;
  // false: the cache-off baseline (HF's use_cache=False). Every step clears `kv` and prefills
  // the whole sequence (prompt + tokens so far) again, so nothing computed earlier is reused.
  // Earlier contents of `kv` are discarded. It produces the same tokens and logits, bit for bit.
  bool use_kv_cache = true;
  // Ids that end generation (included in the output). Empty: the model's eos ids.
  std::vector<int32_t> stop_ids;
  bool ignore_eos = false;
};

enum class StopReason { Eos, MaxTokens, ContextFull, Callback };

struct GenerateResult {
  std::vector<int32_t> tokens;  // generated ids, without the prompt
  StopReason stop = StopReason::MaxTokens;
  int64_t prompt_tokens = 0;
  double prefill_seconds = 0;  // time to first token
  double decode_seconds = 0;   // all steps after the first token
};

// Called with each generated id and the logits it was chosen from; return false to stop.
using TokenCallback = std::function<bool(int32_t id, std::span<const float> logits)>;

// Index of the largest value; the lowest index wins ties (as torch.argmax).
int32_t argmax(std::span<const float> logits);

GenerateResult generate_greedy(Session& session, KvCache& kv, std::span<const int32_t> prompt,
                               const GenerateOptions& options = {}, const TokenCallback& on_token = {});

std::string_view stop_reason_name(StopReason r);

}  // namespace kvinfer
