// Fuzz target: a HF config.json. Every input must parse into a config or throw kvinfer::Error.
#include <cstdint>
#include <string_view>

#include "kvinfer/config.h"
#include "kvinfer/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const kvinfer::ModelConfig cfg =
        kvinfer::parse_config(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz/config.json");
    (void)cfg;
  } catch (const kvinfer::Error&) {
  }
  return 0;
}
