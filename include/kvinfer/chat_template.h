#pragma once
// ChatTemplate: renders a model's chat template (Jinja2 source from tokenizer_config.json
// "chat_template", chat_template.jinja or GGUF "tokenizer.chat_template") byte for byte as
// HF transformers' apply_chat_template(tokenize=False) does: jinja2's sandbox with
// trim_blocks, lstrip_blocks, loop controls, tojson(ensure_ascii=False), raise_exception and
// strftime_now. The supported subset of Jinja2 is listed in docs/chat-templates.md; anything
// outside it is a kvinfer::Error naming the construct and its line, never a wrong prompt.
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvinfer/export.h"

KVINFER_PUBLIC_BEGIN
namespace kvinfer {

// One tool call of an assistant message (OpenAI's message.tool_calls[i]).
struct ChatToolCall {
  std::string id;         // "call_..."
  std::string name;       // the function called
  std::string arguments;  // its arguments as JSON text (an object)
};

struct ChatMessage {
  std::string role;
  std::string content;
  // An assistant message's tool calls. The template sees each as a dict {"id", "type":
  // "function", "function": {"name", "arguments"}} with the arguments parsed (a dict, or the
  // text when it is not JSON), as callers of transformers' apply_chat_template pass them.
  std::vector<ChatToolCall> tool_calls = {};
  std::string tool_call_id = {};  // role "tool": the call this message answers
  std::string name = {};          // role "tool": the function that answered
};

class ChatTemplate {
 public:
  // Parses once; throws kvinfer::Error naming the unsupported construct (or syntax error) and
  // its line.
  explicit ChatTemplate(std::string source, std::string bos_token = "", std::string eos_token = "");

  // Renders `messages` (and the assistant header when add_generation_prompt is set). The
  // template sees messages, bos_token, eos_token, add_generation_prompt, and tools = documents
  // = None, as transformers passes them. Errors (raise_exception, type errors, limits) throw
  // kvinfer::Error naming the line. Safe to call from several threads at once.
  std::string render(std::span<const ChatMessage> messages, bool add_generation_prompt) const;
  // The same, with extra string variables the template may read (e.g. "date_string").
  std::string render(std::span<const ChatMessage> messages, bool add_generation_prompt,
                     const std::map<std::string, std::string>& variables) const;
  // The same with tools, as transformers' apply_chat_template(tools=...): `tools_json` is a JSON
  // list of tool definitions (OpenAI's "tools", [{"type": "function", "function": {"name",
  // "description", "parameters"}}]) that the template sees as `tools`, its objects' keys in their
  // order; "" passes None. Throws Error (InvalidArgument) when it is not a JSON list.
  std::string render(std::span<const ChatMessage> messages, bool add_generation_prompt,
                     const std::map<std::string, std::string>& variables, std::string_view tools_json) const;
  // Whether the template reads `tools` (it can render tool definitions and calls).
  bool supports_tools() const;

  const std::string& source() const { return source_; }

 private:
  struct Parsed;
  std::string source_;
  std::string bos_token_;
  std::string eos_token_;
  std::shared_ptr<const Parsed> parsed_;
};

}  // namespace kvinfer
KVINFER_PUBLIC_END
