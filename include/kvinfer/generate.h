#pragma once
// Generation: prefill the prompt, then sample and decode one token at a time until an end id,
// a stop string, max_new_tokens, a full cache, or the callback says stop.
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvinfer/kv_cache.h"
#include "kvinfer/sampler.h"
#include "kvinfer/session.h"
#include "kvinfer/export.h"

KVINFER_PUBLIC_BEGIN
namespace kvinfer {

class Tokenizer;

struct GenerateOptions {
  int64_t max_new_tokens = 256;
  // false: the cache-off baseline (HF's use_cache=False). Every step clears `kv` and prefills
  // the whole sequence (prompt + tokens so far) again, so nothing computed earlier is reused.
  // Earlier contents of `kv` are discarded. It produces the same tokens and logits, bit for bit.
  bool use_kv_cache = true;
  // Ids that end generation (kept in `tokens`, never printed). Empty: the model's eos ids
  // (config.json's and the tokenizer's, Model::eos_ids()).
  std::vector<int32_t> stop_ids = {};
  bool ignore_eos = false;
  SamplingParams sampling = {};  // greedy (SamplingParams' defaults)
  // Text that ends generation (text generation only). The text is cut before the first
  // occurrence; no part of a stop string is ever passed to the callback.
  std::vector<std::string> stop_strings = {};
  // Asked between prefill chunks and before every decode step; true ends generation with
  // StopReason::Cancelled (a prefill cut short leaves the cache as it was before the call).
  CancelCallback cancel = {};
};

enum class StopReason { Eos, StopString, MaxTokens, ContextFull, Callback, Cancelled };

struct GenerationStats {
  int64_t prompt_tokens = 0;     // prefilled by this call
  int64_t generated_tokens = 0;  // sampled by this call, the final end id included
  double prefill_seconds = 0;    // the prompt's forward pass
  double ttft_seconds = 0;       // time to first token: prefill + the first sample
  double decode_seconds = 0;     // every step after the first token
  uint64_t kv_bytes = 0;         // the cache's memory (its full capacity)
  int64_t kv_tokens = 0;         // positions in use after the call
  double prefill_tokens_per_second() const;
  double decode_tokens_per_second() const;  // (generated - 1) / decode_seconds
};

struct GenerateResult {
  std::vector<int32_t> tokens;  // generated ids, without the prompt
  std::string text;             // their text (text generation), cut at a stop string
  StopReason stop = StopReason::MaxTokens;
  GenerationStats stats;
};

// Called with each generated id and the logits it was chosen from; return false to stop.
// Generation copies the logits to the host only for such a callback: without one (and in text
// generation) on CUDA they stay on the device and only the sampling's few bytes come back
// (Session::step, Session::sample). The tokens are the same either way.
using TokenCallback = std::function<bool(int32_t id, std::span<const float> logits)>;
// Called with each generated id and the text that became printable with it (often "" while a
// UTF-8 character or a possible stop string is incomplete); return false to stop.
using TextCallback = std::function<bool(int32_t id, std::string_view piece)>;

// Index of the largest value; the lowest index wins ties (as torch.argmax).
int32_t argmax(std::span<const float> logits);

// What the cache holds afterwards, in every mode and for every stop reason: the prompt and every
// generated token but the last (whose K/V no step has computed yet), unless the call was
// cancelled during the prompt (then as before the call). To continue, pass the last token (or
// it and the next user turn) as the next call's prompt.
//
// Token-level generation with any sampler. The prompt is appended at kv.size() (so a caller
// may continue a cached conversation), and every prompt id is accepted into the sampler's
// penalty history first. Stop strings are ignored (there is no text).
GenerateResult generate_tokens(Session& session, KvCache& kv, std::span<const int32_t> prompt,
                               const GenerateOptions& options = {}, const TokenCallback& on_token = {});

// Greedy token-level generation (options.sampling is ignored).
GenerateResult generate_greedy(Session& session, KvCache& kv, std::span<const int32_t> prompt,
                               const GenerateOptions& options = {}, const TokenCallback& on_token = {});

// Text generation: streams each token's text through `on_text` (UTF-8 whole, stop strings held
// back) and returns the text. End ids and other special tokens are not part of the text.
GenerateResult generate(Session& session, KvCache& kv, const Tokenizer& tokenizer,
                        std::span<const int32_t> prompt, const GenerateOptions& options = {},
                        const TextCallback& on_text = {});

std::string_view stop_reason_name(StopReason r);

}  // namespace kvinfer
KVINFER_PUBLIC_END
