#pragma once
// Decoders (HF `tokenizers`): a sequence of steps from token strings to text. Each step maps a
// list of strings to a list of strings; ByteLevel and Fuse join the list into one.
#include <optional>
#include <string>
#include <vector>

#include "tokenizer/regex.h"

namespace kvinfer {

struct DecoderStep {
  enum class Kind { ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace };
  Kind kind = Kind::ByteLevel;
  std::optional<Pattern> pattern{};  // Replace
  std::string text{};              // Replace: the replacement; Strip: the character; Metaspace: replacement
  size_t start = 0, stop = 0;      // Strip
  bool prepend = true;             // Metaspace: prepend_scheme is not "never"
};

// How a list of tokens sits in the whole sequence. decode() runs on a whole sequence; the
// stream decoder runs on windows of it.
struct DecodeContext {
  bool at_start = true;  // the first token is the sequence's first (decoded) token
  bool at_end = true;    // the last token is the sequence's last
  // Keep invalid UTF-8 as bytes instead of replacing it (the stream decoder replaces it itself,
  // once it knows that no later byte completes the character).
  bool raw_bytes = false;
};

class Decoder {
 public:
  void add(DecoderStep step) { steps_.push_back(std::move(step)); }
  // A tokenizer without a decoder joins the tokens with spaces (HF's fallback).
  void set_none() { none_ = true; }
  std::string run(std::vector<std::string> tokens, const DecodeContext& context) const;

 private:
  std::vector<DecoderStep> steps_;
  bool none_ = false;
};

}  // namespace kvinfer
