#pragma once
// SentencePiece-style BPE by score, as llama.cpp's SPM tokenizer (GGUF model "llama"): start
// from one symbol per character, repeatedly merge the adjacent pair whose concatenation is a
// vocabulary token with the highest score (leftmost on ties), then emit each symbol's token, or
// its bytes as <0xNN> byte tokens when the symbol is not in the vocabulary.
#include <array>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "tokenizer/vocab_map.h"

namespace kvinfer {

struct SpmWork {
  struct Symbol {
    size_t start, size;  // bytes of the text; size 0 once merged into its left neighbour
    int32_t prev, next, id;  // id: the merged token, -1 for a single character
  };
  struct Bigram {
    float score;
    int32_t left, right;
    size_t size;
    int32_t id;
  };
  std::vector<Symbol> symbols;
  std::vector<Bigram> heap;
};

class SpmModel {
 public:
  SpmModel(VocabMap vocab, std::vector<float> scores, std::optional<int32_t> unk_id);

  void tokenize(std::string_view text, std::vector<int32_t>& out, SpmWork& work) const;

  const VocabMap& vocab() const { return vocab_; }

 private:
  void tokenize_piece(std::string_view text, std::vector<int32_t>& out, SpmWork& work) const;

  VocabMap vocab_;
  bool split_ = false;  // splits_before_metaspace(vocab_)
  std::vector<float> scores_;
  std::optional<int32_t> unk_id_;
  std::array<int32_t, 256> byte_ids_;
};

}  // namespace kvinfer
