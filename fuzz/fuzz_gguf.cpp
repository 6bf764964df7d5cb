// Fuzz target: a GGUF file's header, metadata and tensor infos, then what the loader reads from
// them: the model config and the tokenizer. Every input must load or throw kvinfer::Error.
#include <cstdint>
#include <cstdlib>

#include "formats/gguf.h"
#include "formats/gguf_config.h"
#include "fuzz_input_file.h"
#include "kvinfer/error.h"
#include "kvinfer/tokenizer.h"
#include "tokenizer/load.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static kvinfer::fuzz::InputFile file("model.gguf");
  const auto& path = file.write(data, size);
  try {
    const kvinfer::GgufFile gguf(path);
    for (const auto& t : gguf.tensors())
      if (t.offset + t.bytes > size || t.numel() < 0) std::abort();  // tensors lie inside the file
    try {
      (void)kvinfer::gguf_config(gguf);
    } catch (const kvinfer::Error&) {
    }
    const auto tokenizer = kvinfer::gguf_tokenizer(gguf);
    const auto ids = tokenizer.encode("Hello world! 123 héllo");
    (void)tokenizer.decode(ids);
  } catch (const kvinfer::Error&) {
  }
  return 0;
}
