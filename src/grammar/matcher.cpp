// The parse-set machinery: hash-consed stack nodes, the closure over calls and returns, byte
// steps, and all-or-nothing reads of a token's bytes.
#include "grammar/matcher.h"

#include <algorithm>
#include <unordered_map>

#include <fmt/format.h>

#include "kvinfer/error.h"

namespace kvinfer::grammar {

namespace {

size_t hash_of(uint32_t state, uint32_t parent) {
  uint64_t h = (static_cast<uint64_t>(state) << 32) | parent;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return static_cast<size_t>(h);
}

}  // namespace

void StackPool::clear() {
  nodes_.clear();
  table_.assign(1024, 0);
  mask_ = table_.size() - 1;
}

void StackPool::grow() {
  table_.assign(table_.size() * 2, 0);
  mask_ = table_.size() - 1;
  for (size_t id = 0; id < nodes_.size(); ++id) {
    size_t slot = hash_of(nodes_[id].state, nodes_[id].parent) & mask_;
    while (table_[slot] != 0) slot = (slot + 1) & mask_;
    table_[slot] = static_cast<uint32_t>(id + 1);
    nodes_[id].slot = static_cast<uint32_t>(slot);
  }
}

uint32_t StackPool::make(uint32_t state, uint32_t parent) {
  size_t slot = hash_of(state, parent) & mask_;
  while (table_[slot] != 0) {
    const Node& n = nodes_[table_[slot] - 1];
    if (n.state == state && n.parent == parent) return table_[slot] - 1;
    slot = (slot + 1) & mask_;
  }
  const auto id = static_cast<uint32_t>(nodes_.size());
  nodes_.push_back({state, parent, static_cast<uint32_t>(slot)});
  table_[slot] = id + 1;
  if (nodes_.size() * 2 > table_.size()) grow();
  return id;
}

void StackPool::rollback(size_t mark) {
  while (nodes_.size() > mark) {
    table_[nodes_.back().slot] = 0;
    nodes_.pop_back();
  }
}

Matcher::Matcher(const Pda& pda) : pda_(&pda) { reset(); }

void Matcher::reset() {
  pool_.clear();
  stamp_.clear();
  round_ = 0;
  parses_.heads.clear();
  parses_.popped = false;
  new_round();
  expand(pool_.make(pda_->rules[pda_->root].start, StackPool::kNone), parses_);
}

void Matcher::new_round() {
  if (++round_ == 0) {  // wrapped: every stamp is stale
    std::fill(stamp_.begin(), stamp_.end(), 0);
    round_ = 1;
  }
}

void Matcher::expand(uint32_t node, Parses& out) {
  const Pda& pda = *pda_;
  work_.clear();
  work_.push_back(node);
  while (!work_.empty()) {
    const uint32_t n = work_.back();
    work_.pop_back();
    if (stamp_.size() <= n) stamp_.resize(std::max<size_t>(n + 1, stamp_.size() * 2), 0);
    if (stamp_[n] == round_) continue;
    stamp_[n] = round_;
    const StackPool::Node node_copy = pool_[n];
    const Pda::State& st = pda.states[node_copy.state];
    if (st.has_bytes) {
      if (out.heads.size() >= kMaxHeads)
        throw Error(ErrorKind::InvalidArgument,
                    fmt::format("grammar: more than {} parses are alive at once (the grammar is too ambiguous)", kMaxHeads));
      out.heads.push_back(n);
    }
    for (uint32_t i = st.calls_begin; i < st.calls_end; ++i) {
      const Pda::Call& c = pda.calls[i];
      const uint32_t caller = pool_.make(c.ret, node_copy.parent);
      work_.push_back(pool_.make(pda.rules[c.rule].start, caller));
    }
    if (st.final) {
      if (node_copy.parent == StackPool::kNone)
        out.popped = true;
      else
        work_.push_back(node_copy.parent);
    }
  }
}

bool Matcher::step(const Parses& in, uint8_t byte, Parses& out) {
  out.heads.clear();
  out.popped = false;
  new_round();
  for (uint32_t h : in.heads) {
    const StackPool::Node n = pool_[h];
    const uint32_t t = pda_->next(n.state, byte);
    if (t != Pda::kDead) expand(pool_.make(t, n.parent), out);
  }
  return !out.heads.empty() || out.popped;
}

// Reads `bytes` from `from` through the scratch buffers; the result is *last_ when true.
bool Matcher::run(const Parses& from, std::string_view bytes) {
  const Parses* cur = &from;
  for (const char b : bytes) {
    Parses& next = cur == &scratch_[0] ? scratch_[1] : scratch_[0];
    if (!step(*cur, static_cast<uint8_t>(b), next)) return false;
    cur = &next;
  }
  last_ = cur;
  return true;
}

bool Matcher::accepts(std::string_view bytes) {
  const size_t mark = pool_.size();
  const bool ok = run(parses_, bytes);
  pool_.rollback(mark);
  return ok;
}

bool Matcher::accepts_from(uint32_t head, std::string_view bytes) {
  const size_t mark = pool_.size();
  start_.heads.assign(1, head);
  start_.popped = false;
  const bool ok = run(start_, bytes);
  pool_.rollback(mark);
  return ok;
}

bool Matcher::advance(std::string_view bytes) {
  const size_t mark = pool_.size();
  if (!run(parses_, bytes)) {
    pool_.rollback(mark);
    return false;
  }
  if (last_ != &parses_) std::swap(parses_, *const_cast<Parses*>(last_));
  maybe_compact();
  return true;
}

void Matcher::assign_compact(const Matcher& other) {
  pda_ = other.pda_;
  pool_.clear();
  std::vector<uint32_t> chain;
  std::unordered_map<uint32_t, uint32_t> remap;  // other's node → ours
  const auto find = [&](uint32_t n) -> uint32_t {
    const auto it = remap.find(n);
    return it == remap.end() ? StackPool::kNone : it->second;
  };
  parses_.heads.clear();
  parses_.popped = other.parses_.popped;
  for (uint32_t h : other.parses_.heads) {
    chain.clear();
    uint32_t n = h;
    while (n != StackPool::kNone && find(n) == StackPool::kNone) {
      chain.push_back(n);
      n = other.pool_[n].parent;
    }
    uint32_t below = n == StackPool::kNone ? n : find(n);
    for (size_t i = chain.size(); i-- > 0;) {
      below = pool_.make(other.pool_[chain[i]].state, below);
      remap.emplace(chain[i], below);
    }
    parses_.heads.push_back(find(h));
  }
  stamp_.assign(pool_.size(), 0);
  round_ = 0;
  new_round();
}

// Nodes are never freed while reading; once the pool is large and mostly unreachable, it is
// rebuilt from the current parses (parents before children, as they were made).
void Matcher::maybe_compact() {
  if (pool_.size() < 65536) return;
  std::vector<uint32_t> keep;
  std::vector<bool> mark(pool_.size(), false);
  for (uint32_t h : parses_.heads)
    for (uint32_t n = h; n != StackPool::kNone && !mark[n]; n = pool_[n].parent) mark[n] = true;
  size_t live = 0;
  for (bool m : mark) live += m;
  if (live * 4 > pool_.size()) return;
  StackPool fresh;
  std::vector<uint32_t> remap(pool_.size(), StackPool::kNone);
  for (uint32_t id = 0; id < pool_.size(); ++id)
    if (mark[id]) {
      const uint32_t parent = pool_[id].parent;
      remap[id] = fresh.make(pool_[id].state, parent == StackPool::kNone ? parent : remap[parent]);
    }
  for (uint32_t& h : parses_.heads) h = remap[h];
  pool_ = std::move(fresh);
  stamp_.assign(pool_.size(), 0);
  round_ = 0;
  new_round();
}

}  // namespace kvinfer::grammar
