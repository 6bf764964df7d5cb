#pragma once
// BPE by merge rank, exactly as HF `tokenizers` (models/bpe): a word starts as one symbol per
// character (byte fallback <0xNN> or the unknown token for characters outside the vocabulary),
// then the adjacent pair with the lowest merge rank is merged, leftmost first, until no pair
// has a merge. Symbols form a linked list and candidate pairs a binary heap, so a word of n
// characters costs O(n log n).
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/vocab_map.h"

namespace kvinfer {

struct BpeOptions {
  bool byte_fallback = false;
  bool fuse_unk = false;
  bool ignore_merges = false;  // a word that is itself in the vocabulary is one token
  std::optional<int32_t> unk_id{};
  std::string continuing_subword_prefix{};  // on every character but the first
  std::string end_of_word_suffix{};         // on the last character
};

// Scratch space for one encode call (encode is const and may run on many threads).
struct BpeWork {
  struct Symbol {
    int32_t id, prev, next;
    bool alive;
  };
  struct Candidate {
    uint32_t rank, pos;
    int32_t merged;
  };
  std::vector<Symbol> symbols;
  std::vector<Candidate> heap;
};

class BpeModel {
 public:
  BpeModel(VocabMap vocab, BpeOptions options);

  // Merging `left` and `right` gives `merged`, with priority `rank` (lower first). A pair seen
  // again keeps the first rank unless `replace` (HF's merges map keeps the last).
  void add_merge(int32_t left, int32_t right, int32_t merged, uint32_t rank, bool replace);

  void tokenize(std::string_view word, std::vector<int32_t>& out, BpeWork& work) const;

  const VocabMap& vocab() const { return vocab_; }
  const BpeOptions& options() const { return options_; }

 private:
  struct Merge {
    uint32_t rank;
    int32_t merged;
  };
  // (left, right) → Merge, open addressing with linear probing: one cache line per lookup
  // instead of a node chase, in the innermost loop of encoding.
  class MergeTable {
   public:
    void insert(uint64_t key, Merge m, bool replace);
    const Merge* find(uint64_t key) const;

   private:
    size_t slot(uint64_t key) const { return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_); }
    void grow();
    std::vector<uint64_t> keys_;  // kEmpty where free
    std::vector<Merge> merges_;
    size_t size_ = 0;
    int shift_ = 64;
  };
  const Merge* find_merge(int32_t left, int32_t right) const;
  void initial_symbols(std::string_view word, BpeWork& work) const;
  void merge_word(std::string_view word, std::vector<int32_t>& out, BpeWork& work) const;

  VocabMap vocab_;
  BpeOptions options_;
  // Words split before "▁" (splits_before_metaspace), when nothing else depends on the whole
  // word: no ignore_merges lookup, no subword prefix or end-of-word suffix.
  bool split_ = false;
  MergeTable merges_;
  std::vector<int32_t> char_ids_;  // BMP code point → id of its one-character token, or -1
  std::array<int32_t, 256> byte_ids_;
};

}  // namespace kvinfer
