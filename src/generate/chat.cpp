#include "kvinfer/chat.h"

#include <algorithm>

#include <fmt/format.h>

#include "kvinfer/error.h"
#include "kvinfer/tokenizer.h"

namespace kvinfer {

namespace {

ChatTemplate model_template(const Model& model) {
  const Tokenizer& tok = model.tokenizer();
  if (tok.chat_template().empty())
    throw Error(ErrorKind::Unsupported, "the model's tokenizer has no chat template (tokenizer_config.json chat_template, "
                "chat_template.jinja or GGUF tokenizer.chat_template)");
  return ChatTemplate(tok.chat_template(), tok.bos_text(), tok.eos_text());
}

}  // namespace

Chat::Chat(std::shared_ptr<const Model> model, int64_t capacity_tokens, std::string system_prompt,
           std::optional<DType> kv_dtype)
    : Chat(model, model_template(*model), capacity_tokens, std::move(system_prompt), kv_dtype) {}

Chat::Chat(std::shared_ptr<const Model> model, ChatTemplate chat_template, int64_t capacity_tokens,
           std::string system_prompt, std::optional<DType> kv_dtype)
    : model_(std::move(model)),
      template_(std::move(chat_template)),
      system_prompt_(std::move(system_prompt)),
      session_(model_),
      kv_(*model_, capacity_tokens, kv_dtype) {
  model_->tokenizer();  // a chat needs text: fail now, not at the first message
  reset();
}

void Chat::reset() {
  messages_.clear();
  if (!system_prompt_.empty()) messages_.push_back({"system", system_prompt_});
  kv_.clear();
  cached_ids_.clear();
  cached_text_.clear();
}

ChatTurn Chat::send(std::string_view user_message, const GenerateOptions& options, const TextCallback& on_text) {
  if (!options.use_kv_cache) throw Error(ErrorKind::InvalidArgument, "a chat keeps its conversation in the KV cache: use_kv_cache must be true");
  const Tokenizer& tok = model_->tokenizer();
  const EncodeOptions as_rendered{.add_special = false, .parse_special = true};  // as HF apply_chat_template

  std::vector<ChatMessage> next = messages_;
  next.push_back({"user", std::string(user_message)});
  const std::string rendered = template_.render(next, /*add_generation_prompt=*/true);

  // The cache holds a prefix of the new rendering unless the template rewrote history (or a
  // reply does not survive decode → encode); then keep the longest common prefix of ids.
  std::vector<int32_t> ids;
  size_t keep = cached_ids_.size();
  if (rendered.starts_with(cached_text_)) {
    ids = tok.encode(std::string_view(rendered).substr(cached_text_.size()), as_rendered);
  } else {
    ids = tok.encode(rendered, as_rendered);
    keep = static_cast<size_t>(std::mismatch(cached_ids_.begin(), cached_ids_.end(), ids.begin(), ids.end()).first -
                               cached_ids_.begin());
    ids.erase(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(keep));
  }
  if (ids.empty()) throw Error(ErrorKind::InvalidArgument, "the chat template rendered nothing new for this message");
  const auto free = kv_.capacity() - static_cast<int64_t>(keep);
  if (static_cast<int64_t>(ids.size()) >= free)  // room for the prompt and at least one reply token
    throw Error(ErrorKind::ContextFull, fmt::format("context full: this turn needs {} tokens but {} of {} are free; reset the chat or use "
                            "a larger context",
                            ids.size() + 1, free, kv_.capacity()));

  // A sliding-window model's rings may no longer hold the window before `keep` (a rewind further
  // back than they allow): what they hold is kept, the rest computed again.
  const int64_t reused = kv_.reusable(static_cast<int64_t>(keep));
  ids.insert(ids.begin(), cached_ids_.begin() + reused, cached_ids_.begin() + static_cast<std::ptrdiff_t>(keep));
  kv_.truncate(reused);
  cached_ids_.resize(static_cast<size_t>(reused));
  ChatTurn turn;
  turn.reused_tokens = reused;
  turn.prefilled_tokens = static_cast<int64_t>(ids.size());
  turn.reply = generate(session_, kv_, tok, ids, options, on_text);

  // The cache now holds the new ids and every reply token but the last (sampled, never fed back).
  cached_ids_.insert(cached_ids_.end(), ids.begin(), ids.end());
  cached_text_ = rendered;
  const auto& reply = turn.reply.tokens;
  for (size_t i = 0; i + 1 < reply.size(); ++i) {
    cached_ids_.push_back(reply[i]);
    if (reply[i] < tok.vocab_size()) cached_text_ += tok.token_bytes(reply[i]);
  }
  if (static_cast<int64_t>(cached_ids_.size()) != kv_.size())
    throw Error(ErrorKind::InvalidArgument, fmt::format("internal: chat bookkeeping holds {} ids but the cache {}", cached_ids_.size(), kv_.size()));
  next.push_back({"assistant", turn.reply.text});
  messages_ = std::move(next);
  return turn;
}

}  // namespace kvinfer
