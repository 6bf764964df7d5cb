#pragma once
// String → id maps that look up a std::string_view without building a std::string.
#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace kvinfer {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

using VocabMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

inline std::optional<int32_t> lookup(const VocabMap& map, std::string_view key) {
  auto it = map.find(key);
  if (it == map.end()) return std::nullopt;
  return it->second;
}

// The ids of the byte-fallback tokens "<0x00>".."<0xFF>" (-1 where the vocabulary has none).
std::array<int32_t, 256> byte_token_ids(const VocabMap& vocab);

// SentencePiece-style text marks word starts with "▁". When "▁" is itself a token and no token
// holds a "▁" right after another character, no merge can join a character to a following "▁":
// the text splits before every such "▁" into pieces that merge independently, with the same
// result as merging the whole text (merges in one piece never change which pairs exist in
// another). That keeps the merge heaps small on long texts.
bool splits_before_metaspace(const VocabMap& vocab);

// Calls f(piece) for the pieces of `text` cut before every "▁" that follows another character.
template <typename F>
void for_each_metaspace_piece(std::string_view text, F&& f) {
  constexpr std::string_view kSpace = "\xE2\x96\x81";
  size_t start = 0;
  for (size_t pos = text.find(kSpace, 1); pos != std::string_view::npos; pos = text.find(kSpace, pos + kSpace.size())) {
    if (pos >= kSpace.size() && text.substr(pos - kSpace.size(), kSpace.size()) == kSpace) continue;
    f(text.substr(start, pos - start));
    start = pos;
  }
  f(text.substr(start));
}

}  // namespace kvinfer
