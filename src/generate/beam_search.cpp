// Beam search as transformers 5.24's GenerationMixin._beam_search does it, step for step: the
// same candidates (top max(2, 1 + #eos) × num_beams accumulated log-probs), the same running
// and finished sets, the same f32 arithmetic (its -1e9 masks included) and the same stopping
// rules, so that tokens and sequences_scores match HF's. docs/beam-search.md walks through it.
#include "kvinfer/beam_search.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "core/memory.h"
#include "generate/beam_caches.h"
#include "generate/no_repeat_ngram.h"
#include "kvinfer/kv_plan.h"
#include "kvinfer/model.h"
#include "models/model_internal.h"

namespace kvinfer {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// HF's mask: a score pushed below every real one, in f32 as HF adds it.
constexpr float kMasked = -1.0e9f;

struct Hypothesis {
  std::vector<int32_t> tokens;  // generated so far
  float score = 0;              // running: accumulated log-prob; finished: HF's beam_scores entry
  float sum_logprobs = 0;       // finished: the accumulated log-prob before the length penalty
  bool finished = false;        // finished set only: a real hypothesis, not a masked filler
};

struct Candidate {
  float score;     // parent's accumulated log-prob + this token's log-prob
  int32_t parent;  // running beam
  int32_t token;
};

void validate(const BeamSearchOptions& o, const Model& model, std::span<const int32_t> prompt,
              std::span<const int32_t> eos) {
  const auto bad = [](const std::string& m) { throw Error(ErrorKind::InvalidArgument, "beam search: " + m); };
  if (o.num_beams < 1) bad(fmt::format("num_beams must be at least 1, got {}", o.num_beams));
  if (o.max_new_tokens < 1) bad(fmt::format("max_new_tokens must be at least 1, got {}", o.max_new_tokens));
  if (o.num_return_sequences < 1 || o.num_return_sequences > o.num_beams)
    bad(fmt::format("num_return_sequences must be between 1 and num_beams ({}), got {}", o.num_beams,
                    o.num_return_sequences));
  if (o.no_repeat_ngram_size < 0)
    bad(fmt::format("no_repeat_ngram_size must be 0 (off) or positive, got {}", o.no_repeat_ngram_size));
  if (!std::isfinite(o.length_penalty)) bad(fmt::format("length_penalty must be finite, got {}", o.length_penalty));
  if (prompt.empty()) bad("the prompt is empty; it needs at least one token");
  const int64_t vocab = model.config().vocab_size;
  for (int32_t id : eos)
    if (id < 0 || id >= vocab) bad(fmt::format("eos id {} is outside the vocabulary (size {})", id, vocab));
  const int64_t keep = static_cast<int64_t>(std::max<size_t>(2, 1 + eos.size())) * o.num_beams;
  if (keep > vocab * o.num_beams)
    bad(fmt::format("num_beams {} with {} eos ids keeps {} candidates a step, more than the {} there are", o.num_beams,
                    eos.size(), keep, vocab * o.num_beams));
}

// HF divides an f32 tensor by a Python float (len ** length_penalty, computed in double).
float penalized(float score, int64_t length, float length_penalty) {
  return score / static_cast<float>(std::pow(static_cast<double>(length), static_cast<double>(length_penalty)));
}

// log_softmax of one row (HF: in f32 on the logits), then the no-repeat n-gram ban (-inf).
void log_probs(std::span<const float> logits, std::span<float> out) {
  const float max = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float l : logits) sum += static_cast<double>(std::exp(l - max));  // f32 terms, as HF's f32 kernel
  const double log_sum = std::log(sum);
  for (size_t v = 0; v < logits.size(); ++v)
    out[v] = static_cast<float>(static_cast<double>(logits[v]) - static_cast<double>(max) - log_sum);
}

// Indices of the k best of `count` scores, best first; ties keep the lower index first. One
// pass that inserts only a score among the k best so far: a step scans num_beams × vocab scores.
template <typename Score>
std::vector<int32_t> top_k(size_t count, size_t k, Score score) {
  const auto better = [&](int32_t a, int32_t b) {
    const float sa = score(a), sb = score(b);
    return sa > sb || (sa == sb && a < b);
  };
  std::vector<int32_t> best;
  best.reserve(k + 1);
  for (size_t n = 0; n < count; ++n) {
    const auto i = static_cast<int32_t>(n);
    if (best.size() == k && !better(i, best.back())) continue;
    best.insert(std::upper_bound(best.begin(), best.end(), i, better), i);
    if (best.size() > k) best.pop_back();
  }
  return best;
}

class Search {
 public:
  Search(const BeamSearchOptions& o, std::vector<int32_t> eos, std::vector<int32_t> context, int64_t vocab)
      : o_(o), eos_(std::move(eos)), context_(std::move(context)), vocab_(vocab),
        keep_(static_cast<int32_t>(std::max<size_t>(2, 1 + eos_.size())) * o.num_beams),
        running_(static_cast<size_t>(o.num_beams)), finished_(static_cast<size_t>(o.num_beams)),
        lp_(static_cast<size_t>(o.num_beams * vocab)) {
    // Only the first beam is live at the start: HF scores the others -1e9.
    for (size_t b = 1; b < running_.size(); ++b) running_[b].score = kMasked;
    for (Hypothesis& h : finished_) h.score = kMasked;
  }

  // One step over every running beam's logits (num_beams rows). Returns false when the search
  // is over; otherwise parents() and last_token() describe the new running beams.
  bool step(std::span<const float> logits, int64_t step_index) {
    accumulate(logits);
    const auto score = [&](int32_t i) { return lp_[static_cast<size_t>(i)]; };
    const std::vector<int32_t> top = top_k(lp_.size(), static_cast<size_t>(keep_), score);
    std::vector<Candidate> cands;
    std::vector<bool> hits;  // the candidate meets a stopping criterion: an eos id, or max_new_tokens
    for (int32_t i : top) {
      const Candidate c{score(i), static_cast<int32_t>(i / vocab_), static_cast<int32_t>(i % vocab_)};
      cands.push_back(c);
      hits.push_back(step_index + 1 >= o_.max_new_tokens ||
                     std::find(eos_.begin(), eos_.end(), c.token) != eos_.end());
    }
    const int64_t length = step_index + 1;  // generated tokens, the new one included
    next_running(cands, hits);
    update_finished(cands, hits, length);
    // HF's stopping rules, with the length the running beams now have.
    improvable_ = improvable_ && improvement_possible(length);
    const bool open = !(all_done() && o_.early_stopping == EarlyStopping::Immediate);
    const bool can_continue = !std::all_of(hits.begin(), hits.end(), [](bool h) { return h; });
    return improvable_ && open && can_continue;
  }

  std::span<const int32_t> parents() const { return parents_; }
  int32_t last_token(int32_t beam) const { return running_[static_cast<size_t>(beam)].tokens.back(); }
  const std::vector<Hypothesis>& finished() const { return finished_; }

 private:
  // lp_[b * vocab + v]: beam b's accumulated log-prob with token v next (HF's log_probs +
  // running_beam_scores, f32), banned n-gram completions at -inf.
  void accumulate(std::span<const float> logits) {
    const auto V = static_cast<size_t>(vocab_);
    std::vector<int32_t> banned;
    std::vector<int32_t> sequence;
    for (size_t b = 0; b < running_.size(); ++b) {
      const std::span<float> row(lp_.data() + b * V, V);
      log_probs(logits.subspan(b * V, V), row);
      if (o_.no_repeat_ngram_size > 0) {
        sequence = context_;
        sequence.insert(sequence.end(), running_[b].tokens.begin(), running_[b].tokens.end());
        banned.clear();
        banned_ngram_tokens(sequence, o_.no_repeat_ngram_size, banned);
        for (int32_t id : banned) row[static_cast<size_t>(id)] = -std::numeric_limits<float>::infinity();
      }
      for (float& l : row) l = l + running_[b].score;
    }
  }

  // HF's _get_running_beams_for_next_iteration: the best num_beams candidates once those that hit
  // a stopping criterion are pushed down by 1e9.
  void next_running(const std::vector<Candidate>& cands, const std::vector<bool>& hits) {
    std::vector<float> masked(cands.size());
    for (size_t c = 0; c < cands.size(); ++c) masked[c] = cands[c].score + (hits[c] ? kMasked : 0.0f);
    const auto pick = top_k(cands.size(), running_.size(), [&](int32_t c) { return masked[static_cast<size_t>(c)]; });
    std::vector<Hypothesis> next(running_.size());
    parents_.assign(running_.size(), 0);
    for (size_t j = 0; j < pick.size(); ++j) {
      const Candidate& c = cands[static_cast<size_t>(pick[j])];
      next[j].tokens = running_[static_cast<size_t>(c.parent)].tokens;
      next[j].tokens.push_back(c.token);
      next[j].score = masked[static_cast<size_t>(pick[j])];
      parents_[j] = c.parent;
    }
    previous_ = std::move(running_);
    running_ = std::move(next);
  }

  // HF's _update_finished_beams: the finished set and the candidates (length-penalised; masked
  // unless among the first num_beams and hitting a criterion) merged, the best num_beams kept.
  void update_finished(const std::vector<Candidate>& cands, const std::vector<bool>& hits, int64_t length) {
    const size_t B = finished_.size();
    const bool full = o_.early_stopping == EarlyStopping::Immediate && all_done();
    std::vector<Hypothesis> merged = finished_;
    for (size_t c = 0; c < cands.size(); ++c) {
      const bool done = hits[c] && c < B;
      float s = penalized(cands[c].score, length, o_.length_penalty);
      s = s + (full ? kMasked : 0.0f);
      s = s + (improvable_ ? 0.0f : kMasked);
      s = s + (done ? 0.0f : kMasked);
      Hypothesis h;
      h.tokens = previous_[static_cast<size_t>(cands[c].parent)].tokens;
      h.tokens.push_back(cands[c].token);
      h.score = s;
      h.sum_logprobs = cands[c].score;
      h.finished = done;
      merged.push_back(std::move(h));
    }
    const auto pick = top_k(merged.size(), B, [&](int32_t i) { return merged[static_cast<size_t>(i)].score; });
    for (size_t j = 0; j < B; ++j) finished_[j] = merged[static_cast<size_t>(pick[j])];
  }

  bool all_done() const {
    return std::all_of(finished_.begin(), finished_.end(), [](const Hypothesis& h) { return h.finished; });
  }

  // HF's _check_early_stop_heuristic: can the best running beam still beat a finished one?
  bool improvement_possible(int64_t length) const {
    const int64_t best_length =
        o_.early_stopping == EarlyStopping::Never && o_.length_penalty > 0.0f ? o_.max_new_tokens : length;
    const float best = penalized(running_[0].score, best_length, o_.length_penalty);
    float worst = finished_[0].score;
    for (const Hypothesis& h : finished_) worst = std::min(worst, h.score);
    return std::any_of(finished_.begin(), finished_.end(),
                       [&](const Hypothesis& h) { return best > (h.finished ? worst : kMasked); });
  }

  const BeamSearchOptions& o_;
  std::vector<int32_t> eos_;
  std::vector<int32_t> context_;  // the sequence before the first generated token
  int64_t vocab_;
  int32_t keep_;                  // candidates kept a step
  std::vector<Hypothesis> running_, previous_, finished_;
  std::vector<float> lp_;         // (num_beams, vocab)
  std::vector<int32_t> parents_;  // new running beam -> the old one it continues
  bool improvable_ = true;        // HF's is_early_stop_heuristic_unsatisfied
};

// kv back to its first n positions: what its sliding-window rings no longer hold (a search longer
// than their rewind) is computed again from its ids, the same bits.
void rewind(Session& session, KvCache& kv, int64_t n) {
  const int64_t kept = kv.reusable(n);
  const std::vector<int32_t> again(kv.tokens().begin() + kept, kv.tokens().begin() + n);
  kv.truncate(kept);
  if (!again.empty()) session.prefill(kv, again);
}
}  // namespace

std::string_view early_stopping_name(EarlyStopping e) {
  switch (e) {
    case EarlyStopping::Heuristic: return "false";
    case EarlyStopping::Immediate: return "true";
    case EarlyStopping::Never: return "never";
  }
  return "?";
}

namespace {

// What B beams take beyond the caller's cache, checked against what the model's memory figure has
// left before anything is allocated: B - 1 caches of `capacity` positions, and two B × vocab rows
// of f32 logits (the batch's, and the search's copy).
void check_beam_memory(const Model& model, const KvCache& kv, int32_t num_beams, int64_t capacity) {
  const auto& account = ModelAccess::memory(model);
  const uint64_t left = account ? account->available() : MemoryBudget::kUnknown;
  if (left == MemoryBudget::kUnknown) return;
  const auto beams = static_cast<uint64_t>(num_beams);
  const uint64_t per_cache = plan_kv_bytes(model.config(), capacity, kv.dtype());
  uint64_t caches = 0, logits = 0, total = 0;
  const bool overflow = __builtin_mul_overflow(per_cache, beams - 1, &caches) ||
                        __builtin_mul_overflow(beams * 2 * sizeof(float), static_cast<uint64_t>(model.config().vocab_size),
                                               &logits) ||
                        __builtin_add_overflow(caches, logits, &total);
  if (overflow || total > left)
    throw Error(ErrorKind::OutOfMemory,
                fmt::format("beam search with {} beams needs {}: {} more KV caches of {} positions ({} each, {}) and "
                            "two rows of {} logits per beam ({}); {} of {} memory is left after the weights and caches "
                            "({})",
                            num_beams, overflow ? "more than 2^64 bytes" : bytes_text(total), num_beams - 1,
                            format_count(capacity), format_bytes(per_cache), dtype_name(kv.dtype()),
                            format_count(model.config().vocab_size), format_bytes(logits), bytes_text(left),
                            device_name(model.device()), account->budget().source));
}

}  // namespace

BeamSearchResult beam_search(Session& session, KvCache& kv, std::span<const int32_t> prompt,
                             const BeamSearchOptions& options) {
  const Model& model = session.model();
  std::vector<int32_t> eos;
  if (!options.ignore_eos) eos = options.eos_ids.empty() ? model.eos_ids() : options.eos_ids;
  validate(options, model, prompt, eos);
  const auto needed = static_cast<int64_t>(prompt.size()) + options.max_new_tokens - 1;
  if (needed > kv.remaining())
    throw Error(ErrorKind::ContextFull,
                fmt::format("beam search: a prompt of {} tokens and max_new_tokens {} need {} free positions in the KV "
                            "cache; it has {} of {}",
                            prompt.size(), options.max_new_tokens, needed, kv.remaining(), kv.capacity()));

  check_beam_memory(model, kv, options.num_beams, kv.size() + options.max_new_tokens - 1);

  BeamSearchResult r;
  r.stats.prompt_tokens = static_cast<int64_t>(prompt.size());
  const int64_t start = kv.size();
  try {
    auto t = Clock::now();
    std::span<const float> logits = session.prefill(kv, prompt);
    r.stats.prefill_seconds = seconds_since(t);
    const auto V = static_cast<size_t>(model.config().vocab_size);
    const auto B = static_cast<size_t>(options.num_beams);
    // Every beam starts as the prompt: HF runs num_beams copies of it, whose logits are one row.
    std::vector<float> rows(B * V);
    for (size_t b = 0; b < B; ++b)
      std::copy(logits.begin(), logits.end(), rows.begin() + static_cast<std::ptrdiff_t>(b * V));

    std::vector<int32_t> context(kv.tokens().begin(), kv.tokens().end());
    Search search(options, eos, std::move(context), model.config().vocab_size);
    BeamCaches caches(kv, options.num_beams, kv.size() + options.max_new_tokens - 1, r.stats);
    r.stats.kv_bytes = caches.bytes();
    std::vector<BatchItem> items(B);
    std::vector<int32_t> last(B);
    for (int64_t step = 0;; ++step) {
      t = Clock::now();
      const bool more = search.step(rows, step);
      r.stats.select_seconds += seconds_since(t);
      if (!more) break;
      if (options.cancel && options.cancel())
        throw Error(ErrorKind::Cancelled, fmt::format("beam search cancelled after {} steps", step + 1));
      caches.reorder(search.parents(), r.stats);
      for (size_t b = 0; b < B; ++b) {
        last[b] = search.last_token(static_cast<int32_t>(b));
        items[b] = {&caches[static_cast<int32_t>(b)], {&last[b], 1}, Logits::Last};
      }
      t = Clock::now();
      logits = session.batch(items);
      r.stats.decode_seconds += seconds_since(t);
      r.stats.steps += 1;
      std::copy(logits.begin(), logits.end(), rows.begin());
    }
    for (int32_t i = 0; i < options.num_return_sequences; ++i) {
      const Hypothesis& h = search.finished()[static_cast<size_t>(i)];
      r.sequences.push_back({h.tokens, h.score, h.sum_logprobs});
    }
    rewind(session, kv, start + static_cast<int64_t>(prompt.size()));
  } catch (...) {
    try {
      rewind(session, kv, std::min(kv.size(), start));
    } catch (...) {
      kv.clear();  // what failed may fail again: left empty rather than half computed
    }
    throw;
  }
  return r;
}

}  // namespace kvinfer
