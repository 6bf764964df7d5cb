#pragma once
// Normalizers (HF `tokenizers`): a sequence of steps applied to each piece of text between
// added tokens. Unicode forms and Lowercase apply to the valid UTF-8 runs of the text; invalid
// bytes pass through unchanged.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/regex.h"

namespace kvinfer {

struct NormalizerStep {
  enum class Kind { Nfc, Nfd, Nfkc, Nfkd, Lowercase, Strip, Prepend, Replace };
  Kind kind = Kind::Nfc;
  std::string text{};              // Prepend: the prefix; Replace: the replacement
  std::optional<Pattern> pattern{};  // Replace
  bool strip_left = false;         // Strip
  bool strip_right = false;
};

class Normalizer {
 public:
  void add(NormalizerStep step) { steps_.push_back(std::move(step)); }
  bool empty() const { return steps_.empty(); }
  std::string apply(std::string_view text) const;

 private:
  std::vector<NormalizerStep> steps_;
};

}  // namespace kvinfer
