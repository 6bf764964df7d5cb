#pragma once
// Sampler: picks the next token id from raw logits, with the usual controls (temperature, top-k,
// top-p, min-p, repetition/presence/frequency penalties, logit bias) and a seeded RNG whose draws
// are the same on every compiler and platform. docs/sampling.md has the full definition.
//
// Order of operations, as HF transformers' generate():
//   1. logit bias       l[id] += bias (float), every (id, bias) pair in turn; -inf bans a token
//   2. penalties        over the last penalty_last_n accepted ids (count c > 0 for token t):
//                         repetition: l > 0 ? l / r : l * r          (HF, llama.cpp)
//                         then l -= float(c) * frequency + presence  (OpenAI, llama.cpp)
//   3. temperature      s = double(l) / double(T); T = 0 → greedy: argmax of l (lowest id on ties)
//   4. top-k            keep the k best by (l descending, id ascending)
//   5. top-p            p = softmax(s) over the top-k set; keep the smallest prefix (most probable
//                       first) whose cumulative p ≥ top_p; always at least one token
//   6. min-p            keep tokens with p ≥ min_p × p_max, i.e. exp(s - s_max) ≥ min_p
//   7. draw             u = (mt19937_64() >> 11) × 2^-53, one per sample() call (greedy too);
//                       inverse CDF in double over the candidates sorted by (l desc, id asc)
// With a grammar (docs/structured-output.md), every token it does not allow next is banned (-inf)
// after step 2; without one, nothing changes.
#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "kvinfer/export.h"

KVINFER_PUBLIC_BEGIN
namespace kvinfer {

class Grammar;

// The defaults are the only ones: greedy, with every filter and penalty off, so that what a
// caller sets is all that applies ("temperature 0.7, top_p 0.9" samples from exactly that).
// GenerateOptions::sampling starts from them too; docs/sampling.md lists them with the CLI's.
struct SamplingParams {
  float temperature = 0.0f;         // 0 → greedy (argmax, lowest index on ties)
  int32_t top_k = 0;                // 0 → off; values above the vocabulary keep everything
  float top_p = 1.0f;               // 1 → off
  float min_p = 0.0f;               // 0 → off
  float repetition_penalty = 1.0f;  // 1 → off; logit > 0 divided, else multiplied
  float presence_penalty = 0.0f;    // subtracted once if the token is in the window
  float frequency_penalty = 0.0f;   // subtracted × its count in the window
  int32_t penalty_last_n = 64;      // window of recent accepted ids; -1 = all, 0 = penalties off
  std::vector<std::pair<int32_t, float>> logit_bias = {};  // (id, added to the logit); -inf bans
  uint64_t seed = 0;
  // Constrained output: only tokens that keep the output a prefix of the grammar's language, and
  // its end ids only once the output is complete. Each Sampler keeps its own parse. null: none.
  std::shared_ptr<const Grammar> grammar = {};

  // temperature 0 and every filter and penalty off: plain argmax (the defaults).
  static SamplingParams greedy();

  // Throws kvinfer::Error naming the parameter and its value: vocab_size <= 0, temperature < 0
  // or NaN, top_k < 0, top_p outside (0, 1], min_p outside [0, 1], repetition_penalty <= 0 or
  // NaN, non-finite presence/frequency penalties, penalty_last_n < -1, a logit_bias id outside
  // [0, vocab_size), a NaN bias, a +inf bias (use a large finite value to force a token), or a
  // grammar compiled for another vocabulary size.
  void validate(int32_t vocab_size) const;
};

// One per sequence; not thread-safe. Every buffer is sized for the vocabulary at construction,
// so sample() does not allocate.
class Sampler {
 public:
  Sampler(SamplingParams params, int32_t vocab_size);  // validates
  ~Sampler();
  Sampler(const Sampler& other);
  Sampler& operator=(const Sampler& other);
  Sampler(Sampler&& other) noexcept;
  Sampler& operator=(Sampler&& other) noexcept;

  // Picks the next id from raw logits (vocab_size of them). Does not change the history. Throws
  // kvinfer::Error on a size mismatch, a NaN or +inf logit (naming its index), or when every
  // token is banned (-inf); a call that throws consumes no draw.
  int32_t sample(std::span<const float> logits);

  // Records ids (prompt or generated) for the penalties. Throws, recording nothing, on an id
  // outside [0, vocab_size). With a grammar, the ids accepted after the first sample() (since
  // construction or reset()) are the output: the grammar reads them, and an id it does not
  // allow there throws, recording nothing. Ids accepted before (the prompt) it ignores.
  void accept(int32_t id);
  void accept(std::span<const int32_t> ids);

  // Clears the history and the grammar's parse; the RNG restarts from the seed.
  void reset();

  // With a grammar: the ids that may end the output once it is complete (default: the
  // tokenizer's end ids, GrammarVocabulary::end_ids()). generate() and the Scheduler set their
  // stop ids here.
  void set_end_ids(std::span<const int32_t> ids);
  // With a grammar: the output is complete and nothing may follow it (an end id was accepted, or
  // the grammar allows no further byte): generation ends here. False without a grammar.
  bool grammar_finished() const;

  const SamplingParams& params() const { return params_; }
  int32_t vocab_size() const { return vocab_size_; }

  // ---- for a caller that runs the first steps elsewhere (Session::sample on a GPU) ----
  // Steps 1–3 (checks, bias, penalties) and the top-k selection run on the logits' device; these
  // give that device what it needs, and sample_top_k() runs the rest with sample()'s own code.
  //
  // The penalised tokens of the current window as (id, count in the window) pairs, distinct ids;
  // empty when the penalties are off. Valid until the next call.
  std::span<const std::pair<int32_t, int32_t>> penalty_counts();
  // The size of the top-k set sample_top_k() needs: 1 at temperature 0 (the first maximum), else
  // top_k, or the vocabulary when top_k is 0 or larger.
  int32_t top_k_size() const;
  // Picks the next id from the top-k set (top_k_size() tokens, fewer only if the vocabulary is
  // smaller) of the logits after bias and penalties: the first tokens by (logit descending, id
  // ascending), as (id, adjusted logit) pairs in any order; -inf entries are banned tokens. The
  // result, the draw taken and last_candidates() are those of sample() on the full row whose
  // adjusted logits these are. Throws as sample() does when every token is banned, and on an id
  // outside the vocabulary, a NaN or +inf logit or too many pairs (a call that throws takes no draw),
  // and with a grammar (which needs the whole row: Session::sample copies it then).
  int32_t sample_top_k(std::span<const std::pair<int32_t, float>> top_k);

  // The distribution the last sample() drew from, after every filter: (id, p) pairs sorted by
  // descending p (ties by ascending id), summing to 1. Greedy: the one chosen id with p = 1.
  // Empty before the first sample() and after reset().
  std::span<const std::pair<int32_t, float>> last_candidates() const { return candidates_out_; }

 private:
  struct Candidate {
    double weight;  // exp(s - s_max), then the unnormalised probability
    float logit;    // after bias and penalties; the sort key with id
    int32_t id;
  };

  void adjust_logits(std::span<const float> logits);
  void apply_grammar();  // bans (-inf) what the grammar does not allow next
  void apply_penalties();
  std::span<const int32_t> penalty_window() const;  // empty when the penalties are off
  size_t collect_top_k();
  int32_t pick_greedy(int32_t id, float logit);  // step 4 and its draw
  int32_t sample_from(size_t n);                  // steps 6–11 over work_[0, n), in id order
  size_t keep_top_p_min_p(size_t n, double z);
  int32_t draw(size_t n, double u);

  SamplingParams params_;
  int32_t vocab_size_;
  std::mt19937_64 rng_;
  std::vector<int32_t> history_;   // every accepted id, oldest first
  std::vector<int32_t> counts_;    // (vocab) scratch for the penalties, all zero between calls
  std::vector<float> logits_;      // (vocab) after bias and penalties
  std::vector<Candidate> work_;    // (vocab) candidates; the kept ones first
  std::vector<std::pair<int32_t, float>> candidates_out_;
  std::vector<std::pair<int32_t, int32_t>> penalised_;  // penalty_counts()' result
  struct GrammarState;                                   // the parse (src/generate/sampler.cpp)
  std::unique_ptr<GrammarState> grammar_;                // with a grammar
  bool output_started_ = false;                          // a sample() since construction or reset()
  std::vector<uint64_t> mask_;                           // (vocab bits) the grammar's allowed tokens
  friend struct SamplerAccess;
};

}  // namespace kvinfer
KVINFER_PUBLIC_END
