#pragma once
// Added tokens (special tokens like "<|im_end|>" and user-added words) are found in the text
// before the model runs, as HF's AddedVocabulary does: leftmost-longest matches over all added
// tokens (its Aho-Corasick LeftmostLongest), with single_word, lstrip and rstrip applied to
// each match; the text between matches goes on to the normalizer and the model.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kvinfer {

struct AddedToken {
  int32_t id = 0;
  std::string content{};
  bool special = false;  // skipped by decode(skip_special); not matched when parse_special is off
  bool lstrip = false;   // absorbs the whitespace on its left
  bool rstrip = false;   // absorbs the whitespace on its right
  bool single_word = false;
  bool normalized = false;  // matched in the normalized text instead of the raw text
};

struct Segment {
  size_t begin = 0, end = 0;
  int32_t id = -1;  // the added token, or -1 for text
};

class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  // `patterns[k]` is the text that matches `tokens[k]` (its content, normalized for
  // normalized tokens).
  AddedTokenMatcher(std::vector<AddedToken> tokens, const std::vector<std::string>& patterns);

  bool empty() const { return tokens_.empty(); }
  // Splits `text` into non-empty token and text segments covering it.
  void split(std::string_view text, bool parse_special, std::vector<Segment>& out) const;

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> children;  // sorted by byte
    int32_t token = -1;                                       // index into tokens_ ending here
  };
  // The longest token starting at text[pos] (its index, and its length), or {-1, 0}.
  std::pair<int32_t, size_t> longest_at(std::string_view text, size_t pos) const;

  std::vector<AddedToken> tokens_;
  std::vector<Node> nodes_;  // a byte trie; nodes_[0] is the root
  std::vector<bool> first_byte_ = std::vector<bool>(256, false);
};

}  // namespace kvinfer
