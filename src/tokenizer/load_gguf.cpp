// GGUF tokenizer metadata (tokenizer.ggml.*), read as llama.cpp's llama_vocab::load does:
// model "gpt2" is byte-level BPE with merges and a named pre-tokenizer; model "llama" is
// SentencePiece merged by score with <0xNN> byte fallback. Token types (1 normal, 2 unknown,
// 3 control, 4 user-defined, 5 unused, 6 byte) decide which tokens are matched in the text
// (2, 3, 4) and which are special (2, 3: skipped by decode(skip_special), not matched without
// parse_special).
#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "formats/gguf.h"
#include "kvinfer/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/gguf_pre.h"
#include "tokenizer/load.h"
#include "tokenizer/tokenizer_data.h"

namespace kvinfer {

namespace {

constexpr int64_t kUnknown = 2, kControl = 3, kUserDefined = 4;
constexpr const char* kSpace = "\xE2\x96\x81";  // ▁

// An id key when present and inside the vocabulary; llama.cpp ignores one outside it.
std::optional<int32_t> id_key(const GgufFile& f, const char* key, size_t n, std::optional<int32_t> fallback) {
  if (!f.has(key)) return fallback;
  const int64_t id = f.integer(key);
  return id >= 0 && static_cast<size_t>(id) < n ? std::optional<int32_t>(static_cast<int32_t>(id)) : fallback;
}

bool bool_key(const GgufFile& f, const char* key, bool fallback) { return f.has(key) ? f.boolean(key) : fallback; }

Pattern literal(const char* s) { return Pattern::literal(s); }

void set_up_spm(TokenizerData& data, bool add_space_prefix) {
  using NKind = NormalizerStep::Kind;
  using DKind = DecoderStep::Kind;
  // llama.cpp puts a space before text at the start and after every matched token; HF's
  // Prepend normalizer does the same, as every text piece is at the start or after a token.
  if (add_space_prefix) data.normalizer.add({.kind = NKind::Prepend, .text = kSpace});
  data.normalizer.add({.kind = NKind::Replace, .text = kSpace, .pattern = literal(" ")});
  data.decoder.add({.kind = DKind::Replace, .pattern = literal(kSpace), .text = " "});
  data.decoder.add({.kind = DKind::ByteFallback});
  data.decoder.add({.kind = DKind::Fuse});
  if (add_space_prefix) data.decoder.add({.kind = DKind::Strip, .text = " ", .start = 1});
}

void set_up_bpe(TokenizerData& data, const GgufPreTokenizer& pre, const std::string& where) {
  for (std::string_view regex : pre.regexes)
    data.pre_tokenizer.add({.kind = PreTokenizerStep::Kind::Split,
                            .pattern = Pattern::regex(regex, where + ": tokenizer.ggml.pre"),
                            .behavior = SplitBehavior::Isolated});
  data.pre_tokenizer.add({.kind = PreTokenizerStep::Kind::ByteLevel});
  data.decoder.add({.kind = DecoderStep::Kind::ByteLevel});
}

}  // namespace

std::unique_ptr<TokenizerData> load_gguf_tokenizer(const std::filesystem::path& path) {
  const GgufFile file(path);
  return load_gguf_tokenizer(file);
}

std::unique_ptr<TokenizerData> load_gguf_tokenizer(const GgufFile& f) {
  const std::string where = f.path().string();
  const std::string model = f.string("tokenizer.ggml.model");
  if (model != "gpt2" && model != "llama")
    throw Error(ErrorKind::Unsupported, fmt::format("{}: tokenizer.ggml.model '{}' is not supported (gpt2 and llama are)", where, model));
  const std::vector<std::string>& texts = f.strings("tokenizer.ggml.tokens");
  const size_t n = texts.size();
  const std::vector<int64_t> types = f.has("tokenizer.ggml.token_type") ? f.integers("tokenizer.ggml.token_type")
                                                                        : std::vector<int64_t>(n, 1);
  std::vector<double> scores = f.has("tokenizer.ggml.scores") ? f.numbers("tokenizer.ggml.scores") : std::vector<double>(n, 0.0);
  if (types.size() < n || scores.size() < n)
    throw Error(ErrorKind::BadFile, fmt::format("{}: tokenizer.ggml.token_type has {} and tokenizer.ggml.scores {} entries for {} tokens",
                            where, types.size(), scores.size(), n));

  VocabMap vocab;
  vocab.reserve(n);
  std::vector<std::string> spellings(texts);
  for (size_t i = 0; i < n; ++i) {
    if (spellings[i].empty()) spellings[i] = fmt::format("[EMPTY_{}]", i);  // as llama.cpp names them
    auto [it, fresh] = vocab.emplace(spellings[i], static_cast<int32_t>(i));
    if (!fresh)
      throw Error(ErrorKind::BadFile, fmt::format("{}: tokenizer.ggml.tokens: '{}' is both token {} and token {}", where, spellings[i],
                              it->second, i));
  }

  std::unique_ptr<TokenizerData> data;
  std::optional<int32_t> bos, eos, unk;
  bool add_bos = false;
  if (model == "llama") {
    std::vector<float> fscores(scores.begin(), scores.begin() + static_cast<std::ptrdiff_t>(n));
    unk = id_key(f, "tokenizer.ggml.unknown_token_id", n, n > 0 ? std::optional<int32_t>(0) : std::nullopt);
    data = std::make_unique<TokenizerData>(SpmModel(std::move(vocab), std::move(fscores), unk));
    set_up_spm(*data, bool_key(f, "tokenizer.ggml.add_space_prefix", true));
    bos = id_key(f, "tokenizer.ggml.bos_token_id", n, n > 1 ? std::optional<int32_t>(1) : std::nullopt);
    eos = id_key(f, "tokenizer.ggml.eos_token_id", n, n > 2 ? std::optional<int32_t>(2) : std::nullopt);
    add_bos = true;
  } else {
    const std::string pre_name = f.has("tokenizer.ggml.pre") ? f.string("tokenizer.ggml.pre") : "default";
    const auto pre = gguf_pre_tokenizer(pre_name);
    if (!pre) throw Error(ErrorKind::Unsupported, fmt::format("{}: tokenizer.ggml.pre '{}' is not a known pre-tokenizer", where, pre_name));
    BpeModel bpe(std::move(vocab), BpeOptions{.ignore_merges = pre->ignore_merges});
    const std::vector<std::string>& merges = f.strings("tokenizer.ggml.merges");
    for (size_t rank = 0; rank < merges.size(); ++rank) {
      // "a b", split at the first space after the first byte (as llama.cpp).
      const size_t space = merges[rank].find(' ', 1);
      if (space == std::string::npos)
        throw Error(ErrorKind::BadFile, fmt::format("{}: tokenizer.ggml.merges[{}] '{}' has no space", where, rank, merges[rank]));
      const std::string a = merges[rank].substr(0, space), b = merges[rank].substr(space + 1);
      const auto ia = lookup(bpe.vocab(), a), ib = lookup(bpe.vocab(), b), im = lookup(bpe.vocab(), a + b);
      // A merge whose parts or result are not tokens can never produce a token: skip it.
      if (ia && ib && im) bpe.add_merge(*ia, *ib, *im, static_cast<uint32_t>(rank), /*replace=*/false);
    }
    data = std::make_unique<TokenizerData>(std::move(bpe));
    set_up_bpe(*data, *pre, where);
    unk = id_key(f, "tokenizer.ggml.unknown_token_id", n, std::nullopt);
    bos = id_key(f, "tokenizer.ggml.bos_token_id", n, std::nullopt);
    eos = id_key(f, "tokenizer.ggml.eos_token_id", n, std::nullopt);
    add_bos = pre->add_bos;
  }
  data->source = where;

  // llama.cpp strips the whitespace after Phi-3's special tokens (its "rstrip" attribute).
  std::string name = f.has("general.name") ? f.string("general.name") : "";
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const bool phi3 = name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos;
  std::vector<AddedToken> added;
  for (size_t i = 0; i < n; ++i) {
    const int64_t type = types[i];
    if (type != kUnknown && type != kControl && type != kUserDefined) continue;
    const std::string& text = texts[i];
    const bool rstrip = phi3 && text != "<unk>" && text != "<s>" && text != "<|endoftext|>";
    added.push_back({.id = static_cast<int32_t>(i), .content = spellings[i], .special = type != kUserDefined,
                     .rstrip = rstrip});
    // Byte-level vocabularies store these raw; the ByteLevel decoder must give them back as is.
    if (model == "gpt2") {
      std::string spelled = byte_level::encode(text);
      if (spelled != text) data->decoder_input.emplace(static_cast<int32_t>(i), std::move(spelled));
    }
  }
  finish_vocabulary(*data, std::move(added));

  data->bos_id = bos;
  data->eos_id = eos;
  data->unk_id = unk;
  data->pad_id = id_key(f, "tokenizer.ggml.padding_token_id", n, std::nullopt);
  add_bos = bool_key(f, "tokenizer.ggml.add_bos_token", add_bos);
  const bool add_eos = bool_key(f, "tokenizer.ggml.add_eos_token", false);
  if (add_bos && !bos)
    throw Error(ErrorKind::BadFile, fmt::format("{}: tokenizer.ggml.add_bos_token is true but there is no tokenizer.ggml.bos_token_id", where));
  if (add_eos && !eos)
    throw Error(ErrorKind::BadFile, fmt::format("{}: tokenizer.ggml.add_eos_token is true but there is no tokenizer.ggml.eos_token_id", where));
  if (add_bos) data->prefix = {*bos};
  if (add_eos) data->suffix = {*eos};
  if (bos) data->bos_text = texts[static_cast<size_t>(*bos)];
  if (eos) data->eos_text = texts[static_cast<size_t>(*eos)];
  data->chat_template = gguf_chat_template(f);

  std::vector<int32_t> given;
  for (const auto& id : {eos, id_key(f, "tokenizer.ggml.eot_token_id", n, std::nullopt),
                         id_key(f, "tokenizer.ggml.eom_token_id", n, std::nullopt)})
    if (id) given.push_back(*id);
  data->eos_ids = end_of_generation_ids(*data, std::move(given));
  return data;
}

Tokenizer gguf_tokenizer(const GgufFile& file) { return TokenizerAccess::make(load_gguf_tokenizer(file)); }

bool gguf_has_tokenizer(const GgufFile& file) {
  return file.has("tokenizer.ggml.model") || file.has("tokenizer.ggml.tokens");
}

std::string gguf_chat_template(const GgufFile& file) {
  return file.has("tokenizer.chat_template") ? file.string("tokenizer.chat_template") : std::string();
}

}  // namespace kvinfer
