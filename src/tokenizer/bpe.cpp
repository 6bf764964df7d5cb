#include "tokenizer/bpe.h"

#include <algorithm>
#include <bit>
#include <utility>

#include "tokenizer/utf8.h"

namespace kvinfer {

namespace {

constexpr size_t kCharTable = 0x10000;
constexpr uint64_t kEmpty = ~uint64_t{0};  // the key of pair (-1, -1), which no merge has

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

// Min-heap order: lowest rank first, then leftmost.
bool later(const BpeWork::Candidate& a, const BpeWork::Candidate& b) {
  return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
}

}  // namespace

BpeModel::BpeModel(VocabMap vocab, BpeOptions options)
    : vocab_(std::move(vocab)),
      options_(std::move(options)),
      split_(!options_.ignore_merges && options_.continuing_subword_prefix.empty() &&
             options_.end_of_word_suffix.empty() && splits_before_metaspace(vocab_)),
      char_ids_(kCharTable, -1),
      byte_ids_(byte_token_ids(vocab_)) {
  for (const auto& [token, id] : vocab_) {
    const size_t n = utf8::sequence_length(token, 0);
    if (!token.empty() && n == token.size()) {
      const char32_t cp = utf8::decode(token, 0, n);
      if (cp < kCharTable) char_ids_[cp] = id;
    }
  }
}

void BpeModel::MergeTable::grow() {
  std::vector<uint64_t> keys = std::move(keys_);
  std::vector<Merge> merges = std::move(merges_);
  const size_t capacity = keys.empty() ? 1024 : keys.size() * 2;
  keys_.assign(capacity, kEmpty);
  merges_.assign(capacity, Merge{});
  shift_ = 64 - std::countr_zero(capacity);
  size_ = 0;
  for (size_t k = 0; k < keys.size(); ++k)
    if (keys[k] != kEmpty) insert(keys[k], merges[k], true);
}

void BpeModel::MergeTable::insert(uint64_t key, Merge m, bool replace) {
  if (2 * (size_ + 1) > keys_.size()) grow();  // at most half full
  for (size_t i = slot(key);; i = (i + 1) & (keys_.size() - 1)) {
    if (keys_[i] == kEmpty) {
      keys_[i] = key;
      merges_[i] = m;
      ++size_;
      return;
    }
    if (keys_[i] == key) {
      if (replace) merges_[i] = m;
      return;
    }
  }
}

const BpeModel::Merge* BpeModel::MergeTable::find(uint64_t key) const {
  if (keys_.empty()) return nullptr;
  for (size_t i = slot(key);; i = (i + 1) & (keys_.size() - 1)) {
    if (keys_[i] == key) return &merges_[i];
    if (keys_[i] == kEmpty) return nullptr;
  }
}

void BpeModel::add_merge(int32_t left, int32_t right, int32_t merged, uint32_t rank, bool replace) {
  merges_.insert(pair_key(left, right), Merge{rank, merged}, replace);
}

const BpeModel::Merge* BpeModel::find_merge(int32_t left, int32_t right) const {
  return merges_.find(pair_key(left, right));
}

void BpeModel::initial_symbols(std::string_view word, BpeWork& work) const {
  auto& symbols = work.symbols;
  symbols.clear();
  const auto push = [&](int32_t id) { symbols.push_back({id, -1, -1, true}); };
  const bool decorated = !options_.continuing_subword_prefix.empty() || !options_.end_of_word_suffix.empty();
  std::optional<int32_t> pending_unk;  // HF adds an unknown token only when the next known one arrives
  std::string decorated_char;
  for (size_t i = 0; i < word.size();) {
    const size_t valid = utf8::sequence_length(word, i);
    const size_t n = valid ? valid : 1;
    std::string_view ch = word.substr(i, n);
    i += n;
    std::optional<int32_t> id;
    if (decorated) {
      decorated_char.clear();
      if (i > n) decorated_char += options_.continuing_subword_prefix;
      decorated_char += ch;
      if (i == word.size()) decorated_char += options_.end_of_word_suffix;
      ch = decorated_char;
      id = lookup(vocab_, ch);
    } else if (valid) {
      const char32_t cp = utf8::decode(ch, 0, n);
      if (cp < kCharTable) {
        if (char_ids_[cp] >= 0) id = char_ids_[cp];
      } else {
        id = lookup(vocab_, ch);
      }
    } else {
      id = lookup(vocab_, ch);
    }
    if (id) {
      if (pending_unk) push(*std::exchange(pending_unk, std::nullopt));
      push(*id);
      continue;
    }
    if (options_.byte_fallback &&
        std::all_of(ch.begin(), ch.end(), [&](char b) { return byte_ids_[static_cast<unsigned char>(b)] >= 0; })) {
      for (char b : ch) push(byte_ids_[static_cast<unsigned char>(b)]);
      continue;
    }
    if (options_.unk_id) {
      // A run of unknown characters is one unknown token when fuse_unk is set.
      if (pending_unk && !options_.fuse_unk) push(*pending_unk);
      pending_unk = options_.unk_id;
    }
    // Without an unknown token, HF drops the character.
  }
  if (pending_unk) push(*pending_unk);
  for (size_t k = 0; k < symbols.size(); ++k) {
    symbols[k].prev = static_cast<int32_t>(k) - 1;
    symbols[k].next = k + 1 < symbols.size() ? static_cast<int32_t>(k + 1) : -1;
  }
}

void BpeModel::tokenize(std::string_view word, std::vector<int32_t>& out, BpeWork& work) const {
  if (word.empty()) return;
  if (options_.ignore_merges) {
    if (auto id = lookup(vocab_, word)) {
      out.push_back(*id);
      return;
    }
  }
  if (split_) {
    for_each_metaspace_piece(word, [&](std::string_view piece) { merge_word(piece, out, work); });
  } else {
    merge_word(word, out, work);
  }
}

void BpeModel::merge_word(std::string_view word, std::vector<int32_t>& out, BpeWork& work) const {
  initial_symbols(word, work);
  auto& sym = work.symbols;
  auto& heap = work.heap;
  heap.clear();
  const auto consider = [&](int32_t pos) {
    const int32_t next = sym[static_cast<size_t>(pos)].next;
    if (next < 0) return;
    if (const Merge* m = find_merge(sym[static_cast<size_t>(pos)].id, sym[static_cast<size_t>(next)].id)) {
      heap.push_back({m->rank, static_cast<uint32_t>(pos), m->merged});
      std::push_heap(heap.begin(), heap.end(), later);
    }
  };
  for (size_t k = 0; k + 1 < sym.size(); ++k) consider(static_cast<int32_t>(k));

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const BpeWork::Candidate top = heap.back();
    heap.pop_back();
    BpeWork::Symbol& left = sym[top.pos];
    if (!left.alive || left.next < 0) continue;
    BpeWork::Symbol& right = sym[static_cast<size_t>(left.next)];
    // A stale candidate: one of its symbols has merged since it was queued.
    const Merge* m = find_merge(left.id, right.id);
    if (!m || m->merged != top.merged) continue;
    left.id = top.merged;
    left.next = right.next;
    right.alive = false;
    if (right.next >= 0) sym[static_cast<size_t>(right.next)].prev = static_cast<int32_t>(top.pos);
    if (left.prev >= 0) consider(left.prev);
    consider(static_cast<int32_t>(top.pos));
  }
  for (const BpeWork::Symbol& s : sym)
    if (s.alive) out.push_back(s.id);
}

}  // namespace kvinfer
