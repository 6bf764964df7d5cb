#pragma once
// The token side of constrained sampling. TokenTrie: every usable token's bytes in a byte trie
// (sorted, preorder). TokenTables: for every automaton state that reads a byte, which tokens a
// parse whose top frame is in that state accepts whatever the frames below are (the
// context-independent tokens), and which ones can only be decided by the frames below (they end
// the frame and read on: checked at run time). Most tokens fall in the first group, so a step's
// mask is mostly a copy of precomputed sets (the idea of XGrammar's adaptive token mask cache).
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "grammar/automaton.h"

namespace kvinfer::grammar {

struct TokenTrie {
  struct Node {
    uint32_t end;                  // the index just past this node's subtree
    uint32_t tokens_begin, tokens_end;  // tokens whose bytes end here, in `tokens`
    uint16_t depth;                // bytes from the root (1 for the first byte)
    uint8_t byte;
  };

  int32_t vocab_size = 0;
  std::vector<std::string> bytes;   // (vocab) each token's bytes; "" for tokens never allowed
  std::vector<uint64_t> usable;     // (vocab bits) tokens with bytes, not special
  size_t usable_count = 0;
  std::vector<int32_t> end_ids;     // the tokenizer's end-of-generation ids
  std::vector<Node> nodes;          // preorder
  std::vector<int32_t> tokens;      // ids in trie order
  size_t max_depth = 0;

  // From per-id bytes (empty: never allowed) and the end ids.
  static TokenTrie build(std::vector<std::string> bytes, std::vector<int32_t> end_ids);
};

// A set of token ids in whichever of three forms is smallest.
struct TokenSet {
  enum class Form : uint8_t { Bits, List, AllBut };
  Form form = Form::List;
  uint32_t offset = 0, count = 0;  // Bits: words at `offset`; List/AllBut: `count` ids at `offset`
};

struct TokenTables {
  std::vector<TokenSet> accepted;        // (states)
  std::vector<uint32_t> uncertain_at;    // (states + 1) ranges of `uncertain`
  std::vector<int32_t> uncertain;        // decided at run time
  std::vector<uint64_t> words;           // Bits sets
  std::vector<int32_t> ids;              // List and AllBut sets
  uint64_t trie_steps = 0;               // the work it took

  size_t bytes() const {
    return accepted.size() * sizeof(TokenSet) + uncertain_at.size() * 4 + uncertain.size() * 4 + words.size() * 8 +
           ids.size() * 4;
  }
  // mask |= the accepted set of `state` (mask: vocab bits).
  void add_accepted(uint32_t state, const TokenTrie& trie, std::span<uint64_t> mask) const;
};

// The most trie nodes all the states' walks may visit together before the compile gives up
// (about 10 s on one core): what bounds a hostile grammar's compile time.
inline constexpr uint64_t kMaxTrieSteps = 2'000'000'000;

TokenTables build_tables(const Pda& pda, const TokenTrie& trie);

}  // namespace kvinfer::grammar
