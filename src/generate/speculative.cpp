// Speculative decoding: draft k tokens, verify them in one batched target pass, keep the prefix
// the target agrees with. docs/speculative.md states the loop, the exactness argument and the
// adaptive k.
#include "generate/speculative.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include <fmt/format.h>

#include "generate/sampler_access.h"
#include "kvinfer/error.h"
#include "kvinfer/kv_plan.h"
#include "kvinfer/tokenizer.h"

namespace kvinfer {

namespace {

// The first difference between the two models' vocabularies, as one sentence; empty when none.
std::string vocabulary_difference(const Model& draft, const Model& target) {
  const int64_t dv = draft.config().vocab_size, tv = target.config().vocab_size;
  if (dv != tv)
    return fmt::format("its vocabulary has {} tokens, the target's {}", format_count(dv), format_count(tv));
  if (!draft.has_tokenizer() || !target.has_tokenizer()) return {};
  const Tokenizer &d = draft.tokenizer(), &t = target.tokenizer();
  if (d.vocab_size() != t.vocab_size())
    return fmt::format("its tokenizer has {} tokens, the target's {}", format_count(d.vocab_size()),
                       format_count(t.vocab_size()));
  for (int32_t id = 0; id < d.vocab_size(); ++id)
    if (d.token_text(id) != t.token_text(id))
      return fmt::format("token {} is {:?} in it, {:?} in the target", id, d.token_text(id), t.token_text(id));
  return {};
}

std::shared_ptr<const Model> checked_draft(std::shared_ptr<const Model> draft, const Model& target) {
  if (!draft) throw Error(ErrorKind::InvalidArgument, "draft model: none given (null)");
  const std::string diff = vocabulary_difference(*draft, target);
  if (!diff.empty())
    throw Error(ErrorKind::InvalidArgument,
                fmt::format("draft model: {} (speculative decoding needs the target's vocabulary)", diff));
  return draft;
}

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The most positions a cache of this model can always rewind past its last write: a
// sliding-window ring's piece (kv_plan.h, kv_ring_piece), unbounded without a window.
int64_t rewind_limit(const ModelConfig& c) {
  int64_t limit = std::numeric_limits<int64_t>::max();
  for (int64_t l = 0; l < c.num_layers; ++l)
    if (c.layer_window(l) > 0) limit = std::min(limit, kv_ring_piece(c.layer_window(l)));
  return limit;
}

bool is_stop(std::span<const int32_t> stop_ids, int32_t id) {
  return std::find(stop_ids.begin(), stop_ids.end(), id) != stop_ids.end();
}

// Proposes tokens with a draft model. Its cache keeps the longest prefix it shares with the
// history; the rest of the history is prefilled, then one decode step per drafted token.
class ModelDrafter {
 public:
  ModelDrafter(DraftModel& draft, const SamplingParams& target_params)
      : draft_(draft), sampler_(draft_params(target_params), static_cast<int32_t>(draft.model().config().vocab_size)) {}

  // Up to k tokens following `history`, stopping after a stop id (nothing after it could be
  // used). With a sampling target each token is drawn from the draft's distribution q, kept in
  // q(i) for the rejection rule; greedy: the draft's argmax (after the logit bias).
  // With a grammar (`target`: the target sampler's parse, after the history), the drafts follow
  // it too: the draft sampler starts from a copy of that parse and reads each drafted token.
  std::span<const int32_t> propose(std::span<const int32_t> history, int32_t k, std::span<const int32_t> stop_ids,
                                   const CancelCallback& cancel, const grammar::TokenMatcher* target) {
    tokens_.clear();
    grammar::TokenMatcher* g = SamplerAccess::grammar(sampler_);
    if (g != nullptr && target != nullptr) {
      g->copy_state(*target);
      g->set_end_ids(stop_ids);
      if (g->finished()) return {};
    }
    KvCache& kv = draft_.kv();
    const auto n = static_cast<int64_t>(history.size());
    // The history and k - 1 drafted tokens go into the draft's cache (the last one never does).
    k = static_cast<int32_t>(std::min<int64_t>(k, kv.capacity() - n + 1));
    if (k <= 0) return {};
    const std::span<const int32_t> held = kv.tokens();
    const auto common = static_cast<int64_t>(
        std::mismatch(held.begin(), held.end(), history.begin(), history.end()).first - held.begin());
    // At least the history's last token runs: its logits give the first draft. A ring that no
    // longer holds the window before that point has the history computed again.
    kv.truncate(kv.reusable(std::min(common, n - 1)));
    std::span<const float> logits =
        draft_.session().prefill(kv, history.subspan(static_cast<size_t>(kv.size())), Logits::Last, cancel);
    for (int32_t i = 0; i < k; ++i) {
      const int32_t d = sampler_.sample(logits);
      if (g != nullptr) g->accept(d);  // allowed: the mask let only such ids through
      if (sampled()) {
        const auto c = sampler_.last_candidates();
        if (q_.size() <= static_cast<size_t>(i)) q_.emplace_back();
        q_[static_cast<size_t>(i)].assign(c.begin(), c.end());
      }
      tokens_.push_back(d);
      if (i + 1 == k || is_stop(stop_ids, d) || (g != nullptr && g->finished())) break;
      logits = draft_.session().decode(kv, d);
    }
    return tokens_;
  }

  bool sampled() const { return sampler_.params().temperature > 0; }
  std::span<const std::pair<int32_t, float>> q(size_t i) const { return q_[i]; }

 private:
  // The target's sampling without its penalties: q may be any distribution the draft token is
  // drawn from (the rule corrects to p), and a penalty history would have to be rolled back on
  // every rejection. Its own seed, so its draws are independent of the target's.
  static SamplingParams draft_params(SamplingParams p) {
    p.repetition_penalty = 1.0f;
    p.presence_penalty = 0.0f;
    p.frequency_penalty = 0.0f;
    p.seed ^= 0x9e3779b97f4a7c15ull;
    return p;
  }

  DraftModel& draft_;
  Sampler sampler_;
  std::vector<int32_t> tokens_;                                // (k) this pass's drafts
  std::vector<std::vector<std::pair<int32_t, float>>> q_;      // (k) (candidates) their distributions
};

}  // namespace

DraftModel::DraftModel(std::shared_ptr<const Model> draft, const Model& target, int64_t capacity_tokens,
                       std::optional<DType> kv_dtype, const SessionOptions& session)
    : model_(checked_draft(std::move(draft), target)), session_(model_, session), kv_(*model_, capacity_tokens, kv_dtype) {}

double GenerationStats::acceptance_rate() const {
  return drafted_tokens > 0 ? static_cast<double>(accepted_tokens) / static_cast<double>(drafted_tokens) : 0.0;
}

namespace detail {

void validate_speculative(const SpeculativeOptions& o, bool use_kv_cache) {
  if (o.lookup_ngram < 0)
    throw Error(ErrorKind::InvalidArgument,
                fmt::format("speculative lookup_ngram must be >= 0 (0: off), got {}", o.lookup_ngram));
  if (o.lookup_ngram > 0 && o.draft_model != nullptr)
    throw Error(ErrorKind::InvalidArgument,
                "speculative decoding takes one drafter: lookup_ngram or draft_model, not both");
  if (o.max_draft_tokens < 1 || o.max_draft_tokens > 256)
    throw Error(ErrorKind::InvalidArgument,
                fmt::format("speculative max_draft_tokens must be 1 to 256, got {}", o.max_draft_tokens));
  if (o.enabled() && !use_kv_cache)
    throw Error(ErrorKind::InvalidArgument,
                "speculative decoding needs the KV cache (use_kv_cache): it verifies drafts against the cached positions");
}

std::vector<int32_t> prompt_lookup(std::span<const int32_t> history, int32_t max_ngram, int32_t k) {
  std::vector<int32_t> out;
  const auto L = static_cast<int64_t>(history.size());
  for (int64_t n = std::min<int64_t>(max_ngram, L - 1); n >= 1 && k > 0; --n) {
    const std::span<const int32_t> suffix = history.last(static_cast<size_t>(n));
    // The most recent occurrence that ends before the history does (i + n <= L - 1).
    for (int64_t i = L - n - 1; i >= 0; --i) {
      if (!std::equal(suffix.begin(), suffix.end(), history.begin() + i)) continue;
      // What followed it, read from the history extended by the proposal itself, so a pattern
      // that repeats within the last few tokens is proposed k long (i + n + t < L + t).
      for (int64_t t = 0; t < k; ++t) {
        const int64_t at = i + n + t;
        out.push_back(at < L ? history[static_cast<size_t>(at)] : out[static_cast<size_t>(at - L)]);
      }
      return out;
    }
  }
  return out;
}

void DraftLength::update(int32_t drafted, int32_t accepted) {
  if (!adaptive_) return;
  if (skip_ > 0) {
    --skip_;
    return;
  }
  if (drafted == 0) return;
  if (accepted > 0) backoff_ = 1;
  if (accepted == 0 && k_ == 1) {
    skip_ = backoff_;
    backoff_ = std::min(2 * backoff_, kMaxBackoff);
  } else if (accepted < drafted) {
    k_ = std::max(1, k_ - 1);
  } else if (drafted >= k_) {
    k_ = std::min(max_, k_ + 2);
  }
}

int32_t accept_or_resample(std::span<const std::pair<int32_t, float>> p, std::span<const std::pair<int32_t, float>> q,
                           int32_t d, double u_accept, double u_residual, int32_t fallback, std::vector<float>& q_dense) {
  double pd = 0.0, qd = 0.0;
  for (auto [id, prob] : p)
    if (id == d) pd = prob;
  for (auto [id, prob] : q) {
    q_dense[static_cast<size_t>(id)] = prob;
    if (id == d) qd = prob;
  }
  int32_t pick = -1;
  if (u_accept * qd < pd) {  // u < p(d) / q(d), without dividing by a tiny q(d)
    pick = d;
  } else {
    // max(0, p - q) is zero off p's support: its mass is all on p's candidates.
    double total = 0.0;
    for (auto [id, prob] : p) total += std::max(0.0, static_cast<double>(prob) - q_dense[static_cast<size_t>(id)]);
    if (total > 0.0) {
      const double target = u_residual * total;
      double sum = 0.0;
      for (auto [id, prob] : p) {
        const double r = std::max(0.0, static_cast<double>(prob) - q_dense[static_cast<size_t>(id)]);
        if (r <= 0.0) continue;
        sum += r;
        pick = id;  // the last token with mass, should rounding leave target >= sum
        if (target < sum) break;
      }
    }
    if (pick < 0) pick = fallback;
  }
  for (auto [id, prob] : q) q_dense[static_cast<size_t>(id)] = 0.0f;
  return pick;
}

GenerateResult run_speculative(Session& session, KvCache& kv, std::span<const int32_t> prompt,
                               const GenerateOptions& options, std::span<const int32_t> stop_ids, Sampler& sampler,
                               const Step& step, GenerateResult r) {
  const SpeculativeOptions& spec = options.speculative;
  const int64_t vocab = session.model().config().vocab_size;
  if (spec.draft_model != nullptr && spec.draft_model->model().config().vocab_size != vocab)
    throw Error(ErrorKind::InvalidArgument,
                fmt::format("draft model: its vocabulary has {} tokens, the target's {} (speculative decoding needs "
                            "the target's vocabulary)",
                            format_count(spec.draft_model->model().config().vocab_size), format_count(vocab)));

  // What the drafters read: the target's cache, the prompt, then every token generated.
  std::vector<int32_t> history(kv.tokens().begin(), kv.tokens().end());
  history.insert(history.end(), prompt.begin(), prompt.end());
  std::optional<ModelDrafter> model_drafter;
  if (spec.draft_model != nullptr) model_drafter.emplace(*spec.draft_model, sampler.params());
  const bool rejection_rule = model_drafter && model_drafter->sampled();
  std::mt19937_64 rule_rng(sampler.params().seed ^ 0xd1b54a32d192ed03ull);  // the rule's uniforms
  std::vector<float> q_dense(rejection_rule ? static_cast<size_t>(vocab) : 0, 0.0f);
  DraftLength draft_length(spec.max_draft_tokens, spec.adaptive);
  // A pass of 1 + k positions is cut back by up to k: within what a sliding-window ring can undo
  // (the target's, and the draft's, whose cache follows the same history).
  const int64_t max_k = std::min(rewind_limit(session.model().config()),
                                 model_drafter ? rewind_limit(spec.draft_model->model().config())
                                               : std::numeric_limits<int64_t>::max());

  const auto t0 = Clock::now();
  std::span<const float> rows;  // (1 + drafts, vocab): row j decides the token after the j-th draft
  try {
    rows = session.prefill(kv, prompt, Logits::Last, options.cancel);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::Cancelled) throw;
    r.stop = StopReason::Cancelled;  // the cache is as it was
    r.stats.prefill_seconds = seconds_since(t0);
    r.stats.kv_tokens = kv.size();
    return r;
  }
  r.stats.prefill_seconds = seconds_since(t0);
  Clock::time_point first_token;
  std::vector<int32_t> drafts;        // (drafts) this pass's proposals, verified in `rows`
  std::vector<int32_t> verify;        // (1 + drafts) the pass's input: the last token, then the drafts
  int64_t pos0 = kv.size() - 1;       // the position whose logits are row 0

  for (;;) {
    // Decide row by row, as plain decoding would one step at a time; each emitted id leaves the
    // cache holding every position before it (pos0 + j + 1).
    bool done = false;
    int32_t accepted = 0, next = -1;
    for (size_t j = 0; j <= drafts.size(); ++j) {
      const std::span<const float> row = rows.subspan(j * static_cast<size_t>(vocab), static_cast<size_t>(vocab));
      int32_t id = sampler.sample(row);
      if (rejection_rule && j < drafts.size())
        id = accept_or_resample(sampler.last_candidates(), model_drafter->q(j), drafts[j], uniform(rule_rng),
                                uniform(rule_rng), id, q_dense);
      sampler.accept(id);
      r.tokens.push_back(id);
      history.push_back(id);
      if (r.tokens.size() == 1) {
        first_token = Clock::now();
        r.stats.ttft_seconds = std::chrono::duration<double>(first_token - t0).count();
      }
      const bool hit = j < drafts.size() && id == drafts[j];
      const int64_t keep = pos0 + static_cast<int64_t>(j) + 1;
      bool last = true;
      if (is_stop(stop_ids, id) || sampler.grammar_finished())  // an end id, or a grammar's finished output
        r.stop = StopReason::Eos;
      else if (static_cast<int64_t>(r.tokens.size()) >= options.max_new_tokens)
        r.stop = StopReason::MaxTokens;
      else if (keep == kv.capacity())  // the next position has no room
        r.stop = StopReason::ContextFull;
      else
        last = false;
      if (!step.fn(id, step.wants_logits ? row : std::span<const float>(), last, r.stop) || last) done = true;
      if (!done && options.cancel && options.cancel()) {
        r.stop = StopReason::Cancelled;
        done = true;
      }
      accepted += hit;  // the target chose the drafted id (also when it ends generation)
      if (done || !hit) {
        kv.truncate(keep);  // the drafts after this id (and a rejected one) were never chosen
        next = id;
        break;
      }
    }
    r.stats.drafted_tokens += static_cast<int64_t>(drafts.size());
    r.stats.accepted_tokens += accepted;
    if (done) break;
    draft_length.update(static_cast<int32_t>(drafts.size()), accepted);

    // The next pass: `next` and up to k drafts, within the tokens still allowed and the room left
    // (the pass writes 1 + k positions and emits up to 1 + k ids).
    const int64_t budget = options.max_new_tokens - static_cast<int64_t>(r.tokens.size());
    const auto k =
        static_cast<int32_t>(std::min<int64_t>({draft_length.k(), budget - 1, kv.remaining() - 1, max_k}));
    drafts.clear();
    if (k > 0) {
      if (model_drafter) {
        try {
          const std::span<const int32_t> d =
              model_drafter->propose(history, k, stop_ids, options.cancel, SamplerAccess::grammar(sampler));
          drafts.assign(d.begin(), d.end());
        } catch (const Error& e) {
          if (e.kind() != ErrorKind::Cancelled) throw;
          r.stop = StopReason::Cancelled;  // the target's cache holds everything before `next`
          break;
        }
      } else {
        drafts = prompt_lookup(history, spec.lookup_ngram, k);
        // Nothing after a stop id could be used.
        const auto stop = std::find_if(drafts.begin(), drafts.end(), [&](int32_t d) { return is_stop(stop_ids, d); });
        if (stop != drafts.end()) drafts.erase(stop + 1, drafts.end());
      }
      // Drafts the grammar rejects could never be accepted: they are not verified.
      if (grammar::TokenMatcher* g = SamplerAccess::grammar(sampler)) drafts.resize(g->allowed_prefix(drafts));
    }
    verify.assign(1, next);
    verify.insert(verify.end(), drafts.begin(), drafts.end());
    pos0 = kv.size();
    rows = session.prefill(kv, verify, Logits::All);
    ++r.stats.verify_passes;
  }
  r.stats.decode_seconds = seconds_since(first_token);
  r.stats.generated_tokens = static_cast<int64_t>(r.tokens.size());
  r.stats.kv_tokens = kv.size();
  return r;
}

}  // namespace detail
}  // namespace kvinfer
