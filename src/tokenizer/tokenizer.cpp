#include "kvinfer/tokenizer.h"

#include <fmt/format.h>

#include "kvinfer/error.h"
#include "tokenizer/load.h"
#include "tokenizer/tokenizer_data.h"

namespace kvinfer {

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer TokenizerAccess::make(std::unique_ptr<Data> data) { return Tokenizer(std::move(data)); }
const TokenizerData& TokenizerAccess::data(const Tokenizer& tokenizer) { return *tokenizer.impl_; }
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::from_hf(const std::filesystem::path& dir_or_file) {
  return TokenizerAccess::make(load_hf_tokenizer(dir_or_file));
}
Tokenizer Tokenizer::from_gguf(const std::filesystem::path& path) {
  return TokenizerAccess::make(load_gguf_tokenizer(path));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, const EncodeOptions& options) const {
  const TokenizerData& d = *impl_;
  std::vector<int32_t> ids;
  if (options.add_special) ids = d.prefix;
  BpeWork bpe_work;
  SpmWork spm_work;
  std::vector<Segment> outer, inner;
  std::vector<Piece> pieces;
  const auto run_model = [&](std::string_view piece) {
    if (const auto* bpe = std::get_if<BpeModel>(&d.model)) {
      bpe->tokenize(piece, ids, bpe_work);
    } else {
      std::get<SpmModel>(d.model).tokenize(piece, ids, spm_work);
    }
  };
  // Added tokens are found in the raw text first, then (those marked normalized) in the
  // normalized text between them; what is left is pre-tokenized and handed to the model.
  d.raw_tokens.split(text, options.parse_special, outer);
  for (const Segment& s : outer) {
    if (s.id >= 0) {
      ids.push_back(s.id);
      continue;
    }
    const std::string normalized = d.normalizer.apply(text.substr(s.begin, s.end - s.begin));
    d.normalized_tokens.split(normalized, options.parse_special, inner);
    for (const Segment& t : inner) {
      if (t.id >= 0) {
        ids.push_back(t.id);
        continue;
      }
      std::string piece = normalized.substr(t.begin, t.end - t.begin);
      if (d.pre_tokenizer.empty()) {
        run_model(piece);
        continue;
      }
      pieces.clear();
      d.pre_tokenizer.apply(std::move(piece), s.begin == 0 && t.begin == 0, pieces);
      for (const Piece& p : pieces) run_model(p.text);
    }
  }
  if (options.add_special) ids.insert(ids.end(), d.suffix.begin(), d.suffix.end());
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  return impl_->decode(ids, skip_special, DecodeContext{});
}

std::string Tokenizer::token_bytes(int32_t id) const {
  const int32_t one[] = {id};
  return impl_->decode(one, false, DecodeContext{.at_start = false, .at_end = false, .raw_bytes = true});
}

int32_t Tokenizer::vocab_size() const { return impl_->vocab_size(); }

std::optional<int32_t> Tokenizer::token_id(std::string_view token) const { return impl_->token_id(token); }

const std::string& Tokenizer::token_text(int32_t id) const {
  if (id < 0 || id >= impl_->vocab_size())
    throw Error(ErrorKind::InvalidArgument, fmt::format("{}: token id {} is out of range (vocabulary size {})", impl_->source, id,
                            impl_->vocab_size()));
  return impl_->tokens[static_cast<size_t>(id)];
}

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && id < impl_->vocab_size() && impl_->special[static_cast<size_t>(id)];
}

std::optional<int32_t> Tokenizer::bos_id() const { return impl_->bos_id; }
std::vector<int32_t> Tokenizer::eos_ids() const { return impl_->eos_ids; }
std::optional<int32_t> Tokenizer::unk_id() const { return impl_->unk_id; }
std::optional<int32_t> Tokenizer::pad_id() const { return impl_->pad_id; }
const std::string& Tokenizer::bos_text() const { return impl_->bos_text; }
const std::string& Tokenizer::eos_text() const { return impl_->eos_text; }
const std::string& Tokenizer::chat_template() const { return impl_->chat_template; }

}  // namespace kvinfer
