// GPT-2 beyond the HF parity fixtures (test_hf_parity.cpp runs gpt2_tiny, gpt2_legacy_names and
// gpt2_untied_f16 through every parity check): the published gpt2 / gpt2-medium configs, their
// real shapes loaded through the real loader, and the errors GPT-2 inputs can raise.
#include <gtest/gtest.h>

#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kvinfer/kvinfer.h"
#include "models/synthetic.h"
#include "reference.h"
#include "test_files.h"

namespace kvinfer {
namespace {

namespace fs = std::filesystem;
using test::error_of;
using test::TempDir;

fs::path config_path(const std::string& name) { return fs::path(KVINFER_TEST_DATA) / "configs" / (name + ".json"); }

TEST(Gpt2Config, PublishedConfigsParse) {
  struct Want {
    const char* name;
    int64_t hidden, layers, heads;
  };
  for (Want w : {Want{"gpt2", 768, 12, 12}, Want{"gpt2-medium", 1024, 24, 16}}) {
    SCOPED_TRACE(w.name);
    const ModelConfig c = load_config(config_path(w.name));
    EXPECT_EQ(c.arch, Architecture::GPT2);
    EXPECT_EQ(c.vocab_size, 50257);
    EXPECT_EQ(c.hidden_size, w.hidden);
    EXPECT_EQ(c.num_layers, w.layers);
    EXPECT_EQ(c.num_heads, w.heads);
    EXPECT_EQ(c.num_kv_heads, w.heads);
    EXPECT_EQ(c.head_dim, 64);
    EXPECT_EQ(c.intermediate_size, 4 * w.hidden);  // n_inner absent: 4 × n_embd
    EXPECT_EQ(c.max_position_embeddings, 1024);
    EXPECT_EQ(c.norm_eps, 1e-5);
    EXPECT_TRUE(c.tie_word_embeddings);
    EXPECT_TRUE(c.attention_bias && c.attention_out_bias && c.mlp_bias);
    EXPECT_EQ(c.eos_token_ids, std::vector<int32_t>{50256});
    // kvinfer-bench's synthetic shape of the same name is this config.
    const ModelConfig s = synthetic_config(w.name);
    EXPECT_EQ(s.arch, c.arch);
    EXPECT_EQ(s.vocab_size, c.vocab_size);
    EXPECT_EQ(s.hidden_size, c.hidden_size);
    EXPECT_EQ(s.intermediate_size, c.intermediate_size);
    EXPECT_EQ(s.num_layers, c.num_layers);
    EXPECT_EQ(s.num_heads, c.num_heads);
    EXPECT_EQ(s.head_dim, c.head_dim);
    EXPECT_EQ(s.max_position_embeddings, c.max_position_embeddings);
    EXPECT_EQ(s.norm_eps, c.norm_eps);
  }
}

TEST(Gpt2Config, UnsupportedSettingsAreNamed) {
  const std::string base = test::read_bytes(config_path("gpt2"));
  auto with = [&](const char* key, const nlohmann::json& value) {
    auto j = nlohmann::json::parse(base);
    j[key] = value;
    return error_of([&] { parse_config(j.dump(), "gpt2/config.json"); });
  };
  EXPECT_NE(with("activation_function", "relu").find("'activation_function' is 'relu'"), std::string::npos);
  EXPECT_NE(with("scale_attn_by_inverse_layer_idx", true).find("scale_attn_by_inverse_layer_idx"), std::string::npos);
  EXPECT_NE(with("scale_attn_weights", false).find("scale_attn_weights"), std::string::npos);
  EXPECT_NE(with("n_head", 7).find("'n_embd' (768) is not a multiple of n_head (7)"), std::string::npos);
  EXPECT_NE(with("n_layer", 0).find("'n_layer' must be a positive integer"), std::string::npos);
  EXPECT_NE(with("n_embd", "768").find("'n_embd'"), std::string::npos);
}

// A checkpoint of a real GPT-2 shape as OpenAI's repositories store it (no "transformer."
// prefix, Conv1D weights (in, out), the causal-mask buffers h.N.attn.bias), in f16, written
// sparse: the header is real, the data section is a hole of the right size.
fs::path write_sparse_gpt2(const TempDir& tmp, const std::string& name, uint64_t* matrix_elems,
                           uint64_t* vector_elems) {
  const ModelConfig c = load_config(config_path(name));
  const int64_t h = c.hidden_size, f = c.intermediate_size;
  nlohmann::json header = nlohmann::json::object();
  uint64_t offset = 0;
  *matrix_elems = *vector_elems = 0;
  auto add = [&](const std::string& tensor, std::vector<int64_t> shape, const char* dtype = "F16") {
    uint64_t n = 1;
    for (int64_t d : shape) n *= static_cast<uint64_t>(d);
    const uint64_t bytes = n * (std::string(dtype) == "U8" ? 1 : 2);
    header[tensor] = {{"dtype", dtype}, {"shape", shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    if (std::string(dtype) == "F16") (shape.size() == 1 ? *vector_elems : *matrix_elems) += n;
  };
  add("wte.weight", {c.vocab_size, h});
  add("wpe.weight", {c.max_position_embeddings, h});
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = fmt::format("h.{}.", l);
    add(p + "ln_1.weight", {h});
    add(p + "ln_1.bias", {h});
    add(p + "attn.bias", {1, 1, c.max_position_embeddings, c.max_position_embeddings}, "U8");
    add(p + "attn.c_attn.weight", {h, 3 * h});
    add(p + "attn.c_attn.bias", {3 * h});
    add(p + "attn.c_proj.weight", {h, h});
    add(p + "attn.c_proj.bias", {h});
    add(p + "ln_2.weight", {h});
    add(p + "ln_2.bias", {h});
    add(p + "mlp.c_fc.weight", {h, f});
    add(p + "mlp.c_fc.bias", {f});
    add(p + "mlp.c_proj.weight", {f, h});
    add(p + "mlp.c_proj.bias", {h});
  }
  add("ln_f.weight", {h});
  add("ln_f.bias", {h});
  header["__metadata__"] = {{"format", "pt"}};

  const fs::path dir = tmp / name;
  fs::create_directories(dir);
  fs::copy_file(config_path(name), dir / "config.json");
  std::string bytes = test::safetensors_bytes(header.dump(), "");
  test::write_bytes(dir / "model.safetensors", bytes);
  fs::resize_file(dir / "model.safetensors", bytes.size() + offset);
  return dir;
}

// gpt2 has 124,439,808 parameters and gpt2-medium 354,823,168 (HF's num_parameters()); the
// loader must find every one of them where the real checkpoints keep them.
TEST(Gpt2Shapes, RealShapesLoadFromOriginalCheckpointLayout) {
  struct Want {
    const char* name;
    uint64_t params;
  };
  for (Want w : {Want{"gpt2", 124439808}, Want{"gpt2-medium", 354823168}}) {
    SCOPED_TRACE(w.name);
    TempDir tmp;
    uint64_t matrix_elems = 0, vector_elems = 0;
    const fs::path dir = write_sparse_gpt2(tmp, w.name, &matrix_elems, &vector_elems);
    ASSERT_EQ(matrix_elems + vector_elems, w.params);
    auto model = Model::load(dir, {.device = Device::CPU});
    EXPECT_EQ(model->config().arch, Architecture::GPT2);
    EXPECT_EQ(model->weight_dtype(), DType::F16);
    // Matrices as stored (f16, transposed in place of the Conv1D layout), norms and biases in f32.
    EXPECT_EQ(model->weight_bytes(), 2 * matrix_elems + 4 * vector_elems);
    KvCache kv(*model, 8);
    Session s(model);
    const std::vector<int32_t> ids = {464, 3139, 286, 4881};
    auto logits = s.prefill(kv, ids);
    ASSERT_EQ(logits.size(), 50257u);
    for (float v : logits) ASSERT_TRUE(std::isfinite(v));
    EXPECT_EQ(s.decode(kv, 318).size(), 50257u);
  }
}

TEST(Gpt2Load, ConvWeightOfTheWrongShapeIsNamed) {
  TempDir tmp;
  const fs::path dir = test::copy_fixture("gpt2_tiny", tmp);
  test::edit_safetensors_header(dir / "model.safetensors", [](nlohmann::json& h) {
    h["transformer.h.1.attn.c_attn.weight"]["shape"] = {192, 64};  // (out, in): not Conv1D's (in, out)
  });
  const std::string e = error_of([&] { Model::load(dir, {.device = Device::CPU}); });
  EXPECT_NE(e.find("'transformer.h.1.attn.c_attn.weight' has shape [192, 64]"), std::string::npos) << e;
  EXPECT_NE(e.find("implies [64, 192]"), std::string::npos) << e;
}

TEST(Gpt2Load, MissingTensorIsNamed) {
  TempDir tmp;
  const fs::path dir = test::copy_fixture("gpt2_tiny", tmp);
  test::edit_safetensors_header(dir / "model.safetensors",
                                [](nlohmann::json& h) { h.erase("transformer.wpe.weight"); });
  const std::string e = error_of([&] { Model::load(dir, {.device = Device::CPU}); });
  EXPECT_NE(e.find("transformer.wpe.weight"), std::string::npos) << e;
}

// Learned positions end at n_positions: the cache may be larger, the model cannot go further.
TEST(Gpt2Positions, BeyondLearnedPositionsIsAnErrorAndLeavesTheCache) {
  auto model = Model::load(test::model_dir("gpt2_tiny"), {.device = Device::CPU});
  ASSERT_EQ(model->config().max_position_embeddings, 128);
  EXPECT_THROW(KvCache(*model, 200, DType::F32), Error);  // a model's caches stop at its context
  // A cache made from the config alone may be longer: the session still stops at the table's end.
  KvCache kv(model->config(), 200, DType::F32);
  Session s(model);
  std::vector<int32_t> ids(126, 5);
  s.prefill(kv, ids);
  const std::string e = error_of([&] { s.prefill(kv, std::vector<int32_t>{1, 2, 3}); });
  EXPECT_NE(e.find("positions 126 .. 128 go beyond the model's 128 learned positions"), std::string::npos) << e;
  EXPECT_EQ(kv.size(), 126);
  s.decode(kv, 7);
  s.decode(kv, 8);  // positions 126 and 127: the last two there are
  EXPECT_EQ(kv.size(), 128);
  EXPECT_NE(error_of([&] { s.decode(kv, 9); }).find("learned positions"), std::string::npos);
}

}  // namespace
}  // namespace kvinfer
