#pragma once
// GPT-2's reversible byte ↔ character map: byte-level BPE vocabularies spell every byte as a
// printable code point (printable Latin-1 bytes as themselves, the other 68 bytes as U+0100 and
// up, so that a space is "Ġ" and a newline "Ċ").
#include <array>
#include <string>
#include <string_view>

namespace kvinfer::byte_level {

// The UTF-8 spelling of the character that stands for each byte.
const std::array<std::string, 256>& byte_chars();

// The byte a code point stands for, or -1 when it is not one of the 256 characters.
int byte_of(char32_t cp);

// Every byte of `bytes` as its character.
std::string encode(std::string_view bytes);

// Tokens' characters back to bytes, as HF's ByteLevel decoder: a token holding any character
// outside the map contributes its own UTF-8 bytes unchanged.
void decode_token(std::string_view token, std::string& out);

}  // namespace kvinfer::byte_level
