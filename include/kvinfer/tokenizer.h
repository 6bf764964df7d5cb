#pragma once
// Tokenizer: text ↔ token ids, exactly as the model's reference tokenizer (HF `tokenizers`,
// llama.cpp's vocab) does it. Two algorithms:
//  - byte-level BPE (GPT-2, Llama-3, Qwen2, SmolLM2): pre-tokenizer regex, bytes mapped to
//    printable code points, merges applied by rank;
//  - SentencePiece-style BPE (Llama-2, TinyLlama, Mistral, Phi-3): spaces as "▁", an optional
//    prepended "▁", merges by rank (tokenizer.json) or by score (GGUF), byte fallback <0xNN>.
// Added/special tokens are matched in the text before the model runs.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvinfer/export.h"

KVINFER_PUBLIC_BEGIN
namespace kvinfer {

struct EncodeOptions {
  // Add the tokenizer's own special tokens (BOS, and EOS where the tokenizer says so), as
  // HF's add_special_tokens=True. Chat templates are encoded without (they write BOS themselves).
  bool add_special = true;
  // Match special/added tokens written in the text ("<|im_end|>") as single ids. false treats
  // them as plain text, as llama.cpp's parse_special=false.
  bool parse_special = true;
};

class Tokenizer {
 public:
  // From a model directory (tokenizer.json + optional tokenizer_config.json and
  // chat_template.jinja) or a tokenizer.json path. Throws kvinfer::Error naming the file/field.
  static Tokenizer from_hf(const std::filesystem::path& dir_or_file);
  // From a GGUF file's metadata (tokenizer.ggml.*, models "gpt2" and "llama").
  static Tokenizer from_gguf(const std::filesystem::path& path);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Thread-safe. Takes any bytes: a byte that is not part of valid UTF-8 is a character of its
  // own, which no pre-tokenizer class matches and normalizers leave as it is; byte-level BPE
  // encodes it as its byte's token, byte fallback as <0xNN>, otherwise it becomes the unknown
  // token (or nothing where there is none, as HF drops characters it cannot encode).
  std::vector<int32_t> encode(std::string_view text, const EncodeOptions& options = {}) const;
  // The text of `ids`, as HF's decode(skip_special_tokens=...). Invalid UTF-8 that byte tokens
  // produce is replaced by U+FFFD, as HF does.
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;
  // The raw bytes one token stands for (may be part of a UTF-8 sequence).
  std::string token_bytes(int32_t id) const;

  int32_t vocab_size() const;
  std::optional<int32_t> token_id(std::string_view token) const;  // by its vocabulary string
  const std::string& token_text(int32_t id) const;                // its vocabulary string
  bool is_special(int32_t id) const;  // control tokens (skipped by decode(..., true))

  std::optional<int32_t> bos_id() const;
  // Every end-of-generation id: the declared eos (tokenizer_config.json eos_token, GGUF
  // eos/eot/eom ids, generation_config.json eos_token_id), then every vocabulary token that
  // llama.cpp ends generation on by its text (<|eot_id|>, <|eom_id|>, <|im_end|>, <|end|>,
  // <end_of_turn>, <|endoftext|>, <|end_of_text|>, <EOT>, ...).
  std::vector<int32_t> eos_ids() const;
  std::optional<int32_t> unk_id() const;
  std::optional<int32_t> pad_id() const;
  const std::string& bos_text() const;   // "" when none
  const std::string& eos_text() const;
  // The Jinja chat template (tokenizer_config.json, chat_template.jinja or GGUF
  // tokenizer.chat_template); "" when the model has none.
  const std::string& chat_template() const;

 private:
  struct Impl;  // the vocabulary, models and special tokens: the library's own
  friend struct TokenizerAccess;  // the library's own loaders
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Turns a stream of ids into text without ever emitting a broken UTF-8 sequence: bytes of an
// incomplete character are held until the character completes (or flush()). The concatenation
// of every push() and flush() equals tokenizer.decode(all ids) whenever the ids' bytes are valid
// UTF-8 (byte-level tokenizers: always). Invalid bytes become U+FFFD, one per maximal invalid
// subpart; decode() agrees, except that HF's ByteFallback decoder turns a whole run of <0xNN>
// tokens that is invalid into one U+FFFD per byte, valid characters in the run included, which
// a stream that already returned those characters cannot do.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer, bool skip_special = false);
  std::string push(int32_t id);  // the text that became complete with this id (maybe "")
  std::string flush();           // whatever is held, invalid bytes as U+FFFD
  void reset();

 private:
  const Tokenizer* tokenizer_;
  bool skip_special_;
  // The ids whose text is not all returned yet; decoded together, since a character's bytes
  // may span ids. Emptied whenever everything it decodes to is out, so each push decodes a few
  // ids only.
  std::vector<int32_t> window_;
  size_t consumed_ = 0;     // bytes of the window's decoded text already returned
  size_t window_text_ = 0;  // bytes the window decoded to at the last push
  bool at_start_ = true;    // no earlier id produced text: the window starts the sequence
};

}  // namespace kvinfer
KVINFER_PUBLIC_END
