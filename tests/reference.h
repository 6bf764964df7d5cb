#pragma once
// Reads a fixture's reference.safetensors: HF transformers' logits for a prompt and a 32-step
// greedy continuation (see tests/data/models/PROVENANCE.md).
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "formats/safetensors.h"

namespace kvinfer::test {

inline std::filesystem::path model_dir(const std::string& name) {
  return std::filesystem::path(KVINFER_TEST_DATA) / "models" / name;
}

struct Reference {
  std::vector<int32_t> prompt_ids;            // (T)
  std::vector<float> prompt_logits;           // (T, vocab)
  std::vector<int32_t> greedy_ids;            // (32)
  std::vector<float> greedy_logits;           // (32, vocab): row i chose greedy_ids[i]
  std::vector<float> prompt_logits_native;    // (T, vocab) half-precision fixtures only, else empty

  explicit Reference(const std::string& fixture) {
    SafetensorsFile f(model_dir(fixture) / "reference.safetensors");
    read(f, "prompt_ids", prompt_ids);
    read(f, "prompt_logits", prompt_logits);
    read(f, "greedy_ids", greedy_ids);
    read(f, "greedy_logits", greedy_logits);
    if (f.find("prompt_logits_native")) read(f, "prompt_logits_native", prompt_logits_native);
  }

 private:
  template <typename T>
  static void read(const SafetensorsFile& f, const std::string& name, std::vector<T>& out) {
    const TensorView& t = f.get(name);
    out.resize(t.bytes / sizeof(T));
    std::memcpy(out.data(), t.data, t.bytes);
  }
};

}  // namespace kvinfer::test
