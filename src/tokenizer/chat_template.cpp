// ChatTemplate over the Jinja engine in jinja/: parse at construction, build the variables
// transformers passes (messages as dicts, the special tokens, tools/documents = None), render.
#include "kvinfer/chat_template.h"

#include <string>

#include <nlohmann/json.hpp>

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
  return render(messages, add_generation_prompt, variables, {});
}

namespace {

using Json = nlohmann::ordered_json;

// A JSON value as the Python object json.loads gives (dicts keep their keys' order).
jinja::Value from_json(const Json& j, int depth) {
  using jinja::Value;
  if (depth > 64) throw Error(ErrorKind::InvalidArgument, "chat template input: JSON nested deeper than 64 levels");
  switch (j.type()) {
    case Json::value_t::null: return Value::none();
    case Json::value_t::boolean: return Value::boolean(j.get<bool>());
    case Json::value_t::number_integer: return Value::integer(j.get<int64_t>());
    case Json::value_t::number_unsigned:
      if (j.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) return Value::number(j.get<double>());
      return Value::integer(static_cast<int64_t>(j.get<uint64_t>()));
    case Json::value_t::number_float: return Value::number(j.get<double>());
    case Json::value_t::string: return Value::string(j.get<std::string>());
    case Json::value_t::array: {
      jinja::ValueList items;
      for (const Json& e : j) items.push_back(from_json(e, depth + 1));
      return Value::sequence(std::move(items));
    }
    case Json::value_t::object: {
      jinja::Dict d;
      for (const auto& [k, v] : j.items()) d.set(Value::string(k), from_json(v, depth + 1));
      return Value::dict(std::move(d));
    }
    default: return Value::none();
  }
}

Json parse_json(std::string_view text, const char* what) {
  try {
    return Json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorKind::InvalidArgument, std::string("chat template input: ") + what + " is not valid JSON: " + e.what());
  }
}

}  // namespace

std::string ChatTemplate::render(std::span<const ChatMessage> messages, bool add_generation_prompt,
                                 const std::map<std::string, std::string>& variables, std::string_view tools_json) const {
  using jinja::Value;
  jinja::ValueList list;
  list.reserve(messages.size());
  jinja::Variables vars;
  Value tools = Value::none();
  try {
    for (const auto& m : messages) {
      jinja::Dict d;
      d.set(Value::string("role"), Value::string(m.role));
      d.set(Value::string("content"), Value::string(m.content));
      if (!m.tool_calls.empty()) {
        jinja::ValueList calls;
        for (const ChatToolCall& c : m.tool_calls) {
          Value arguments = Value::string(c.arguments);
          if (Json::accept(c.arguments)) arguments = from_json(Json::parse(c.arguments), 0);
          jinja::Dict fn;
          fn.set(Value::string("name"), Value::string(c.name));
          fn.set(Value::string("arguments"), std::move(arguments));
          jinja::Dict call;
          call.set(Value::string("id"), Value::string(c.id));
          call.set(Value::string("type"), Value::string("function"));
          call.set(Value::string("function"), Value::dict(std::move(fn)));
          calls.push_back(Value::dict(std::move(call)));
        }
        d.set(Value::string("tool_calls"), Value::sequence(std::move(calls)));
      }
      if (!m.tool_call_id.empty()) d.set(Value::string("tool_call_id"), Value::string(m.tool_call_id));
      if (!m.name.empty()) d.set(Value::string("name"), Value::string(m.name));
      list.push_back(Value::dict(std::move(d)));
    }
    for (const auto& [name, value] : variables) vars.emplace_back(name, Value::string(value));
    if (!tools_json.empty()) {
      const Json t = parse_json(tools_json, "tools");
      if (!t.is_array()) throw Error(ErrorKind::InvalidArgument, "chat template input: tools must be a JSON list");
      tools = from_json(t, 0);
    }
  } catch (const jinja::EvalError& e) {  // an input past the engine's string size limit
    throw Error(ErrorKind::InvalidArgument, std::string("chat template input: ") + e.what());
  }
  // Added after the extras so that the conversation itself cannot be overridden by them.
  vars.emplace_back("messages", Value::sequence(std::move(list)));
  vars.emplace_back("bos_token", Value::string(bos_token_));
  vars.emplace_back("eos_token", Value::string(eos_token_));
  vars.emplace_back("add_generation_prompt", Value::boolean(add_generation_prompt));
  vars.emplace_back("tools", std::move(tools));
  vars.emplace_back("documents", Value::none());
  return jinja::render(parsed_->body, vars, jinja::RenderLimits{});
}

bool ChatTemplate::supports_tools() const { return source_.find("tools") != std::string::npos; }

}  // namespace kvinfer
