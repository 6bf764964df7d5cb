// kvinfer-kv-plan as a user runs it: on the published configs of tests/data/configs (the figures
// of docs/kv-cache.md), on fixture model directories (weights = the safetensors tensor bytes), on
// GGUF model fixtures, --json against the table, and one-line errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "formats/gguf.h"
#include "formats/safetensors.h"
#include "kvinfer/kvinfer.h"
#include "run_binary.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kData = KVINFER_TEST_DATA;
constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kGiB = uint64_t{1} << 30;

using kvinfer::test::Output;
using kvinfer::test::shell_quote;

// Runs kvinfer-kv-plan with `args`; `env` ("NAME=value") is set for it alone.
Output run(const std::vector<std::string>& args, const std::string& env = "") {
  return kvinfer::test::run_binary(KVINFER_KV_PLAN_BIN, args, "", env);
}

json plan(const std::vector<std::string>& args) {
  std::vector<std::string> a = args;
  a.push_back("--json");
  Output r = run(a);
  EXPECT_EQ(r.code, 0) << r.err;
  return json::parse(r.out);
}

std::string config(const std::string& name) { return (kData / "configs" / (name + ".json")).string(); }

// The table's exact byte counts: label -> the first number on its line, thousands separators removed.
std::map<std::string, uint64_t> table_numbers(const std::string& table) {
  std::map<std::string, uint64_t> out;
  std::istringstream in(table);
  std::string line;
  while (std::getline(in, line)) {
    const size_t gap = line.find("  ");
    if (gap == std::string::npos) continue;
    const std::string label = line.substr(0, gap);
    std::string rest = line.substr(line.find_first_not_of(' ', gap)), digits;
    for (char c : rest) {
      if (std::isdigit(static_cast<unsigned char>(c)))
        digits.push_back(c);
      else if (c != ',')
        break;
    }
    if (!digits.empty()) out[label] = std::stoull(digits);
  }
  return out;
}

uint64_t safetensors_data_bytes(const fs::path& file) {
  const kvinfer::SafetensorsFile st(file);
  uint64_t sum = 0;
  for (const auto& [name, t] : st.tensors()) sum += t.bytes;
  // Independently of the reader: the data section is what follows the 8-byte length and the header.
  std::ifstream in(file, std::ios::binary);
  uint64_t header = 0;
  in.read(reinterpret_cast<char*>(&header), sizeof header);
  EXPECT_EQ(sum, fs::file_size(file) - 8 - header) << file;
  return sum;
}

// docs/kv-cache.md, "Real models": f16 bytes per token and max context of each published config;
// a sequence is tokens × that but for Mistral, whose window of 4,096 keeps a ring of 4,607 rows.
TEST(KvPlanCli, PublishedConfigsGiveTheDocumentedFigures) {
  const struct {
    const char* name;
    uint64_t per_token;
    int64_t context;
    int64_t rows;  // positions each layer holds at the context length
  } rows[] = {{"llama-2-7b", 524'288, 4096, 4096},          {"mistral-7b-v0.1", 131'072, 32768, 4607},
              {"llama-3-8b", 131'072, 8192, 8192},          {"llama-3.1-8b-instruct", 131'072, 131072, 131072},
              {"qwen2.5-0.5b-instruct", 12'288, 32768, 32768}, {"smollm2-135m-instruct", 23'040, 8192, 8192}};
  for (const auto& row : rows) {
    SCOPED_TRACE(row.name);
    const json j = plan({"-m", config(row.name)});
    EXPECT_EQ(j["format"], "config_json");
    EXPECT_EQ(j["kv_dtype"], "f16");
    EXPECT_EQ(j["bytes_per_token"].get<uint64_t>(), row.per_token);
    EXPECT_EQ(j["context_length"].get<int64_t>(), row.context);
    EXPECT_EQ(j["tokens"].get<int64_t>(), row.context);  // -n defaults to the context length
    EXPECT_EQ(j["bytes_per_sequence"].get<uint64_t>(), row.per_token * static_cast<uint64_t>(row.rows));
    EXPECT_EQ(j["bytes_total"], j["bytes_per_sequence"]);  // -b defaults to 1
    EXPECT_TRUE(j["weight_bytes"].is_null());
    // The library's plan, the one KvCache sizes itself with.
    const kvinfer::ModelConfig cfg = kvinfer::load_config(config(row.name));
    EXPECT_EQ(j["bytes_per_sequence"].get<uint64_t>(), kvinfer::plan_kv_bytes(cfg, row.context, kvinfer::DType::F16));
  }
}

TEST(KvPlanCli, Llama2At4096TokensIsTwoGiBAndScales) {
  auto llama2 = [](const char* dtype) {
    return plan({"-m", config("llama-2-7b"), "-n", "4096", "--kv-dtype", dtype})["bytes_per_sequence"].get<uint64_t>();
  };
  EXPECT_EQ(plan({"-m", config("llama-2-7b"), "-n", "4096"})["bytes_per_sequence"].get<uint64_t>(), 2 * kGiB);
  EXPECT_EQ(llama2("f32"), 4 * kGiB);
  EXPECT_EQ(llama2("bf16"), 2 * kGiB);
  const json batch = plan({"--model", config("mistral-7b-v0.1"), "--tokens", "4096", "--batch", "8"});
  EXPECT_EQ(batch["bytes_per_sequence"].get<uint64_t>(), 512 * kMiB);
  EXPECT_EQ(batch["bytes_total"].get<uint64_t>(), 4 * kGiB);
  EXPECT_EQ(batch["batch"], 8);
}

TEST(KvPlanCli, ModelDirectoryWeightsAreTheSafetensorsTensorBytes) {
  const fs::path single = kData / "models" / "llama_gqa4";
  const json j = plan({"-m", single.string(), "-n", "100"});
  EXPECT_EQ(j["format"], "hf_directory");
  EXPECT_EQ(j["weight_bytes"].get<uint64_t>(), safetensors_data_bytes(single / "model.safetensors"));
  const kvinfer::ModelConfig cfg = kvinfer::load_config(single / "config.json");
  EXPECT_EQ(j["bytes_per_sequence"].get<uint64_t>(), kvinfer::plan_kv_bytes(cfg, 100, kvinfer::DType::F16));
  EXPECT_EQ(j["kv_heads"], cfg.num_kv_heads);

  const fs::path sharded = kData / "models" / "llama_sharded";
  uint64_t shards = 0, files = 0;
  for (const auto& e : fs::directory_iterator(sharded)) {
    const std::string name = e.path().filename().string();
    if (name.starts_with("model-") && name.ends_with(".safetensors")) {
      shards += safetensors_data_bytes(e.path());
      ++files;
    }
  }
  ASSERT_GT(files, 1u);
  EXPECT_EQ(plan({"-m", sharded.string()})["weight_bytes"].get<uint64_t>(), shards);
}

// A GGUF file gives the same shape as the HF directory it was converted from, and its weights
// are its tensors as stored (quantised blocks included).
TEST(KvPlanCli, GgufModelsGiveTheirDirectorysShapeAndStoredBytes) {
  const json dir = plan({"-m", (kData / "models" / "llama_gqa4").string(), "-n", "64"});
  for (const char* file : {"llama_gqa4.f32.gguf", "llama_gqa4.q8_0.gguf"}) {
    SCOPED_TRACE(file);
    const fs::path path = kData / "gguf" / "models" / file;
    const json j = plan({"-m", path.string(), "-n", "64"});
    EXPECT_EQ(j["format"], "gguf");
    for (const char* key : {"layers", "heads", "kv_heads", "head_dim", "bytes_per_token", "bytes_per_sequence"})
      EXPECT_EQ(j[key], dir[key]) << key;
    // Bytes from each tensor's shape and type, not the reader's byte count.
    uint64_t expected = 0;
    const kvinfer::GgufFile gguf(path);
    for (const kvinfer::GgufTensorInfo& t : gguf.tensors()) {
      const kvinfer::GgmlTypeInfo& info = kvinfer::ggml_type_info(t.type);
      expected += static_cast<uint64_t>(t.numel() / info.block_elements * info.block_bytes);
    }
    EXPECT_EQ(j["weight_bytes"].get<uint64_t>(), expected);
  }
  // f32 GGUF tensors hold the same values as the f32 safetensors, so the same bytes.
  const fs::path f32 = kData / "gguf" / "models" / "llama_gqa4.f32.gguf";
  EXPECT_EQ(plan({"-m", f32.string()})["weight_bytes"], dir["weight_bytes"]);
}

// Phi-3 and Phi-4-mini (fused projections, partial rotary), from safetensors and GGUF: the plan
// is the bytes of the cache a loaded model makes.
TEST(KvPlanCli, Phi3PlansAreTheLoadedModelsCacheBytes) {
  for (const fs::path& path : {kData / "models" / "phi3_longrope", kData / "gguf" / "models" / "phi3_longrope.f32.gguf",
                               kData / "models" / "phi4_partial_rotary",
                               kData / "gguf" / "models" / "phi4_partial_rotary.q8_0.gguf"}) {
    SCOPED_TRACE(path.string());
    const json j = plan({"-m", path.string(), "-n", "40"});
    const auto model = kvinfer::Model::load(path, {.device = kvinfer::Device::CPU});
    EXPECT_EQ(j["kv_heads"], model->config().num_kv_heads);
    EXPECT_EQ(j["head_dim"], model->config().head_dim);
    EXPECT_EQ(j["bytes_per_sequence"].get<uint64_t>(), kvinfer::KvCache(*model, 40, kvinfer::DType::F16).bytes());
  }
}

// Qwen3-MoE (head_dim 32 ≠ hidden / heads, experts, a dense layer), from safetensors and GGUF:
// the plan is the attention's cache, the bytes of the cache a loaded model makes, and the
// weights are every expert's.
TEST(KvPlanCli, Qwen3MoePlansAreTheLoadedModelsCacheBytes) {
  for (const fs::path& path : {kData / "models" / "qwen3_moe_tiny", kData / "gguf" / "models" / "qwen3_moe_tiny.f32.gguf",
                               kData / "gguf" / "models" / "qwen3_moe_tiny.q8_0.gguf"}) {
    SCOPED_TRACE(path.string());
    const json j = plan({"-m", path.string(), "-n", "40"});
    const auto model = kvinfer::Model::load(path, {.device = kvinfer::Device::CPU});
    EXPECT_EQ(j["kv_heads"], 2);
    EXPECT_EQ(j["head_dim"], 32);
    EXPECT_EQ(j["bytes_per_token"].get<uint64_t>(), uint64_t{2 * 3 * 2 * 32 * 2});  // K and V, 3 layers, f16
    EXPECT_EQ(j["bytes_per_sequence"].get<uint64_t>(), kvinfer::KvCache(*model, 40, kvinfer::DType::F16).bytes());
    EXPECT_EQ(j["weight_bytes"].get<uint64_t>(), model->weight_bytes());
  }
}

// Windowed layers are named with the rows each keeps: gemma3_tiny's sliding layers and
// mistral_window's every layer keep a ring (window + min(window, 512) − 1 rows) beyond it, every
// position below it; none for llama_gqa4. The per-sequence bytes are the plan's, rings included.
TEST(KvPlanCli, SlidingWindowLayersAreNamed) {
  for (const char* name : {"gemma3_tiny", "mistral_window", "llama_gqa4"}) {
    SCOPED_TRACE(name);
    const fs::path dir = kData / "models" / name;
    const kvinfer::ModelConfig cfg = kvinfer::load_config(dir / "config.json");
    int64_t windowed = 0;
    for (int64_t l = 0; l < cfg.num_layers; ++l) windowed += cfg.layer_window(l) > 0 ? 1 : 0;
    for (int64_t n : {5, 100}) {
      const std::vector<std::string> args = {"-m", dir.string(), "-n", std::to_string(n)};
      const json j = plan(args);
      EXPECT_EQ(j["windowed_layers"].get<int64_t>(), windowed);
      EXPECT_EQ(j["bytes_per_sequence"].get<uint64_t>(), kvinfer::plan_kv_bytes(cfg, n, kvinfer::DType::F16));
      const Output table = run(args);
      if (windowed == 0) {
        EXPECT_TRUE(j["window"].is_null());
        EXPECT_TRUE(j["ring_rows"].is_null());
        EXPECT_EQ(table.out.find("windows"), std::string::npos) << table.out;
        EXPECT_EQ(table.out.find("rings"), std::string::npos) << table.out;
        continue;
      }
      const int64_t w = *cfg.sliding_window, ring = w + std::min<int64_t>(w, 512) - 1;
      EXPECT_EQ(j["window"].get<int64_t>(), w);
      EXPECT_EQ(j["ring_rows"].get<int64_t>(), std::min(n, ring));
      // Computed here: the windowed layers' rows, every position on the others.
      const uint64_t row = 2 * static_cast<uint64_t>(cfg.num_kv_heads * cfg.head_dim) * 2;  // f16 K and V
      EXPECT_EQ(j["bytes_per_sequence"].get<uint64_t>(),
                row * static_cast<uint64_t>(windowed * std::min(n, ring) + (cfg.num_layers - windowed) * n));
      const std::string line = fmt::format("windows         {} of {} layers attend to the last {} positions: each keeps ",
                                           windowed, cfg.num_layers, w);
      EXPECT_NE(table.out.find(n > ring ? fmt::format("{}a ring of {} rows, not {}\n", line, ring, n)
                                        : fmt::format("{}all {} (a ring of {} rows beyond that)\n", line, n, ring)),
                std::string::npos)
          << table.out;
      // Not linear: the per-token line says so when a ring holds fewer rows than tokens.
      EXPECT_EQ(table.out.find("the rings make a sequence less than tokens × this") != std::string::npos, n > ring)
          << table.out;
    }
  }
}

// Gemma 3 270M's shape from a bare config.json (18 layers, 15 windowed to 512 positions, 1 KV
// head of 256): at its 32,768 tokens, 3 layers of every position and 15 rings of 1,023 rows.
TEST(KvPlanCli, Gemma3ShapeCountsItsRings) {
  json c = json::parse(std::ifstream(kData / "models" / "gemma3_tiny" / "config.json"));
  c["num_hidden_layers"] = 18;
  c["num_key_value_heads"] = 1;
  c["head_dim"] = 256;
  c["query_pre_attn_scalar"] = 256;
  c["sliding_window"] = 512;
  c["max_position_embeddings"] = 32768;
  c["layer_types"] = json::array();
  for (int l = 0; l < 18; ++l) c["layer_types"].push_back((l + 1) % 6 == 0 ? "full_attention" : "sliding_attention");
  const fs::path file = fs::temp_directory_path() / fmt::format("kvinfer-kv-plan-gemma3-{}.json", ::getpid());
  std::ofstream(file) << c.dump();
  const json j = plan({"-m", file.string()});
  const Output table = run({"-m", file.string()});
  fs::remove(file);
  const uint64_t row = 2 * 1 * 256 * 2;  // f16 K and V of one layer and position
  EXPECT_EQ(j["tokens"].get<int64_t>(), 32768);
  EXPECT_EQ(j["bytes_per_token"].get<uint64_t>(), 18 * row);
  EXPECT_EQ(j["bytes_per_sequence"].get<uint64_t>(), 3 * 32768 * row + 15 * 1023 * row);  // 116,376,576
  EXPECT_EQ(j["windowed_layers"].get<int64_t>(), 15);
  EXPECT_EQ(j["ring_rows"].get<int64_t>(), 1023);
  EXPECT_NE(table.out.find("per sequence    116,376,576 bytes (111.0 MiB) for 32,768 tokens"), std::string::npos)
      << table.out;
  EXPECT_NE(table.out.find("windows         15 of 18 layers attend to the last 512 positions: each keeps a ring of "
                           "1,023 rows, not 32,768"),
            std::string::npos)
      << table.out;
}

TEST(KvPlanCli, TableShowsTheJsonFigures) {
  const std::vector<std::vector<std::string>> cases = {
      {"-m", config("llama-3.1-8b-instruct"), "-n", "32768", "-b", "4", "--kv-dtype", "bf16"},
      {"-m", (kData / "models" / "llama_sharded").string()},
      {"-m", (kData / "gguf" / "models" / "qwen2_bias.q8_0.gguf").string(), "-b", "3"},
  };
  for (const auto& args : cases) {
    SCOPED_TRACE(args[1]);
    Output table = run(args);
    ASSERT_EQ(table.code, 0) << table.err;
    const json j = plan(args);
    const auto n = table_numbers(table.out);
    EXPECT_EQ(n.at("per token"), j["bytes_per_token"].get<uint64_t>()) << table.out;
    EXPECT_EQ(n.at("per sequence"), j["bytes_per_sequence"].get<uint64_t>()) << table.out;
    EXPECT_EQ(n.at("total"), j["bytes_total"].get<uint64_t>()) << table.out;
    if (j["weight_bytes"].is_null())
      EXPECT_EQ(n.count("weights"), 0u) << table.out;
    else
      EXPECT_EQ(n.at("weights"), j["weight_bytes"].get<uint64_t>()) << table.out;
    EXPECT_EQ(n.at("context length"), j["context_length"].get<uint64_t>()) << table.out;
    EXPECT_NE(table.out.find(fmt::format("for {} tokens", kvinfer::format_count(j["tokens"].get<int64_t>()))),
              std::string::npos)
        << table.out;
    EXPECT_NE(table.out.find("kv dtype        " + j["kv_dtype"].get<std::string>()), std::string::npos) << table.out;
  }
  Output bare = run({"-m", config("llama-2-7b")});
  EXPECT_NE(bare.out.find("per sequence    2,147,483,648 bytes (2.00 GiB) for 4,096 tokens"), std::string::npos)
      << bare.out;
  EXPECT_NE(bare.out.find("weights         - "), std::string::npos) << bare.out;
}

TEST(KvPlanCli, KvinferModelIsTheDefault) {
  Output r = run({"--json"}, "KVINFER_MODEL=" + shell_quote(config("qwen2.5-0.5b-instruct")));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["bytes_per_token"], 12'288);
}

TEST(KvPlanCli, ErrorsAreOneLineAndNonZero) {
  const std::string gguf = (kData / "gguf" / "models" / "llama_gqa4.q8_0.gguf").string();
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"-m", (kData / "missing").string()}, "missing"},
      {{"-m", (kData / "configs").string()}, "config.json"},            // a directory without config.json
      {{"-m", (kData / "gguf" / "types.gguf").string()}, "types.gguf"},  // a GGUF that is no model
      {{"-m", gguf, "--kv-dtype", "q8_0"}, "--kv-dtype: unknown dtype 'q8_0'"},
      {{"-m", gguf, "-n", "0"}, "--tokens"},
      {{"-m", gguf, "-b", "-2"}, "--batch"},
      {{"-m", gguf, "-n", "lots"}, "--tokens"},
      {{"-m", gguf, "--no-such-flag"}, "--no-such-flag"},
      {{"-m", config("llama-3.1-8b-instruct"), "-b", "9000000000000000000"}, "64 bits"},
  };
  for (const auto& [args, mention] : bad) {
    Output r = run(args);
    EXPECT_NE(r.code, 0) << args.back();
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(r.err.rfind("kvinfer-kv-plan: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(mention), std::string::npos) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
  Output r = run({}, "KVINFER_MODEL=" + shell_quote((kData / "missing.gguf").string()));
  EXPECT_NE(r.code, 0);
  EXPECT_EQ(r.err.rfind("kvinfer-kv-plan: $KVINFER_MODEL: ", 0), 0u) << r.err;
}

TEST(KvPlanCli, HelpListsEveryOption) {
  Output r = run({"--help"});
  ASSERT_EQ(r.code, 0);
  for (const char* opt : {"-m,--model", "-n,--tokens", "-b,--batch INT=1", "--kv-dtype TEXT=f16", "--json",
                          "KVINFER_MODEL", "tools/fetch_model.sh"})
    EXPECT_NE(r.out.find(opt), std::string::npos) << opt;
}

}  // namespace
