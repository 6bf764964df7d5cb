#include "kvinfer/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "generate/sampler_access.h"
#include "grammar/token_matcher.h"
#include "kvinfer/error.h"
#include "kvinfer/grammar.h"

namespace kvinfer {

struct Sampler::GrammarState {
  grammar::TokenMatcher matcher;
};

grammar::TokenMatcher* SamplerAccess::grammar(Sampler& s) { return s.grammar_ ? &s.grammar_->matcher : nullptr; }

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr size_t kFirstTopPChunk = 64;  // top-p sorts the nucleus in growing chunks from here

// The candidates' one order, everywhere: higher logit first, lower id on ties. Logits are
// compared after bias and penalties but before the temperature, which does not change the order.
template <typename C>
bool comes_before(const C& a, const C& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

// The top 53 bits of one mt19937_64 output as a double in [0, 1). Written out because
// std::uniform_real_distribution is implementation-defined and would differ between libraries.
double uniform_01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

}  // namespace

SamplingParams SamplingParams::greedy() { return {}; }

void SamplingParams::validate(int32_t vocab_size) const {
  if (vocab_size <= 0) throw Error(ErrorKind::InvalidArgument, fmt::format("sampler: vocab_size must be > 0, got {}", vocab_size));
  if (!(temperature >= 0.0f))
    throw Error(ErrorKind::InvalidArgument, fmt::format("sampling parameter temperature must be >= 0 (0 = greedy), got {}", temperature));
  if (top_k < 0) throw Error(ErrorKind::InvalidArgument, fmt::format("sampling parameter top_k must be >= 0 (0 = off), got {}", top_k));
  if (!(top_p > 0.0f && top_p <= 1.0f))
    throw Error(ErrorKind::InvalidArgument, fmt::format("sampling parameter top_p must be in (0, 1] (1 = off), got {}", top_p));
  if (!(min_p >= 0.0f && min_p <= 1.0f))
    throw Error(ErrorKind::InvalidArgument, fmt::format("sampling parameter min_p must be in [0, 1] (0 = off), got {}", min_p));
  if (!(repetition_penalty > 0.0f && std::isfinite(repetition_penalty)))
    throw Error(ErrorKind::InvalidArgument, fmt::format("sampling parameter repetition_penalty must be finite and > 0 (1 = off), got {}",
                            repetition_penalty));
  if (!std::isfinite(presence_penalty))
    throw Error(ErrorKind::InvalidArgument, fmt::format("sampling parameter presence_penalty must be finite, got {}", presence_penalty));
  if (!std::isfinite(frequency_penalty))
    throw Error(ErrorKind::InvalidArgument, fmt::format("sampling parameter frequency_penalty must be finite, got {}", frequency_penalty));
  if (penalty_last_n < -1)
    throw Error(ErrorKind::InvalidArgument, fmt::format("sampling parameter penalty_last_n must be >= -1 (-1 = all, 0 = off), got {}",
                            penalty_last_n));
  for (size_t i = 0; i < logit_bias.size(); ++i) {
    const auto [id, bias] = logit_bias[i];
    if (id < 0 || id >= vocab_size)
      throw Error(ErrorKind::InvalidArgument, fmt::format("sampling parameter logit_bias[{}]: token id {} is outside the vocabulary [0, {})", i,
                              id, vocab_size));
    if (std::isnan(bias) || bias == kInf)
      throw Error(ErrorKind::InvalidArgument, fmt::format("sampling parameter logit_bias[{}] for token id {} is {}; use -inf to ban a token "
                              "and a large finite value to force one",
                              i, id, bias));
  }
  if (grammar && grammar->vocab_size() != vocab_size)
    throw Error(ErrorKind::InvalidArgument,
                fmt::format("sampling parameter grammar: compiled for a vocabulary of {} tokens, the model has {}",
                            grammar->vocab_size(), vocab_size));
}

Sampler::Sampler(SamplingParams params, int32_t vocab_size)
    : params_(std::move(params)), vocab_size_(vocab_size), rng_(params_.seed) {
  params_.validate(vocab_size_);
  counts_.assign(vocab_size_, 0);
  logits_.resize(vocab_size_);
  work_.resize(vocab_size_);
  candidates_out_.reserve(vocab_size_);
  penalised_.reserve(static_cast<size_t>(std::min(vocab_size_, params_.penalty_last_n > 0 ? params_.penalty_last_n : 256)));
  if (params_.grammar) {
    grammar_ = std::make_unique<GrammarState>(GrammarState{grammar::TokenMatcher(params_.grammar)});
    mask_.assign((static_cast<size_t>(vocab_size_) + 63) / 64, 0);
  }
}

Sampler::~Sampler() = default;
Sampler::Sampler(Sampler&&) noexcept = default;
Sampler& Sampler::operator=(Sampler&&) noexcept = default;

Sampler::Sampler(const Sampler& o)
    : params_(o.params_),
      vocab_size_(o.vocab_size_),
      rng_(o.rng_),
      history_(o.history_),
      counts_(o.counts_),
      logits_(o.logits_),
      work_(o.work_),
      candidates_out_(o.candidates_out_),
      penalised_(o.penalised_),
      grammar_(o.grammar_ ? std::make_unique<GrammarState>(*o.grammar_) : nullptr),
      output_started_(o.output_started_),
      mask_(o.mask_) {}

Sampler& Sampler::operator=(const Sampler& o) {
  if (this != &o) *this = Sampler(o);
  return *this;
}

void Sampler::set_end_ids(std::span<const int32_t> ids) {
  if (grammar_) grammar_->matcher.set_end_ids(ids);
}

bool Sampler::grammar_finished() const { return grammar_ && grammar_->matcher.finished(); }

void Sampler::accept(int32_t id) { accept(std::span<const int32_t>(&id, 1)); }

void Sampler::accept(std::span<const int32_t> ids) {
  for (int32_t id : ids)
    if (id < 0 || id >= vocab_size_)
      throw Error(ErrorKind::InvalidArgument, fmt::format("sampler: accepted token id {} is outside the vocabulary [0, {})", id, vocab_size_));
  if (grammar_ && output_started_ && !ids.empty()) {
    grammar::TokenMatcher& m = grammar_->matcher;
    const size_t n = ids.size() == 1 ? 0 : m.allowed_prefix(ids);  // all or nothing
    if (ids.size() == 1 ? !m.accept(ids[0]) : n < ids.size())
      throw Error(ErrorKind::InvalidArgument,
                  fmt::format("sampler: token id {} is not allowed by the grammar there", ids[ids.size() == 1 ? 0 : n]));
    if (ids.size() > 1)
      for (int32_t id : ids) m.accept(id);
  }
  history_.insert(history_.end(), ids.begin(), ids.end());
}

void Sampler::reset() {
  history_.clear();
  rng_.seed(params_.seed);
  candidates_out_.clear();
  if (grammar_) grammar_->matcher.reset();
  output_started_ = false;
}

namespace {
constexpr const char* kAllBanned = "sampler: every token is banned (all logits are -inf after bias and penalties)";
}  // namespace

int32_t Sampler::sample(std::span<const float> logits) {
  if (logits.size() != static_cast<size_t>(vocab_size_))
    throw Error(ErrorKind::InvalidArgument, fmt::format("sampler: got {} logits for a vocabulary of {}", logits.size(), vocab_size_));
  adjust_logits(logits);
  if (grammar_) apply_grammar();
  output_started_ = true;
  if (params_.temperature == 0.0f) {
    // The first maximum: the lowest id on ties, as torch.argmax.
    const auto best = static_cast<int32_t>(std::max_element(logits_.begin(), logits_.end()) - logits_.begin());
    return pick_greedy(best, logits_[best]);
  }
  return sample_from(collect_top_k());
}

int32_t Sampler::top_k_size() const {
  if (params_.temperature == 0.0f) return 1;
  return params_.top_k == 0 ? vocab_size_ : std::min(params_.top_k, vocab_size_);
}

int32_t Sampler::sample_top_k(std::span<const std::pair<int32_t, float>> top_k) {
  if (grammar_)
    throw Error(ErrorKind::InvalidArgument, "sampler: sample_top_k cannot apply a grammar (it needs the whole row: use sample())");
  if (top_k.empty() || top_k.size() > static_cast<size_t>(top_k_size()))
    throw Error(ErrorKind::InvalidArgument, fmt::format("sampler: got a top-k set of {} tokens, expected 1 .. {}", top_k.size(), top_k_size()));
  for (const auto& [id, logit] : top_k) {
    if (id < 0 || id >= vocab_size_)
      throw Error(ErrorKind::InvalidArgument, fmt::format("sampler: top-k token id {} is outside the vocabulary [0, {})", id, vocab_size_));
    if (!(logit < kInf)) throw Error(ErrorKind::InvalidArgument, fmt::format("sampler: top-k logit of token id {} is {}", id, logit));
  }
  if (params_.temperature == 0.0f) {
    Candidate best{0.0, top_k[0].second, top_k[0].first};
    for (const auto& [id, logit] : top_k.subspan(1))
      if (comes_before(Candidate{0.0, logit, id}, best)) best = {0.0, logit, id};
    return pick_greedy(best.id, best.logit);
  }
  size_t n = 0;
  for (const auto& [id, logit] : top_k)
    if (logit != -kInf) work_[n++] = {0.0, logit, id};
  const auto by_id = [](const Candidate& a, const Candidate& b) { return a.id < b.id; };
  if (!std::is_sorted(work_.begin(), work_.begin() + static_cast<ptrdiff_t>(n), by_id))
    std::sort(work_.begin(), work_.begin() + static_cast<ptrdiff_t>(n), by_id);
  return sample_from(n);
}

int32_t Sampler::pick_greedy(int32_t id, float logit) {
  if (logit == -kInf) throw Error(ErrorKind::InvalidArgument, kAllBanned);
  uniform_01(rng_);  // unused, but every successful call takes exactly one draw
  candidates_out_.assign(1, {id, 1.0f});
  return id;
}

// work_[0, n) is the top-k set in id order.
int32_t Sampler::sample_from(size_t n) {
  if (n == 0) throw Error(ErrorKind::InvalidArgument, kAllBanned);
  // Drawn here, after every check, so the k-th successful call always uses the k-th draw.
  const double u = uniform_01(rng_);

  // The top-k set's softmax, unnormalised: weight = exp(s - s_max) ∈ (0, 1], exactly 1 at the
  // maximum; z is its sum in id order (work_ is in id order here).
  float l_max = -kInf;
  for (size_t i = 0; i < n; ++i) l_max = std::max(l_max, work_[i].logit);
  const double t = params_.temperature;
  const double s_max = static_cast<double>(l_max) / t;
  double z = 0.0;
  for (size_t i = 0; i < n; ++i) {
    work_[i].weight = std::exp(static_cast<double>(work_[i].logit) / t - s_max);
    z += work_[i].weight;
  }
  n = keep_top_p_min_p(n, z);
  return draw(n, u);
}

void Sampler::adjust_logits(std::span<const float> logits) {
  int bad = 0;  // NaN or +inf; -inf is a banned token and fine. No early exit, an int: vectorises.
  for (int32_t id = 0; id < vocab_size_; ++id) {
    logits_[id] = logits[id];
    bad |= !(logits[id] < kInf);
  }
  if (bad != 0)
    for (int32_t id = 0; id < vocab_size_; ++id)
      if (!(logits_[id] < kInf)) throw Error(ErrorKind::InvalidArgument, fmt::format("sampler: logit at index {} is {}", id, logits_[id]));
  for (const auto& [id, bias] : params_.logit_bias) logits_[id] += bias;
  apply_penalties();
  for (const auto& [id, bias] : params_.logit_bias)
    if (logits_[id] == kInf)
      throw Error(ErrorKind::InvalidArgument, fmt::format("sampler: logit of token id {} overflows to +inf after its logit bias", id));
}

void Sampler::apply_grammar() {
  grammar_->matcher.fill_mask(mask_);
  bool any = false;
  for (const uint64_t w : mask_) any |= w != 0;
  if (!any)
    throw Error(ErrorKind::InvalidArgument,
                "sampler: the grammar allows no token here (the output is complete and no end id is set)");
  const size_t vocab = static_cast<size_t>(vocab_size_);
  for (size_t w = 0; w < mask_.size(); ++w) {
    const uint64_t bits = mask_[w];
    if (bits == ~uint64_t{0}) continue;
    const size_t end = std::min(vocab, w * 64 + 64);
    for (size_t id = w * 64; id < end; ++id)
      if (((bits >> (id & 63)) & 1) == 0) logits_[id] = -kInf;
  }
}

std::span<const int32_t> Sampler::penalty_window() const {
  const SamplingParams& p = params_;
  if (p.penalty_last_n == 0 ||
      (p.repetition_penalty == 1.0f && p.presence_penalty == 0.0f && p.frequency_penalty == 0.0f))
    return {};
  const size_t window =
      p.penalty_last_n < 0 ? history_.size() : std::min(history_.size(), static_cast<size_t>(p.penalty_last_n));
  return std::span<const int32_t>(history_).last(window);
}

std::span<const std::pair<int32_t, int32_t>> Sampler::penalty_counts() {
  const auto recent = penalty_window();
  penalised_.clear();
  for (int32_t id : recent) ++counts_[id];
  for (int32_t id : recent) {
    if (counts_[id] == 0) continue;  // listed already
    penalised_.emplace_back(id, counts_[id]);
    counts_[id] = 0;
  }
  return penalised_;
}

void Sampler::apply_penalties() {
  const SamplingParams& p = params_;
  const auto recent = penalty_window();
  if (recent.empty()) return;
  for (int32_t id : recent) ++counts_[id];
  int32_t overflow = -1;  // thrown after the loop, which leaves counts_ all zero again
  for (int32_t id : recent) {
    const int32_t count = counts_[id];
    if (count == 0) continue;  // already penalised: once per distinct token
    counts_[id] = 0;
    float& l = logits_[id];
    l = l > 0.0f ? l / p.repetition_penalty : l * p.repetition_penalty;
    l -= static_cast<float>(count) * p.frequency_penalty + p.presence_penalty;
    if (l == kInf && overflow < 0) overflow = id;
  }
  if (overflow >= 0)
    throw Error(ErrorKind::InvalidArgument, fmt::format("sampler: logit of token id {} overflows to +inf after the penalties", overflow));
}

// Fills work_ with the top_k first tokens in the one order (every token not banned when top-k is
// off or k exceeds them), in id order. One pass with a heap of k whose top is the worst kept
// token: ids arrive in ascending order, so a newcomer displaces it only with a strictly higher
// logit, and on random logits that is rare after the first few thousand.
size_t Sampler::collect_top_k() {
  const auto k = params_.top_k == 0 ? static_cast<size_t>(vocab_size_) : static_cast<size_t>(params_.top_k);
  const auto first = work_.begin();
  size_t n = 0;
  int32_t id = 0;
  for (; id < vocab_size_ && n < k; ++id)
    if (logits_[id] != -kInf) work_[n++] = {0.0, logits_[id], id};
  if (id == vocab_size_) return n;
  std::make_heap(first, first + n, comes_before<Candidate>);
  for (; id < vocab_size_; ++id) {
    if (!(logits_[id] > work_[0].logit)) continue;
    std::pop_heap(first, first + n, comes_before<Candidate>);
    work_[n - 1] = {0.0, logits_[id], id};
    std::push_heap(first, first + n, comes_before<Candidate>);
  }
  std::sort(first, first + n, [](const Candidate& a, const Candidate& b) { return a.id < b.id; });
  return n;
}

// Top-p then min-p, as one prefix of the candidates in the one order: min-p keeps the prefix with
// weight ≥ min_p (p / p_max = weight, whatever the normalisation), top-p the shortest prefix whose
// weights reach top_p × z. Only that prefix is sorted: min-p's survivors are partitioned off
// first, and top-p sorts chunks of 64, 256, 1024, … until the mass is reached.
size_t Sampler::keep_top_p_min_p(size_t n, double z) {
  const auto first = work_.begin();
  size_t m = n;
  if (params_.min_p > 0.0f) {
    const double min_p = params_.min_p;
    m = static_cast<size_t>(
        std::partition(first, first + n, [&](const Candidate& c) { return c.weight >= min_p; }) - first);
  }
  if (params_.top_p >= 1.0f) {
    std::sort(first, first + m, comes_before<Candidate>);
    return m;
  }
  const double target = static_cast<double>(params_.top_p) * z;
  double cumulative = 0.0;
  size_t sorted = 0;
  for (size_t chunk = kFirstTopPChunk; sorted < m; chunk *= 4) {
    const size_t end = std::min(m, sorted + chunk);
    if (end < m) std::nth_element(first + sorted, first + end, first + m, comes_before<Candidate>);
    std::sort(first + sorted, first + end, comes_before<Candidate>);
    for (size_t i = sorted; i < end; ++i) {
      cumulative += work_[i].weight;
      if (cumulative >= target) return i + 1;
    }
    sorted = end;
  }
  return m;
}

// Inverse CDF over work_[0, n), sorted: the first i with u × total < w_0 + … + w_i (all sums in
// double, in that order). Should rounding leave u × total at or above the total, the last
// candidate with a non-zero weight.
int32_t Sampler::draw(size_t n, double u) {
  double total = 0.0;
  for (size_t i = 0; i < n; ++i) total += work_[i].weight;
  const double target = u * total;
  size_t pick = n;
  double cumulative = 0.0;
  for (size_t i = 0; i < n; ++i) {
    cumulative += work_[i].weight;
    if (target < cumulative) {
      pick = i;
      break;
    }
  }
  if (pick == n) {
    pick = n - 1;
    while (pick > 0 && work_[pick].weight == 0.0) --pick;
  }

  candidates_out_.clear();
  for (size_t i = 0; i < n; ++i)
    candidates_out_.emplace_back(work_[i].id, static_cast<float>(work_[i].weight / total));
  // Rounding to float can make neighbours with different logits equal; restore ascending ids
  // within such ties (one pass, as the list is already non-increasing in p).
  for (size_t i = 1; i < n; ++i)
    for (size_t j = i; j > 0 && candidates_out_[j - 1].second == candidates_out_[j].second &&
                       candidates_out_[j - 1].first > candidates_out_[j].first;
         --j)
      std::swap(candidates_out_[j - 1], candidates_out_[j]);
  return work_[pick].id;
}

}  // namespace kvinfer
