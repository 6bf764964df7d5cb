#include "tokenizer/tokenizer_data.h"

#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "kvinfer/error.h"
#include "tokenizer/utf8.h"

namespace kvinfer {

namespace {

// The largest id accepted: ids are dense in practice, and a corrupt file must not make us
// allocate tables for billions of ids.
int64_t max_plausible_id(size_t entries) { return 4 * static_cast<int64_t>(entries) + 1024; }

}  // namespace

void finish_vocabulary(TokenizerData& data, std::vector<AddedToken> added) {
  const VocabMap& vocab = data.model_vocab();
  int64_t max_id = -1;
  const auto check = [&](int64_t id, std::string_view token) {
    if (id < 0 || id > max_plausible_id(vocab.size() + added.size()))
      throw Error(ErrorKind::BadFile, fmt::format("{}: token '{}' has id {}, outside 0..{}", data.source, token, id,
                              max_plausible_id(vocab.size() + added.size())));
    max_id = std::max(max_id, id);
  };
  for (const auto& [token, id] : vocab) check(id, token);
  for (const AddedToken& a : added) check(a.id, a.content);

  const auto n = static_cast<size_t>(max_id + 1);
  data.tokens.assign(n, std::string());
  data.assigned.assign(n, false);
  data.special.assign(n, false);
  for (const auto& [token, id] : vocab) {
    data.tokens[static_cast<size_t>(id)] = token;
    data.assigned[static_cast<size_t>(id)] = true;
  }
  std::vector<AddedToken> raw, normalized;
  std::vector<std::string> raw_patterns, normalized_patterns;
  for (const AddedToken& a : added) {
    const auto id = static_cast<size_t>(a.id);
    data.tokens[id] = a.content;
    data.assigned[id] = true;
    data.special[id] = a.special;
    data.added_ids.emplace(a.content, a.id);
    if (a.normalized) {
      normalized_patterns.push_back(data.normalizer.apply(a.content));
      normalized.push_back(a);
    } else {
      raw_patterns.push_back(a.content);
      raw.push_back(a);
    }
  }
  data.raw_tokens = AddedTokenMatcher(std::move(raw), raw_patterns);
  data.normalized_tokens = AddedTokenMatcher(std::move(normalized), normalized_patterns);
}

std::vector<int32_t> end_of_generation_ids(const TokenizerData& data, std::vector<int32_t> given) {
  // llama.cpp's list (llama-vocab.cpp, special_eog_ids), matched on the vocabulary string.
  static constexpr std::array<std::string_view, 17> kEndTexts = {
      "<|eot_id|>", "<|im_end|>",   "<|end|>",           "<|return|>",         "<|call|>", "<|flush|>",
      "<|calls|>",  "<end_of_turn>", "<|endoftext|>",    "<|eom_id|>",         "<EOT>",    "_<EOT>",
      "[EOT]",      "<|end_of_text|>", "<end_of_utterance>", "<｜end▁of▁sentence｜>", "<eos>"};
  std::vector<int32_t> ids;
  const auto add = [&](int32_t id) {
    if (id >= 0 && id < data.vocab_size() && std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  };
  for (int32_t id : given) add(id);
  std::vector<int32_t> by_text;
  for (std::string_view text : kEndTexts)
    if (auto id = data.token_id(text)) by_text.push_back(*id);
  std::sort(by_text.begin(), by_text.end());
  for (int32_t id : by_text) add(id);
  return ids;
}

std::string TokenizerData::decode(std::span<const int32_t> ids, bool skip_special, const DecodeContext& context) const {
  std::vector<std::string> pieces;
  pieces.reserve(ids.size());
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab_size())
      throw Error(ErrorKind::InvalidArgument, fmt::format("{}: cannot decode token id {}: the vocabulary has ids 0..{}", source, id,
                              vocab_size() - 1));
    const auto k = static_cast<size_t>(id);
    if (!assigned[k] || (skip_special && special[k])) continue;  // HF skips ids it has no token for
    auto it = decoder_input.find(id);
    pieces.push_back(it != decoder_input.end() ? it->second : tokens[k]);
  }
  std::string text = decoder.run(std::move(pieces), context);
  // Vocabulary strings from a GGUF file may themselves be invalid UTF-8.
  return context.raw_bytes || utf8::is_valid(text) ? text : utf8::lossy(text);
}

}  // namespace kvinfer
