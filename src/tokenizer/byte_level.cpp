#include "tokenizer/byte_level.h"

#include "tokenizer/utf8.h"

namespace kvinfer::byte_level {

namespace {

// bytes_to_unicode() of GPT-2's encoder.py: the printable ranges keep their code point, the
// rest are numbered from U+0100 in byte order.
constexpr bool keeps_code_point(int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; }

struct Tables {
  std::array<std::string, 256> chars;
  std::array<int, 0x144> bytes{};  // every mapped code point is below U+0144
  Tables() {
    bytes.fill(-1);
    int next = 0x100;
    for (int b = 0; b < 256; ++b) {
      const int cp = keeps_code_point(b) ? b : next++;
      utf8::append(chars[static_cast<size_t>(b)], static_cast<char32_t>(cp));
      bytes[static_cast<size_t>(cp)] = b;
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

const std::array<std::string, 256>& byte_chars() { return tables().chars; }

int byte_of(char32_t cp) {
  const auto& bytes = tables().bytes;
  return cp < bytes.size() ? bytes[cp] : -1;
}

std::string encode(std::string_view bytes) {
  const auto& chars = byte_chars();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += chars[static_cast<unsigned char>(c)];
  return out;
}

void decode_token(std::string_view token, std::string& out) {
  const size_t start = out.size();
  for (size_t i = 0; i < token.size();) {
    const size_t n = utf8::sequence_length(token, i);
    const int b = n ? byte_of(utf8::decode(token, i, n)) : -1;
    if (b < 0) {
      out.resize(start);
      out.append(token);
      return;
    }
    out.push_back(static_cast<char>(b));
    i += n;
  }
}

}  // namespace kvinfer::byte_level
