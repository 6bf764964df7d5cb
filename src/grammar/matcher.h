#pragma once
// Running a Pda over bytes: the set of parses alive (each a stack of rule frames) after the bytes
// read so far. Stacks share their lower frames as a tree of nodes, one node per distinct
// (state, frame below), so equal stacks are one node and a set of parses is a set of node ids.
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "grammar/automaton.h"

namespace kvinfer::grammar {

// Parses alive at once, at most (an ambiguous grammar could otherwise multiply them).
inline constexpr size_t kMaxHeads = 4096;

class StackPool {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;
  struct Node {
    uint32_t state;   // the top frame's state
    uint32_t parent;  // the frame below (its state is where it continues), or kNone
    uint32_t slot;    // in table_
  };

  StackPool() { clear(); }
  // The node for (state, parent): the existing one, or a new one.
  uint32_t make(uint32_t state, uint32_t parent);
  const Node& operator[](uint32_t id) const { return nodes_[id]; }
  size_t size() const { return nodes_.size(); }
  // Forgets every node made after size() was `mark` (nodes are made in order, and a removal in
  // reverse order leaves the hash table as it was).
  void rollback(size_t mark);
  void clear();

 private:
  void grow();
  std::vector<Node> nodes_;
  std::vector<uint32_t> table_;  // node id + 1; 0: empty (open addressing, linear probing)
  size_t mask_ = 0;
};

// A set of parses: the nodes whose top state reads a byte next ("heads"), and whether a parse
// has ended the bottom frame ("popped": the output is complete, or for a table's walk, the
// rule it starts in has ended).
struct Parses {
  std::vector<uint32_t> heads;
  bool popped = false;
};

class Matcher {
 public:
  explicit Matcher(const Pda& pda);

  // The parses of the empty output.
  void reset();
  // Becomes `other`'s parses (the same Pda), copying only the stack nodes they reach.
  void assign_compact(const Matcher& other);
  // Reads the bytes: true and the new parses, or false and nothing changed (no parse reads them).
  bool advance(std::string_view bytes);
  // Whether the bytes could be read now (nothing changes).
  bool accepts(std::string_view bytes);
  // The bytes read so far are a whole output / something more can be read.
  bool complete() const { return parses_.popped; }
  bool can_continue() const { return !parses_.heads.empty(); }
  const Parses& parses() const { return parses_; }
  StackPool& pool() { return pool_; }
  const Pda& pda() const { return *pda_; }

  // Whether `bytes` can be read from the parse `head` alone (a node of the pool).
  bool accepts_from(uint32_t head, std::string_view bytes);

  // The parses of `node` expanded: calls entered, ended rules returned from, every head (a node
  // whose state reads a byte) appended to out.heads once; out.popped when a bottom frame ends.
  // Throws when more than kMaxHeads parses are alive.
  void expand(uint32_t node, Parses& out);
  // One byte from `in` into `out` (cleared first); false when no parse survives.
  bool step(const Parses& in, uint8_t byte, Parses& out);
  // Starts a new expansion round: a node expanded in this round is not expanded again.
  void new_round();

 private:
  bool run(const Parses& from, std::string_view bytes);
  void maybe_compact();

  const Pda* pda_;
  StackPool pool_;
  Parses parses_;
  Parses scratch_[2], start_;
  const Parses* last_ = nullptr;
  std::vector<uint32_t> stamp_;  // (nodes) the round a node was last expanded in
  uint32_t round_ = 0;
  std::vector<uint32_t> work_;
};

}  // namespace kvinfer::grammar
