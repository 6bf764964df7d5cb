#include "openai.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include <fmt/format.h>

namespace server {

using nlohmann::json;

namespace {

ApiError bad(const std::string& param, const std::string& message, std::string code = "") {
  return ApiError(400, "invalid_request_error", param, message, std::move(code));
}

// A JSON object's fields, each read at most once; whatever was not read is an unknown field.
class Fields {
 public:
  explicit Fields(const json& obj) : obj_(obj) {}

  const json* get(const std::string& name) {
    seen_.insert(name);
    const auto it = obj_.find(name);
    return it == obj_.end() || it->is_null() ? nullptr : &*it;
  }
  std::optional<double> number(const std::string& name, double lo, double hi) {
    const json* v = get(name);
    if (!v) return std::nullopt;
    if (!v->is_number()) throw bad(name, fmt::format("'{}' must be a number, got {}", name, v->dump()));
    const double d = v->get<double>();
    if (!(d >= lo && d <= hi)) throw bad(name, fmt::format("'{}' is {}; it must be in [{}, {}]", name, v->dump(), lo, hi));
    return d;
  }
  std::optional<int64_t> integer(const std::string& name, int64_t lo, int64_t hi) {
    const json* v = get(name);
    if (!v) return std::nullopt;
    if (!v->is_number_integer()) throw bad(name, fmt::format("'{}' must be an integer, got {}", name, v->dump()));
    if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(hi))
      throw bad(name, fmt::format("'{}' is {}; it must be in [{}, {}]", name, v->dump(), lo, hi));
    const auto i = v->get<int64_t>();
    if (i < lo || i > hi) throw bad(name, fmt::format("'{}' is {}; it must be in [{}, {}]", name, i, lo, hi));
    return i;
  }
  std::optional<bool> boolean(const std::string& name) {
    const json* v = get(name);
    if (!v) return std::nullopt;
    if (!v->is_boolean()) throw bad(name, fmt::format("'{}' must be true or false, got {}", name, v->dump()));
    return v->get<bool>();
  }
  std::optional<std::string> string(const std::string& name) {
    const json* v = get(name);
    if (!v) return std::nullopt;
    if (!v->is_string()) throw bad(name, fmt::format("'{}' must be a string, got {}", name, v->dump()));
    return v->get<std::string>();
  }
  // Fields kvinfer accepts only with their default (n = 1, echo = false, ...).
  void only(const std::string& name, const json& allowed) {
    const json* v = get(name);
    if (v && *v != allowed)
      throw bad(name, fmt::format("'{}' = {} is not supported (only {})", name, v->dump(), allowed.dump()));
  }
  void finish(const std::string& where) const {
    for (const auto& [key, value] : obj_.items())
      if (!seen_.contains(key)) throw bad(where.empty() ? key : where + "." + key, fmt::format("unknown field '{}'", key));
  }

 private:
  const json& obj_;
  std::set<std::string> seen_;
};

std::vector<int32_t> parse_prompt(const json& p, const kvinfer::Model& model) {
  const kvinfer::Tokenizer& tok = model.tokenizer();
  if (p.is_string()) return tok.encode(p.get<std::string>());
  if (p.is_array() && p.size() == 1 && p[0].is_string()) return tok.encode(p[0].get<std::string>());
  if (p.is_array() && !p.empty() && p[0].is_number_integer()) {
    std::vector<int32_t> ids;
    for (const json& v : p) {
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= model.config().vocab_size)
        throw bad("prompt", fmt::format("prompt token {} is not an id of this model's vocabulary (size {})", v.dump(),
                                        model.config().vocab_size));
      ids.push_back(v.get<int32_t>());
    }
    return ids;
  }
  throw bad("prompt", "'prompt' must be a string, a list of one string, or a non-empty list of token ids");
}

// Text content: a string, or a list of text parts.
std::string content_text(const json* content, const std::string& where, bool may_be_null) {
  if (!content || content->is_null()) {
    if (may_be_null) return "";
    throw bad(where + ".content", where + ".content must be a string or a list of text parts");
  }
  if (content->is_string()) return content->get<std::string>();
  if (content->is_array()) {
    std::string text;
    for (const json& part : *content) {  // [{"type": "text", "text": "..."}]
      if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string())
        throw bad(where + ".content", "only text content parts ({\"type\": \"text\", \"text\": ...}) are supported");
      text += part["text"].get<std::string>();
    }
    return text;
  }
  throw bad(where + ".content", where + ".content must be a string or a list of text parts");
}

std::vector<kvinfer::ChatMessage> parse_messages(const json* m) {
  if (!m || !m->is_array() || m->empty()) throw bad("messages", "'messages' must be a non-empty list");
  std::vector<kvinfer::ChatMessage> messages;
  for (size_t i = 0; i < m->size(); ++i) {
    const json& msg = (*m)[i];
    const std::string where = fmt::format("messages[{}]", i);
    if (!msg.is_object()) throw bad(where, where + " must be an object");
    Fields f(msg);
    const auto role = f.string("role");
    if (!role || (*role != "system" && *role != "user" && *role != "assistant" && *role != "developer" && *role != "tool"))
      throw bad(where + ".role", where + ".role must be \"system\", \"developer\", \"user\", \"assistant\" or \"tool\"");
    kvinfer::ChatMessage out{*role == "developer" ? "system" : *role, ""};
    const json* calls = *role == "assistant" ? f.get("tool_calls") : nullptr;
    out.content = content_text(f.get("content"), where, calls != nullptr);
    if (calls) {
      if (!calls->is_array()) throw bad(where + ".tool_calls", where + ".tool_calls must be a list");
      for (size_t k = 0; k < calls->size(); ++k) {
        const json& c = (*calls)[k];
        const std::string cw = fmt::format("{}.tool_calls[{}]", where, k);
        if (!c.is_object()) throw bad(cw, cw + " must be an object");
        Fields cf(c);
        kvinfer::ChatToolCall call;
        call.id = cf.string("id").value_or("");
        if (const auto type = cf.string("type"); type && *type != "function")
          throw bad(cw + ".type", cw + ".type must be \"function\"");
        const json* fn = cf.get("function");
        if (!fn || !fn->is_object()) throw bad(cw + ".function", cw + ".function must be an object");
        Fields ff(*fn);
        const auto name = ff.string("name");
        const auto arguments = ff.string("arguments");
        if (!name) throw bad(cw + ".function.name", cw + ".function.name is required");
        ff.finish(cw + ".function");
        cf.finish(cw);
        call.name = *name;
        call.arguments = arguments.value_or("{}");
        out.tool_calls.push_back(std::move(call));
      }
    }
    if (*role == "tool") {
      const auto id = f.string("tool_call_id");
      if (!id) throw bad(where + ".tool_call_id", where + ".tool_call_id is required in a tool message");
      out.tool_call_id = *id;
    }
    if (const auto name = f.string("name"); name && *role == "tool") out.name = *name;
    f.finish(where);
    messages.push_back(std::move(out));
  }
  return messages;
}

// "tools", "tool_choice" and "parallel_tool_calls" of a chat request.
Tools parse_tools(Fields& f, const nlohmann::ordered_json& body, const std::string& template_source) {
  Tools t;
  t.format = tool_format(template_source);
  const json* tools = f.get("tools");
  const json* choice = f.get("tool_choice");
  if (const auto p = f.boolean("parallel_tool_calls")) t.parallel = *p;
  if (!tools) {
    if (choice && *choice != "none") throw bad("tool_choice", "'tool_choice' needs 'tools'");
    t.choice = ToolChoice::None;
    return t;
  }
  if (!tools->is_array()) throw bad("tools", "'tools' must be a list");
  if (tools->size() > 128) throw bad("tools", "'tools' lists more than 128 functions");
  for (size_t i = 0; i < tools->size(); ++i) {
    const json& tool = (*tools)[i];
    const std::string where = fmt::format("tools[{}]", i);
    if (!tool.is_object()) throw bad(where, where + " must be an object");
    Fields tf(tool);
    if (tf.string("type").value_or("") != "function") throw bad(where + ".type", where + ".type must be \"function\"");
    const json* fn = tf.get("function");
    if (!fn || !fn->is_object()) throw bad(where + ".function", where + ".function must be an object");
    tf.finish(where);
    Fields ff(*fn);
    ToolFunction out;
    out.name = ff.string("name").value_or("");
    if (out.name.empty() || out.name.size() > 64 ||
        out.name.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") != std::string::npos)
      throw bad(where + ".function.name", where + ".function.name must be 1 to 64 letters, digits, '_' or '-'");
    for (const ToolFunction& other : t.functions)
      if (other.name == out.name) throw bad(where + ".function.name", fmt::format("two functions are named '{}'", out.name));
    ff.string("description");
    out.strict = ff.boolean("strict").value_or(false);
    if (const json* params = ff.get("parameters")) {
      if (!params->is_object()) throw bad(where + ".function.parameters", where + ".function.parameters must be a JSON schema object");
      out.parameters = body["tools"][i]["function"]["parameters"];  // its keys in the client's order
    } else {
      out.parameters = {{"type", "object"}, {"properties", nlohmann::ordered_json::object()}};
    }
    ff.finish(where + ".function");
    t.functions.push_back(std::move(out));
  }
  t.json = body["tools"].dump();  // the client's key order: the template prints it
  t.choice = ToolChoice::Auto;
  if (choice) {
    if (*choice == "none") {
      t.choice = ToolChoice::None;
    } else if (*choice == "auto") {
      t.choice = ToolChoice::Auto;
    } else if (*choice == "required") {
      t.choice = ToolChoice::Required;
    } else if (choice->is_object() && choice->value("type", "") == "function" && choice->contains("function") &&
               (*choice)["function"].is_object() && (*choice)["function"].contains("name") &&
               (*choice)["function"]["name"].is_string()) {
      t.choice = ToolChoice::Named;
      t.named = (*choice)["function"]["name"].get<std::string>();
      bool found = false;
      for (const ToolFunction& fn : t.functions) found |= fn.name == t.named;
      if (!found) throw bad("tool_choice", fmt::format("tool_choice names '{}', which is not in 'tools'", t.named));
    } else {
      throw bad("tool_choice", "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", "
                               "\"function\": {\"name\": ...}}");
    }
  }
  return t;
}

// The grammar text "response_format" asks for, or "".
std::string response_format_grammar(const json* rf, const nlohmann::ordered_json& body) {
  if (!rf) return "";
  if (!rf->is_object() || !rf->contains("type") || !(*rf)["type"].is_string())
    throw bad("response_format", "'response_format' must be an object with a 'type'");
  Fields f(*rf);
  const std::string type = *f.string("type");
  std::string text;
  if (type == "text") {
  } else if (type == "json_object") {
    text = kvinfer::json_schema_to_gbnf(R"({"type": "object"})");
  } else if (type == "json_schema") {
    const json* js = f.get("json_schema");
    if (!js || !js->is_object()) throw bad("response_format.json_schema", "'response_format.json_schema' must be an object");
    Fields jf(*js);
    const auto name = jf.string("name");
    if (!name || name->empty()) throw bad("response_format.json_schema.name", "'response_format.json_schema.name' is required");
    jf.string("description");
    jf.boolean("strict");  // a grammar constrains the reply either way
    const json* schema = jf.get("schema");
    jf.finish("response_format.json_schema");
    try {
      // The properties in the client's order: the reply writes them in that order.
      text = kvinfer::json_schema_to_gbnf(schema ? body["response_format"]["json_schema"]["schema"].dump()
                                                 : std::string(R"({"type": "object"})"));
    } catch (const kvinfer::Error& e) {
      throw bad("response_format.json_schema.schema", e.what());
    }
  } else {
    throw bad("response_format.type", fmt::format("response_format type '{}' is not supported (text, json_object, json_schema)", type));
  }
  f.finish("response_format");
  return text;
}

// The prompt of a chat request: the conversation rendered with the model's template, with the
// tools when it renders them, else in Hermes' words (tool_calls.h).
std::vector<int32_t> render_chat(const std::vector<kvinfer::ChatMessage>& messages, const Tools& tools,
                                 const kvinfer::Model& model) {
  const kvinfer::Tokenizer& tok = model.tokenizer();
  if (tok.chat_template().empty())
    throw ApiError(400, "invalid_request_error", "messages", "this model has no chat template: use /v1/completions");
  const kvinfer::ChatTemplate tmpl(tok.chat_template(), tok.bos_text(), tok.eos_text());
  bool tool_messages = false;
  for (const auto& m : messages) tool_messages |= m.role == "tool" || !m.tool_calls.empty();
  std::string text;
  if (tools.format == ToolFormat::Generic && (tools.active() || tool_messages))
    text = tmpl.render(generic_tool_messages(messages, tools), true);
  else
    text = tmpl.render(messages, true, {}, tools.active() ? tools.json : std::string());
  return tok.encode(text, {.add_special = false, .parse_special = true});
}

}  // namespace

json error_body(const ApiError& e) {
  return {{"error",
           {{"message", e.what()},
            {"type", e.type},
            {"param", e.param.empty() ? json(nullptr) : json(e.param)},
            {"code", e.code.empty() ? json(nullptr) : json(e.code)}}}};
}

ApiRequest parse_request(Endpoint endpoint, const std::string& body, const kvinfer::Model& model,
                         const ServerConfig& config) {
  json j;
  try {
    j = json::parse(body);
  } catch (const json::parse_error& e) {
    throw bad("", fmt::format("the body is not valid JSON: {}", e.what()));
  }
  if (!j.is_object()) throw bad("", "the body must be a JSON object");
  const bool chat = endpoint == Endpoint::ChatCompletions;
  ApiRequest r{endpoint, {}, false, false, config.model_id, {}};
  Fields f(j);
  if (const auto m = f.string("model")) r.model = *m;
  kvinfer::GenerateOptions& o = r.request.options;
  r.request.text = true;
  std::string grammar_text;
  if (chat) {
    const std::vector<kvinfer::ChatMessage> messages = parse_messages(f.get("messages"));
    const auto ordered = nlohmann::ordered_json::parse(body);  // valid: parsed above
    r.tools = parse_tools(f, ordered, model.tokenizer().chat_template());
    grammar_text = response_format_grammar(f.get("response_format"), ordered);
    if (!grammar_text.empty() && r.tools.active())
      throw bad("response_format", "'response_format' with tools the model may call is not supported (use tool_choice \"none\")");
    if (r.tools.active()) {
      try {
        grammar_text = tool_grammar(r.tools);
      } catch (const kvinfer::Error& e) {
        throw bad("tools", e.what());
      }
    }
    r.request.prompt = render_chat(messages, r.tools, model);
  } else {
    const json* p = f.get("prompt");
    if (!p) throw bad("prompt", "'prompt' is required");
    r.request.prompt = parse_prompt(*p, model);
    if (r.request.prompt.empty()) throw bad("prompt", "the prompt encodes to no tokens");
  }
  const int64_t ctx = config.context_length > 0 ? std::min(config.context_length, model.context_length())
                                                : model.context_length();
  const auto prompt = static_cast<int64_t>(r.request.prompt.size());
  if (prompt >= ctx)
    throw bad(chat ? "messages" : "prompt",
              fmt::format("This model's maximum context length is {} tokens; the prompt has {} tokens", ctx, prompt),
              "context_length_exceeded");
  std::optional<int64_t> max_tokens = f.integer("max_tokens", 1, INT32_MAX);
  if (chat)
    if (const auto m = f.integer("max_completion_tokens", 1, INT32_MAX)) max_tokens = m;
  o.max_new_tokens = max_tokens.value_or(chat ? ctx - prompt : config.default_max_tokens);
  if (prompt + o.max_new_tokens > ctx)
    throw bad("max_tokens",
              fmt::format("This model's maximum context length is {} tokens. However, you requested {} tokens ({} in the "
                          "prompt, {} in the completion)",
                          ctx, prompt + o.max_new_tokens, prompt, o.max_new_tokens),
              "context_length_exceeded");

  kvinfer::SamplingParams& s = o.sampling;
  s.temperature = static_cast<float>(f.number("temperature", 0, 2).value_or(1.0));  // OpenAI's default
  s.top_p = static_cast<float>(f.number("top_p", 0, 1).value_or(1.0));
  if (s.top_p == 0.0f) throw bad("top_p", "'top_p' must be greater than 0");
  s.presence_penalty = static_cast<float>(f.number("presence_penalty", -2, 2).value_or(0.0));
  s.frequency_penalty = static_cast<float>(f.number("frequency_penalty", -2, 2).value_or(0.0));
  // Extensions (llama.cpp's and vLLM's names).
  s.top_k = static_cast<int32_t>(f.integer("top_k", 0, INT32_MAX).value_or(0));
  s.min_p = static_cast<float>(f.number("min_p", 0, 1).value_or(0.0));
  s.repetition_penalty = static_cast<float>(f.number("repetition_penalty", 0.01, 100).value_or(1.0));
  o.ignore_eos = f.boolean("ignore_eos").value_or(false);
  if (const json* seed = f.get("seed")) {
    if (!seed->is_number_integer()) throw bad("seed", fmt::format("'seed' must be an integer, got {}", seed->dump()));
    s.seed = seed->is_number_unsigned() ? seed->get<uint64_t>() : static_cast<uint64_t>(seed->get<int64_t>());
  } else {
    s.seed = std::random_device{}() | (static_cast<uint64_t>(std::random_device{}()) << 32);
  }
  if (const json* bias = f.get("logit_bias")) {
    if (!bias->is_object()) throw bad("logit_bias", "'logit_bias' must be an object of token id → bias");
    for (const auto& [key, value] : bias->items()) {
      char* end = nullptr;
      const long long id = std::strtoll(key.c_str(), &end, 10);
      if (key.empty() || *end != '\0' || id < 0 || id >= model.config().vocab_size)
        throw bad("logit_bias", fmt::format("logit_bias key '{}' is not a token id of this model (vocabulary {})", key,
                                            model.config().vocab_size));
      if (!value.is_number() || value.get<double>() < -100 || value.get<double>() > 100)
        throw bad("logit_bias", fmt::format("logit_bias[{}] = {} must be a number in [-100, 100]", key, value.dump()));
      s.logit_bias.emplace_back(static_cast<int32_t>(id), value.get<float>());
    }
  }
  if (const json* stop = f.get("stop")) {
    if (stop->is_string()) {
      o.stop_strings.push_back(stop->get<std::string>());
    } else if (stop->is_array() && stop->size() <= 4) {
      for (const json& v : *stop) {
        if (!v.is_string()) throw bad("stop", "'stop' must be a string or a list of up to 4 strings");
        o.stop_strings.push_back(v.get<std::string>());
      }
    } else {
      throw bad("stop", "'stop' must be a string or a list of up to 4 strings");
    }
    for (const std::string& st : o.stop_strings)
      if (st.empty()) throw bad("stop", "a stop string must not be empty");
  }
  r.stream = f.boolean("stream").value_or(false);
  if (const json* so = f.get("stream_options")) {
    if (!r.stream) throw bad("stream_options", "'stream_options' is only allowed with \"stream\": true");
    if (!so->is_object()) throw bad("stream_options", "'stream_options' must be an object");
    Fields sf(*so);
    r.include_usage = sf.boolean("include_usage").value_or(false);
    sf.finish("stream_options");
  }
  f.string("user");
  f.only("n", 1);
  if (chat) {
    f.only("logprobs", false);
  } else {
    f.only("echo", false);
    f.only("best_of", 1);
    if (f.get("logprobs")) throw bad("logprobs", "'logprobs' is not supported");
    if (f.get("suffix")) throw bad("suffix", "'suffix' is not supported");
  }
  f.finish("");
  if (!grammar_text.empty()) {
    try {
      s.grammar = config.grammars ? config.grammars->get(grammar_text, model)
                                  : kvinfer::Grammar::from_gbnf(grammar_text, model.grammar_vocabulary());
    } catch (const kvinfer::Error& e) {
      throw bad(r.tools.active() ? "tools" : "response_format", e.what());
    }
  }
  s.validate(static_cast<int32_t>(model.config().vocab_size));
  return r;
}

std::shared_ptr<const kvinfer::Grammar> GrammarCache::get(const std::string& text, const kvinfer::Model& model) {
  {
    std::lock_guard lock(mu_);
    if (const auto it = index_.find(text); it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      return it->second->second;
    }
  }
  // Compiled outside the lock: other requests go on meanwhile (two may compile the same text).
  auto g = kvinfer::Grammar::from_gbnf(text, model.grammar_vocabulary());
  std::lock_guard lock(mu_);
  if (index_.contains(text)) return g;
  lru_.emplace_front(text, g);
  index_[text] = lru_.begin();
  if (lru_.size() > kEntries) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
  return g;
}

std::string finish_reason(kvinfer::StopReason stop) {
  switch (stop) {
    case kvinfer::StopReason::Eos:
    case kvinfer::StopReason::StopString: return "stop";
    case kvinfer::StopReason::MaxTokens:
    case kvinfer::StopReason::ContextFull: return "length";
    case kvinfer::StopReason::Callback:
    case kvinfer::StopReason::Cancelled: return "cancelled";
  }
  return "stop";
}

namespace {

json usage(const Completion& c) {
  return {{"prompt_tokens", c.prompt_tokens},
          {"completion_tokens", c.completion_tokens},
          {"total_tokens", c.prompt_tokens + c.completion_tokens}};
}

json envelope(const ApiRequest& r, const Completion& c, const char* object) {
  return {{"id", c.id}, {"object", object}, {"created", c.created}, {"model", r.model}};
}

}  // namespace

json tool_call_json(const ToolCall& call) {
  return {{"id", call.id}, {"type", "function"}, {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
}

json response_body(const ApiRequest& r, const Completion& c) {
  const bool chat = r.endpoint == Endpoint::ChatCompletions;
  json out = envelope(r, c, chat ? "chat.completion" : "text_completion");
  json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", c.finish_reason}};
  if (chat && r.tools.active()) {
    const ToolStream::Out parsed = parse_tool_output(r.tools.format, c.text);
    json message = {{"role", "assistant"}, {"content", parsed.calls.empty() || !parsed.content.empty() ? json(parsed.content) : json(nullptr)}};
    if (!parsed.calls.empty()) {
      message["tool_calls"] = json::array();
      for (const ToolCall& call : parsed.calls) message["tool_calls"].push_back(tool_call_json(call));
      if (c.finish_reason == "stop") choice["finish_reason"] = "tool_calls";
    }
    choice["message"] = message;
  } else if (chat) {
    choice["message"] = {{"role", "assistant"}, {"content", c.text}};
  } else {
    choice["text"] = c.text;
  }
  out["choices"] = json::array({choice});
  out["usage"] = usage(c);
  return out;
}

json chunk_body(const ApiRequest& r, const Completion& c, const std::string& piece, bool first, bool last) {
  const bool chat = r.endpoint == Endpoint::ChatCompletions;
  json out = envelope(r, c, chat ? "chat.completion.chunk" : "text_completion");
  json choice = {{"index", 0}, {"logprobs", nullptr},
                 {"finish_reason", last ? json(c.finish_reason) : json(nullptr)}};
  if (chat) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!piece.empty() || first) delta["content"] = piece;
    choice["delta"] = delta;
  } else {
    choice["text"] = piece;
  }
  out["choices"] = json::array({choice});
  return out;
}

std::vector<json> tool_call_chunks(const ApiRequest& r, const Completion& c, const ToolCall& call, size_t index, bool first) {
  // OpenAI's shape: the first delta of a call has its id, type and name with empty arguments;
  // the arguments follow in deltas that carry only the index. Ours come in one such delta, as
  // the call is given out once its text is complete (tool_calls.h).
  const auto chunk = [&](json t, bool with_role) {
    json delta = {{"tool_calls", json::array({std::move(t)})}};
    if (with_role) {
      delta["role"] = "assistant";
      delta["content"] = nullptr;
    }
    json out = envelope(r, c, "chat.completion.chunk");
    out["choices"] = json::array({{{"index", 0}, {"logprobs", nullptr}, {"finish_reason", nullptr}, {"delta", delta}}});
    return out;
  };
  return {chunk({{"index", index}, {"id", call.id}, {"type", "function"}, {"function", {{"name", call.name}, {"arguments", ""}}}},
                first),
          chunk({{"index", index}, {"function", {{"arguments", call.arguments}}}}, false)};
}

json usage_chunk(const ApiRequest& r, const Completion& c) {
  json out = envelope(r, c, r.endpoint == Endpoint::ChatCompletions ? "chat.completion.chunk" : "text_completion");
  out["choices"] = json::array();
  out["usage"] = usage(c);
  return out;
}

}  // namespace server
