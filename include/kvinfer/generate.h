#pragma once
// Generation: prefill the prompt, then sample and decode one token at a time (or verify several
// drafted ones at once: speculative decoding) until an end id, a stop string, max_new_tokens, a
// full cache, or the callback says stop.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvinfer/dtype.h"
#include "kvinfer/kv_cache.h"
#include "kvinfer/model.h"
#include "kvinfer/sampler.h"
#include "kvinfer/session.h"
#include "kvinfer/export.h"

KVINFER_PUBLIC_BEGIN
namespace kvinfer {

class Tokenizer;

// ---- speculative decoding (docs/speculative.md) ----

// A second model that drafts tokens for speculative decoding: a cheaper model with the target's
// vocabulary (fewer layers, 8-bit activations, another quantisation), with its own Session and
// KvCache. It lives across generate calls: the positions its cache already holds for the history
// (the target's cache plus the prompt and the tokens generated) are reused, the rest cut off.
class DraftModel {
 public:
  // Checks that `draft` can draft for `target`: the same vocabulary size, and where both have a
  // tokenizer, the same bytes for every token id. Throws Error (InvalidArgument) naming the first
  // difference. capacity_tokens: positions of the draft's cache (it drafts nothing for a history
  // longer than that); at least 1, at most the draft's context length. kv_dtype as for KvCache.
  DraftModel(std::shared_ptr<const Model> draft, const Model& target, int64_t capacity_tokens,
             std::optional<DType> kv_dtype = std::nullopt, const SessionOptions& session = {});

  const Model& model() const { return *model_; }
  Session& session() { return session_; }
  KvCache& kv() { return kv_; }

 private:
  std::shared_ptr<const Model> model_;
  Session session_;
  KvCache kv_;
};

// Speculative decoding: a drafter proposes up to k tokens, the target runs them in one batched
// pass (Session::prefill with Logits::All) and keeps the longest prefix it would have chosen
// itself, cutting its cache back to it (KvCache::truncate). On the CPU greedy output is the same
// tokens and logits, bit for bit, as without it; sampled output has the target's distribution
// (docs/speculative.md). Needs use_kv_cache. Off by default (neither drafter set).
struct SpeculativeOptions {
  // Prompt lookup: propose the tokens that followed the most recent earlier occurrence of the
  // last n tokens of the history (the cache's tokens, the prompt and the tokens generated), n from
  // lookup_ngram down to 1. 0: off.
  int32_t lookup_ngram = 0;
  // A draft model proposes the tokens (not owned; used by one generation at a time). null: off.
  DraftModel* draft_model = nullptr;
  // k, the tokens drafted per verification pass: at most this, 1 to 256.
  int32_t max_draft_tokens = 8;
  // true: k adapts (starts at min(4, max), +2 after a pass that accepts every drafted token,
  // -1 after one that rejects one, within 1..max_draft_tokens; after a pass at k = 1 that
  // accepts nothing, no drafts for 1, 2, 4, .. 16 passes). false: k = max_draft_tokens.
  bool adaptive = true;

  bool enabled() const { return lookup_ngram > 0 || draft_model != nullptr; }
};

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
  // Speculative decoding (off by default): prompt lookup or a draft model.
  SpeculativeOptions speculative = {};
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
  // Speculative decoding (0 without it): tokens the drafter proposed, those the target accepted,
  // and the target's verification passes.
  int64_t drafted_tokens = 0;
  int64_t accepted_tokens = 0;
  int64_t verify_passes = 0;
  double acceptance_rate() const;  // accepted / drafted (0 when nothing was drafted)
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
