#pragma once
// OpenAI tool calling over a model's own chat template (docs/server.md, "Tools"): which format the
// template's family writes calls in, the grammar that constrains them (tool_choice "required", a
// named function, or "auto" with strict functions), and parsing the output (whole or streamed)
// back into tool_calls. No HTTP here.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvinfer/kvinfer.h"

namespace server {

enum class ToolFormat {
  Hermes,     // <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call> (Qwen2.5, Qwen3, Hermes)
  Llama3,     // {"name": ..., "parameters": {...}} as the whole reply (Llama 3.1 - 3.3)
  Generic,    // a template without tools: Hermes' instructions in the system message, Hermes' calls
};

// The format a chat template's family uses, from its source.
ToolFormat tool_format(const std::string& template_source);
std::string_view tool_format_name(ToolFormat f);

enum class ToolChoice { None, Auto, Required, Named };

struct ToolFunction {
  std::string name;
  nlohmann::ordered_json parameters;  // a JSON schema (an object schema when absent)
  bool strict = false;
};

struct Tools {
  std::vector<ToolFunction> functions;
  std::string json;  // the "tools" list as the client sent it (for the template)
  ToolChoice choice = ToolChoice::Auto;
  std::string named;     // ToolChoice::Named: the function
  bool parallel = true;  // parallel_tool_calls
  ToolFormat format = ToolFormat::Hermes;
  bool active() const { return !functions.empty() && choice != ToolChoice::None; }
};

// The grammar text for the reply, or "" when the reply is free (auto without strict functions,
// none). Throws kvinfer::Error (Unsupported) naming the function whose parameters use a feature
// outside the schema subset ("tools[1].function.parameters: ...").
std::string tool_grammar(const Tools& t);

// A template without tools support gets the tools in Hermes' words, at the end of the system
// message (one is added first when there is none); its tool calls and results become text as
// Qwen2.5's template writes them.
std::vector<kvinfer::ChatMessage> generic_tool_messages(std::vector<kvinfer::ChatMessage> messages, const Tools& t);

// Python's json.dumps(value, ensure_ascii=False): what a template's `| tojson` prints.
std::string python_json(const nlohmann::ordered_json& v);

struct ToolCall {
  std::string id;         // "call_..."
  std::string name;
  std::string arguments;  // JSON text
};

// Reads a reply as it streams: text that cannot be part of a call comes out at once; a call comes
// out whole once its text is complete. Text that turns out not to be a valid call comes out as
// text.
class ToolStream {
 public:
  explicit ToolStream(ToolFormat format) : format_(format) {}
  struct Out {
    std::string content;
    std::vector<ToolCall> calls;
  };
  Out push(std::string_view piece);
  Out finish();

 private:
  Out hermes(bool end);
  ToolFormat format_;
  std::string held_;        // text not yet given out
  bool in_call_ = false;    // Hermes: inside <tool_call> ... </tool_call>
  bool after_call_ = false; // Hermes: a call ended; whitespace after it is not content
  bool decided_ = false;    // Llama3: whether the reply is a call is known
  bool whole_call_ = false; // Llama3: it may be one (it starts with '{')
};

// The whole reply at once (what ToolStream gives for it in one piece).
ToolStream::Out parse_tool_output(ToolFormat format, std::string_view text);

}  // namespace server
