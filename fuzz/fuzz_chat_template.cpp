// Fuzz target: a chat template (Jinja2 source, as tokenizer_config.json or GGUF metadata carry it)
// rendered over a conversation. The input is the template source; after a NUL byte, the rest is
// the user message's content. Every input must render or throw kvinfer::Error, within the
// interpreter's limits on time and output.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kvinfer/chat_template.h"
#include "kvinfer/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string source(input.substr(0, nul));
  const std::string content = nul == std::string_view::npos ? "Hello!" : std::string(input.substr(nul + 1));
  try {
    const kvinfer::ChatTemplate tmpl(source, "<s>", "</s>");
    const std::vector<kvinfer::ChatMessage> messages = {
        {"system", "You are helpful."}, {"user", content}, {"assistant", "Hi there."}, {"user", content}};
    (void)tmpl.render(messages, true);
    (void)tmpl.render(std::span(messages).first(2), false);
  } catch (const kvinfer::Error&) {
  }
  return 0;
}
