// kvinfer-kv-plan: the memory a model's KV cache needs (per token, per sequence, for a batch)
// and its weights as stored, read from a GGUF file, a HF model directory or a bare config.json
// without loading any weights. The cache figures come from kvinfer::plan_kv_bytes, the function
// that sizes real caches (KvCache::bytes() equals it), so the plan is what a run will allocate.
#include <cstdio>
#include <fstream>
#include <optional>
#include <set>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "formats/gguf.h"
#include "formats/gguf_config.h"
#include "formats/safetensors.h"

namespace {

namespace fs = std::filesystem;

struct Source {
  std::string format;  // "gguf", "hf_directory" or "config_json"
  kvinfer::ModelConfig config;
  std::optional<uint64_t> weight_bytes;  // none for a bare config.json
};

bool is_gguf(const fs::path& p) {
  char magic[4] = {};
  std::ifstream in(p, std::ios::binary);
  in.read(magic, sizeof magic);
  return in.gcount() == 4 && std::string_view(magic, 4) == "GGUF";
}

uint64_t safetensors_bytes(const fs::path& file) {
  const kvinfer::SafetensorsFile st(file);
  uint64_t sum = 0;
  for (const auto& [name, t] : st.tensors()) sum += t.bytes;
  return sum;
}

// The weights of a HF directory: model.safetensors, or every shard the index names. Only the
// headers are read (the files are mapped, not paged in).
std::optional<uint64_t> directory_weight_bytes(const fs::path& dir) {
  const fs::path index = dir / "model.safetensors.index.json";
  if (fs::exists(index)) {
    std::ifstream in(index);
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_discarded() || !j.contains("weight_map") || !j["weight_map"].is_object())
      throw kvinfer::Error(fmt::format("{}: not JSON with a 'weight_map' object", index.string()));
    std::set<std::string> shards;
    for (const auto& [tensor, shard] : j["weight_map"].items()) {
      if (!shard.is_string())
        throw kvinfer::Error(fmt::format("{}: weight_map['{}'] is not a file name", index.string(), tensor));
      shards.insert(shard.get<std::string>());
    }
    uint64_t sum = 0;
    for (const std::string& shard : shards) sum += safetensors_bytes(dir / shard);
    return sum;
  }
  if (fs::exists(dir / "model.safetensors")) return safetensors_bytes(dir / "model.safetensors");
  return std::nullopt;
}

Source read_source(const fs::path& path) {
  if (!fs::exists(path)) throw kvinfer::Error(fmt::format("{}: no such file or directory", path.string()));
  if (fs::is_directory(path)) {
    if (!fs::exists(path / "config.json"))
      throw kvinfer::Error(fmt::format("{}: a model directory needs a config.json", path.string()));
    return {"hf_directory", kvinfer::load_config(path / "config.json"), directory_weight_bytes(path)};
  }
  if (is_gguf(path)) {
    const kvinfer::GgufFile file(path);
    uint64_t sum = 0;
    for (const kvinfer::GgufTensorInfo& t : file.tensors()) sum += t.bytes;
    return {"gguf", kvinfer::gguf_config(file), sum};
  }
  return {"config_json", kvinfer::load_config(path), std::nullopt};
}

uint64_t checked_product(uint64_t a, int64_t b, const char* what) {
  uint64_t r = 0;
  if (__builtin_mul_overflow(a, static_cast<uint64_t>(b), &r))
    throw kvinfer::Error(fmt::format("{} {}: the total does not fit in 64 bits", what, b));
  return r;
}

std::string grouped(uint64_t v) {  // 2147483648 -> "2,147,483,648"
  std::string digits = std::to_string(v), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

std::string bytes_text(uint64_t v) { return fmt::format("{} bytes ({})", grouped(v), kvinfer::format_bytes(v)); }

std::string attention_kind(const kvinfer::ModelConfig& c) {
  if (c.num_kv_heads == c.num_heads) return "MHA";
  if (c.num_kv_heads == 1) return "MQA";
  return fmt::format("GQA, {} query heads per KV head", c.group_size());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kvinfer-kv-plan: KV cache and weight memory of a model, from its config alone", "kvinfer-kv-plan"};
  cli::one_line_errors(app);
  std::string model, kv_dtype_name = "f16";
  std::optional<int64_t> tokens;
  int64_t batch = 1;
  bool json = false;
  cli::add_model_option(app, model);
  app.add_option("-n,--tokens", tokens, "tokens per sequence, at least 1 (default: the model's context length)");
  app.add_option("-b,--batch", batch, "sequences, each with its own cache; at least 1")->capture_default_str();
  app.add_option("--kv-dtype", kv_dtype_name, "cache element type: f32, f16, bf16")->capture_default_str();
  app.add_flag("--json", json, "print one JSON object instead of the table");
  CLI11_PARSE(app, argc, argv);

  try {
    if (tokens && *tokens < 1) throw kvinfer::Error(fmt::format("--tokens must be at least 1, got {}", *tokens));
    if (batch < 1) throw kvinfer::Error(fmt::format("--batch must be at least 1, got {}", batch));
    const kvinfer::DType dtype = [&] {
      try {
        return kvinfer::parse_dtype(kv_dtype_name);
      } catch (const kvinfer::Error& e) {
        throw kvinfer::Error(fmt::format("--kv-dtype: {}", e.what()));
      }
    }();
    const fs::path path = cli::model_path(model);
    const Source src = read_source(path);
    const kvinfer::ModelConfig& c = src.config;
    const int64_t n = tokens.value_or(c.max_position_embeddings);
    const uint64_t per_token = kvinfer::kv_bytes_per_token(c, dtype);
    const uint64_t per_sequence = kvinfer::plan_kv_bytes(c, n, dtype);
    const uint64_t total = checked_product(per_sequence, batch, "--batch");

    if (json) {
      nlohmann::json j = {
          {"model", path.string()}, {"format", src.format}, {"architecture", kvinfer::architecture_name(c.arch)},
          {"layers", c.num_layers}, {"heads", c.num_heads}, {"kv_heads", c.num_kv_heads}, {"head_dim", c.head_dim},
          {"context_length", c.max_position_embeddings}, {"kv_dtype", kvinfer::dtype_name(dtype)}, {"tokens", n},
          {"batch", batch}, {"bytes_per_token", per_token}, {"bytes_per_sequence", per_sequence},
          {"bytes_total", total}, {"weight_bytes", nullptr}};
      if (src.weight_bytes) j["weight_bytes"] = *src.weight_bytes;
      std::printf("%s\n", j.dump(1).c_str());
      return 0;
    }
    std::string out;
    out.append(fmt::format("model           {} ({})\n", path.string(), src.format));
    out.append(fmt::format("architecture    {}: {} layers, {} heads, {} KV heads ({}), head_dim {}\n",
                           kvinfer::architecture_name(c.arch), c.num_layers, c.num_heads, c.num_kv_heads,
                           attention_kind(c), c.head_dim));
    out.append(fmt::format("context length  {} tokens\n", c.max_position_embeddings));
    out.append(fmt::format("kv dtype        {}\n", kvinfer::dtype_name(dtype)));
    out.append(fmt::format("per token       {}\n", bytes_text(per_token)));
    out.append(fmt::format("per sequence    {} for {} tokens\n", bytes_text(per_sequence), n));
    out.append(fmt::format("total           {} for {} sequence{}\n", bytes_text(total), batch, batch == 1 ? "" : "s"));
    if (src.weight_bytes)
      out.append(fmt::format("weights         {} as stored\n", bytes_text(*src.weight_bytes)));
    else
      out.append(src.format == "config_json" ? "weights         - (a bare config.json names no weights)\n"
                                             : "weights         - (no model.safetensors or index in the directory)\n");
    std::fputs(out.c_str(), stdout);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvinfer-kv-plan: %s\n", e.what());
    return 1;
  }
  return 0;
}
