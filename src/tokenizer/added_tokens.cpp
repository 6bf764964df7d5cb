#include "tokenizer/added_tokens.h"

#include <algorithm>

#include "tokenizer/utf8.h"

namespace kvinfer {

namespace {

// The code point of the last valid character before `end`, or -1.
int64_t last_char(std::string_view s, size_t end) {
  for (size_t back = 1; back <= 4 && back <= end; ++back) {
    const size_t n = utf8::sequence_length(s, end - back);
    if (n == back) return utf8::decode(s, end - back, n);
  }
  return -1;
}

int64_t first_char(std::string_view s, size_t begin) {
  const size_t n = begin < s.size() ? utf8::sequence_length(s, begin) : 0;
  return n ? static_cast<int64_t>(utf8::decode(s, begin, n)) : -1;
}

bool is_space(int64_t c) { return c >= 0 && utf8::is_whitespace(static_cast<char32_t>(c)); }
bool is_word(int64_t c) { return c >= 0 && utf8::is_word(static_cast<char32_t>(c)); }

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens, const std::vector<std::string>& patterns)
    : tokens_(std::move(tokens)), nodes_(1) {
  for (size_t k = 0; k < tokens_.size(); ++k) {
    const std::string& p = patterns[k];
    if (p.empty()) continue;
    first_byte_[static_cast<unsigned char>(p[0])] = true;
    size_t node = 0;
    for (char ch : p) {
      const auto b = static_cast<unsigned char>(ch);
      auto& children = nodes_[node].children;
      auto it = std::lower_bound(children.begin(), children.end(), b,
                                 [](const auto& child, unsigned char key) { return child.first < key; });
      if (it != children.end() && it->first == b) {
        node = static_cast<size_t>(it->second);
        continue;
      }
      const auto next = static_cast<int32_t>(nodes_.size());
      children.insert(it, {b, next});
      nodes_.emplace_back();
      node = static_cast<size_t>(next);
    }
    // The first token with a given pattern wins, as HF's trie keeps the first pattern.
    if (nodes_[node].token < 0) nodes_[node].token = static_cast<int32_t>(k);
  }
}

std::pair<int32_t, size_t> AddedTokenMatcher::longest_at(std::string_view text, size_t pos) const {
  std::pair<int32_t, size_t> best{-1, 0};
  size_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    const auto b = static_cast<unsigned char>(text[i]);
    const auto& children = nodes_[node].children;
    auto it = std::lower_bound(children.begin(), children.end(), b,
                               [](const auto& child, unsigned char key) { return child.first < key; });
    if (it == children.end() || it->first != b) break;
    node = static_cast<size_t>(it->second);
    if (nodes_[node].token >= 0) best = {nodes_[node].token, i + 1 - pos};
  }
  return best;
}

void AddedTokenMatcher::split(std::string_view text, bool parse_special, std::vector<Segment>& out) const {
  out.clear();
  size_t done = 0;  // text before this is already in `out`
  size_t pos = 0;
  while (pos < text.size()) {
    if (!first_byte_[static_cast<unsigned char>(text[pos])]) {
      ++pos;
      continue;
    }
    const auto [index, length] = longest_at(text, pos);
    if (index < 0) {
      ++pos;
      continue;
    }
    const AddedToken& token = tokens_[static_cast<size_t>(index)];
    size_t start = pos, stop = pos + length;
    pos = stop;  // matches never overlap, even a match that is then discarded
    if (token.special && !parse_special) continue;
    if (token.single_word && (is_word(last_char(text, start)) || is_word(first_char(text, stop)))) continue;
    if (token.lstrip) {
      while (start > done) {
        const int64_t c = last_char(text, start);
        if (!is_space(c)) break;
        start -= c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
      }
    }
    if (token.rstrip) {
      while (stop < text.size()) {
        const int64_t c = first_char(text, stop);
        if (!is_space(c)) break;
        stop += utf8::sequence_length(text, stop);
      }
    }
    if (start > done) out.push_back({done, start, -1});
    out.push_back({start, stop, token.id});
    done = pos = stop;
  }
  if (done < text.size()) out.push_back({done, text.size(), -1});
}

}  // namespace kvinfer
