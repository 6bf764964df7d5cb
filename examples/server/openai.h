#pragma once
// The OpenAI-compatible request and response bodies kvinfer-server speaks: parsing and checking a
// /v1/completions or /v1/chat/completions body into a SchedulerRequest, and the JSON it answers
// with. No HTTP here (server.cpp), so that the rules are testable on their own.
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvinfer/kvinfer.h"
#include "tool_calls.h"

namespace server {

// A request the client got wrong: HTTP `status` with an OpenAI error body naming `param`.
struct ApiError : std::runtime_error {
  ApiError(int http_status, std::string error_type, std::string field, const std::string& message,
           std::string error_code = "")
      : std::runtime_error(message),
        status(http_status),
        type(std::move(error_type)),
        param(std::move(field)),
        code(std::move(error_code)) {}
  int status;
  std::string type;   // "invalid_request_error", "server_error", ...
  std::string param;  // the field at fault, or ""
  std::string code;   // "context_length_exceeded", ...
};

nlohmann::json error_body(const ApiError& e);

enum class Endpoint { Completions, ChatCompletions };

struct ApiRequest {
  Endpoint endpoint;
  kvinfer::SchedulerRequest request;  // text request: the prompt's ids, options, stop strings
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  std::string model;           // as the client named it (echoed back)
  Tools tools;                 // chat: the functions, tool_choice and the template's call format
};

// Compiled grammars by their text, shared by requests (the same tools and schemas come again and
// again): at most 64, the least recently used dropped first. Thread-safe.
class GrammarCache {
 public:
  std::shared_ptr<const kvinfer::Grammar> get(const std::string& text, const kvinfer::Model& model);

 private:
  static constexpr size_t kEntries = 64;
  std::mutex mu_;
  std::list<std::pair<std::string, std::shared_ptr<const kvinfer::Grammar>>> lru_;  // most recent first
  std::unordered_map<std::string, decltype(lru_)::iterator> index_;
};

struct ServerConfig {
  std::string model_id;  // what GET /v1/models lists
  int64_t default_max_tokens = 16;  // completions' default (OpenAI's); chat: until the context ends
  int64_t context_length = 0;       // positions a sequence may use (-c); 0: the model's
  GrammarCache* grammars = nullptr;  // null: each request compiles its own
};

// Parses and checks `body` against the model: malformed JSON, unknown fields, wrong types and
// values out of range throw ApiError (400); a prompt over the context, too (400, code
// context_length_exceeded).
ApiRequest parse_request(Endpoint endpoint, const std::string& body, const kvinfer::Model& model,
                         const ServerConfig& config);

// "stop", "length" (max tokens or a full context) or "cancelled".
std::string finish_reason(kvinfer::StopReason stop);

struct Completion {
  std::string id;  // "cmpl-…" / "chatcmpl-…"
  int64_t created = 0;
  std::string text;
  std::string finish_reason;
  int64_t prompt_tokens = 0, completion_tokens = 0;
  std::vector<ToolCall> tool_calls;  // chat with tools: the calls parsed out of the reply
};
// The whole response of a non-streaming request. A chat reply with tools is parsed into content
// and tool_calls first (finish_reason "tool_calls" when it has calls and was not cut off).
nlohmann::json response_body(const ApiRequest& r, const Completion& c);
// One server-sent event's data: a text piece (finish_reason empty) or the final chunk.
nlohmann::json chunk_body(const ApiRequest& r, const Completion& c, const std::string& piece, bool first, bool last);
// The chunks of one tool call, the index-th of the reply, once its text is complete: its id, type
// and name with empty arguments, then its arguments (the deltas OpenAI streams a call in).
std::vector<nlohmann::json> tool_call_chunks(const ApiRequest& r, const Completion& c, const ToolCall& call, size_t index,
                                             bool first);
nlohmann::json usage_chunk(const ApiRequest& r, const Completion& c);

}  // namespace server
