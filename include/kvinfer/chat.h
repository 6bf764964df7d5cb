#pragma once
// Chat: a conversation over one KV cache. Every turn renders the whole conversation with the
// model's chat template, but prefills only the text the cache does not hold yet: the new
// message and the template's text around it. Earlier turns are never recomputed.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvinfer/chat_template.h"
#include "kvinfer/generate.h"
#include "kvinfer/kv_cache.h"
#include "kvinfer/model.h"
#include "kvinfer/session.h"
#include "kvinfer/export.h"

KVINFER_PUBLIC_BEGIN
namespace kvinfer {

struct ChatTurn {
  GenerateResult reply;
  int64_t prefilled_tokens = 0;  // tokens this turn prefilled
  int64_t reused_tokens = 0;     // cache positions kept from earlier turns
};

class Chat {
 public:
  // The template comes from the model's tokenizer (tokenizer_config.json, chat_template.jinja
  // or GGUF metadata); a model without one is an error. An empty system prompt adds none.
  Chat(std::shared_ptr<const Model> model, int64_t capacity_tokens, std::string system_prompt = {},
       std::optional<DType> kv_dtype = std::nullopt);
  Chat(std::shared_ptr<const Model> model, ChatTemplate chat_template, int64_t capacity_tokens,
       std::string system_prompt = {}, std::optional<DType> kv_dtype = std::nullopt);

  // Adds a user message and generates the assistant's reply (streamed through on_text).
  // A turn that does not fit in the cache throws kvinfer::Error and changes nothing.
  ChatTurn send(std::string_view user_message, const GenerateOptions& options = {}, const TextCallback& on_text = {});
  // Forgets every message but the system prompt and empties the cache.
  void reset();

  const std::vector<ChatMessage>& messages() const { return messages_; }
  const KvCache& kv() const { return kv_; }
  const Model& model() const { return *model_; }

 private:
  std::shared_ptr<const Model> model_;
  ChatTemplate template_;
  std::string system_prompt_;
  Session session_;
  KvCache kv_;
  std::vector<ChatMessage> messages_;
  std::vector<int32_t> cached_ids_;  // exactly what kv_ holds, position by position
  std::string cached_text_;          // the text those ids stand for
};

}  // namespace kvinfer
KVINFER_PUBLIC_END
