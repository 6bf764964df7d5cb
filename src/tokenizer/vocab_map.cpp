#include "tokenizer/vocab_map.h"

#include <fmt/format.h>

namespace kvinfer {

std::array<int32_t, 256> byte_token_ids(const VocabMap& vocab) {
  std::array<int32_t, 256> ids{};
  for (int b = 0; b < 256; ++b) ids[static_cast<size_t>(b)] = lookup(vocab, fmt::format("<0x{:02X}>", b)).value_or(-1);
  return ids;
}

bool splits_before_metaspace(const VocabMap& vocab) {
  constexpr std::string_view kSpace = "\xE2\x96\x81";
  if (!vocab.contains(kSpace)) return false;
  for (const auto& entry : vocab) {
    const std::string_view token = entry.first;
    for (size_t pos = token.find(kSpace, 1); pos != std::string_view::npos; pos = token.find(kSpace, pos + 1))
      if (pos < kSpace.size() || token.substr(pos - kSpace.size(), kSpace.size()) != kSpace) return false;
  }
  return true;
}

}  // namespace kvinfer
