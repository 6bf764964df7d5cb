// Fuzz target: a safetensors file (8-byte header length, JSON header, data). Every input must
// load or throw kvinfer::Error; whatever loads must describe tensors that lie inside the file.
#include <cstdint>
#include <cstdlib>

#include "formats/safetensors.h"
#include "fuzz_input_file.h"
#include "kvinfer/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static kvinfer::fuzz::InputFile file("model.safetensors");
  const auto& path = file.write(data, size);
  try {
    kvinfer::SafetensorsFile st(path);
    for (const auto& [name, t] : st.tensors()) {
      if (t.bytes > size || t.numel() < 0) std::abort();  // a tensor's bytes lie inside the file
      try {
        (void)t.float_dtype();
      } catch (const kvinfer::Error&) {
      }
    }
  } catch (const kvinfer::Error&) {
  }
  return 0;
}
