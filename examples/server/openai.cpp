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

std::vector<int32_t> parse_messages(const json* m, const kvinfer::Model& model) {
  if (!m || !m->is_array() || m->empty()) throw bad("messages", "'messages' must be a non-empty list");
  std::vector<kvinfer::ChatMessage> messages;
  for (size_t i = 0; i < m->size(); ++i) {
    const json& msg = (*m)[i];
    const std::string where = fmt::format("messages[{}]", i);
    if (!msg.is_object()) throw bad(where, where + " must be an object");
    Fields f(msg);
    const auto role = f.string("role");
    if (!role || (*role != "system" && *role != "user" && *role != "assistant" && *role != "developer"))
      throw bad(where + ".role", where + ".role must be \"system\", \"developer\", \"user\" or \"assistant\"");
    const json* content = f.get("content");
    std::string text;
    if (content && content->is_string()) {
      text = content->get<std::string>();
    } else if (content && content->is_array()) {
      for (const json& part : *content) {  // [{"type": "text", "text": "..."}]
        if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string())
          throw bad(where + ".content", "only text content parts ({\"type\": \"text\", \"text\": ...}) are supported");
        text += part["text"].get<std::string>();
      }
    } else {
      throw bad(where + ".content", where + ".content must be a string or a list of text parts");
    }
    f.string("name");
    f.finish(where);
    messages.push_back({*role == "developer" ? "system" : *role, std::move(text)});
  }
  const kvinfer::Tokenizer& tok = model.tokenizer();
  if (tok.chat_template().empty())
    throw ApiError(400, "invalid_request_error", "messages", "this model has no chat template: use /v1/completions");
  const kvinfer::ChatTemplate tmpl(tok.chat_template(), tok.bos_text(), tok.eos_text());
  return tok.encode(tmpl.render(messages, /*add_generation_prompt=*/true), {.add_special = false, .parse_special = true});
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
  ApiRequest r{endpoint, {}, false, false, config.model_id};
  Fields f(j);
  if (const auto m = f.string("model")) r.model = *m;
  kvinfer::GenerateOptions& o = r.request.options;
  r.request.text = true;
  if (chat) {
    r.request.prompt = parse_messages(f.get("messages"), model);
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
    f.only("response_format", {{"type", "text"}});
  } else {
    f.only("echo", false);
    f.only("best_of", 1);
    if (f.get("logprobs")) throw bad("logprobs", "'logprobs' is not supported");
    if (f.get("suffix")) throw bad("suffix", "'suffix' is not supported");
  }
  f.finish("");
  s.validate(static_cast<int32_t>(model.config().vocab_size));
  return r;
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

json response_body(const ApiRequest& r, const Completion& c) {
  const bool chat = r.endpoint == Endpoint::ChatCompletions;
  json out = envelope(r, c, chat ? "chat.completion" : "text_completion");
  json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", c.finish_reason}};
  if (chat)
    choice["message"] = {{"role", "assistant"}, {"content", c.text}};
  else
    choice["text"] = c.text;
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

json usage_chunk(const ApiRequest& r, const Completion& c) {
  json out = envelope(r, c, r.endpoint == Endpoint::ChatCompletions ? "chat.completion.chunk" : "text_completion");
  out["choices"] = json::array();
  out["usage"] = usage(c);
  return out;
}

}  // namespace server
