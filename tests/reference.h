#pragma once
// Reads a fixture's reference.safetensors: HF transformers' logits for a prompt and a 32-step
// greedy continuation (see tests/data/models/PROVENANCE.md).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "formats/safetensors.h"

namespace kvinfer::test {

// The elements of tensor `name` of a reference file, as T (the file's dtype).
template <typename T>
std::vector<T> read_tensor(const SafetensorsFile& f, const std::string& name) {
  const TensorView& t = f.get(name);
  std::vector<T> out(t.bytes / sizeof(T));
  std::memcpy(out.data(), t.data, t.bytes);
  return out;
}

// Every fixture of tests/data/models (PROVENANCE.md says what each covers).
inline const char* const kFixtures[] = {
    "llama_mha", "llama_gqa4", "llama_mqa", "llama_group7", "llama_head_dim", "llama3_rope",
    "llama_rope_linear", "llama_attn_bias", "qwen2_bias", "mistral_window", "llama_bf16",
    "llama_f16", "llama_sharded", "gpt2_tiny", "gpt2_legacy_names", "gpt2_untied_f16",
    "qwen3_tiny", "gemma2_tiny", "gemma2_scalar", "gemma3_tiny", "qwen2_window",
    "mixtral_tiny", "mixtral_fused", "qwen2_moe_tiny", "llama_yarn", "qwen2_yarn",
    "llama_yarn_mscale", "llama_dynamic", "phi3_longrope", "phi4_partial_rotary", "qwen3_moe_tiny"};

// LoadOptions::context_length a fixture's references were made for (0: the model's). Dynamic NTK
// picks its frequencies by the model's context length: llama_dynamic's references are HF's calls
// over 64 positions, twice its max_position_embeddings (tools/make_fixtures.py, "pad_to").
inline int64_t fixture_context_length(std::string_view fixture) { return fixture == "llama_dynamic" ? 64 : 0; }

// max |a - b|; infinity when the sizes differ.
inline float max_abs_diff(std::span<const float> a, std::span<const float> b) {
  if (a.size() != b.size()) return INFINITY;
  float m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

inline std::filesystem::path model_dir(const std::string& name) {
  return std::filesystem::path(KVINFER_TEST_DATA) / "models" / name;
}

struct Reference {
  std::vector<int32_t> prompt_ids;            // (T)
  std::vector<float> prompt_logits;           // (T, vocab)
  std::vector<int32_t> greedy_ids;            // (32)
  std::vector<float> greedy_logits;           // (32, vocab): row i chose greedy_ids[i]
  std::vector<float> prompt_logits_native;    // (T, vocab) half-precision fixtures only, else empty
  std::vector<float> prompt_logits_short;     // (T, vocab) "pad_to" fixtures only: HF's call over the prompt alone

  // The reference of fixture `fixture` (tests/data/models/<fixture>/reference.safetensors).
  explicit Reference(const std::string& fixture) { load(model_dir(fixture) / "reference.safetensors"); }
  // A reference file of the same format anywhere (e.g. tests/data/gguf/models/<name>.reference.safetensors).
  static Reference from_file(const std::filesystem::path& file) {
    Reference r;
    r.load(file);
    return r;
  }

 private:
  Reference() = default;
  void load(const std::filesystem::path& file) {
    SafetensorsFile f(file);
    prompt_ids = read_tensor<int32_t>(f, "prompt_ids");
    prompt_logits = read_tensor<float>(f, "prompt_logits");
    greedy_ids = read_tensor<int32_t>(f, "greedy_ids");
    greedy_logits = read_tensor<float>(f, "greedy_logits");
    if (f.find("prompt_logits_native")) prompt_logits_native = read_tensor<float>(f, "prompt_logits_native");
    if (f.find("prompt_logits_short")) prompt_logits_short = read_tensor<float>(f, "prompt_logits_short");
  }
};

}  // namespace kvinfer::test
