// Every way a model directory, a prompt or a cache can be wrong ends in a kvinfer::Error whose
// message names the file and the tensor, key or value at fault. Each test corrupts a copy of a
// real fixture checkpoint in its own temporary directory.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "kvinfer/kvinfer.h"
#include "reference.h"
#include "test_files.h"

namespace kvinfer {
namespace {

namespace fs = std::filesystem;
using test::copy_fixture;
using test::edit_json_file;
using test::edit_safetensors_header;
using test::error_of;
using test::TempDir;
using ::testing::AllOf;
using ::testing::HasSubstr;
using json = nlohmann::json;

// llama_gqa4: f32, tied, 8 heads / 2 KV heads × head_dim 8, hidden 64, intermediate 64.
const std::string kFixture = "llama_gqa4";

// A load's error; its kind must be `kind`.
std::string load_error(const fs::path& dir, ErrorKind kind = ErrorKind::BadFile,
                       const LoadOptions& options = {.device = Device::CPU}) {
  return error_of(kind, [&] { Model::load(dir, options); });
}

// An Error's what() is a C string: a NUL inside the message (a key from a config.json's
// "\u0000", a name from any file) shows as \x00 and the rest of the message is kept.
TEST(ErrorText, ANulInTheMessageIsShownNotTheEnd) {
  const Error e(ErrorKind::BadFile, std::string("f: key 'a\0b' is bad\0", 20));
  EXPECT_STREQ(e.what(), "f: key 'a\\x00b' is bad\\x00");
  EXPECT_EQ(e.kind(), ErrorKind::BadFile);
}

TEST(LoadErrors, PristineCopyLoads) {  // the corruptions below are all that break the copies
  TempDir tmp;
  EXPECT_NO_THROW(Model::load(copy_fixture(kFixture, tmp), {.device = Device::CPU}));
}

TEST(LoadErrors, MissingConfigJson) {
  TempDir tmp;
  fs::path dir = copy_fixture(kFixture, tmp);
  fs::remove(dir / "config.json");
  EXPECT_THAT(load_error(dir), AllOf(HasSubstr(dir.string()), HasSubstr("config.json")));
}

TEST(LoadErrors, MissingDirectory) {
  TempDir tmp;
  EXPECT_THAT(load_error(tmp / "nowhere"), HasSubstr((tmp / "nowhere").string()));
}

TEST(LoadErrors, MissingWeights) {
  TempDir tmp;
  fs::path dir = copy_fixture(kFixture, tmp);
  fs::remove(dir / "model.safetensors");
  EXPECT_THAT(load_error(dir), AllOf(HasSubstr(dir.string()), HasSubstr("model.safetensors"),
                                     HasSubstr("model.safetensors.index.json")));
}

TEST(LoadErrors, UnsupportedArchitecture) {
  TempDir tmp;
  // GPT-2 is supported, but this config lacks its keys; Falcon is not.
  for (const auto& [arch, kind] : {std::pair{"GPT2LMHeadModel", ErrorKind::BadFile},
                                   std::pair{"FalconForCausalLM", ErrorKind::Unsupported}}) {
    fs::path dir = copy_fixture(kFixture, tmp, arch);
    const char* name = arch;  // clang 14 cannot capture a structured binding
    edit_json_file(dir / "config.json", [&](json& c) { c["architectures"] = {name}; });
    EXPECT_THAT(load_error(dir, kind), AllOf(HasSubstr((dir / "config.json").string()), HasSubstr(arch)));
  }
}

TEST(LoadErrors, InvalidConfigJson) {
  TempDir tmp;
  fs::path dir = copy_fixture(kFixture, tmp);
  test::write_bytes(dir / "config.json", "{\"architectures\": [\"LlamaForCausalLM\"],");
  EXPECT_THAT(load_error(dir), AllOf(HasSubstr((dir / "config.json").string()), HasSubstr("invalid JSON")));
}

TEST(LoadErrors, SafetensorsTruncatedBelowEightBytes) {
  TempDir tmp;
  fs::path dir = copy_fixture(kFixture, tmp);
  const fs::path weights = dir / "model.safetensors";
  test::write_bytes(weights, test::read_bytes(weights).substr(0, 5));
  EXPECT_THAT(load_error(dir), AllOf(HasSubstr(weights.string()), HasSubstr("truncated")));
}

TEST(LoadErrors, SafetensorsTruncatedMidData) {
  TempDir tmp;
  fs::path dir = copy_fixture(kFixture, tmp);
  const fs::path weights = dir / "model.safetensors";
  const std::string bytes = test::read_bytes(weights);
  test::write_bytes(weights, bytes.substr(0, bytes.size() - 100));
  // The last tensor in the file (256 bytes) now runs past its end.
  EXPECT_THAT(load_error(dir), AllOf(HasSubstr(weights.string()), HasSubstr("model.norm.weight"),
                                     HasSubstr("outside the")));
}

TEST(LoadErrors, SafetensorsHeaderLengthBeyondTheFile) {
  TempDir tmp;
  fs::path dir = copy_fixture(kFixture, tmp);
  const fs::path weights = dir / "model.safetensors";
  test::write_bytes(weights, test::read_bytes(weights).substr(0, 8 + 1000));  // cut inside the header
  EXPECT_THAT(load_error(dir), AllOf(HasSubstr(weights.string()), HasSubstr("beyond the end")));
}

TEST(LoadErrors, SafetensorsInvalidHeaderJson) {
  TempDir tmp;
  fs::path dir = copy_fixture(kFixture, tmp);
  const fs::path weights = dir / "model.safetensors";
  auto parts = test::SafetensorsParts::read(weights);
  std::string header = parts.header.dump();
  header.pop_back();  // drop the closing brace
  test::write_safetensors(weights, header, parts.data);
  EXPECT_THAT(load_error(dir), AllOf(HasSubstr(weights.string()), HasSubstr("invalid header JSON")));
}

TEST(LoadErrors, TensorOffsetsOutsideTheDataSection) {
  TempDir tmp;
  fs::path dir = copy_fixture(kFixture, tmp);
  const fs::path weights = dir / "model.safetensors";
  const std::string name = "model.layers.1.self_attn.k_proj.weight";
  edit_safetensors_header(weights, [&](json& h) {
    const uint64_t end = h["model.norm.weight"]["data_offsets"][1].get<uint64_t>();
    h[name]["data_offsets"] = {end, end + 16 * 64 * 4};
  });
  EXPECT_THAT(load_error(dir), AllOf(HasSubstr(weights.string()), HasSubstr(name), HasSubstr("outside the")));
}

TEST(LoadErrors, OverlappingTensors) {
  TempDir tmp;
  fs::path dir = copy_fixture(kFixture, tmp);
  const fs::path weights = dir / "model.safetensors";
  const std::string q = "model.layers.0.self_attn.q_proj.weight", o = "model.layers.0.self_attn.o_proj.weight";
  // Both are (64, 64) f32: o_proj now aliases q_proj's bytes.
  edit_safetensors_header(weights, [&](json& h) { h[o]["data_offsets"] = h[q]["data_offsets"]; });
  EXPECT_THAT(load_error(dir), AllOf(HasSubstr(weights.string()), HasSubstr(o), HasSubstr(q), HasSubstr("overlap")));
}

TEST(LoadErrors, WeightWithANonFloatDtype) {
  TempDir tmp;
  // I32 has the f32 byte count, so only the dtype is wrong.
  fs::path dir = copy_fixture(kFixture, tmp, "i32");
  const std::string up = "model.layers.1.mlp.up_proj.weight";
  edit_safetensors_header(dir / "model.safetensors", [&](json& h) { h[up]["dtype"] = "I32"; });
  EXPECT_THAT(load_error(dir, ErrorKind::Unsupported),
              AllOf(HasSubstr((dir / "model.safetensors").string()), HasSubstr(up), HasSubstr("I32")));

  // F64 needs twice the bytes: the norm weight moves to 512 new bytes at the end of the data.
  dir = copy_fixture(kFixture, tmp, "f64");
  const fs::path weights = dir / "model.safetensors";
  auto parts = test::SafetensorsParts::read(weights);
  const uint64_t end = parts.data.size();
  parts.header["model.norm.weight"]["dtype"] = "F64";
  parts.header["model.norm.weight"]["data_offsets"] = {end, end + 64 * 8};
  parts.data.append(64 * 8, '\0');
  parts.write(weights);
  EXPECT_THAT(load_error(dir, ErrorKind::Unsupported), AllOf(HasSubstr(weights.string()), HasSubstr("model.norm.weight"), HasSubstr("F64")));
}

TEST(LoadErrors, ConfigShapeDisagreesWithTensors) {
  TempDir tmp;
  fs::path dir = copy_fixture(kFixture, tmp);
  edit_json_file(dir / "config.json", [](json& c) { c["intermediate_size"] = 96; });
  EXPECT_THAT(load_error(dir),
              AllOf(HasSubstr((dir / "model.safetensors").string()), HasSubstr("model.layers.0.mlp.gate_proj.weight"),
                    HasSubstr("[64, 64]"), HasSubstr("[96, 64]")));
}

// The tensors' shapes check every size config.json states but one: the head count when head_dim
// is derived and the KV width stays the same (heads × head_dim is all a shape shows).
TEST(LoadErrors, EverySizeKeyIsCheckedByTheTensorShapes) {
  struct Case {
    const char* key;
    int value;
    const char* tensor;
    const char* found;
    const char* implied;
  };
  const Case cases[] = {
      {"vocab_size", 100, "model.embed_tokens.weight", "[128, 64]", "[100, 64]"},
      {"hidden_size", 32, "model.embed_tokens.weight", "[128, 64]", "[128, 32]"},
      {"num_attention_heads", 4, "model.layers.0.self_attn.q_proj.weight", "[64, 64]", "[32, 64]"},
      {"num_key_value_heads", 4, "model.layers.0.self_attn.k_proj.weight", "[16, 64]", "[32, 64]"},
      {"head_dim", 16, "model.layers.0.self_attn.q_proj.weight", "[64, 64]", "[128, 64]"},
  };
  TempDir tmp;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.key);
    fs::path dir = copy_fixture(kFixture, tmp, c.key);
    edit_json_file(dir / "config.json", [&](json& config) { config[c.key] = c.value; });
    EXPECT_THAT(load_error(dir), AllOf(HasSubstr((dir / "model.safetensors").string()), HasSubstr(c.tensor),
                                       HasSubstr(c.found), HasSubstr(c.implied)));
  }
}

// A checkpoint with more layers than config.json states would run with the extra ones ignored.
TEST(LoadErrors, LayerBeyondTheConfigsLayerCount) {
  TempDir tmp;
  struct Case {
    const char* fixture;
    const char* key;
    const char* tensor;
  };
  const Case cases[] = {
      {"llama_gqa4", "num_hidden_layers", "model.layers.1.input_layernorm.weight"},
      {"gpt2_tiny", "n_layer", "transformer.h.1.attn.c_attn.bias"},
      {"gpt2_legacy_names", "n_layer", "h.1.attn.c_attn.bias"},  // h.1.attn.bias, a mask buffer, is skipped
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.fixture);
    fs::path dir = copy_fixture(c.fixture, tmp);
    edit_json_file(dir / "config.json", [&](json& config) { config[c.key] = 1; });
    EXPECT_THAT(load_error(dir),
                AllOf(HasSubstr((dir / "model.safetensors").string()),
                      HasSubstr(fmt::format("tensor '{}' is for layer 1, but config.json has {} 1", c.tensor, c.key))));
  }
  // Sharded: the error names the shard that holds the tensor.
  fs::path dir = copy_fixture("llama_sharded", tmp);
  edit_json_file(dir / "config.json", [](json& c) { c["num_hidden_layers"] = 1; });
  EXPECT_THAT(load_error(dir), AllOf(HasSubstr(dir.string() + "/model-0000"), HasSubstr("'model.layers.1."),
                                     HasSubstr("is for layer 1, but config.json has num_hidden_layers 1")));
}

// Appends an f32 tensor of `shape` (zeros) to a safetensors file.
void add_tensor(const fs::path& weights, const std::string& name, const std::vector<int64_t>& shape) {
  auto parts = test::SafetensorsParts::read(weights);
  uint64_t bytes = 4;
  for (int64_t d : shape) bytes *= static_cast<uint64_t>(d);
  const uint64_t end = parts.data.size();
  parts.header[name] = {{"dtype", "F32"}, {"shape", shape}, {"data_offsets", {end, end + bytes}}};
  parts.data.append(bytes, '\0');
  parts.write(weights);
}

// Any other layer tensor the model does not bind would be dropped too (here a bias the config
// does not turn on); the buffers HF itself skips on load are accepted.
TEST(LoadErrors, LayerTensorTheModelDoesNotUse) {
  TempDir tmp;
  fs::path dir = copy_fixture(kFixture, tmp, "bias");
  const std::string bias = "model.layers.0.self_attn.q_proj.bias";
  add_tensor(dir / "model.safetensors", bias, {64});
  EXPECT_THAT(load_error(dir, ErrorKind::Unsupported), AllOf(HasSubstr((dir / "model.safetensors").string()), HasSubstr("'" + bias + "'"),
                                     HasSubstr("not part of a LlamaForCausalLM model")));

  dir = copy_fixture(kFixture, tmp, "inv_freq");
  for (int l = 0; l < 2; ++l)
    add_tensor(dir / "model.safetensors", fmt::format("model.layers.{}.self_attn.rotary_emb.inv_freq", l), {4});
  EXPECT_NO_THROW(Model::load(dir, {.device = Device::CPU}));
  dir = copy_fixture("gpt2_tiny", tmp);
  add_tensor(dir / "model.safetensors", "transformer.h.0.attn.masked_bias", {});
  add_tensor(dir / "model.safetensors", "transformer.h.1.attn.bias", {1, 1, 4, 4});
  EXPECT_NO_THROW(Model::load(dir, {.device = Device::CPU}));
}

TEST(LoadErrors, ConfigDimensionsWhoseProductWouldOverflow) {
  // × 8 heads overflows int64; every size config.json states is capped at int32 first.
  TempDir tmp;
  fs::path dir = copy_fixture(kFixture, tmp);
  edit_json_file(dir / "config.json", [](json& c) { c["head_dim"] = int64_t{1} << 62; });
  EXPECT_THAT(load_error(dir), AllOf(HasSubstr((dir / "config.json").string()),
                                     HasSubstr("'head_dim' is 4611686018427387904, beyond the limit of 2147483647")));
}

TEST(LoadErrors, TensorShapeDisagreesWithConfig) {
  TempDir tmp;
  fs::path dir = copy_fixture(kFixture, tmp);
  const std::string k = "model.layers.1.self_attn.k_proj.weight";
  // (16, 64) → (64, 16): same bytes, transposed shape.
  edit_safetensors_header(dir / "model.safetensors", [&](json& h) { h[k]["shape"] = {64, 16}; });
  EXPECT_THAT(load_error(dir), AllOf(HasSubstr((dir / "model.safetensors").string()), HasSubstr(k),
                                     HasSubstr("[64, 16]"), HasSubstr("[16, 64]")));
}

TEST(LoadErrors, MissingTensor) {
  TempDir tmp;
  fs::path dir = copy_fixture(kFixture, tmp);
  const std::string v = "model.layers.1.self_attn.v_proj.weight";
  edit_safetensors_header(dir / "model.safetensors", [&](json& h) { h.erase(v); });
  EXPECT_THAT(load_error(dir), AllOf(HasSubstr(dir.string()), HasSubstr(v), HasSubstr("missing")));

  // An untied model needs lm_head.weight.
  dir = copy_fixture("llama_mha", tmp);
  edit_safetensors_header(dir / "model.safetensors", [&](json& h) { h.erase("lm_head.weight"); });
  EXPECT_THAT(load_error(dir), AllOf(HasSubstr(dir.string()), HasSubstr("'lm_head.weight'")));
}

TEST(LoadErrors, ShardedIndexNamesAMissingShard) {
  TempDir tmp;
  fs::path dir = copy_fixture("llama_sharded", tmp);
  const fs::path shard = dir / "model-00002-of-00003.safetensors";
  fs::remove(shard);
  EXPECT_THAT(load_error(dir), HasSubstr(shard.string()));
}

TEST(LoadErrors, ShardedIndexListsATensorTheShardLacks) {
  TempDir tmp;
  // The index names a tensor that no shard holds.
  fs::path dir = copy_fixture("llama_sharded", tmp, "extra");
  edit_json_file(dir / "model.safetensors.index.json",
                 [](json& i) { i["weight_map"]["model.layers.0.ghost.weight"] = "model-00001-of-00003.safetensors"; });
  EXPECT_THAT(load_error(dir), AllOf(HasSubstr((dir / "model-00001-of-00003.safetensors").string()),
                                     HasSubstr("model.layers.0.ghost.weight"), HasSubstr("index.json")));

  // A shard lost a tensor the index still places there.
  dir = copy_fixture("llama_sharded", tmp, "lost");
  const fs::path shard = dir / "model-00003-of-00003.safetensors";
  edit_safetensors_header(shard, [](json& h) { h.erase("lm_head.weight"); });
  EXPECT_THAT(load_error(dir), AllOf(HasSubstr(shard.string()), HasSubstr("lm_head.weight")));
}

TEST(LoadErrors, ShardedIndexNamingAPathOutsideTheDirectory) {
  TempDir tmp;
  fs::path dir = copy_fixture("llama_sharded", tmp);
  edit_json_file(dir / "model.safetensors.index.json",
                 [](json& i) { i["weight_map"]["lm_head.weight"] = "../llama_mha/model.safetensors"; });
  EXPECT_THAT(load_error(dir), AllOf(HasSubstr("model.safetensors.index.json"), HasSubstr("lm_head.weight"),
                                     HasSubstr("../llama_mha/model.safetensors")));
}

TEST(LoadErrors, CudaWithoutADeviceIsRefusedClearly) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device is present: Device::CUDA is valid here";
  const fs::path dir = test::fixture_dir(kFixture);
  EXPECT_THAT(load_error(dir, ErrorKind::Device, {.device = Device::CUDA}),
              AllOf(HasSubstr(dir.string()), HasSubstr("no CUDA device is usable")));
}

// ---- run-time errors: the cache is left as it was ----

using test::filled_kv;

class RunErrors : public ::testing::Test {
 protected:
  std::shared_ptr<const Model> model_ = Model::load(test::fixture_dir("llama_mha"), {.device = Device::CPU});
  test::Reference ref_{"llama_mha"};  // prompt of 7 ids
  std::span<const int32_t> prompt(size_t n) const { return {ref_.prompt_ids.data(), n}; }
};

TEST_F(RunErrors, PromptLongerThanRemainingCapacity) {
  KvCache kv(*model_, 9);
  Session s(model_);
  s.prefill(kv, prompt(5));
  const auto before = filled_kv(kv);

  EXPECT_THAT(error_of(ErrorKind::ContextFull, [&] { s.prefill(kv, prompt(7)); }),
              AllOf(HasSubstr("7 tokens"), HasSubstr("4 of 9 positions")));
  EXPECT_EQ(kv.size(), 5);
  EXPECT_EQ(filled_kv(kv), before);

  // The next valid step sees exactly the cache a fresh run builds.
  auto logits = s.decode(kv, ref_.prompt_ids[5]);
  const std::vector<float> after_error(logits.begin(), logits.end());
  KvCache fresh_kv(*model_, 9);
  Session fresh(model_);
  fresh.prefill(fresh_kv, prompt(5));
  logits = fresh.decode(fresh_kv, ref_.prompt_ids[5]);
  const std::vector<float> expected(logits.begin(), logits.end());
  EXPECT_EQ(after_error, expected);  // bit for bit
  EXPECT_EQ(filled_kv(kv), filled_kv(fresh_kv));

  // A full cache refuses one more token the same way, by decode and by prefill, and keeps
  // every committed position's K/V.
  s.prefill(kv, prompt(3));
  ASSERT_EQ(kv.remaining(), 0);
  const auto full = filled_kv(kv);
  EXPECT_THAT(error_of(ErrorKind::ContextFull, [&] { s.decode(kv, 1); }), HasSubstr("1 tokens do not fit in the KV cache: 0 of 9 positions"));
  EXPECT_EQ(kv.size(), 9);
  EXPECT_EQ(filled_kv(kv), full);
  EXPECT_THAT(error_of(ErrorKind::ContextFull, [&] { s.prefill(kv, prompt(2)); }), HasSubstr("2 tokens do not fit in the KV cache: 0 of 9"));
  EXPECT_EQ(kv.size(), 9);
  EXPECT_EQ(filled_kv(kv), full);
}

TEST_F(RunErrors, TokenIdOutsideTheVocabulary) {
  KvCache kv(*model_, 16);
  Session s(model_);
  const std::vector<int32_t> ids = {3, 128, 5};
  EXPECT_THAT(error_of(ErrorKind::InvalidArgument, [&] { s.prefill(kv, ids); }),
              AllOf(HasSubstr("token id 128"), HasSubstr("index 1"), HasSubstr("size 128")));
  EXPECT_THAT(error_of(ErrorKind::InvalidArgument, [&] { s.decode(kv, -1); }), HasSubstr("token id -1"));
  EXPECT_EQ(kv.size(), 0);
  EXPECT_THAT(error_of(ErrorKind::InvalidArgument, [&] { s.prefill(kv, std::span<const int32_t>{}); }), HasSubstr("empty"));
}

TEST_F(RunErrors, KvCacheOfAnotherModel) {
  auto other = Model::load(test::fixture_dir(kFixture), {.device = Device::CPU});  // 2 KV heads × 8, not 4 × 16
  KvCache kv(*other, 16);
  Session s(model_);
  EXPECT_THAT(error_of(ErrorKind::InvalidArgument, [&] { s.prefill(kv, prompt(3)); }),
              AllOf(HasSubstr("KV cache"), HasSubstr("2 KV heads × head_dim 8"), HasSubstr("4 × 16")));
  EXPECT_EQ(kv.size(), 0);
}

}  // namespace
}  // namespace kvinfer
