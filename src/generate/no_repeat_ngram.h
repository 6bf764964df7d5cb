#pragma once
// HF's NoRepeatNGramLogitsProcessor: the token that would complete an n-gram already present
// in the sequence (prompt included) is banned.
#include <cstdint>
#include <span>
#include <vector>

namespace kvinfer {

// Appends to `banned` every id that, as the next token after `sequence`, would repeat one of its
// n-grams: for each window of n tokens whose first n - 1 equal the sequence's last n - 1, its
// last token. Nothing while the sequence is shorter than n. n >= 1 (n = 1 bans every id seen).
void banned_ngram_tokens(std::span<const int32_t> sequence, int32_t n, std::vector<int32_t>& banned);

}  // namespace kvinfer
