// Tool calls: formats, their grammars, the Hermes instructions for templates without tools, and
// the parser that turns a reply (or a stream of pieces) into content and calls.
#include "tool_calls.h"

#include <random>

#include <fmt/format.h>

#include "grammar/gbnf.h"
#include "grammar/json_schema.h"

namespace server {

using nlohmann::ordered_json;

namespace {

constexpr std::string_view kOpen = "<tool_call>", kClose = "</tool_call>";

std::string call_id() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char kChars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += kChars[rng() % (sizeof kChars - 1)];
  return id;
}

// Any text that does not contain `w`, as a grammar expression; w must not overlap itself (no
// proper prefix is also a suffix) and its first character must not occur again in it, as
// "<tool_call>". A regular expression: runs of other characters, and excursions into a prefix of w
// that break off (every w[0] starts over at the first character).
std::string text_without(std::string_view w) {
  using kvinfer::grammar::quote;
  const std::string w0 = quote(w.substr(0, 1));
  const auto cls = [](std::string_view chars) {
    std::string out = "[^";
    for (char c : chars) {
      if (c == ']' || c == '\\' || c == '^' || c == '-' || c == '[') out += '\\';
      out += c;
    }
    return out + "]";
  };
  std::vector<std::string> partial = {"\"\""};  // ε, w1, w1w2, ..., w1..w(n-2)
  for (size_t k = 2; k < w.size(); ++k) partial.push_back(quote(w.substr(1, k - 1)));
  std::string partials;
  for (const auto& p : partial) partials += (partials.empty() ? "" : " | ") + p;
  std::string exits;  // w1..w(k-1) then a character other than w[0] and w[k]
  for (size_t k = 1; k < w.size(); ++k) {
    const std::string prefix = k == 1 ? "" : quote(w.substr(1, k - 1)) + " ";
    exits += (exits.empty() ? "" : " | ") + prefix + cls(std::string(1, w[0]) + w[k]);
  }
  const std::string loop = "( ( " + partials + " ) " + w0 + " )*";
  return fmt::format("( {} | {} {} ( {} ) )* ( {} {} ( {} ) )?", cls(w.substr(0, 1)), w0, loop, exits, w0, loop, partials);
}

std::string json_string(const std::string& s) { return ordered_json(s).dump(); }

void python_json_to(const ordered_json& v, std::string& out) {
  if (v.is_object()) {
    out += '{';
    bool first = true;
    for (const auto& [k, e] : v.items()) {
      if (!first) out += ", ";
      first = false;
      out += json_string(k) + ": ";
      python_json_to(e, out);
    }
    out += '}';
  } else if (v.is_array()) {
    out += '[';
    for (size_t i = 0; i < v.size(); ++i) {
      if (i > 0) out += ", ";
      python_json_to(v[i], out);
    }
    out += ']';
  } else if (v.is_boolean()) {
    out += v.get<bool>() ? "true" : "false";
  } else {
    out += v.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
  }
}

// The reply `text` is one call in `format`'s JSON ({"name", "arguments"/"parameters"}).
std::optional<ToolCall> parse_call(std::string_view text, ToolFormat format) {
  ordered_json j;
  try {
    j = ordered_json::parse(text);
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return std::nullopt;
  const char* key = format == ToolFormat::Llama3 && j.contains("parameters") ? "parameters" : "arguments";
  ordered_json args = j.contains(key) ? j[key] : ordered_json::object();
  if (args.is_string()) {  // arguments already as JSON text
    try {
      args = ordered_json::parse(args.get<std::string>());
    } catch (const nlohmann::json::exception&) {
      return std::nullopt;
    }
  }
  if (!args.is_object()) return std::nullopt;
  return ToolCall{call_id(), j["name"].get<std::string>(), args.dump(-1, ' ', false, ordered_json::error_handler_t::replace)};
}

std::string trim(std::string_view s) {
  const size_t a = s.find_first_not_of(" \t\r\n");
  if (a == std::string_view::npos) return "";
  const size_t b = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(a, b - a + 1));
}

}  // namespace

std::string python_json(const ordered_json& v) {
  std::string out;
  python_json_to(v, out);
  return out;
}

ToolFormat tool_format(const std::string& source) {
  if (source.find("<tool_call>") != std::string::npos) return ToolFormat::Hermes;
  if (source.find("<|python_tag|>") != std::string::npos || source.find("Environment: ipython") != std::string::npos)
    return ToolFormat::Llama3;
  if (source.find("tools") != std::string::npos) return ToolFormat::Hermes;  // renders tools: ask for Hermes' calls
  return ToolFormat::Generic;
}

std::string_view tool_format_name(ToolFormat f) {
  switch (f) {
    case ToolFormat::Hermes: return "hermes";
    case ToolFormat::Llama3: return "llama3_json";
    case ToolFormat::Generic: return "generic (hermes)";
  }
  return "?";
}

std::string tool_grammar(const Tools& t) {
  if (!t.active()) return "";
  const bool forced = t.choice == ToolChoice::Required || t.choice == ToolChoice::Named;
  bool any_strict = false;
  for (const ToolFunction& f : t.functions) any_strict |= f.strict;
  if (!forced && !any_strict) return "";
  // Each callable function's arguments: its schema, or any object for a non-strict one in "auto".
  static const ordered_json kAnyObject = {{"type", "object"}};
  std::vector<std::pair<std::string, const ordered_json*>> schemas;
  std::vector<const ToolFunction*> callable;
  for (size_t i = 0; i < t.functions.size(); ++i) {
    const ToolFunction& f = t.functions[i];
    if (t.choice == ToolChoice::Named && f.name != t.named) continue;
    callable.push_back(&f);
    schemas.emplace_back(fmt::format("tools[{}].function.parameters", i), forced || f.strict ? &f.parameters : &kAnyObject);
  }
  const auto root = [&](const std::vector<std::string>& rules) {
    std::string bodies;
    for (size_t i = 0; i < callable.size(); ++i) {
      const std::string head = fmt::format("{{\"name\": {}, \"{}\": ", json_string(callable[i]->name),
                                           t.format == ToolFormat::Llama3 ? "parameters" : "arguments");
      bodies += (bodies.empty() ? "" : " | ") + kvinfer::grammar::quote(head) + " " + rules[i] + " \"}\"";
    }
    bodies = "( " + bodies + " )";
    if (t.format == ToolFormat::Llama3) {
      // One call as the whole reply; in "auto" also any text that does not start with '{'.
      return forced ? bodies : bodies + " | ( [^{] [^\\x00]* )?";  // [^\x00]: any character but NUL
    }
    const std::string open = kvinfer::grammar::quote(std::string(kOpen) + "\n");
    const std::string close = kvinfer::grammar::quote(fmt::format("\n{}", kClose));
    const std::string more = t.parallel && t.choice != ToolChoice::Named
                                 ? " ( " + kvinfer::grammar::quote("\n") + " " + open + " " + bodies + " " + close + " )*"
                                 : "";
    if (forced) return open + " " + bodies + " " + close + more;
    // "auto": text (never the opening tag), then optionally the calls.
    return text_without(kOpen) + " ( " + kvinfer::grammar::quote(kOpen) + " " + kvinfer::grammar::quote("\n") + " " +
           bodies + " " + close + more + " )?";
  };
  return kvinfer::grammar::json_schemas_gbnf(schemas, root, {.whitespace = true});
}

std::vector<kvinfer::ChatMessage> generic_tool_messages(std::vector<kvinfer::ChatMessage> messages, const Tools& t) {
  std::vector<kvinfer::ChatMessage> out;
  if (t.active()) {
    std::string tools = "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided "
                        "with function signatures within <tools></tools> XML tags:\n<tools>";
    for (const ordered_json& tool : ordered_json::parse(t.json)) tools.append("\n").append(python_json(tool));
    tools += "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
             "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
             "<args-json-object>}\n</tool_call>";
    if (!messages.empty() && messages[0].role == "system")
      messages[0].content += "\n\n" + tools;
    else
      messages.insert(messages.begin(), {"system", tools});
  }
  bool after_tool = false;  // the last message written holds tool results: more join it
  for (kvinfer::ChatMessage& m : messages) {
    if (m.role == "tool") {
      const std::string block = "<tool_response>\n" + m.content + "\n</tool_response>";
      if (after_tool)
        out.back().content += "\n" + block;
      else
        out.push_back({"user", block});
      after_tool = true;
      continue;
    }
    after_tool = false;
    if (!m.tool_calls.empty()) {
      std::string text = m.content;
      for (const kvinfer::ChatToolCall& c : m.tool_calls) {
        std::string args = c.arguments;
        if (ordered_json::accept(args)) args = python_json(ordered_json::parse(args));
        if (!text.empty()) text += '\n';
        text += fmt::format("<tool_call>\n{{\"name\": {}, \"arguments\": {}}}\n</tool_call>", json_string(c.name), args);
      }
      out.push_back({m.role, text});
      continue;
    }
    out.push_back({m.role, m.content});
  }
  return out;
}

ToolStream::Out ToolStream::hermes(bool end) {
  Out out;
  for (;;) {
    if (!in_call_) {
      if (after_call_) {  // whitespace between calls is not content: hold it until what follows shows
        const size_t next = held_.find_first_not_of(" \t\r\n");
        if (next == std::string::npos) {
          if (end) held_.clear();
          return out;
        }
        const std::string_view rest = std::string_view(held_).substr(next);
        const bool tag = rest.size() >= kOpen.size() ? rest.starts_with(kOpen) : kOpen.starts_with(rest);
        if (tag && rest.size() < kOpen.size() && !end) return out;
        if (tag) held_.erase(0, next);
        after_call_ = false;
      }
      const size_t at = held_.find(kOpen);
      if (at != std::string::npos) {
        out.content += held_.substr(0, at);
        held_.erase(0, at + kOpen.size());
        in_call_ = true;
        continue;
      }
      // Keep back what could be the start of the tag.
      size_t keep = 0;
      if (!end)
        for (size_t k = std::min(held_.size(), kOpen.size() - 1); k > 0; --k)
          if (held_.compare(held_.size() - k, k, kOpen, 0, k) == 0) {
            keep = k;
            break;
          }
      out.content += held_.substr(0, held_.size() - keep);
      held_.erase(0, held_.size() - keep);
      return out;
    }
    const size_t at = held_.find(kClose);
    if (at == std::string::npos && !end) return out;
    const std::string body = held_.substr(0, at);
    if (auto call = parse_call(trim(body), format_)) {
      out.calls.push_back(*call);
      after_call_ = true;
    } else {
      out.content += std::string(kOpen) + body + (at == std::string::npos ? "" : std::string(kClose));
    }
    held_.erase(0, at == std::string::npos ? held_.size() : at + kClose.size());
    in_call_ = false;
  }
}

ToolStream::Out ToolStream::push(std::string_view piece) {
  held_ += piece;
  if (format_ != ToolFormat::Llama3) return hermes(false);
  Out out;
  if (!decided_) {
    const size_t first = held_.find_first_not_of(" \t\r\n");
    if (first == std::string::npos) return out;
    decided_ = true;
    whole_call_ = held_[first] == '{';
  }
  if (!whole_call_) {
    out.content = std::move(held_);
    held_.clear();
  }
  return out;
}

ToolStream::Out ToolStream::finish() {
  if (format_ != ToolFormat::Llama3) return hermes(true);
  Out out;
  if (decided_ && whole_call_) {
    if (auto call = parse_call(trim(held_), format_))
      out.calls.push_back(*call);
    else
      out.content = held_;
  } else {
    out.content = held_;
  }
  held_.clear();
  return out;
}

ToolStream::Out parse_tool_output(ToolFormat format, std::string_view text) {
  ToolStream s(format);
  ToolStream::Out a = s.push(text);
  ToolStream::Out b = s.finish();
  a.content += b.content;
  for (ToolCall& c : b.calls) a.calls.push_back(std::move(c));
  return a;
}

}  // namespace server
