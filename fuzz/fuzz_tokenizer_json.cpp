// Fuzz target: loading a HF tokenizer.json, then encoding and decoding a fixed text with it.
// Every input must load or throw kvinfer::Error.
#include <cstdint>

#include "fuzz_input_file.h"
#include "kvinfer/error.h"
#include "kvinfer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static kvinfer::fuzz::InputFile file("tokenizer.json");
  const auto& path = file.write(data, size);
  try {
    const auto tokenizer = kvinfer::Tokenizer::from_hf(path);
    const auto ids = tokenizer.encode("Hello world! 123 <|im_start|>héllo  \n\t 日本");
    (void)tokenizer.decode(ids);
    (void)tokenizer.decode(ids, /*skip_special=*/true);
  } catch (const kvinfer::Error&) {
  }
  return 0;
}
