// Grammar → pushdown automaton: Thompson NFAs over bytes (code points as UTF-8 byte-range
// sequences), non-recursive rules inlined, one subset construction per remaining rule, then
// the analyses the matcher and the token tables rely on (productive rules, live states, nullable
// rules, no left recursion, the bytes that may follow each rule).
#include "grammar/automaton.h"

#include <algorithm>
#include <functional>
#include <map>
#include <unordered_map>

#include <fmt/format.h>

#include "kvinfer/error.h"

namespace kvinfer::grammar {

namespace {

[[noreturn]] void too_large(const std::string& what) {
  throw Error(ErrorKind::InvalidArgument, fmt::format("grammar: too large: {}", what));
}

void encode(char32_t cp, uint8_t* out, int n) {
  if (n == 1) {
    out[0] = static_cast<uint8_t>(cp);
  } else if (n == 2) {
    out[0] = static_cast<uint8_t>(0xC0 | (cp >> 6));
    out[1] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
  } else if (n == 3) {
    out[0] = static_cast<uint8_t>(0xE0 | (cp >> 12));
    out[1] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
    out[2] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
  } else {
    out[0] = static_cast<uint8_t>(0xF0 | (cp >> 18));
    out[1] = static_cast<uint8_t>(0x80 | ((cp >> 12) & 0x3F));
    out[2] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
    out[3] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
  }
}

// [lo, hi] of one encoded length n: split until every byte position is one range.
void split_same_length(char32_t lo, char32_t hi, int n, std::vector<std::vector<std::pair<uint8_t, uint8_t>>>& out) {
  for (int i = 1; i < n; ++i) {
    const char32_t m = (char32_t{1} << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split_same_length(lo, lo | m, n, out);
        split_same_length((lo | m) + 1, hi, n, out);
        return;
      }
      if ((hi & m) != m) {
        split_same_length(lo, (hi & ~m) - 1, n, out);
        split_same_length(hi & ~m, hi, n, out);
        return;
      }
    }
  }
  uint8_t a[4], b[4];
  encode(lo, a, n);
  encode(hi, b, n);
  std::vector<std::pair<uint8_t, uint8_t>> seq;
  for (int i = 0; i < n; ++i) seq.emplace_back(a[i], b[i]);
  out.push_back(std::move(seq));
}

struct NfaEdge {
  uint8_t lo, hi;
  uint32_t to;
};
struct NfaState {
  std::vector<NfaEdge> bytes;
  std::vector<uint32_t> eps;
  std::vector<std::pair<uint32_t, uint32_t>> calls;  // (kept rule, to)
};

// Which rules stay rules: the root, those on a cycle of references, and big ones used more than
// once (inlining those would copy them into every caller). The others are inlined.
std::vector<bool> rules_to_keep(const Ast& ast) {
  const size_t n = ast.rules.size();
  std::vector<std::vector<uint32_t>> refs(n);
  std::function<void(const Expr&, std::vector<uint32_t>&)> collect = [&](const Expr& e, std::vector<uint32_t>& out) {
    if (e.kind == Expr::Kind::Rule) out.push_back(e.rule);
    for (const Expr& c : e.items) collect(c, out);
  };
  for (size_t r = 0; r < n; ++r) collect(ast.rules[r].body, refs[r]);

  // Tarjan's strongly connected components, iteratively (a hostile grammar's chain of rules
  // must not exhaust the stack).
  std::vector<int> index(n, -1), low(n, 0), comp(n, -1), comp_size;
  std::vector<bool> on_stack(n, false);
  std::vector<uint32_t> stack;
  int counter = 0;
  for (uint32_t s = 0; s < n; ++s) {
    if (index[s] >= 0) continue;
    std::vector<std::pair<uint32_t, size_t>> work{{s, 0}};
    index[s] = low[s] = counter++;
    stack.push_back(s);
    on_stack[s] = true;
    while (!work.empty()) {
      auto& [v, i] = work.back();
      if (i < refs[v].size()) {
        const uint32_t w = refs[v][i++];
        if (index[w] < 0) {
          index[w] = low[w] = counter++;
          stack.push_back(w);
          on_stack[w] = true;
          work.emplace_back(w, 0);
        } else if (on_stack[w]) {
          low[v] = std::min(low[v], index[w]);
        }
        continue;
      }
      if (low[v] == index[v]) {
        const int c = static_cast<int>(comp_size.size());
        comp_size.push_back(0);
        uint32_t w;
        do {
          w = stack.back();
          stack.pop_back();
          on_stack[w] = false;
          comp[w] = c;
          ++comp_size[c];
        } while (w != v);
      }
      const uint32_t done = v;
      work.pop_back();
      if (!work.empty()) low[work.back().first] = std::min(low[work.back().first], low[done]);
    }
  }
  std::vector<bool> keep(n, false), self(n, false);
  for (uint32_t r = 0; r < n; ++r) {
    self[r] = std::find(refs[r].begin(), refs[r].end(), r) != refs[r].end();
    keep[r] = r == ast.root || comp_size[comp[r]] > 1 || self[r];
  }
  std::vector<int> uses(n, 0);
  for (uint32_t r = 0; r < n; ++r)
    for (uint32_t t : refs[r]) ++uses[t];
  // On a cycle, a rule used in one place only is inlined there too, as long as every cycle keeps
  // a rule (the rules not kept must reference each other without a cycle): fewer calls, fewer
  // tokens that the frames below decide.
  const auto acyclic_without_kept = [&] {
    std::vector<int> color(n, 0);
    for (uint32_t s = 0; s < n; ++s) {
      if (keep[s] || color[s] != 0) continue;
      std::vector<std::pair<uint32_t, size_t>> dfs{{s, 0}};
      color[s] = 1;
      while (!dfs.empty()) {
        auto& [v, i] = dfs.back();
        if (i < refs[v].size()) {
          const uint32_t w = refs[v][i++];
          if (keep[w]) continue;
          if (color[w] == 1) return false;
          if (color[w] == 0) {
            color[w] = 1;
            dfs.emplace_back(w, 0);
          }
          continue;
        }
        color[v] = 2;
        dfs.pop_back();
      }
    }
    return true;
  };
  for (uint32_t r = 0; r < n; ++r) {
    if (!keep[r] || r == ast.root || self[r] || uses[r] != 1) continue;
    keep[r] = false;
    if (!acyclic_without_kept()) keep[r] = true;
  }
  // The rules not kept, callees first (a post-order over their references, which have no cycle).
  std::vector<uint32_t> order;
  {
    std::vector<bool> done(n, false);
    for (uint32_t s = 0; s < n; ++s) {
      if (keep[s] || done[s]) continue;
      std::vector<std::pair<uint32_t, size_t>> dfs{{s, 0}};
      done[s] = true;
      while (!dfs.empty()) {
        auto& [v, i] = dfs.back();
        if (i < refs[v].size()) {
          const uint32_t w = refs[v][i++];
          if (!keep[w] && !done[w]) {
            done[w] = true;
            dfs.emplace_back(w, 0);
          }
          continue;
        }
        order.push_back(v);
        dfs.pop_back();
      }
    }
  }
  // Estimated NFA size once inlined, and how deep inlining nests; big shared rules stay rules.
  std::vector<double> size(n, 0);
  std::vector<int> height(n, 0);
  std::function<double(const Expr&, int&)> estimate = [&](const Expr& e, int& h) -> double {
    switch (e.kind) {
      case Expr::Kind::Literal: return static_cast<double>(e.bytes.size()) + 1;
      case Expr::Kind::Chars: return 3.0 * static_cast<double>(e.ranges.size()) + 4;
      case Expr::Kind::Rule:
        if (keep[e.rule]) return 1;
        h = std::max(h, height[e.rule] + 1);
        return size[e.rule];
      case Expr::Kind::Repeat: {
        const double one = estimate(e.items[0], h);
        const double copies = e.max == Expr::kUnbounded ? std::max<double>(e.min, 1) + 1 : std::max<double>(e.max, 1);
        return one * copies + 2;
      }
      default: {
        double s = 1;
        for (const Expr& c : e.items) s += estimate(c, h) + 1;
        return s;
      }
    }
  };
  for (uint32_t r : order) {
    if (keep[r]) continue;
    int h = 0;
    size[r] = estimate(ast.rules[r].body, h);
    height[r] = h;
    if (h > 16 || (size[r] > 2000 && uses[r] > 1)) {
      keep[r] = true;
      height[r] = 0;
    }
  }
  return keep;
}

class NfaBuilder {
 public:
  NfaBuilder(const Ast& ast, const std::vector<int32_t>& kept_id, size_t& total)
      : ast_(ast), kept_id_(kept_id), total_(total) {}

  std::vector<NfaState> states;

  uint32_t add() {
    if (++total_ > kMaxNfaStates)
      too_large(fmt::format("its automaton needs more than {} states before determinisation", kMaxNfaStates));
    states.emplace_back();
    return static_cast<uint32_t>(states.size() - 1);
  }

  // Adds paths from `from` to `to` that read what `e` matches.
  void build(const Expr& e, uint32_t from, uint32_t to) {
    switch (e.kind) {
      case Expr::Kind::Literal: {
        uint32_t at = from;
        for (size_t i = 0; i < e.bytes.size(); ++i) {
          const uint32_t next = i + 1 == e.bytes.size() ? to : add();
          const auto b = static_cast<uint8_t>(e.bytes[i]);
          states[at].bytes.push_back({b, b, next});
          at = next;
        }
        if (e.bytes.empty()) states[from].eps.push_back(to);
        return;
      }
      case Expr::Kind::Chars:
        for (auto [lo, hi] : e.ranges)
          for (const auto& seq : utf8_sequences(lo, hi)) {
            uint32_t at = from;
            for (size_t i = 0; i < seq.size(); ++i) {
              const uint32_t next = i + 1 == seq.size() ? to : add();
              states[at].bytes.push_back({seq[i].first, seq[i].second, next});
              at = next;
            }
          }
        return;
      case Expr::Kind::Rule:
        if (kept_id_[e.rule] >= 0)
          states[from].calls.emplace_back(static_cast<uint32_t>(kept_id_[e.rule]), to);
        else
          build(ast_.rules[e.rule].body, from, to);
        return;
      case Expr::Kind::Seq: {
        uint32_t at = from;
        for (size_t i = 0; i < e.items.size(); ++i) {
          const uint32_t next = i + 1 == e.items.size() ? to : add();
          build(e.items[i], at, next);
          at = next;
        }
        if (e.items.empty()) states[from].eps.push_back(to);
        return;
      }
      case Expr::Kind::Alt:
        for (const Expr& c : e.items) {
          // Each alternative between fresh states, so that one's loops cannot reach another's.
          const uint32_t a = add(), b = add();
          states[from].eps.push_back(a);
          build(c, a, b);
          states[b].eps.push_back(to);
        }
        return;
      case Expr::Kind::Repeat: {
        uint32_t at = from;
        for (uint32_t i = 0; i < e.min; ++i) {
          const uint32_t next = add();
          build(e.items[0], at, next);
          at = next;
        }
        if (e.max == Expr::kUnbounded) {
          const uint32_t loop = add(), body_end = add();
          states[at].eps.push_back(loop);
          build(e.items[0], loop, body_end);
          states[body_end].eps.push_back(loop);
          states[loop].eps.push_back(to);
          return;
        }
        for (uint32_t i = e.min; i < e.max; ++i) {
          const uint32_t next = add();
          states[at].eps.push_back(to);
          build(e.items[0], at, next);
          at = next;
        }
        states[at].eps.push_back(to);
        return;
      }
    }
  }

 private:
  const Ast& ast_;
  const std::vector<int32_t>& kept_id_;
  size_t& total_;
};

struct VecHash {
  size_t operator()(const std::vector<uint32_t>& v) const {
    uint64_t h = 1469598103934665603ull;
    for (uint32_t x : v) h = (h ^ x) * 1099511628211ull;
    return static_cast<size_t>(h);
  }
};

// One rule's subset construction over the global byte classes; states numbered from `base`.
struct RuleDfa {
  std::vector<uint32_t> trans;                                   // (states × classes), local ids or kDead
  std::vector<bool> final;
  std::vector<std::vector<std::pair<uint32_t, uint32_t>>> calls;  // (callee, local ret)
};

RuleDfa determinize(const std::vector<NfaState>& nfa, uint32_t accept, const std::array<uint8_t, 256>& cls,
                    uint32_t num_classes, size_t& total_states) {
  RuleDfa d;
  std::vector<uint32_t> stamp(nfa.size(), 0);
  uint32_t gen = 0;
  std::vector<uint32_t> stack;
  const auto closure = [&](std::vector<uint32_t>& set) {
    ++gen;
    stack.clear();
    for (uint32_t s : set)
      if (stamp[s] != gen) {
        stamp[s] = gen;
        stack.push_back(s);
      }
    set.clear();
    while (!stack.empty()) {
      const uint32_t s = stack.back();
      stack.pop_back();
      set.push_back(s);
      for (uint32_t t : nfa[s].eps)
        if (stamp[t] != gen) {
          stamp[t] = gen;
          stack.push_back(t);
        }
    }
    std::sort(set.begin(), set.end());
  };
  std::unordered_map<std::vector<uint32_t>, uint32_t, VecHash> ids;
  std::vector<std::vector<uint32_t>> sets;
  const auto id_of = [&](std::vector<uint32_t>&& set) -> uint32_t {
    closure(set);
    const auto it = ids.find(set);
    if (it != ids.end()) return it->second;
    if (++total_states > kMaxStates)
      too_large(fmt::format("its deterministic automaton has more than {} states", kMaxStates));
    const auto id = static_cast<uint32_t>(sets.size());
    ids.emplace(set, id);
    sets.push_back(std::move(set));
    return id;
  };
  id_of({0});
  std::vector<std::vector<uint32_t>> per_class(num_classes);
  for (size_t i = 0; i < sets.size(); ++i) {
    for (auto& v : per_class) v.clear();
    std::map<uint32_t, std::vector<uint32_t>> per_callee;
    bool fin = false;
    for (uint32_t s : sets[i]) {
      fin |= s == accept;
      for (const NfaEdge& e : nfa[s].bytes)
        for (uint32_t c = cls[e.lo]; c <= cls[e.hi]; ++c) per_class[c].push_back(e.to);
      for (auto [callee, to] : nfa[s].calls) per_callee[callee].push_back(to);
    }
    std::vector<uint32_t> row(num_classes, Pda::kDead);
    for (uint32_t c = 0; c < num_classes; ++c)
      if (!per_class[c].empty()) row[c] = id_of(std::move(per_class[c]));
    std::vector<std::pair<uint32_t, uint32_t>> calls;
    for (auto& [callee, targets] : per_callee) calls.emplace_back(callee, id_of(std::move(targets)));
    d.trans.insert(d.trans.end(), row.begin(), row.end());
    d.final.push_back(fin);
    d.calls.push_back(std::move(calls));
  }
  return d;
}

void add_byte(ByteSet& s, uint8_t b) { s[b >> 6] |= uint64_t{1} << (b & 63); }
bool merge(ByteSet& into, const ByteSet& from) {
  bool changed = false;
  for (int i = 0; i < 4; ++i) {
    const uint64_t v = into[i] | from[i];
    changed |= v != into[i];
    into[i] = v;
  }
  return changed;
}

// Merges states no input can tell apart (Moore's partition refinement: same rule, same end,
// and moves into the same blocks on every byte class and every call), and drops the states no
// rule start reaches. Fewer states: fewer token tables to build.
void minimize(Pda& pda) {
  const size_t n = pda.states.size(), nc = pda.num_classes;
  // Reachable states.
  std::vector<bool> reach(n, false);
  std::vector<uint32_t> todo;
  for (const Pda::Rule& r : pda.rules) {
    reach[r.start] = true;
    todo.push_back(r.start);
  }
  while (!todo.empty()) {
    const uint32_t s = todo.back();
    todo.pop_back();
    const auto go = [&](uint32_t t) {
      if (t != Pda::kDead && !reach[t]) {
        reach[t] = true;
        todo.push_back(t);
      }
    };
    for (size_t k = 0; k < nc; ++k) go(pda.trans[s * nc + k]);
    for (uint32_t i = pda.states[s].calls_begin; i < pda.states[s].calls_end; ++i) go(pda.calls[i].ret);
  }
  std::vector<uint32_t> block(n, 0);
  size_t blocks = 0;
  {
    std::map<std::pair<uint32_t, bool>, uint32_t> first;
    for (size_t s = 0; s < n; ++s) {
      if (!reach[s]) continue;
      const auto key = std::make_pair(pda.states[s].rule, pda.states[s].final);
      const auto [it, added] = first.emplace(key, static_cast<uint32_t>(first.size()));
      block[s] = it->second;
    }
    blocks = first.size();
  }
  std::vector<uint32_t> sig;
  for (;;) {
    std::unordered_map<std::vector<uint32_t>, uint32_t, VecHash> ids;
    std::vector<uint32_t> next(n, 0);
    for (size_t s = 0; s < n; ++s) {
      if (!reach[s]) continue;
      sig.assign(1, block[s]);
      for (size_t k = 0; k < nc; ++k) {
        const uint32_t t = pda.trans[s * nc + k];
        sig.push_back(t == Pda::kDead ? Pda::kDead : block[t]);
      }
      for (uint32_t i = pda.states[s].calls_begin; i < pda.states[s].calls_end; ++i) {
        sig.push_back(pda.calls[i].rule);
        sig.push_back(block[pda.calls[i].ret]);
      }
      next[s] = ids.emplace(sig, static_cast<uint32_t>(ids.size())).first->second;
    }
    block.swap(next);
    const size_t now = ids.size();
    if (now == blocks) break;
    blocks = now;
  }
  // One state per block, in the order of their first member (rule starts keep their rules' order).
  std::vector<uint32_t> rep(blocks, Pda::kDead), id_of(blocks, Pda::kDead);
  std::vector<uint32_t> order;
  for (size_t s = 0; s < n; ++s)
    if (reach[s] && rep[block[s]] == Pda::kDead) {
      rep[block[s]] = static_cast<uint32_t>(s);
      id_of[block[s]] = static_cast<uint32_t>(order.size());
      order.push_back(static_cast<uint32_t>(s));
    }
  const auto map = [&](uint32_t s) { return s == Pda::kDead ? s : id_of[block[s]]; };
  Pda out;
  out.byte_class = pda.byte_class;
  out.num_classes = pda.num_classes;
  out.rules = pda.rules;
  out.root = pda.root;
  for (Pda::Rule& r : out.rules) r.start = map(r.start);
  for (uint32_t s : order) {
    Pda::State st = pda.states[s];
    const uint32_t begin = static_cast<uint32_t>(out.calls.size());
    for (uint32_t i = st.calls_begin; i < st.calls_end; ++i) out.calls.push_back({pda.calls[i].rule, map(pda.calls[i].ret)});
    st.calls_begin = begin;
    st.calls_end = static_cast<uint32_t>(out.calls.size());
    out.states.push_back(st);
    for (size_t k = 0; k < nc; ++k) out.trans.push_back(map(pda.trans[s * nc + k]));
  }
  pda = std::move(out);
}

}  // namespace

std::vector<std::vector<std::pair<uint8_t, uint8_t>>> utf8_sequences(char32_t lo, char32_t hi) {
  std::vector<std::vector<std::pair<uint8_t, uint8_t>>> out;
  static constexpr char32_t kLast[4] = {0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
  char32_t first = 0;
  for (int n = 1; n <= 4; ++n) {
    const char32_t a = std::max(lo, first), b = std::min(hi, kLast[n - 1]);
    if (a <= b) split_same_length(a, b, n, out);
    first = kLast[n - 1] + 1;
  }
  return out;
}

Pda compile(const Ast& ast) {
  const size_t n_ast = ast.rules.size();
  // Only what the root reaches matters.
  std::vector<bool> reached(n_ast, false);
  {
    std::vector<uint32_t> todo{ast.root};
    reached[ast.root] = true;
    std::function<void(const Expr&)> visit = [&](const Expr& e) {
      if (e.kind == Expr::Kind::Rule && !reached[e.rule]) {
        reached[e.rule] = true;
        todo.push_back(e.rule);
      }
      for (const Expr& c : e.items) visit(c);
    };
    while (!todo.empty()) {
      const uint32_t r = todo.back();
      todo.pop_back();
      visit(ast.rules[r].body);
    }
  }
  const std::vector<bool> keep = rules_to_keep(ast);
  std::vector<int32_t> kept_id(n_ast, -1);
  std::vector<uint32_t> kept;  // kept rule → ast rule
  kept_id[ast.root] = 0;
  kept.push_back(ast.root);
  for (uint32_t r = 0; r < n_ast; ++r)
    if (keep[r] && reached[r] && r != ast.root) {
      kept_id[r] = static_cast<int32_t>(kept.size());
      kept.push_back(r);
    }

  // NFAs: state 0 the start, 1 the accept.
  size_t nfa_total = 0;
  std::vector<std::vector<NfaState>> nfas;
  for (uint32_t r : kept) {
    NfaBuilder b(ast, kept_id, nfa_total);
    b.add();
    b.add();
    b.build(ast.rules[r].body, 0, 1);
    nfas.push_back(std::move(b.states));
  }

  // Byte classes: the intervals between every edge's boundaries.
  std::array<bool, 257> cut{};
  cut[0] = cut[256] = true;
  for (const auto& nfa : nfas)
    for (const NfaState& s : nfa)
      for (const NfaEdge& e : s.bytes) {
        cut[e.lo] = true;
        cut[e.hi + 1] = true;
      }
  Pda pda;
  uint32_t c = 0;
  for (int b = 0; b < 256; ++b) {
    if (b > 0 && cut[b]) ++c;
    pda.byte_class[b] = static_cast<uint8_t>(c);
  }
  pda.num_classes = c + 1;

  // One automaton per kept rule, numbered globally.
  size_t dfa_total = 0;
  for (size_t k = 0; k < kept.size(); ++k) {
    const RuleDfa d = determinize(nfas[k], 1, pda.byte_class, pda.num_classes, dfa_total);
    nfas[k].clear();
    nfas[k].shrink_to_fit();
    const auto base = static_cast<uint32_t>(pda.states.size());
    pda.rules.push_back({ast.rules[kept[k]].name, base, false, {}, false});
    for (size_t s = 0; s < d.final.size(); ++s) {
      Pda::State st;
      st.rule = static_cast<uint32_t>(k);
      st.final = d.final[s];
      st.calls_begin = static_cast<uint32_t>(pda.calls.size());
      for (auto [callee, ret] : d.calls[s]) pda.calls.push_back({callee, base + ret});
      st.calls_end = static_cast<uint32_t>(pda.calls.size());
      pda.states.push_back(st);
    }
    for (uint32_t t : d.trans) pda.trans.push_back(t == Pda::kDead ? t : base + t);
  }
  const size_t n_rules = pda.rules.size(), nc = pda.num_classes;
  {
  const size_t n_states = pda.states.size();

  // Productive rules: the start reaches an end through bytes and calls of productive rules.
  std::vector<bool> productive(n_rules, false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n_rules; ++r) {
      if (productive[r]) continue;
      std::vector<uint32_t> todo{pda.rules[r].start};
      std::vector<bool> seen(n_states, false);
      seen[pda.rules[r].start] = true;
      while (!todo.empty() && !productive[r]) {
        const uint32_t s = todo.back();
        todo.pop_back();
        if (pda.states[s].final) {
          productive[r] = changed = true;
          break;
        }
        const auto go = [&](uint32_t t) {
          if (t != Pda::kDead && !seen[t]) {
            seen[t] = true;
            todo.push_back(t);
          }
        };
        for (size_t k = 0; k < nc; ++k) go(pda.trans[s * nc + k]);
        for (uint32_t i = pda.states[s].calls_begin; i < pda.states[s].calls_end; ++i)
          if (productive[pda.calls[i].rule]) go(pda.calls[i].ret);
      }
    }
  }
  // Live states: some end is reachable from them (reverse reachability from the final states).
  std::vector<std::vector<uint32_t>> preds(n_states);
  for (size_t s = 0; s < n_states; ++s) {
    for (size_t k = 0; k < nc; ++k)
      if (pda.trans[s * nc + k] != Pda::kDead) preds[pda.trans[s * nc + k]].push_back(static_cast<uint32_t>(s));
    for (uint32_t i = pda.states[s].calls_begin; i < pda.states[s].calls_end; ++i)
      if (productive[pda.calls[i].rule]) preds[pda.calls[i].ret].push_back(static_cast<uint32_t>(s));
  }
  std::vector<bool> live(n_states, false);
  {
    std::vector<uint32_t> todo;
    for (size_t s = 0; s < n_states; ++s)
      if (pda.states[s].final) {
        live[s] = true;
        todo.push_back(static_cast<uint32_t>(s));
      }
    while (!todo.empty()) {
      const uint32_t s = todo.back();
      todo.pop_back();
      for (uint32_t p : preds[s])
        if (!live[p]) {
          live[p] = true;
          todo.push_back(p);
        }
    }
  }
  if (!live[pda.rules[0].start])
    throw Error(ErrorKind::InvalidArgument, "grammar: it matches nothing (rule 'root' can never end)");
  {
    std::vector<Pda::Call> calls;
    for (size_t s = 0; s < n_states; ++s) {
      Pda::State& st = pda.states[s];
      bool any = false;
      for (size_t k = 0; k < nc; ++k) {
        uint32_t& t = pda.trans[s * nc + k];
        if (t != Pda::kDead && (!live[s] || !live[t])) t = Pda::kDead;
        any |= t != Pda::kDead;
      }
      st.has_bytes = any;
      const auto begin = static_cast<uint32_t>(calls.size());
      for (uint32_t i = st.calls_begin; i < st.calls_end; ++i)
        if (live[s] && productive[pda.calls[i].rule] && live[pda.calls[i].ret]) calls.push_back(pda.calls[i]);
      st.calls_begin = begin;
      st.calls_end = static_cast<uint32_t>(calls.size());
    }
    pda.calls = std::move(calls);
  }
  }

  minimize(pda);
  const size_t n_states = pda.states.size();

  // Nullable rules, and the states from which a rule can end without reading a byte.
  std::vector<bool> ends(n_states, false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t s = n_states; s-- > 0;) {
      if (ends[s]) continue;
      bool e = pda.states[s].final;
      for (uint32_t i = pda.states[s].calls_begin; i < pda.states[s].calls_end && !e; ++i)
        e = pda.rules[pda.calls[i].rule].nullable && ends[pda.calls[i].ret];
      if (e) {
        ends[s] = changed = true;
        Pda::Rule& r = pda.rules[pda.states[s].rule];
        if (r.start == s) r.nullable = true;
      }
    }
  }

  // Left recursion: a rule that can call itself (through others) before reading a byte would
  // make the matcher's closure push forever.
  {
    std::vector<std::vector<uint32_t>> left(n_rules);
    for (size_t r = 0; r < n_rules; ++r) {
      std::vector<uint32_t> todo{pda.rules[r].start};
      std::vector<uint32_t> seen{pda.rules[r].start};
      while (!todo.empty()) {
        const uint32_t s = todo.back();
        todo.pop_back();
        for (uint32_t i = pda.states[s].calls_begin; i < pda.states[s].calls_end; ++i) {
          const Pda::Call& cl = pda.calls[i];
          if (std::find(left[r].begin(), left[r].end(), cl.rule) == left[r].end()) left[r].push_back(cl.rule);
          if (pda.rules[cl.rule].nullable && std::find(seen.begin(), seen.end(), cl.ret) == seen.end()) {
            seen.push_back(cl.ret);
            todo.push_back(cl.ret);
          }
        }
      }
    }
    std::vector<int> color(n_rules, 0);  // 0 new, 1 on the path, 2 done
    std::vector<uint32_t> path;
    std::function<void(uint32_t)> dfs = [&](uint32_t r) {
      color[r] = 1;
      path.push_back(r);
      for (uint32_t t : left[r]) {
        if (color[t] == 1) {
          std::string cycle;
          for (auto it = std::find(path.begin(), path.end(), t); it != path.end(); ++it) cycle += pda.rules[*it].name + " → ";
          throw Error(ErrorKind::InvalidArgument,
                      fmt::format("grammar: rule '{}' is left-recursive ({}{} before reading a character)",
                                  pda.rules[t].name, cycle, pda.rules[t].name));
        }
        if (color[t] == 0) dfs(t);
      }
      path.pop_back();
      color[r] = 2;
    };
    for (uint32_t r = 0; r < n_rules; ++r)
      if (color[r] == 0) dfs(r);
  }

  // FIRST (bytes that can be read next from a state, through nullable calls) and FOLLOW.
  std::vector<ByteSet> first(n_states);
  for (size_t s = 0; s < n_states; ++s)
    for (int b = 0; b < 256; ++b)
      if (pda.trans[s * nc + pda.byte_class[b]] != Pda::kDead) add_byte(first[s], static_cast<uint8_t>(b));
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t s = 0; s < n_states; ++s)
      for (uint32_t i = pda.states[s].calls_begin; i < pda.states[s].calls_end; ++i) {
        const Pda::Call& cl = pda.calls[i];
        changed |= merge(first[s], first[pda.rules[cl.rule].start]);
        if (pda.rules[cl.rule].nullable) changed |= merge(first[s], first[cl.ret]);
      }
  }
  pda.rules[0].can_end = true;
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t s = 0; s < n_states; ++s)
      for (uint32_t i = pda.states[s].calls_begin; i < pda.states[s].calls_end; ++i) {
        const Pda::Call& cl = pda.calls[i];
        Pda::Rule& callee = pda.rules[cl.rule];
        const Pda::Rule caller = pda.rules[pda.states[s].rule];
        changed |= merge(callee.follow, first[cl.ret]);
        if (ends[cl.ret]) {
          changed |= merge(callee.follow, caller.follow);
          if (caller.can_end && !callee.can_end) callee.can_end = changed = true;
        }
      }
  }
  return pda;
}

}  // namespace kvinfer::grammar
