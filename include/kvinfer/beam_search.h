#pragma once
// Beam search with HF transformers' semantics (GenerationMixin._beam_search of transformers 5.24):
// the same hypotheses, tokens and sequences_scores as model.generate(num_beams=..., do_sample=False,
// ...). docs/beam-search.md describes the algorithm, its HF equivalence and its cache policy.
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "kvinfer/error.h"
#include "kvinfer/export.h"
#include "kvinfer/kv_cache.h"
#include "kvinfer/session.h"

KVINFER_PUBLIC_BEGIN
namespace kvinfer {

// HF's early_stopping: true, false or "never".
enum class EarlyStopping {
  Heuristic,  // false (HF's default): stop once the best running beam, scored at its current
              // length, cannot beat the worst of num_beams finished hypotheses
  Immediate,  // true: stop as soon as num_beams hypotheses have finished
  Never,      // "never": as false, but with a positive length_penalty the best running beam is
              // scored at max_new_tokens (its best case), so the search runs while it could win
};

struct BeamSearchOptions {
  int32_t num_beams = 4;             // at least 1
  int64_t max_new_tokens = 32;       // at least 1 (HF's max_new_tokens)
  float length_penalty = 1.0f;       // score = sum of log-probs / generated_length^length_penalty
  EarlyStopping early_stopping = EarlyStopping::Heuristic;
  int32_t no_repeat_ngram_size = 0;  // > 0: no n-gram (prompt included) occurs twice in a beam
  int32_t num_return_sequences = 1;  // 1 .. num_beams hypotheses returned, best first
  // Ids that end a hypothesis (it keeps the id). Empty: the model's (Model::eos_ids()).
  std::vector<int32_t> eos_ids = {};
  bool ignore_eos = false;  // no id ends a hypothesis: every one runs max_new_tokens
  // Asked before every step; true ends the search with Error (kind Cancelled).
  CancelCallback cancel = {};
};

struct BeamHypothesis {
  std::vector<int32_t> tokens;  // generated ids, without the prompt; an end id last if one ended it
  float score = 0;              // HF's sequences_scores: sum_logprobs / tokens.size()^length_penalty
  float sum_logprobs = 0;       // the tokens' log-probabilities summed (f32, as HF adds them)
};

struct BeamSearchStats {
  int64_t prompt_tokens = 0;
  int64_t steps = 0;             // batched forward passes after the prompt's (one per step)
  double prefill_seconds = 0;    // the prompt's forward pass
  double decode_seconds = 0;     // the steps' batched forward passes
  double select_seconds = 0;     // log-softmax, no-repeat n-grams, top-k and bookkeeping
  // Reordering the beams' caches: only a beam that continues another beam's sequence copies,
  // and only the rows after the prefix its cache already shares with that beam.
  int64_t cache_copies = 0;      // caches rewritten (the forks after the prompt included)
  int64_t copied_rows = 0;       // positions copied, summed over those caches
  uint64_t copied_bytes = 0;     // K/V bytes copied (scales included for 8-bit caches)
  double copy_seconds = 0;
  uint64_t kv_bytes = 0;         // all the beams' caches: the given one and the forks'
};

struct BeamSearchResult {
  std::vector<BeamHypothesis> sequences;  // num_return_sequences, best score first (HF's order)
  BeamSearchStats stats;
};

// Appends `prompt` to `kv` (at kv.size(), so a cached conversation may continue), then runs
// beam search. `kv` is the first beam's cache; the other num_beams - 1 beams get forks of it,
// made for this call, with room for max_new_tokens - 1 more positions. Every step runs all the
// beams in one Session::batch pass, the same bits as running each alone. kv.remaining() must
// hold the prompt plus max_new_tokens - 1 positions (the last token is never fed back);
// ContextFull otherwise, before any work. Afterwards `kv` holds its earlier positions and the
// prompt, also when the search throws (the prompt then too is gone).
//
// InvalidArgument, naming the option, before any work: num_beams < 1, max_new_tokens < 1,
// num_return_sequences outside [1, num_beams], no_repeat_ngram_size < 0, a non-finite
// length_penalty, an end id outside the vocabulary, an empty prompt, or a vocabulary smaller
// than the max(2, 1 + end ids) candidates a beam must supply each step.
BeamSearchResult beam_search(Session& session, KvCache& kv, std::span<const int32_t> prompt,
                             const BeamSearchOptions& options = {});

std::string_view early_stopping_name(EarlyStopping e);  // "false", "true", "never" (HF's spelling)

}  // namespace kvinfer
KVINFER_PUBLIC_END
