// kvinfer-bench output (bench_report.h): table, JSON, CSV, SVG.
#include "bench_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "kvinfer/kv_plan.h"
#include "svg_plot.h"

namespace bench {

namespace {

using json = nlohmann::ordered_json;
namespace fs = std::filesystem;

// One step with everything derived from it.
struct StepRow {
  int64_t step = 0, positions = 0;  // 1-based step; positions attended
  std::optional<double> on_ms, off_ms;
  std::optional<int32_t> on_token, off_token;
  std::optional<uint64_t> on_bytes;  // cache-on decode steps (i >= 2): weights + KV read
  std::optional<double> on_gbps;     // on_bytes / on step time, 1e9 B/s
};

std::vector<StepRow> step_rows(const Report& r) {
  const uint64_t kv_token = kvinfer::kv_bytes_per_token(r.info.config, r.run.kv_dtype);
  std::vector<StepRow> rows;
  for (int64_t i = 1; i <= r.info.tokens; ++i) {
    const auto k = static_cast<size_t>(i - 1);
    StepRow row{i, attended_positions(r.info, i), r.run.on.step_ms[k], r.run.off.step_ms[k], {}, {}, {}, {}};
    if (row.on_ms) row.on_token = r.run.on.tokens[k];
    if (row.off_ms) row.off_token = r.run.off.tokens[k];
    if (row.on_ms && i >= 2) {
      row.on_bytes = r.info.step_weight_bytes + kv_token * static_cast<uint64_t>(row.positions);
      row.on_gbps = static_cast<double>(*row.on_bytes) / (*row.on_ms * 1e-3) / 1e9;
    }
    rows.push_back(row);
  }
  return rows;
}

std::optional<double> median(std::vector<double> v) {
  if (v.empty()) return std::nullopt;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

// Median time of the decode steps (2..N) the mode ran.
std::optional<double> median_decode_ms(const ModeResult& m) {
  std::vector<double> v;
  for (size_t i = 1; i < m.step_ms.size(); ++i)
    if (m.step_ms[i]) v.push_back(*m.step_ms[i]);
  return median(v);
}

std::optional<double> median_gbps(const std::vector<StepRow>& rows) {
  std::vector<double> v;
  for (const StepRow& row : rows)
    if (row.on_gbps) v.push_back(*row.on_gbps);
  return median(v);
}

// The fraction of the probe's bandwidth, when it measured the memory the model reads (CPU).
std::optional<double> fraction(const Report& r, std::optional<double> gbps) {
  if (!gbps || !r.bandwidth || r.info.device != "cpu" || r.bandwidth->gb_per_s <= 0) return std::nullopt;
  return *gbps / r.bandwidth->gb_per_s;
}

std::optional<double> speedup(const Report& r) {
  if (!r.run.on.ran || !r.run.off.ran || !tokens_match(r) || r.run.on.total_ms <= 0) return std::nullopt;
  return r.run.off.total_ms / r.run.on.total_ms;
}

uint64_t used_positions(const BenchInfo& info) {  // the cache at the end: all but the last token
  return static_cast<uint64_t>(info.prompt_tokens + info.tokens - 1);
}

// Token positions each mode runs through the model over all N steps: cache on prefills P then
// decodes N - 1; cache off prefills P + i - 1 at step i.
struct TokenWork {
  uint64_t on = 0, off = 0;
};
TokenWork token_work(const BenchInfo& in) {
  const auto p = static_cast<uint64_t>(in.prompt_tokens), n = static_cast<uint64_t>(in.tokens);
  return {p + n - 1, n * p + n * (n - 1) / 2};
}

std::string estimate_note(const Report& r) {
  return fmt::format(
      "estimated from {} of {} steps (--off-every {}: the steps between measured ones "
      "interpolated linearly, trapezoid rule in step index)",
      r.run.off.steps_run, r.info.tokens, r.info.off_every);
}

std::string ms(std::optional<double> v) { return v ? fmt::format("{:.2f} ms", *v) : std::string("-"); }

template <class T>
json opt(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

json mode_json(const Report& r, const ModeResult& m) {
  if (!m.ran) return nullptr;
  json j;
  j["total_s"] = m.total_ms / 1e3;
  j["tokens_per_s"] = m.total_ms > 0 ? static_cast<double>(r.info.tokens) / (m.total_ms / 1e3) : 0.0;
  j["ttft_ms"] = opt(m.step_ms.front());
  j["median_decode_ms"] = opt(median_decode_ms(m));
  j["steps_run"] = m.steps_run;
  j["estimated"] = m.estimated;
  if (m.estimated) j["estimate"] = estimate_note(r);
  j["peak_rss_bytes"] = m.peak_rss.bytes;
  j["peak_rss_scope"] = m.peak_rss.reset ? "this mode" : "since start";
  return j;
}

}  // namespace

uint64_t count_params(const kvinfer::ModelConfig& c) {
  const auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
  const uint64_t h = u(c.hidden_size), q = u(c.num_heads * c.head_dim), kv = u(c.num_kv_heads * c.head_dim),
                 f = u(c.intermediate_size), vocab = u(c.vocab_size);
  const uint64_t norm = c.is_gpt2() ? 2 * h : h;  // LayerNorm: weight and bias; RMSNorm: weight
  uint64_t layer = h * q + 2 * h * kv + q * h + 2 * norm;
  if (c.attention_bias) layer += q + 2 * kv;
  if (c.attention_out_bias) layer += h;
  uint64_t total = u(c.num_layers) * layer + norm + vocab * h * (c.tie_word_embeddings ? 1 : 2);
  for (int64_t l = 0; l < c.num_layers; ++l) {  // the MLPs: dense, or the router and every expert
    if (c.is_moe_layer(l)) {
      const uint64_t e = u(c.moe_intermediate_size), shared = u(c.shared_expert_intermediate_size);
      total += u(c.num_experts) * (h + 3 * h * e) + (shared > 0 ? 3 * h * shared + h : 0);
      continue;
    }
    total += (c.is_gpt2() ? 2 : 3) * h * f;
    if (c.mlp_bias) total += (c.is_gpt2() ? 1 : 2) * f + h;
  }
  if (c.is_gpt2()) total += u(c.max_position_embeddings) * h;  // the learned position table
  return total;
}

int64_t attended_positions(const BenchInfo& info, int64_t step) {
  const int64_t n = info.prompt_tokens + step - 1;
  return info.config.sliding_window ? std::min(n, *info.config.sliding_window) : n;
}

bool tokens_match(const Report& r) { return !r.run.mismatch; }

int64_t middle_decode_step(int64_t tokens) { return tokens < 2 ? 0 : 1 + tokens / 2; }

FloorFigures floor_figures(const Report& r) {
  FloorFigures f;
  if (!r.floor) {
    f.source = "no decode step";
    return f;
  }
  if (const auto ms = median_decode_ms(r.run.on); ms && *ms > 0) f.achieved_tokens_per_s = 1e3 / *ms;
  if (r.info.device == "cpu") {
    if (r.bandwidth) {
      f.gb_per_s = r.bandwidth->gb_per_s;
      f.source = "host read probe";
    } else {
      f.source = "not measured (--no-bandwidth-probe)";
    }
  } else if (!r.device_copy) {
    f.source = "not measured (--no-bandwidth-probe)";
  } else if (r.device_copy->simulated) {
    f.source = "simulated device (the CUDA simulation build): no floor";
  } else {
    f.gb_per_s = r.device_copy->gb_per_s;
    f.source = "device copy";
  }
  if (f.gb_per_s && *f.gb_per_s > 0) {
    f.floor_ms = static_cast<double>(r.floor->bytes.total()) / (*f.gb_per_s * 1e9) * 1e3;
    f.floor_tokens_per_s = 1e3 / *f.floor_ms;
    if (f.achieved_tokens_per_s) f.fraction = *f.achieved_tokens_per_s / *f.floor_tokens_per_s;
  }
  return f;
}

std::string format_table(const Report& r) {
  const BenchInfo& in = r.info;
  const uint64_t kv_token = kvinfer::kv_bytes_per_token(in.config, r.run.kv_dtype);
  std::string s = "kvinfer-bench: KV cache on vs off (greedy decoding, EOS ignored)\n";
  s += fmt::format("model      {}{}\n", in.model,
                   in.synthetic ? fmt::format(" (synthetic, random weights): {}", in.description)
                                : fmt::format(" ({})", kvinfer::architecture_name(in.config.arch)));
  s += fmt::format("params     {:.1f} M ({} layers, hidden {}, vocab {})\n",
                   static_cast<double>(count_params(in.config)) / 1e6, in.config.num_layers, in.config.hidden_size,
                   in.config.vocab_size);
  s += fmt::format("weights    {}, {}; one decode step reads {}\n", in.weight_dtype, kvinfer::format_bytes(in.weight_bytes),
                   kvinfer::format_bytes(in.step_weight_bytes));
  s += fmt::format("device     {}, {} thread{}{}\n", in.device, in.threads, in.threads == 1 ? "" : "s",
                   in.activations == kvinfer::ActivationMode::Exact
                       ? std::string()
                       : fmt::format(", --activations {}", kvinfer::activation_mode_name(in.activations)));
  s += fmt::format("prompt     P = {} tokens ({})\n", in.prompt_tokens, in.prompt_source);
  s += fmt::format("generate   N = {} tokens\n", in.tokens);
  s += fmt::format("kv cache   {}, {} for P + N = {} positions ({} per position); at the end {} positions = {}\n",
                   kvinfer::dtype_name(r.run.kv_dtype), kvinfer::format_bytes(r.run.kv_bytes), in.prompt_tokens + in.tokens,
                   kvinfer::format_bytes(kv_token), used_positions(in), kvinfer::format_bytes(kv_token * used_positions(in)));

  const ModeResult &on = r.run.on, &off = r.run.off;
  const char* star = off.estimated ? " *" : "";
  auto row = [&](const std::string& label, const std::string& a, const std::string& b) {
    s += fmt::format("{:<38}{:>14}{:>16}\n", label, a, b);
  };
  auto both = [&](const std::string& label, auto&& f) {
    row(label, on.ran ? f(on) : std::string("-"), off.ran ? f(off) : std::string("-"));
  };
  s += "\n";
  row("", "cache on", "cache off");
  both("total time",
       [&](const ModeResult& m) { return fmt::format("{:.3f} s{}", m.total_ms / 1e3, &m == &off ? star : ""); });
  both("tokens/s", [&](const ModeResult& m) {
    return fmt::format("{:.2f}{}", static_cast<double>(in.tokens) / (m.total_ms / 1e3), &m == &off ? star : "");
  });
  both(fmt::format("time to first token (step 1, {} pos.)", attended_positions(in, 1)),
       [](const ModeResult& m) { return ms(m.step_ms.front()); });
  for (int64_t p : in.positions)
    if (p > 1)
      both(fmt::format("step {} ({} positions)", p, attended_positions(in, p)),
           [&](const ModeResult& m) { return ms(m.step_ms[static_cast<size_t>(p - 1)]); });
  both("median decode step (2..N)", [](const ModeResult& m) { return ms(median_decode_ms(m)); });
  const bool rss_reset = (!on.ran || on.peak_rss.reset) && (!off.ran || off.peak_rss.reset);
  both(rss_reset ? "peak RSS" : "peak RSS since start",
       [](const ModeResult& m) { return kvinfer::format_bytes(m.peak_rss.bytes); });
  if (off.estimated) s += fmt::format("* cache off: {}\n", estimate_note(r));
  s += "\n";

  if (on.ran && off.ran) {
    if (r.run.mismatch)
      s += fmt::format("same tokens: NO: first mismatch at step {}: cache on {}, cache off {} ({} steps compared)\n",
                       r.run.mismatch->step, r.run.mismatch->on_token, r.run.mismatch->off_token, r.run.compared);
    else
      s += fmt::format("same tokens: yes ({} of {} compared)\n", r.run.compared, in.tokens);
    if (auto x = speedup(r))
      s += fmt::format("speedup (off/on total time): {:.2f}×{}\n", *x, off.estimated ? " (cache off estimated)" : "");
    else
      s += "speedup: not reported, the two modes produced different tokens\n";
  } else {
    s += fmt::format("same tokens: not compared (--mode {})\n", in.mode);
  }
  const TokenWork w = token_work(in);
  s += fmt::format(
      "positions run through the model: cache on {} (P + N - 1), cache off {} (sum of P + i - 1): "
      "{:.1f}× the work\n",
      w.on, w.off, static_cast<double>(w.off) / static_cast<double>(w.on));

  if (r.bandwidth)
    s += fmt::format(
        "memory read bandwidth (probe{}): {:.1f} GB/s (best of {} passes over {}, {} thread{}; median {:.1f})\n",
        in.device == "cpu" ? "" : ", host only", r.bandwidth->gb_per_s, r.bandwidth->passes,
        kvinfer::format_bytes(r.bandwidth->buffer_bytes), r.bandwidth->threads, r.bandwidth->threads == 1 ? "" : "s",
        r.bandwidth->median_gb_per_s);
  else
    s += "memory read bandwidth: not measured (--no-bandwidth-probe)\n";
  if (on.ran && in.tokens >= 2) {
    const std::vector<StepRow> rows = step_rows(r);
    auto bw = [&](std::optional<double> gbps) {
      const auto f = fraction(r, gbps);
      return fmt::format("{:.1f} GB/s{}", gbps.value_or(0), f ? fmt::format(" ({:.0f}% of probe)", *f * 100) : "");
    };
    s += fmt::format("cache-on decode step reads {} of weights + {} of KV per position attended\n",
                     kvinfer::format_bytes(in.step_weight_bytes), kvinfer::format_bytes(kv_token));
    std::string at;
    for (int64_t p : in.positions)
      if (p >= 2)
        at += fmt::format("{}step {}: {}", at.empty() ? "" : "; ", p, bw(rows[static_cast<size_t>(p - 1)].on_gbps));
    s += fmt::format("achieved read bandwidth: median over decode steps {}{}{}\n", bw(median_gbps(rows)),
                     at.empty() ? "" : "; ", at);
    if (r.bandwidth && in.device == "cpu" && in.step_weight_bytes < r.bandwidth->llc_bytes)
      s += fmt::format("(the weights fit in the {} last-level cache: these are cache, not DRAM, figures)\n",
                       kvinfer::format_bytes(r.bandwidth->llc_bytes));
    if (r.bandwidth && in.device != "cpu")
      s += fmt::format("(no fraction of the probe: it measured host memory, the model runs on {})\n", in.device);
  }
  s += format_floor(r);
  return s;
}

std::string format_floor(const Report& r) {
  std::string s;
  if (r.device_copy)
    s += fmt::format("device copy bandwidth: {:.1f} GB/s ({}: D2D cudaMemcpy of {}, read + write, median of {}){}\n",
                     r.device_copy->gb_per_s, r.device_copy->device, kvinfer::format_bytes(r.device_copy->bytes),
                     r.device_copy->reps,
                     r.device_copy->simulated ? "; simulated device: not a GPU measurement" : "");
  if (!r.floor) return s;
  const kvinfer::DecodeStepBytes& b = r.floor->bytes;
  using kvinfer::format_bytes;
  s += fmt::format(
      "decode step bytes (step {}, {} positions): {} = matrices {} + LM head {} + norms/biases {} + embedding row {} "
      "+ KV read {} ({} positions) + KV write {}\n",
      r.floor->step, r.floor->context, kvinfer::format_count(static_cast<int64_t>(b.total())),
      format_bytes(b.layer_matrices), format_bytes(b.lm_head), format_bytes(b.norms_biases),
      format_bytes(b.embedding_rows), format_bytes(b.kv_read), b.positions_read, format_bytes(b.kv_write));
  const FloorFigures f = floor_figures(r);
  const std::string achieved =
      f.achieved_tokens_per_s ? fmt::format("achieved {:.1f} tokens/s", *f.achieved_tokens_per_s) : "achieved -";
  if (f.floor_ms)
    s += fmt::format("decode floor: {:.3f} ms/token = {:.1f} tokens/s (bytes a step / {:.1f} GB/s, {}); {}{}\n",
                     *f.floor_ms, *f.floor_tokens_per_s, *f.gb_per_s, f.source, achieved,
                     f.fraction ? fmt::format(" = {:.1f}% of the floor", *f.fraction * 100) : "");
  else
    s += fmt::format("decode floor: not computed, {}; {}\n", f.source, achieved);
  return s;
}

std::string format_json(const Report& r) {
  const BenchInfo& in = r.info;
  const std::vector<StepRow> rows = step_rows(r);
  const uint64_t kv_token = kvinfer::kv_bytes_per_token(in.config, r.run.kv_dtype);
  json j;
  j["config"] = {{"model", in.model},
                 {"synthetic", in.synthetic},
                 {"description", in.description},
                 {"architecture", std::string(kvinfer::architecture_name(in.config.arch))},
                 {"params", count_params(in.config)},
                 {"weight_dtype", in.weight_dtype},
                 {"weight_bytes", in.weight_bytes},
                 {"step_weight_bytes", in.step_weight_bytes},
                 {"device", in.device},
                 {"activations", std::string(kvinfer::activation_mode_name(in.activations))},
                 {"threads", in.threads},
                 {"prompt_tokens", in.prompt_tokens},
                 {"tokens", in.tokens},
                 {"prompt_source", in.prompt_source},
                 {"seed", in.seed},
                 {"mode", in.mode},
                 {"off_every", in.off_every},
                 {"positions", in.positions}};
  j["kv_cache"] = {{"dtype", std::string(kvinfer::dtype_name(r.run.kv_dtype))},
                   {"capacity_tokens", in.prompt_tokens + in.tokens},
                   {"bytes", r.run.kv_bytes},
                   {"bytes_per_token", kv_token},
                   {"positions_used", used_positions(in)},
                   {"bytes_used", kv_token * used_positions(in)}};
  j["cache_on"] = mode_json(r, r.run.on);
  j["cache_off"] = mode_json(r, r.run.off);
  const bool compared = r.run.on.ran && r.run.off.ran;
  j["tokens_match"] = compared ? json(tokens_match(r)) : json(nullptr);
  j["compared_steps"] = r.run.compared;
  j["first_mismatch"] = r.run.mismatch ? json{{"step", r.run.mismatch->step},
                                              {"on_token", r.run.mismatch->on_token},
                                              {"off_token", r.run.mismatch->off_token}}
                                       : json(nullptr);
  j["speedup"] = opt(speedup(r));
  j["speedup_estimated"] = r.run.off.estimated;
  j["positions_processed"] = {{"cache_on", token_work(in).on}, {"cache_off", token_work(in).off}};

  json bw;
  bw["probe_GBps"] = r.bandwidth ? json(r.bandwidth->gb_per_s) : json(nullptr);
  if (r.bandwidth) {
    bw["probe_median_GBps"] = r.bandwidth->median_gb_per_s;
    bw["probe_statistic"] = fmt::format("best of {} passes", r.bandwidth->passes);
    bw["probe_buffer_bytes"] = r.bandwidth->buffer_bytes;
    bw["probe_llc_bytes"] = r.bandwidth->llc_bytes;
    bw["probe_threads"] = r.bandwidth->threads;
    bw["probe_scope"] =
        in.device == "cpu" ? "host (the model's memory)" : "host only (the model runs on " + in.device + ")";
  }
  bw["decode_median_GBps"] = opt(median_gbps(rows));
  bw["decode_median_fraction"] = opt(fraction(r, median_gbps(rows)));
  json at = json::array();
  for (int64_t p : in.positions) {
    const StepRow& row = rows[static_cast<size_t>(p - 1)];
    at.push_back({{"step", p},
                  {"positions", row.positions},
                  {"on_ms", opt(row.on_ms)},
                  {"off_ms", opt(row.off_ms)},
                  {"on_bytes_read", opt(row.on_bytes)},
                  {"on_GBps", opt(row.on_gbps)},
                  {"on_fraction", opt(fraction(r, row.on_gbps))}});
  }
  j["at_positions"] = at;
  j["bandwidth"] = bw;
  j["device_copy"] = r.device_copy ? json{{"device", r.device_copy->device},
                                          {"GBps", r.device_copy->gb_per_s},
                                          {"bytes", r.device_copy->bytes},
                                          {"reps", r.device_copy->reps},
                                          {"statistic", "median; read + write bytes of a D2D cudaMemcpy"},
                                          {"simulated", r.device_copy->simulated}}
                                   : json(nullptr);
  if (r.floor) {
    const kvinfer::DecodeStepBytes& b = r.floor->bytes;
    const FloorFigures f = floor_figures(r);
    j["decode_floor"] = {{"step", r.floor->step},
                         {"context", r.floor->context},
                         {"bytes", {{"total", b.total()},
                                    {"weights", b.weights()},
                                    {"layer_matrices", b.layer_matrices},
                                    {"lm_head", b.lm_head},
                                    {"norms_biases", b.norms_biases},
                                    {"embedding_rows", b.embedding_rows},
                                    {"positions_read", b.positions_read},
                                    {"kv_read", b.kv_read},
                                    {"kv_write", b.kv_write}}},
                         {"bandwidth_GBps", opt(f.gb_per_s)},
                         {"bandwidth_source", f.source},
                         {"floor_ms_per_token", opt(f.floor_ms)},
                         {"floor_tokens_per_s", opt(f.floor_tokens_per_s)},
                         {"achieved_tokens_per_s", opt(f.achieved_tokens_per_s)},
                         {"fraction_of_floor", opt(f.fraction)}};
  } else {
    j["decode_floor"] = nullptr;
  }

  json steps = json::array();
  for (const StepRow& row : rows)
    steps.push_back({{"step", row.step},
                     {"positions", row.positions},
                     {"on_ms", opt(row.on_ms)},
                     {"off_ms", opt(row.off_ms)},
                     {"on_bytes_read", opt(row.on_bytes)},
                     {"on_GBps", opt(row.on_gbps)},
                     {"on_token", opt(row.on_token)},
                     {"off_token", opt(row.off_token)}});
  j["steps"] = steps;
  return j.dump(2) + "\n";
}

std::string format_csv(const Report& r) {
  auto cell = [](const auto& v) { return v ? fmt::format("{}", *v) : std::string(); };
  std::string s = "step,positions,on_ms,off_ms,on_bytes_read,on_GBps\n";
  for (const StepRow& row : step_rows(r))
    s += fmt::format("{},{},{},{},{},{}\n", row.step, row.positions, cell(row.on_ms), cell(row.off_ms),
                     cell(row.on_bytes), cell(row.on_gbps));
  return s;
}

std::string format_svg(const Report& r) {
  Series on{"cache on", "#1f77b4", {}, false}, off{"cache off", "#d62728", {}, r.run.off.estimated};
  if (r.run.off.estimated)
    off.name = fmt::format("cache off ({} of {} steps measured)", r.run.off.steps_run, r.info.tokens);
  for (const StepRow& row : step_rows(r)) {
    const auto x = static_cast<double>(row.step);
    if (row.on_ms) on.points.emplace_back(x, *row.on_ms);
    if (row.off_ms) off.points.emplace_back(x, *row.off_ms);
  }
  std::vector<Series> series;
  if (r.run.on.ran) series.push_back(on);
  if (r.run.off.ran) series.push_back(off);
  // A model file by its name alone (a directory's or a .gguf's), a shape by its name.
  const std::string name = r.info.synthetic ? r.info.model : fs::path(r.info.model).filename().string();
  const std::string title =
      fmt::format("{}: step latency, KV cache on vs off (P = {}, N = {}, {})", name.empty() ? r.info.model : name,
                  r.info.prompt_tokens, r.info.tokens, r.info.device);
  return plot(title, "step (generated token)", "step latency (ms)", series);
}

}  // namespace bench
