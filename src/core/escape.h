#pragma once
// Names read from a file (GGUF keys, tensor names), made safe inside a one-line message: every
// control byte is written as an escape (\t, \n, \r, \x00, \x7f), so that a NUL cannot end the
// message and a TAB or newline cannot move what follows it.
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace kvinfer {

inline std::string escape_name(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\t') out += "\\t";
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c < 0x20 || c == 0x7f) out += fmt::format("\\x{:02x}", c);
    else out += ch;
  }
  return out;
}

}  // namespace kvinfer
