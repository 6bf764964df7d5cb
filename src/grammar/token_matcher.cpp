// A token-level parse: masks from the grammar's tables (plus run-time checks of the undecided
// tokens against the real stack), and reading tokens as their bytes.
#include "grammar/token_matcher.h"

#include <algorithm>

#include "grammar/grammar_access.h"
#include "kvinfer/error.h"

namespace kvinfer::grammar {

namespace {

const Grammar& checked(const std::shared_ptr<const Grammar>& g) {
  if (!g) throw Error(ErrorKind::InvalidArgument, "grammar: none given (null)");
  return *g;
}

}  // namespace

TokenMatcher::TokenMatcher(std::shared_ptr<const Grammar> grammar)
    : grammar_(std::move(grammar)), matcher_(GrammarAccess::impl(checked(grammar_)).pda) {
  const auto ends = grammar_->vocabulary().end_ids();
  end_ids_.assign(ends.begin(), ends.end());
}

TokenMatcher::TokenMatcher(const TokenMatcher& other)
    : grammar_(other.grammar_), matcher_(GrammarAccess::impl(*grammar_).pda), end_ids_(other.end_ids_) {
  copy_state(other);
}

TokenMatcher& TokenMatcher::operator=(const TokenMatcher& other) {
  if (this == &other) return *this;
  if (grammar_ != other.grammar_) {
    grammar_ = other.grammar_;
    matcher_ = Matcher(GrammarAccess::impl(*grammar_).pda);
  }
  end_ids_ = other.end_ids_;
  copy_state(other);
  return *this;
}

void TokenMatcher::copy_state(const TokenMatcher& other) {
  matcher_.assign_compact(other.matcher_);
  ended_ = other.ended_;
}

void TokenMatcher::reset() {
  matcher_.reset();
  ended_ = false;
}

bool TokenMatcher::is_end(int32_t id) const { return std::find(end_ids_.begin(), end_ids_.end(), id) != end_ids_.end(); }

void TokenMatcher::fill_mask(std::span<uint64_t> mask) {
  std::fill(mask.begin(), mask.end(), 0);
  if (ended_) return;
  const auto& g = GrammarAccess::impl(*grammar_);
  const TokenTrie& trie = GrammarAccess::trie(*g.vocabulary);
  const Parses& parses = matcher_.parses();
  StackPool& pool = matcher_.pool();
  for (size_t i = 0; i < parses.heads.size(); ++i) {
    const uint32_t head = parses.heads[i];
    const uint32_t state = pool[head].state;
    bool seen = false;  // another head in the same state added its table already
    for (size_t j = 0; j < i && !seen; ++j) seen = pool[parses.heads[j]].state == state;
    if (!seen) g.tables.add_accepted(state, trie, mask);
    for (uint32_t k = g.tables.uncertain_at[state]; k < g.tables.uncertain_at[state + 1]; ++k) {
      const int32_t id = g.tables.uncertain[k];
      uint64_t& w = mask[static_cast<size_t>(id) >> 6];
      const uint64_t bit = uint64_t{1} << (id & 63);
      if ((w & bit) == 0 && matcher_.accepts_from(head, trie.bytes[static_cast<size_t>(id)])) w |= bit;
    }
  }
  if (matcher_.complete())
    for (int32_t id : end_ids_)
      if (id >= 0 && id < trie.vocab_size) mask[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
}

bool TokenMatcher::accept(int32_t id) {
  if (ended_) return false;
  if (is_end(id)) {
    if (!matcher_.complete()) return false;
    ended_ = true;
    return true;
  }
  const TokenTrie& trie = GrammarAccess::trie(grammar_->vocabulary());
  if (id < 0 || id >= trie.vocab_size || trie.bytes[static_cast<size_t>(id)].empty()) return false;
  return matcher_.advance(trie.bytes[static_cast<size_t>(id)]);
}

bool TokenMatcher::allows(int32_t id) {
  if (ended_) return false;
  if (is_end(id)) return matcher_.complete();
  const TokenTrie& trie = GrammarAccess::trie(grammar_->vocabulary());
  if (id < 0 || id >= trie.vocab_size || trie.bytes[static_cast<size_t>(id)].empty()) return false;
  return matcher_.accepts(trie.bytes[static_cast<size_t>(id)]);
}

size_t TokenMatcher::allowed_prefix(std::span<const int32_t> ids) {
  if (ids.empty()) return 0;
  TokenMatcher probe(*this);
  size_t n = 0;
  while (n < ids.size() && probe.accept(ids[n])) ++n;
  return n;
}

}  // namespace kvinfer::grammar
