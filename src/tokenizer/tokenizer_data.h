#pragma once
// Everything a Tokenizer holds, immutable once loaded: the vocabulary, the HF-style pipeline
// (added tokens → normalizer → pre-tokenizer → model → post-processor; decoder) and the
// special-token ids. Both loaders (tokenizer.json and GGUF) fill this.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "kvinfer/tokenizer.h"
#include "tokenizer/access.h"
#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/spm.h"
#include "tokenizer/vocab_map.h"

namespace kvinfer {

// Tokenizer's private state; TokenizerData below names it for the library's own code.
struct Tokenizer::Impl {
  std::string source;  // the file it came from, for messages

  // id → vocabulary string ("" for an id nothing is assigned to), and what decode feeds the
  // decoder for it when that differs (GGUF byte-level vocabularies store added tokens raw).
  std::vector<std::string> tokens;
  std::vector<bool> assigned;
  std::vector<bool> special;
  std::unordered_map<int32_t, std::string> decoder_input;
  VocabMap added_ids;  // added tokens' content → id (looked up before the model's vocabulary)

  AddedTokenMatcher raw_tokens;         // added tokens matched in the raw text
  AddedTokenMatcher normalized_tokens;  // added tokens matched in the normalized text
  Normalizer normalizer;
  PreTokenizer pre_tokenizer;
  std::variant<BpeModel, SpmModel> model;
  std::vector<int32_t> prefix, suffix;  // what add_special puts around the ids
  Decoder decoder;

  std::optional<int32_t> bos_id, eos_id, unk_id, pad_id;
  std::vector<int32_t> eos_ids;  // every end-of-generation id (see end_of_generation_ids)
  std::string bos_text, eos_text, chat_template;

  explicit Impl(std::variant<BpeModel, SpmModel> m) : model(std::move(m)) {}

  int32_t vocab_size() const { return static_cast<int32_t>(tokens.size()); }
  const VocabMap& model_vocab() const {
    return std::visit([](const auto& m) -> const VocabMap& { return m.vocab(); }, model);
  }
  std::optional<int32_t> token_id(std::string_view token) const {
    if (auto id = lookup(added_ids, token)) return id;
    return lookup(model_vocab(), token);
  }
  // The text of `ids` in `context`; raw_bytes keeps invalid UTF-8 (see DecodeContext).
  std::string decode(std::span<const int32_t> ids, bool skip_special, const DecodeContext& context) const;
};

// Sizes the per-id tables to cover every id in the model vocabulary and `added`, fills them,
// and builds the two added-token matchers (normalized tokens are matched by their normalized
// content).
void finish_vocabulary(TokenizerData& data, std::vector<AddedToken> added);

// eos, the other given end ids, and every vocabulary token that llama.cpp treats as an end of
// generation by its text (<|eot_id|>, <|im_end|>, <|end|>, <end_of_turn>, <|endoftext|>, ...).
std::vector<int32_t> end_of_generation_ids(const TokenizerData& data, std::vector<int32_t> given);

}  // namespace kvinfer
