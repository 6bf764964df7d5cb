// kvinfer-kv-plan: the memory a model's KV cache needs (per token, per sequence, for a batch)
// and its weights as stored, read from a GGUF file, a HF model directory or a bare config.json
// without loading any weights (kvinfer::inspect_model: the public API only). The cache figures
// come from kvinfer::plan_kv_bytes, the function that sizes real caches (KvCache::bytes() equals
// it), so the plan is what a run will allocate: a sliding-window layer's ring of rows included.
#include <cstdio>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "kvinfer/model_info.h"

namespace {

namespace fs = std::filesystem;

uint64_t checked_product(uint64_t a, int64_t b, const char* what) {
  uint64_t r = 0;
  if (__builtin_mul_overflow(a, static_cast<uint64_t>(b), &r))
    throw tool::UsageError(fmt::format("{}: {} sequences of this size do not fit in 64 bits of bytes", what,
                                       kvinfer::format_count(b)));
  return r;
}

std::string bytes_text(uint64_t v) {
  return fmt::format("{} bytes ({})", kvinfer::format_count(static_cast<int64_t>(v)), kvinfer::format_bytes(v));
}

int64_t first_windowed(const kvinfer::ModelConfig& c) {
  for (int64_t l = 0; l < c.num_layers; ++l)
    if (c.layer_window(l) > 0) return l;
  return 0;
}

std::string attention_kind(const kvinfer::ModelConfig& c) {
  if (c.num_kv_heads == c.num_heads) return "MHA";
  if (c.num_kv_heads == 1) return "MQA";
  return fmt::format("GQA, {} query heads per KV head", c.group_size());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kvinfer-kv-plan: KV cache and weight memory of a model, from its config alone", "kvinfer-kv-plan"};
  std::string model, kv_dtype_name = "f16";
  std::optional<int64_t> tokens;
  int64_t batch = 1;
  bool json = false;
  cli::add_model_option(app, model);
  app.add_option("-n,--tokens", tokens,
                 "tokens per sequence, at least 1 (default: the model's context length; more is planned, and "
                 "marked as beyond it)")
      ->check(tool::at_least(1));
  app.add_option("-b,--batch", batch, "sequences, each with its own cache; at least 1")
      ->check(tool::at_least(1))
      ->capture_default_str();
  app.add_option("--kv-dtype", kv_dtype_name,
                 "cache element type of the headline figures: f32, f16, bf16, int8, fp8 (the table after them lists "
                 "every type)")
      ->capture_default_str();
  app.add_flag("--json", json, "print one JSON object instead of the table");
  app.footer(tool::kExitStatusHelp);
  return tool::run(app, argc, argv, [&] {
    const kvinfer::DType dtype = [&] {
      try {
        return kvinfer::parse_dtype(kv_dtype_name);
      } catch (const kvinfer::Error& e) {
        throw tool::UsageError(fmt::format("--kv-dtype: {}", e.what()));
      }
    }();
    const fs::path path = cli::model_path(model);
    // The headers only: no weight is read (kvinfer::inspect_model).
    const kvinfer::ModelInfo info = kvinfer::inspect_model(path);
    const std::string format(kvinfer::model_format_name(info.format));
    // The weights as stored: a GGUF file's tensors, a directory's safetensors; none for a bare config.
    const uint64_t weights = info.stored_bytes;
    const kvinfer::ModelConfig& c = info.config;
    const int64_t n = tokens.value_or(c.max_position_embeddings);
    const bool beyond = n > c.max_position_embeddings;
    const uint64_t per_token = kvinfer::kv_bytes_per_token(c, dtype);
    const uint64_t per_sequence = kvinfer::plan_kv_bytes(c, n, dtype);
    const uint64_t total = checked_product(per_sequence, batch, "-b/--batch");

    // Every cache type side by side: the 8-bit ones with their rows' scales counted.
    struct Row {
      kvinfer::DType dtype;
      uint64_t per_token, per_sequence, total;
    };
    std::vector<Row> rows;
    for (kvinfer::DType t : {kvinfer::DType::F32, kvinfer::DType::F16, kvinfer::DType::BF16, kvinfer::DType::I8,
                             kvinfer::DType::FP8}) {
      const uint64_t seq = kvinfer::plan_kv_bytes(c, n, t);
      rows.push_back({t, kvinfer::kv_bytes_per_token(c, t), seq, checked_product(seq, batch, "-b/--batch")});
    }

    // Sliding-window layers keep a ring of rows (kv_layer_rows), not every position: a sequence's
    // bytes are then not tokens × the per-token figure, which is one token's rows on every layer.
    int64_t windowed = 0, ring_rows = 0;
    for (int64_t l = 0; l < c.num_layers; ++l)
      if (c.layer_window(l) > 0) ++windowed, ring_rows = kvinfer::kv_layer_rows(c, l, n);
    const bool rings = windowed > 0 && ring_rows < n;  // some layers hold fewer than n positions

    if (json) {
      nlohmann::json every = nlohmann::json::array();
      for (const Row& r : rows)
        every.push_back({{"kv_dtype", kvinfer::dtype_name(r.dtype)},
                         {"bytes_per_token", r.per_token},
                         {"scale_bytes_per_token", 2 * c.num_layers * c.num_kv_heads * kvinfer::kv_scale_bytes(r.dtype)},
                         {"bytes_per_sequence", r.per_sequence},
                         {"bytes_total", r.total}});
      nlohmann::json j = {
          {"model", path.string()}, {"format", format}, {"architecture", kvinfer::architecture_name(c.arch)},
          {"layers", c.num_layers}, {"heads", c.num_heads}, {"kv_heads", c.num_kv_heads}, {"head_dim", c.head_dim},
          {"context_length", c.max_position_embeddings}, {"kv_dtype", kvinfer::dtype_name(dtype)}, {"tokens", n},
          {"beyond_context", beyond}, {"batch", batch}, {"bytes_per_token", per_token},
          {"bytes_per_sequence", per_sequence}, {"bytes_total", total}, {"weight_bytes", nullptr}};
      if (info.has_weights) j["weight_bytes"] = weights;
      j["windowed_layers"] = windowed;
      j["window"] = windowed > 0 ? nlohmann::json(*c.sliding_window) : nlohmann::json(nullptr);
      // The positions each windowed layer keeps of `tokens`: its ring, or all of them when fewer.
      j["ring_rows"] = windowed > 0 ? nlohmann::json(ring_rows) : nlohmann::json(nullptr);
      j["every_kv_dtype"] = every;
      // Names from a stranger's file may hold invalid UTF-8: replaced, not thrown on.
      tool::write_stdout(j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
      return tool::kExitOk;
    }
    std::string out;
    out.append(fmt::format("model           {} ({})\n", tool::printable(path.string()), format));
    out.append(fmt::format("architecture    {}: {} layers, {} heads, {} KV heads ({}), head_dim {}\n",
                           kvinfer::architecture_name(c.arch), c.num_layers, c.num_heads, c.num_kv_heads,
                           attention_kind(c), c.head_dim));
    out.append(fmt::format("context length  {} tokens\n", kvinfer::format_count(c.max_position_embeddings)));
    out.append(fmt::format("kv dtype        {}\n", kvinfer::dtype_name(dtype)));
    out.append(fmt::format("per token       {}{}\n", bytes_text(per_token),
                           rings ? ": one token's rows on every layer (a step's write); the rings make a sequence less "
                                   "than tokens × this"
                                 : ""));
    out.append(fmt::format("per sequence    {} for {} tokens{}\n", bytes_text(per_sequence), kvinfer::format_count(n),
                           beyond ? " (beyond the model's context length: a run needs --extend-context)" : ""));
    out.append(fmt::format("total           {} for {} sequence{}\n", bytes_text(total), kvinfer::format_count(batch),
                           batch == 1 ? "" : "s"));
    if (windowed > 0) {
      const int64_t full_ring = kvinfer::kv_layer_rows(c, first_windowed(c), std::numeric_limits<int64_t>::max());
      out.append(fmt::format("windows         {} of {} layers attend to the last {} positions: each keeps {}\n",
                             windowed, c.num_layers, kvinfer::format_count(*c.sliding_window),
                             rings ? fmt::format("a ring of {} rows, not {}", kvinfer::format_count(ring_rows),
                                                 kvinfer::format_count(n))
                                   : fmt::format("all {} (a ring of {} rows beyond that)", kvinfer::format_count(n),
                                                 kvinfer::format_count(full_ring))));
    }
    if (info.has_weights)
      out.append(fmt::format("weights         {} as stored\n", bytes_text(weights)));
    else
      out.append(info.format == kvinfer::ModelFormat::ConfigJson
                     ? "weights         - (a bare config.json names no weights)\n"
                     : "weights         - (no model.safetensors or index in the directory)\n");
    out.append(fmt::format("\nevery cache type, {} tokens × {} sequence{} (int8 and fp8: an f32 scale per row included)\n",
                           kvinfer::format_count(n), kvinfer::format_count(batch), batch == 1 ? "" : "s"));
    out.append(fmt::format("{:<6} {:>24} {:>28} {:>28} {:>7}\n", "dtype", "per token", "per sequence", "total", "vs f16"));
    const double f16 = static_cast<double>(rows[1].per_sequence);
    for (const Row& r : rows)
      out.append(fmt::format("{:<6} {:>24} {:>28} {:>28} {:>6.3f}×\n", kvinfer::dtype_name(r.dtype),
                             bytes_text(r.per_token), bytes_text(r.per_sequence), bytes_text(r.total),
                             static_cast<double>(r.per_sequence) / f16));
    tool::write_stdout(out);
    return tool::kExitOk;
  });
}
