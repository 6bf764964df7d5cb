#include "tokenizer/spm.h"

#include <algorithm>

#include "tokenizer/utf8.h"

namespace kvinfer {

namespace {

// Max-heap order of llama.cpp's comparator: highest score first, then leftmost.
bool lower(const SpmWork::Bigram& a, const SpmWork::Bigram& b) {
  return a.score < b.score || (a.score == b.score && a.left > b.left);
}

}  // namespace

SpmModel::SpmModel(VocabMap vocab, std::vector<float> scores, std::optional<int32_t> unk_id)
    : vocab_(std::move(vocab)),
      split_(splits_before_metaspace(vocab_)),
      scores_(std::move(scores)),
      unk_id_(unk_id),
      byte_ids_(byte_token_ids(vocab_)) {}

void SpmModel::tokenize(std::string_view text, std::vector<int32_t>& out, SpmWork& work) const {
  if (split_) {
    for_each_metaspace_piece(text, [&](std::string_view piece) { tokenize_piece(piece, out, work); });
  } else {
    tokenize_piece(text, out, work);
  }
}

void SpmModel::tokenize_piece(std::string_view text, std::vector<int32_t>& out, SpmWork& work) const {
  auto& sym = work.symbols;
  auto& heap = work.heap;
  sym.clear();
  heap.clear();
  for (size_t i = 0; i < text.size();) {
    const size_t n = utf8::char_length(text, i);
    const auto index = static_cast<int32_t>(sym.size());
    sym.push_back({i, n, index - 1, i + n < text.size() ? index + 1 : -1, -1});
    i += n;
  }
  const auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const auto& l = sym[static_cast<size_t>(left)];
    const size_t size = l.size + sym[static_cast<size_t>(right)].size;
    auto it = vocab_.find(text.substr(l.start, size));
    if (it == vocab_.end()) return;
    const size_t id = static_cast<size_t>(it->second);
    heap.push_back({id < scores_.size() ? scores_[id] : 0.0f, left, right, size, it->second});
    std::push_heap(heap.begin(), heap.end(), lower);
  };
  for (size_t k = 1; k < sym.size(); ++k) try_add(static_cast<int32_t>(k - 1), static_cast<int32_t>(k));

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), lower);
    const SpmWork::Bigram b = heap.back();
    heap.pop_back();
    auto& left = sym[static_cast<size_t>(b.left)];
    auto& right = sym[static_cast<size_t>(b.right)];
    // Sizes only grow, so unchanged sizes mean neither symbol has merged since b was queued.
    if (left.size == 0 || right.size == 0 || left.size + right.size != b.size) continue;
    left.size += right.size;
    left.id = b.id;
    right.size = 0;
    left.next = right.next;
    if (right.next >= 0) sym[static_cast<size_t>(right.next)].prev = b.left;
    try_add(left.prev, b.left);
    try_add(b.left, left.next);
  }

  for (int32_t i = sym.empty() ? -1 : 0; i >= 0; i = sym[static_cast<size_t>(i)].next) {
    const auto& s = sym[static_cast<size_t>(i)];
    if (s.id >= 0) {
      out.push_back(s.id);
      continue;
    }
    const std::string_view piece = text.substr(s.start, s.size);
    if (auto id = lookup(vocab_, piece)) {
      out.push_back(*id);
      continue;
    }
    for (char c : piece) {
      const int32_t byte_id = byte_ids_[static_cast<unsigned char>(c)];
      if (byte_id >= 0) {
        out.push_back(byte_id);
      } else if (unk_id_) {
        out.push_back(*unk_id_);
      }
    }
  }
}

}  // namespace kvinfer
