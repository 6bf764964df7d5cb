#pragma once
// Pre-tokenizers (HF `tokenizers`): a sequence of steps that split normalized text into the
// pieces the model tokenizes one by one.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/regex.h"

namespace kvinfer {

struct Piece {
  std::string text;
  bool first = false;  // starts at the start of the original text (Metaspace's prepend "first")
};

enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };
enum class PrependScheme { Always, First, Never };

struct PreTokenizerStep {
  enum class Kind { Split, ByteLevel, Digits, Metaspace };
  Kind kind = Kind::Split;
  std::optional<Pattern> pattern{};  // Split; ByteLevel with use_regex (the GPT-2 regex)
  SplitBehavior behavior = SplitBehavior::Isolated;
  bool invert = false;
  bool add_prefix_space = false;   // ByteLevel
  bool individual_digits = false;  // Digits
  std::string replacement{};       // Metaspace
  PrependScheme prepend = PrependScheme::Always;
  bool split = true;
};

class PreTokenizer {
 public:
  void add(PreTokenizerStep step) { steps_.push_back(std::move(step)); }
  bool empty() const { return steps_.empty(); }
  // Appends the pieces of `text` to `out` (empty pieces are dropped, as HF drops them).
  void apply(std::string text, bool first, std::vector<Piece>& out) const;

 private:
  std::vector<PreTokenizerStep> steps_;
};

// The regex HF's ByteLevel pre-tokenizer splits with (GPT-2's).
inline constexpr std::string_view kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

}  // namespace kvinfer
