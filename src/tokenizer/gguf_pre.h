#pragma once
// GGUF names a byte-level BPE tokenizer's pre-tokenizer (tokenizer.ggml.pre); llama.cpp maps
// each name to regexes applied in turn (each splits the pieces of the one before, keeping both
// matches and the text between them). Where llama.cpp rewrote a tokenizer.json regex for
// std::regex, the original is used here: PCRE2 runs it as HF does.
#include <optional>
#include <string_view>
#include <vector>

namespace kvinfer {

struct GgufPreTokenizer {
  std::vector<std::string_view> regexes;
  bool ignore_merges = false;  // llama.cpp sets it (and add_bos) for the Llama-3 family
  bool add_bos = false;
};

// nullopt for a name llama.cpp does not know either (or one not carried over here).
std::optional<GgufPreTokenizer> gguf_pre_tokenizer(std::string_view name);

}  // namespace kvinfer
