// ChatTemplate over the Jinja engine in jinja/: parse at construction, build the variables
// transformers passes (messages as dicts, the special tokens, tools/documents = None), render.
#include "kvinfer/chat_template.h"

#include <string>

#include "kvinfer/error.h"
#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/interpreter.h"

namespace kvinfer {

struct ChatTemplate::Parsed {
  jinja::Body body;
};

ChatTemplate::ChatTemplate(std::string source, std::string bos_token, std::string eos_token)
    : source_(std::move(source)), bos_token_(std::move(bos_token)), eos_token_(std::move(eos_token)) {
  auto parsed = std::make_shared<Parsed>();
  parsed->body = jinja::parse_template(source_);
  parsed_ = std::move(parsed);
}

std::string ChatTemplate::render(std::span<const ChatMessage> messages, bool add_generation_prompt) const {
  return render(messages, add_generation_prompt, {});
}

std::string ChatTemplate::render(std::span<const ChatMessage> messages, bool add_generation_prompt,
                                 const std::map<std::string, std::string>& variables) const {
  using jinja::Value;
  jinja::ValueList list;
  list.reserve(messages.size());
  jinja::Variables vars;
  try {
    for (const auto& m : messages) {
      jinja::Dict d;
      d.set(Value::string("role"), Value::string(m.role));
      d.set(Value::string("content"), Value::string(m.content));
      list.push_back(Value::dict(std::move(d)));
    }
    for (const auto& [name, value] : variables) vars.emplace_back(name, Value::string(value));
  } catch (const jinja::EvalError& e) {  // an input past the engine's string size limit
    throw Error(ErrorKind::InvalidArgument, std::string("chat template input: ") + e.what());
  }
  // Added after the extras so that the conversation itself cannot be overridden by them.
  vars.emplace_back("messages", Value::sequence(std::move(list)));
  vars.emplace_back("bos_token", Value::string(bos_token_));
  vars.emplace_back("eos_token", Value::string(eos_token_));
  vars.emplace_back("add_generation_prompt", Value::boolean(add_generation_prompt));
  vars.emplace_back("tools", Value::none());
  vars.emplace_back("documents", Value::none());
  return jinja::render(parsed_->body, vars, jinja::RenderLimits{});
}

}  // namespace kvinfer
