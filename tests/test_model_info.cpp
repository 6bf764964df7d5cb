// inspect_model (kvinfer/model_info.h) against what a load gives for the same file: the config,
// the tensors (against the format readers), weight_bytes and weight_dtype (Model), the tokenizer
// and its chat template (Tokenizer), KV bytes (KvCache); the error kinds; and that no page of
// tensor data is read.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "formats/gguf.h"
#include "formats/hf_checkpoint.h"
#include "kvinfer/kvinfer.h"
#include "kvinfer/model_info.h"
#include "test_files.h"

namespace kvinfer {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

const fs::path kGgufDir = fs::path(KVINFER_TEST_DATA) / "gguf" / "models";

void expect_same_config(const ModelConfig& a, const ModelConfig& b) {
  EXPECT_EQ(a.arch, b.arch);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.hidden_size, b.hidden_size);
  EXPECT_EQ(a.intermediate_size, b.intermediate_size);
  EXPECT_EQ(a.num_layers, b.num_layers);
  EXPECT_EQ(a.num_heads, b.num_heads);
  EXPECT_EQ(a.num_kv_heads, b.num_kv_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.norm_eps, b.norm_eps);
  EXPECT_EQ(a.rope_theta, b.rope_theta);
  EXPECT_EQ(a.rope_scaling.type, b.rope_scaling.type);
  EXPECT_EQ(a.rope_scaling.factor, b.rope_scaling.factor);
  EXPECT_EQ(a.rope_layout, b.rope_layout);
  EXPECT_EQ(a.max_position_embeddings, b.max_position_embeddings);
  EXPECT_EQ(a.sliding_window, b.sliding_window);
  EXPECT_EQ(a.tie_word_embeddings, b.tie_word_embeddings);
  EXPECT_EQ(a.attention_bias, b.attention_bias);
  EXPECT_EQ(a.attention_out_bias, b.attention_out_bias);
  EXPECT_EQ(a.mlp_bias, b.mlp_bias);
  EXPECT_EQ(a.bos_token_id, b.bos_token_id);
  EXPECT_EQ(a.eos_token_ids, b.eos_token_ids);
  EXPECT_EQ(a.num_experts, b.num_experts);
  EXPECT_EQ(a.num_experts_per_tok, b.num_experts_per_tok);
  EXPECT_EQ(a.moe_intermediate_size, b.moe_intermediate_size);
  EXPECT_EQ(a.shared_expert_intermediate_size, b.shared_expert_intermediate_size);
  EXPECT_EQ(a.norm_topk_prob, b.norm_topk_prob);
  EXPECT_EQ(a.dense_layers, b.dense_layers);
}

// What inspect_model says equals what Model::load, its tokenizer and a KvCache say.
void expect_matches_load(const fs::path& path) {
  SCOPED_TRACE(path.string());
  const ModelInfo info = inspect_model(path);
  const auto model = Model::load(path, {.device = Device::CPU});
  expect_same_config(info.config, model->config());
  EXPECT_TRUE(info.has_weights);
  EXPECT_EQ(info.weight_dtype, model->weight_dtype());
  EXPECT_EQ(info.weight_bytes, model->weight_bytes());
  EXPECT_EQ(info.default_kv_dtype(), KvCache(*model, 1).dtype());
  EXPECT_EQ(info.has_tokenizer, model->has_tokenizer());
  if (model->has_tokenizer()) {
    EXPECT_EQ(info.chat_template, model->tokenizer().chat_template());
  }
  uint64_t stored = 0;
  for (const TensorInfo& t : info.tensors) stored += t.bytes;
  EXPECT_EQ(info.stored_bytes, stored);
  for (int64_t n : {int64_t{1}, int64_t{7}, model->config().max_position_embeddings}) {
    EXPECT_EQ(info.kv_bytes(n), KvCache(*model, n).bytes()) << n;
    for (DType d : {DType::F32, DType::F16, DType::BF16}) {
      EXPECT_EQ(info.kv_bytes(n, d), KvCache(*model, n, d).bytes());
    }
    EXPECT_EQ(info.load_bytes(n), model->weight_bytes() + KvCache(*model, n).bytes());
  }
}

TEST(ModelInfo, HfDirectoriesMatchTheLoadedModel) {
  for (const char* name : {"chatml_tiny", "gpt2_legacy_names", "gpt2_tiny", "gpt2_untied_f16", "llama3_rope",
                           "llama_attn_bias", "llama_bf16", "llama_f16", "llama_gqa4", "llama_group7",
                           "llama_head_dim", "llama_mha", "llama_mqa", "llama_rope_linear", "llama_sharded",
                           "mistral_window", "qwen2_bias", "qwen3_tiny", "gemma2_tiny", "gemma2_scalar", "gemma3_tiny",
                           "qwen2_window", "mixtral_tiny", "mixtral_fused", "qwen2_moe_tiny", "qwen3_moe_tiny"}) {
    const fs::path dir = test::fixture_dir(name);
    expect_matches_load(dir);
    const ModelInfo info = inspect_model(dir);
    EXPECT_EQ(info.format, ModelFormat::HfDirectory);
    EXPECT_EQ(info.name, name);
    // Every tensor as the safetensors reader has it.
    const HfCheckpoint ckpt(dir);
    ASSERT_EQ(info.tensors.size(), ckpt.names().size()) << name;
    for (const TensorInfo& t : info.tensors) {
      const TensorView& v = ckpt.get(t.name);
      EXPECT_EQ(t.type, v.dtype) << t.name;
      if (v.dtype == "F32" || v.dtype == "F16" || v.dtype == "BF16") {
        EXPECT_EQ(t.dtype, v.float_dtype()) << t.name;
      } else {
        EXPECT_EQ(t.dtype, std::nullopt) << t.name;  // GPT-2's U8 attn.bias buffers
      }
      EXPECT_EQ(t.shape, v.shape) << t.name;
      EXPECT_EQ(t.bytes, v.bytes) << t.name;
    }
    EXPECT_EQ(info.stored_bytes, ckpt.tensor_bytes()) << name;
  }
}

TEST(ModelInfo, GgufFilesMatchTheLoadedModel) {
  for (const char* name : {"chatml_tiny.f32", "gpt2_tiny.f32", "gpt2_tiny.q8_0", "llama3_rope.f16",
                           "llama3_rope.q8_0", "llama_f16.f16", "llama_gqa4.f32", "llama_gqa4.q8_0",
                           "llama_mha.q8_0", "llama_rope_linear.f16", "qwen2_bias.f32", "qwen2_bias.q8_0",
                           "mixtral_tiny.f32", "mixtral_tiny.q8_0", "qwen2_moe_tiny.f32", "qwen2_moe_tiny.q8_0",
                           "qwen3_moe_tiny.f32", "qwen3_moe_tiny.q8_0"}) {
    const fs::path path = kGgufDir / (std::string(name) + ".gguf");
    expect_matches_load(path);
    const ModelInfo info = inspect_model(path);
    EXPECT_EQ(info.format, ModelFormat::Gguf);
    const GgufFile f(path);
    ASSERT_EQ(info.tensors.size(), f.tensors().size()) << name;
    for (size_t i = 0; i < info.tensors.size(); ++i) {
      const TensorInfo& t = info.tensors[i];
      const GgufTensorInfo& g = f.tensors()[i];
      EXPECT_EQ(t.name, g.name);
      EXPECT_EQ(t.shape, std::vector<int64_t>(g.dims.rbegin(), g.dims.rend())) << t.name;
      EXPECT_EQ(t.bytes, g.bytes) << t.name;
      EXPECT_EQ(t.type, ggml_type_info(g.type).name);
      ASSERT_TRUE(t.dtype.has_value()) << t.name;
      EXPECT_EQ(dtype_row_bytes(*t.dtype, g.dims[0]) * static_cast<uint64_t>(g.numel() / g.dims[0]), g.bytes)
          << t.name;
    }
    if (f.has("general.name")) {
      EXPECT_EQ(info.name, f.string("general.name"));
    }
  }
}

// The default model (tools/fetch_model.sh), when it is there: quantised, with a tokenizer and a
// chat template in its metadata.
TEST(ModelInfo, DefaultModelMatchesTheLoadedModel) {
  const fs::path path = KVINFER_DEFAULT_MODEL;
  if (!fs::exists(path)) GTEST_SKIP() << path << " is absent (tools/fetch_model.sh)";
  expect_matches_load(path);
  const ModelInfo info = inspect_model(path);
  EXPECT_TRUE(info.has_tokenizer);
  EXPECT_FALSE(info.chat_template.empty());
}

TEST(ModelInfo, TokenizerAndChatTemplate) {
  const ModelInfo chatml = inspect_model(test::fixture_dir("chatml_tiny"));
  EXPECT_TRUE(chatml.has_tokenizer);
  EXPECT_EQ(chatml.chat_template, Tokenizer::from_hf(test::fixture_dir("chatml_tiny")).chat_template());
  EXPECT_FALSE(chatml.chat_template.empty());
  const ModelInfo bare = inspect_model(test::fixture_dir("llama_mha"));
  EXPECT_FALSE(bare.has_tokenizer);
  EXPECT_EQ(bare.chat_template, "");

  // tokenizer_config.json's template when there is no chat_template.jinja; the .jinja file wins.
  TempDir tmp;
  const fs::path dir = test::copy_fixture("chatml_tiny", tmp);
  fs::remove(dir / "chat_template.jinja");
  test::edit_json_file(dir / "tokenizer_config.json", [](nlohmann::json& j) { j["chat_template"] = "{{ 1 }}"; });
  EXPECT_EQ(inspect_model(dir).chat_template, "{{ 1 }}");
  EXPECT_EQ(inspect_model(dir).chat_template, Tokenizer::from_hf(dir).chat_template());
  test::write_bytes(dir / "chat_template.jinja", "{{ 2 }}");
  EXPECT_EQ(inspect_model(dir).chat_template, "{{ 2 }}");
  EXPECT_EQ(inspect_model(dir).chat_template, Tokenizer::from_hf(dir).chat_template());

  const fs::path gguf = kGgufDir / "chatml_tiny.f32.gguf";
  const ModelInfo g = inspect_model(gguf);
  EXPECT_TRUE(g.has_tokenizer);
  EXPECT_EQ(g.chat_template, Tokenizer::from_gguf(gguf).chat_template());
}

TEST(ModelInfo, WithoutWeights) {
  // A bare config.json: the config and the KV plan, nothing else.
  const fs::path config = test::fixture_dir("llama_gqa4") / "config.json";
  const ModelInfo bare = inspect_model(config);
  EXPECT_EQ(bare.format, ModelFormat::ConfigJson);
  EXPECT_EQ(model_format_name(bare.format), "config_json");
  expect_same_config(bare.config, load_config(config));
  EXPECT_FALSE(bare.has_weights);
  EXPECT_TRUE(bare.tensors.empty());
  EXPECT_EQ(bare.weight_bytes, 0u);
  EXPECT_EQ(bare.stored_bytes, 0u);
  EXPECT_EQ(bare.kv_bytes(100, DType::F16), plan_kv_bytes(bare.config, 100, DType::F16));

  // A directory with a config.json and no safetensors.
  TempDir tmp;
  fs::create_directory(tmp / "cfg");
  fs::copy_file(config, tmp / "cfg" / "config.json");
  const ModelInfo dir = inspect_model(tmp / "cfg");
  EXPECT_EQ(dir.format, ModelFormat::HfDirectory);
  EXPECT_FALSE(dir.has_weights);
  EXPECT_EQ(dir.name, "cfg");
}

ErrorKind kind_of(const fs::path& path) {
  try {
    (void)inspect_model(path);
  } catch (const Error& e) {
    return e.kind();
  }
  ADD_FAILURE() << path << " inspected without an error";
  return ErrorKind::InvalidArgument;
}

TEST(ModelInfo, ErrorKinds) {
  TempDir tmp;
  EXPECT_EQ(kind_of(tmp / "missing"), ErrorKind::BadFile);
  EXPECT_EQ(kind_of(tmp.path()), ErrorKind::BadFile);  // a directory without config.json

  const fs::path broken = test::copy_fixture("llama_mha", tmp, "broken");
  test::write_bytes(broken / "config.json", "{\"architectures\": [\"LlamaForCausalLM\"], ");
  EXPECT_EQ(kind_of(broken), ErrorKind::BadFile);
  test::edit_json_file(test::copy_fixture("llama_mha", tmp, "no_heads") / "config.json",
                       [](nlohmann::json& j) { j.erase("num_attention_heads"); });
  EXPECT_EQ(kind_of(tmp / "no_heads"), ErrorKind::BadFile);

  const fs::path other = test::copy_fixture("llama_mha", tmp, "other");
  test::edit_json_file(other / "config.json",
                       [](nlohmann::json& j) { j["architectures"] = nlohmann::json::array({"FalconForCausalLM"}); });
  EXPECT_EQ(kind_of(other), ErrorKind::Unsupported);
  EXPECT_EQ(kind_of(other / "config.json"), ErrorKind::Unsupported);

  // A GGUF file of another architecture: the same bytes with "llama" spelled "llamb".
  std::string bytes = test::read_bytes(kGgufDir / "llama_mha.q8_0.gguf");
  const std::string key = "general.architecture";
  const size_t at = bytes.find(key);
  ASSERT_NE(at, std::string::npos);
  // key, then u32 type (8: string), u64 length, the value.
  const size_t value = at + key.size() + 4 + 8;
  ASSERT_EQ(bytes.substr(value, 5), "llama");
  bytes[value + 4] = 'b';
  test::write_bytes(tmp / "llamb.gguf", bytes);
  EXPECT_EQ(kind_of(tmp / "llamb.gguf"), ErrorKind::Unsupported);

  // Truncated: the tensor data is shorter than the tensor table says. The sizes are checked
  // against the file's length (no byte of data is read to find it out).
  std::string gguf = test::read_bytes(kGgufDir / "llama_mha.q8_0.gguf");
  test::write_bytes(tmp / "short.gguf", gguf.substr(0, gguf.size() - 100));
  EXPECT_EQ(kind_of(tmp / "short.gguf"), ErrorKind::BadFile);
  const fs::path short_st = test::copy_fixture("llama_mha", tmp, "short_st");
  std::string st = test::read_bytes(short_st / "model.safetensors");
  test::write_bytes(short_st / "model.safetensors", st.substr(0, st.size() - 100));
  EXPECT_EQ(kind_of(short_st), ErrorKind::BadFile);
}

// Resident pages of `path` from byte `from` on.
size_t resident_pages(const fs::path& path, size_t from) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw std::runtime_error("open " + path.string());
  const size_t size = fs::file_size(path);
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) throw std::runtime_error("mmap " + path.string());
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> v((size + page - 1) / page);
  const int rc = ::mincore(p, size, v.data());
  ::munmap(p, size);
  if (rc != 0) throw std::runtime_error("mincore " + path.string());
  return static_cast<size_t>(std::count_if(v.begin() + static_cast<std::ptrdiff_t>(from / page), v.end(),
                                           [](unsigned char c) { return (c & 1) != 0; }));
}

void drop_from_page_cache(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw std::runtime_error("open " + path.string());
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

// A 64 MiB embedding, dropped from the page cache: inspecting the directory brings none of its
// pages back (reading it, through the mapping or not, would bring every one).
TEST(ModelInfo, ReadsNoTensorData) {
  TempDir tmp;
  const fs::path dir = test::copy_fixture("llama_mha", tmp, "big");
  const int64_t rows = int64_t{1} << 18, hidden = 64;
  const std::string header = nlohmann::json{
      {"model.layers.0.self_attn.q_proj.weight", {{"dtype", "F32"}, {"shape", {hidden, hidden}},
                                                  {"data_offsets", {0, hidden * hidden * 4}}}},
      {"model.embed_tokens.weight", {{"dtype", "F32"}, {"shape", {rows, hidden}},
                                     {"data_offsets", {hidden * hidden * 4, hidden * hidden * 4 + rows * hidden * 4}}}},
  }.dump();
  const fs::path file = dir / "model.safetensors";
  test::write_safetensors(file, header, std::string(static_cast<size_t>((hidden * hidden + rows * hidden) * 4), '\1'));
  const size_t from = size_t{4} << 20;  // past the header and any read-ahead after it
  drop_from_page_cache(file);
  if (resident_pages(file, from) > 16) GTEST_SKIP() << "this file system keeps the file in memory";
  const ModelInfo info = inspect_model(dir);
  EXPECT_EQ(info.stored_bytes, static_cast<uint64_t>((hidden * hidden + rows * hidden) * 4));
  EXPECT_EQ(info.weight_dtype, DType::F32);
  EXPECT_LE(resident_pages(file, from), 16u);
}

}  // namespace
}  // namespace kvinfer
