#pragma once
// One output's parse under a compiled Grammar, at the token level: the mask of the tokens allowed
// next, and reading a chosen token. What a Sampler with a grammar keeps (one per sequence).
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "grammar/matcher.h"
#include "kvinfer/grammar.h"

namespace kvinfer::grammar {

class TokenMatcher {
 public:
  explicit TokenMatcher(std::shared_ptr<const Grammar> grammar);
  TokenMatcher(const TokenMatcher& other);
  TokenMatcher& operator=(const TokenMatcher& other);

  void reset();
  // mask (vocab bits) := the tokens allowed now: those whose bytes the output can continue with,
  // and the end ids once it is complete. Nothing after an end id.
  void fill_mask(std::span<uint64_t> mask);
  // Reads `id` if it is allowed (true); otherwise false and nothing changes.
  bool accept(int32_t id);
  // Whether `id` is allowed now, decided from its bytes alone (nothing changes): what
  // fill_mask's tables must agree with.
  bool allows(int32_t id);
  // How many of `ids`, in order from the current state, would be allowed (nothing changes).
  size_t allowed_prefix(std::span<const int32_t> ids);
  // This parse becomes `other`'s (the same grammar): only its live stacks are copied.
  void copy_state(const TokenMatcher& other);

  // The output is complete, and nothing can follow it (only an end id, or an end id was read).
  bool finished() const { return ended_ || (matcher_.complete() && !matcher_.can_continue()); }
  bool complete() const { return ended_ || matcher_.complete(); }
  void set_end_ids(std::span<const int32_t> ids) { end_ids_.assign(ids.begin(), ids.end()); }
  std::span<const int32_t> end_ids() const { return end_ids_; }
  const Grammar& grammar() const { return *grammar_; }
  int32_t vocab_size() const { return grammar_->vocab_size(); }

 private:
  bool is_end(int32_t id) const;

  std::shared_ptr<const Grammar> grammar_;
  Matcher matcher_;
  std::vector<int32_t> end_ids_;
  bool ended_ = false;  // an end id was read
};

}  // namespace kvinfer::grammar
