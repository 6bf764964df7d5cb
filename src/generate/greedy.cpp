#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "kvinfer/error.h"
#include "kvinfer/generate.h"

namespace kvinfer {

int32_t argmax(std::span<const float> logits) {
  if (logits.empty()) throw Error("argmax of empty logits");
  // std::max_element keeps the first of equal maxima, as torch.argmax.
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

std::string_view stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::Eos: return "eos";
    case StopReason::MaxTokens: return "max_tokens";
    case StopReason::ContextFull: return "context_full";
    case StopReason::Callback: return "callback";
  }
  return "?";
}

GenerateResult generate_greedy(Session& session, KvCache& kv, std::span<const int32_t> prompt,
                               const GenerateOptions& options, const TokenCallback& on_token) {
  using Clock = std::chrono::steady_clock;
  if (options.max_new_tokens < 0)
    throw Error(fmt::format("max_new_tokens must be >= 0, got {}", options.max_new_tokens));
  if (prompt.empty()) throw Error("generation needs a prompt of at least one token");
  std::vector<int32_t> stop_ids = options.stop_ids;
  if (stop_ids.empty() && !options.ignore_eos) stop_ids = session.model().config().eos_token_ids;

  GenerateResult r;
  r.prompt_tokens = static_cast<int64_t>(prompt.size());
  if (options.max_new_tokens == 0) return r;

  // Cache-off: the whole sequence so far, recomputed from an empty cache every step.
  std::vector<int32_t> sequence;
  if (!options.use_kv_cache) {
    sequence.assign(prompt.begin(), prompt.end());
    kv.clear();
  }

  const auto t0 = Clock::now();
  std::span<const float> logits = session.prefill(kv, prompt);
  const auto t1 = Clock::now();
  r.prefill_seconds = std::chrono::duration<double>(t1 - t0).count();

  for (;;) {
    const int32_t id = argmax(logits);
    r.tokens.push_back(id);
    if (on_token && !on_token(id, logits)) {
      r.stop = StopReason::Callback;
      break;
    }
    if (std::find(stop_ids.begin(), stop_ids.end(), id) != stop_ids.end()) {
      r.stop = StopReason::Eos;
      break;
    }
    if (static_cast<int64_t>(r.tokens.size()) >= options.max_new_tokens) {
      r.stop = StopReason::MaxTokens;
      break;
    }
    if (kv.remaining() == 0) {  // in both modes: the next position has no room
      r.stop = StopReason::ContextFull;
      break;
    }
    if (options.use_kv_cache) {
      logits = session.decode(kv, id);
    } else {
      sequence.push_back(id);
      kv.clear();
      logits = session.prefill(kv, sequence);
    }
  }
  r.decode_seconds = std::chrono::duration<double>(Clock::now() - t1).count();
  return r;
}

}  // namespace kvinfer
