// StreamDecoder: each push decodes the window of ids whose text is not all out yet, with the
// context that decide how decoders treat its edges (is this the sequence's first token, which
// SentencePiece decoders strip a space from?), and returns the complete characters beyond what
// it returned before. Decoding keeps invalid UTF-8 as bytes so that an incomplete character can
// be held until the next id completes it, or replaced once the next byte shows it never will.
//
// The window empties once everything it decodes to is out. It is kept while its text is empty
// but it holds tokens the decoder sees: their text may still depend on what follows (a lone "▁"
// first token strips to "", yet "▁" "▁Hi" decodes to " Hi"). When only the newest id's bytes
// are held, the window shrinks to that id. Both rest on decoding with raw bytes being
// prefix-stable: decode(ids + [id]) starts with decode(ids), and once that is non-empty the rest
// is decode([id]) out of context. The one decoder step that is not, a Strip of trailing
// characters after a Fuse, is left out of windows (no tokenizer we know uses it).
#include <algorithm>

#include <fmt/format.h>

#include "kvinfer/error.h"
#include "kvinfer/tokenizer.h"
#include "tokenizer/tokenizer_data.h"
#include "tokenizer/utf8.h"

namespace kvinfer {

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool skip_special)
    : tokenizer_(&tokenizer), skip_special_(skip_special) {}

namespace {

bool has_visible(const TokenizerData& d, const std::vector<int32_t>& ids, bool skip_special) {
  return std::any_of(ids.begin(), ids.end(), [&](int32_t id) {
    const auto k = static_cast<size_t>(id);
    return d.assigned[k] && !(skip_special && d.special[k]);
  });
}

}  // namespace

std::string StreamDecoder::push(int32_t id) {
  const TokenizerData& d = TokenizerAccess::data(*tokenizer_);
  if (id < 0 || id >= d.vocab_size())  // checked before the window changes
    throw Error(ErrorKind::InvalidArgument, fmt::format("{}: cannot decode token id {}: the vocabulary has ids 0..{}", d.source, id,
                            d.vocab_size() - 1));
  window_.push_back(id);
  const std::string raw = d.decode(window_, skip_special_, {.at_start = at_start_, .at_end = false, .raw_bytes = true});
  std::string out;
  consumed_ = std::min(consumed_, raw.size());
  consumed_ += utf8::append_lossy(out, std::string_view(raw).substr(consumed_), /*final=*/false);
  const size_t before = window_text_;  // what the window decoded to without `id`
  window_text_ = raw.size();
  if (consumed_ == raw.size()) {
    if (!raw.empty() || !has_visible(d, window_, skip_special_)) {
      if (!raw.empty()) at_start_ = false;
      window_.clear();
      consumed_ = window_text_ = 0;
    }
  } else if (window_.size() > 1 && before > 0 && before <= consumed_) {
    // Only bytes of `id` are held (byte-level tokens may end inside one character and start
    // inside the next, chain after chain): keep `id` alone, or the window would grow.
    window_.erase(window_.begin(), window_.end() - 1);
    consumed_ -= before;
    window_text_ -= before;
    at_start_ = false;
  }
  return out;
}

std::string StreamDecoder::flush() {
  if (window_.empty()) return {};
  const TokenizerData& d = TokenizerAccess::data(*tokenizer_);
  const std::string raw = d.decode(window_, skip_special_, {.at_start = at_start_, .at_end = false, .raw_bytes = true});
  std::string out;
  utf8::append_lossy(out, std::string_view(raw).substr(std::min(consumed_, raw.size())));
  if (has_visible(d, window_, skip_special_)) at_start_ = false;
  window_.clear();
  consumed_ = window_text_ = 0;
  return out;
}

void StreamDecoder::reset() {
  window_.clear();
  consumed_ = window_text_ = 0;
  at_start_ = true;
}

}  // namespace kvinfer
