// The trie of token bytes and the per-state token tables: one walk of the trie per state that
// reads a byte, advancing a parse that starts in that state with nothing known below it.
#include "grammar/token_table.h"

#include <algorithm>
#include <bit>
#include <numeric>

#include <fmt/format.h>

#include "grammar/matcher.h"
#include "kvinfer/error.h"

namespace kvinfer::grammar {

namespace {

// Tokens longer than this are never allowed (no real vocabulary has one).
constexpr size_t kMaxTokenBytes = 1024;

void set_bit(std::span<uint64_t> m, int32_t id) { m[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63); }

}  // namespace

TokenTrie TokenTrie::build(std::vector<std::string> bytes, std::vector<int32_t> end_ids) {
  TokenTrie t;
  t.vocab_size = static_cast<int32_t>(bytes.size());
  t.usable.assign((bytes.size() + 63) / 64, 0);
  for (auto& b : bytes)
    if (b.size() > kMaxTokenBytes) b.clear();
  t.bytes = std::move(bytes);
  t.end_ids = std::move(end_ids);
  std::vector<int32_t> order;
  for (int32_t id = 0; id < t.vocab_size; ++id)
    if (!t.bytes[static_cast<size_t>(id)].empty()) {
      order.push_back(id);
      set_bit(t.usable, id);
    }
  t.usable_count = order.size();
  // char_traits<char> compares as unsigned char: preorder by byte value.
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return t.bytes[static_cast<size_t>(a)] < t.bytes[static_cast<size_t>(b)]; });
  std::vector<uint32_t> open;  // the node at each depth of the current path
  const std::string* prev = nullptr;
  for (int32_t id : order) {
    const std::string& s = t.bytes[static_cast<size_t>(id)];
    size_t common = 0;
    if (prev != nullptr)
      while (common < s.size() && common < prev->size() && s[common] == (*prev)[common]) ++common;
    while (open.size() > common) {
      t.nodes[open.back()].end = static_cast<uint32_t>(t.nodes.size());
      open.pop_back();
    }
    for (size_t d = common; d < s.size(); ++d) {
      open.push_back(static_cast<uint32_t>(t.nodes.size()));
      const auto at = static_cast<uint32_t>(t.tokens.size());
      t.nodes.push_back({0, at, at, static_cast<uint16_t>(d + 1), static_cast<uint8_t>(s[d])});
    }
    // Equal bytes sort together, right after the path's own end: the node's tokens stay contiguous.
    t.tokens.push_back(id);
    t.nodes[open.back()].tokens_end = static_cast<uint32_t>(t.tokens.size());
    t.max_depth = std::max(t.max_depth, s.size());
    prev = &s;
  }
  while (!open.empty()) {
    t.nodes[open.back()].end = static_cast<uint32_t>(t.nodes.size());
    open.pop_back();
  }
  return t;
}

void TokenTables::add_accepted(uint32_t state, const TokenTrie& trie, std::span<uint64_t> mask) const {
  const TokenSet& s = accepted[state];
  switch (s.form) {
    case TokenSet::Form::Bits: {
      const uint64_t* w = words.data() + s.offset;
      for (size_t i = 0; i < mask.size(); ++i) mask[i] |= w[i];
      return;
    }
    case TokenSet::Form::List:
      for (uint32_t i = 0; i < s.count; ++i) set_bit(mask, ids[s.offset + i]);
      return;
    case TokenSet::Form::AllBut: {
      // Every usable token but the listed ones: the listed ones keep whatever bits they had.
      std::vector<uint64_t> keep(s.count);
      for (uint32_t i = 0; i < s.count; ++i) {
        const int32_t id = ids[s.offset + i];
        keep[i] = mask[static_cast<size_t>(id) >> 6] & (uint64_t{1} << (id & 63));
      }
      for (size_t i = 0; i < mask.size(); ++i) mask[i] |= trie.usable[i];
      for (uint32_t i = 0; i < s.count; ++i) {
        const int32_t id = ids[s.offset + i];
        uint64_t& w = mask[static_cast<size_t>(id) >> 6];
        w = (w & ~(uint64_t{1} << (id & 63))) | keep[i];
      }
      return;
    }
  }
}

namespace {

// The walk of the trie from one state. A level is what is known after the bytes of one trie
// node's path: while the parse stays in the starting frame with no call entered it is one
// state ("simple", no stack built); otherwise a set of parses in the matcher's pool.
struct Level {
  bool simple = true;
  uint32_t state = Pda::kDead;
  size_t pool_after = 0;  // the pool's size once this level was computed
  bool alive = false;     // a token ending here is accepted
  bool reads = false;     // a parse can read another byte without leaving the frame
  bool esc = false;       // a parse ended the starting frame right after this level's bytes
  bool unc = false;       // some parse left the starting frame earlier and read on: undecided
};

class Walker {
 public:
  Walker(const Pda& pda, const TokenTrie& trie, TokenTables& out)
      : pda_(pda),
        trie_(trie),
        out_(out),
        matcher_(pda),
        levels_(trie.max_depth + 1),
        parses_(trie.max_depth + 1),
        bits_(trie.usable.size(), 0) {}

  void run(uint32_t state) {
    count_ = 0;
    const Pda::Rule& rule = pda_.rules[pda_.states[state].rule];
    StackPool& pool = matcher_.pool();
    levels_[0] = Level{true, state, pool.size(), true, true, false, false};
    const auto& nodes = trie_.nodes;
    size_t i = 0;
    while (i < nodes.size()) {
      const TokenTrie::Node& node = nodes[i];
      const Level& p = levels_[node.depth - 1];
      Level& l = levels_[node.depth];
      pool.rollback(p.pool_after);
      if (++out_.trie_steps > kMaxTrieSteps)
        throw Error(ErrorKind::InvalidArgument,
                    fmt::format("grammar: too large for this vocabulary: compiling its token tables takes more than {} "
                                "trie steps",
                                kMaxTrieSteps));
      l = Level{};
      l.unc = p.unc || (p.esc && has_byte(rule.follow, node.byte));
      if (p.simple) {
        const uint32_t t = p.state == Pda::kDead ? Pda::kDead : pda_.next(p.state, node.byte);
        const Pda::State* ts = t == Pda::kDead ? nullptr : &pda_.states[t];
        if (ts == nullptr) {
          l.simple = true;
        } else if (ts->calls_begin == ts->calls_end) {
          l.simple = true;
          l.state = t;
          l.alive = true;
          l.reads = ts->has_bytes;
          l.esc = ts->final;
        } else {
          l.simple = false;
          Parses& ps = parses_[node.depth];
          ps.heads.clear();
          ps.popped = false;
          matcher_.new_round();
          matcher_.expand(pool.make(t, StackPool::kNone), ps);
          set_from(l, ps);
        }
      } else {
        Parses& ps = parses_[node.depth];
        if (p.reads) {
          matcher_.step(parses_[node.depth - 1], node.byte, ps);
        } else {
          ps.heads.clear();
          ps.popped = false;
        }
        l.simple = false;
        set_from(l, ps);
      }
      l.pool_after = pool.size();
      for (uint32_t k = node.tokens_begin; k < node.tokens_end; ++k) {
        if (l.alive) {
          const int32_t id = trie_.tokens[k];
          bits_[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
          ++count_;
        }
        else if (l.unc)
          out_.uncertain.push_back(trie_.tokens[k]);
      }
      if (!l.reads && l.unc) {  // every longer token through here is undecided
        for (uint32_t k = nodes[i].tokens_end; k < (node.end < nodes.size() ? nodes[node.end].tokens_begin
                                                                              : trie_.tokens.size());
             ++k)
          out_.uncertain.push_back(trie_.tokens[k]);
        i = node.end;
        continue;
      }
      i = l.reads || l.esc || l.unc ? i + 1 : node.end;
    }
    pool.rollback(levels_[0].pool_after);
    store(state);
  }

 private:
  static void set_from(Level& l, const Parses& ps) {
    l.reads = !ps.heads.empty();
    l.esc = ps.popped;
    l.alive = l.reads || l.esc;
  }

  // The accepted tokens (bits_, count_) in the smallest form; bits_ cleared for the next state.
  void store(uint32_t state) {
    TokenSet& s = out_.accepted[state];
    const size_t n = count_, usable = trie_.usable_count, limit = bits_.size() * 2;  // ids in a bitset's bytes
    const auto offset = static_cast<uint32_t>(out_.ids.size());
    if (n <= limit) {
      s = {TokenSet::Form::List, offset, static_cast<uint32_t>(n)};
      for (size_t w = 0; w < bits_.size(); ++w)
        for (uint64_t b = bits_[w]; b != 0; b &= b - 1) out_.ids.push_back(static_cast<int32_t>(w * 64 + std::countr_zero(b)));
    } else if (usable - n <= limit) {
      s = {TokenSet::Form::AllBut, offset, static_cast<uint32_t>(usable - n)};
      for (size_t w = 0; w < bits_.size(); ++w)
        for (uint64_t b = trie_.usable[w] & ~bits_[w]; b != 0; b &= b - 1)
          out_.ids.push_back(static_cast<int32_t>(w * 64 + std::countr_zero(b)));
    } else {
      s = {TokenSet::Form::Bits, static_cast<uint32_t>(out_.words.size()), 0};
      out_.words.insert(out_.words.end(), bits_.begin(), bits_.end());
    }
    std::fill(bits_.begin(), bits_.end(), 0);
  }

  const Pda& pda_;
  const TokenTrie& trie_;
  TokenTables& out_;
  Matcher matcher_;
  std::vector<Level> levels_;
  std::vector<Parses> parses_;
  std::vector<uint64_t> bits_;  // (vocab bits) the tokens accepted from the current state
  size_t count_ = 0;
};

}  // namespace

TokenTables build_tables(const Pda& pda, const TokenTrie& trie) {
  TokenTables t;
  t.accepted.resize(pda.states.size());
  t.uncertain_at.assign(pda.states.size() + 1, 0);
  Walker w(pda, trie, t);
  for (uint32_t s = 0; s < pda.states.size(); ++s) {
    t.uncertain_at[s] = static_cast<uint32_t>(t.uncertain.size());
    if (pda.states[s].has_bytes) w.run(s);
  }
  t.uncertain_at[pda.states.size()] = static_cast<uint32_t>(t.uncertain.size());
  return t;
}

}  // namespace kvinfer::grammar
