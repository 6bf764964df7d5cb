#pragma once
// Speculative decoding (docs/speculative.md): the generation loop that drafts tokens (prompt
// lookup or a draft model), verifies them in one target pass and keeps the accepted prefix, and
// its parts, exposed here for the tests.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "kvinfer/generate.h"

namespace kvinfer::detail {

// What the caller of the generation loop does with each sampled id (generate.cpp's three entry
// points). `last` says the loop ends after it whatever the step answers; returning false ends
// the loop with `stop` as the reason.
struct Step {
  std::function<bool(int32_t id, std::span<const float> logits, bool last, StopReason& stop)> fn;
  // fn reads `logits`: they are copied to the host. Otherwise fn gets an empty span, and on CUDA
  // the logits never leave the device (Session::step, Session::sample).
  bool wants_logits = false;
};

// Throws InvalidArgument naming the field when `o` cannot run: both drafters, a k outside 1..256,
// a negative n-gram length, or speculation with use_kv_cache off.
void validate_speculative(const SpeculativeOptions& o, bool use_kv_cache);

// The generation loop with speculation on (options.speculative.enabled()): the same contract as
// the plain loop (tokens, stop reasons, what the cache holds afterwards, the calls to step.fn),
// and on the CPU the same ids and logits bit for bit when `sampler` is greedy or the drafter is
// deterministic (prompt lookup, or a draft model at temperature 0). Called by generate.cpp's loop
// after its checks, with the end ids, the sampler having seen the prompt, and r's prompt stats;
// max_new_tokens > 0.
GenerateResult run_speculative(Session& session, KvCache& kv, std::span<const int32_t> prompt,
                               const GenerateOptions& options, std::span<const int32_t> stop_ids, Sampler& sampler,
                               const Step& step, GenerateResult r);

// Prompt lookup: for n from max_ngram down to 1, the most recent earlier occurrence of the last n
// ids of `history` (one that ends before the history does); the ids that followed it, at most k
// (fewer where the history ends). Empty when no n-gram recurs.
std::vector<int32_t> prompt_lookup(std::span<const int32_t> history, int32_t max_ngram, int32_t k);

// The adaptive draft length: starts at min(4, max); after a pass that accepted every drafted
// token (and was offered a full k) it grows by 2, after one that rejected a drafted token it
// shrinks by 1, within [1, max]. A pass at k = 1 that accepted nothing backs off: k() is 0 (no
// drafting: a plain decode step) for the next 1, 2, 4, … 16 passes, the wait doubling with each
// such pass in a row and starting over at 1 once a draft is accepted, since there a verification
// pass costs more than a decode step and wins nothing. Not adaptive: always max.
class DraftLength {
 public:
  DraftLength(int32_t max, bool adaptive) : max_(max), adaptive_(adaptive), k_(adaptive ? std::min(4, max) : max) {}
  int32_t k() const { return skip_ > 0 ? 0 : k_; }
  // After a verification pass that drafted `drafted` tokens (asked for k()) and accepted `accepted`.
  void update(int32_t drafted, int32_t accepted);

  static constexpr int32_t kMaxBackoff = 16;

 private:
  int32_t max_;
  bool adaptive_;
  int32_t k_;
  int32_t skip_ = 0;     // passes left without drafting
  int32_t backoff_ = 1;  // the next back-off's length
};

// One uniform double in [0, 1): the top 53 bits of one 64-bit output (as the Sampler draws).
inline double uniform(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

// The rejection rule of Leviathan et al. / Chen et al. 2023 for a drafted token d drawn from q:
// accept d with probability min(1, p(d) / q(d)) (u_accept < p(d) / q(d)), else pick from
// norm(max(0, p - q)) by inverse CDF with u_residual over p's order. p and q are distributions as
// Sampler::last_candidates() gives them ((id, prob), p sorted by descending prob then id);
// q_dense is (vocab) zeros, used as scratch and left zero. Returns the emitted id (d when
// accepted). When rounding leaves the residual empty, `fallback` (a draw from p) is returned.
int32_t accept_or_resample(std::span<const std::pair<int32_t, float>> p, std::span<const std::pair<int32_t, float>> q,
                           int32_t d, double u_accept, double u_residual, int32_t fallback, std::vector<float>& q_dense);

}  // namespace kvinfer::detail
