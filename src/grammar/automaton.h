#pragma once
// A grammar compiled to a pushdown automaton over bytes: every rule that must stay a rule (the
// root, and rules that recur) becomes one deterministic automaton whose edges read a byte class
// or call another rule; every other rule is inlined where it is used. Rules that can never end,
// states that can never reach an end, and left recursion are found here, so that the matcher's
// closure always terminates and every state it keeps can still complete.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "grammar/ast.h"

namespace kvinfer::grammar {

using ByteSet = std::array<uint64_t, 4>;

inline bool has_byte(const ByteSet& s, uint8_t b) { return (s[b >> 6] >> (b & 63)) & 1; }

// Limits that bound a hostile grammar's size (and with it the time to compile it).
inline constexpr size_t kMaxNfaStates = 500'000;
inline constexpr size_t kMaxStates = 40'000;  // deterministic states, all rules together

struct Pda {
  static constexpr uint32_t kDead = UINT32_MAX;

  struct Call {
    uint32_t rule;   // the callee
    uint32_t ret;    // where the caller continues once it ends
  };
  struct State {
    uint32_t rule = 0;
    uint32_t calls_begin = 0, calls_end = 0;  // in `calls`
    bool final = false;                        // the rule may end here
    bool has_bytes = false;                    // some byte moves on from here
  };
  struct Rule {
    std::string name;
    uint32_t start = 0;
    bool nullable = false;   // may match the empty string
    ByteSet follow{};        // the bytes that may come right after it ends, in any context
    bool can_end = false;    // the output may end right after it
  };

  std::array<uint8_t, 256> byte_class{};  // bytes that every edge treats alike share a class
  uint32_t num_classes = 0;
  std::vector<uint32_t> trans;  // (states × num_classes): the next state, or kDead
  std::vector<State> states;
  std::vector<Call> calls;
  std::vector<Rule> rules;
  uint32_t root = 0;

  uint32_t next(uint32_t state, uint8_t byte) const {
    return trans[static_cast<size_t>(state) * num_classes + byte_class[byte]];
  }
};

// Compiles the parsed grammar. Throws Error (InvalidArgument) when it matches nothing, a rule is
// left-recursive, or it is beyond the limits above.
Pda compile(const Ast& ast);

// The byte-range sequences whose concatenations are the UTF-8 encodings of the code points in
// [lo, hi] (no surrogates inside): each sequence lists (lowest, highest) byte per position.
std::vector<std::vector<std::pair<uint8_t, uint8_t>>> utf8_sequences(char32_t lo, char32_t hi);

}  // namespace kvinfer::grammar
