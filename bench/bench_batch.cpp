// kvinfer-bench-batch: aggregate decode throughput of B sequences decoded together
// (Session::batch, one weight read per step for all of them) against the same model's prefill
// rate, measured in the same run, interleaved (docs/benchmarks.md, "Batched decode").
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/output_file.h"
#include "kvinfer/kvinfer.h"
#include "svg_plot.h"
#include "tool.h"

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::vector<int32_t> random_ids(std::mt19937_64& rng, int64_t n, int64_t vocab) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int32_t& id : ids) id = static_cast<int32_t>(std::uniform_int_distribution<int64_t>(0, vocab - 1)(rng));
  return ids;
}

// Prefill tokens/s: one pass over `n` random tokens into a fresh cache.
double prefill_rate(kvinfer::Session& s, const kvinfer::Model& m, int64_t n, std::mt19937_64& rng) {
  kvinfer::KvCache kv(m, n);
  const auto ids = random_ids(rng, n, m.config().vocab_size);
  const auto t0 = Clock::now();
  s.prefill(kv, ids);
  return static_cast<double>(n) / std::chrono::duration<double>(Clock::now() - t0).count();
}

// Seconds per decode step of `batch` sequences, each with a `prompt`-token history, over `steps`
// steps: the time of Session::batch, whose logits every sequence's next token is then picked from
// (greedily, untimed: sampling is the caller's, and llama-batched-bench times no sampling either).
double decode_step_seconds(kvinfer::Session& s, const kvinfer::Model& m, int64_t batch, int64_t prompt, int64_t steps,
                           std::mt19937_64& rng) {
  const int64_t vocab = m.config().vocab_size;
  std::vector<kvinfer::KvCache> caches;
  std::vector<std::vector<int32_t>> prompts;
  for (int64_t b = 0; b < batch; ++b) {
    caches.emplace_back(m, prompt + steps + 1);
    prompts.push_back(random_ids(rng, prompt, vocab));
  }
  std::vector<kvinfer::BatchItem> items;
  for (int64_t b = 0; b < batch; ++b) items.push_back({&caches[static_cast<size_t>(b)], prompts[static_cast<size_t>(b)]});
  auto logits = s.batch(items);  // the histories, untimed
  std::vector<int32_t> next(static_cast<size_t>(batch));
  const auto pick = [&] {
    for (size_t b = 0; b < next.size(); ++b)
      next[b] = kvinfer::argmax(logits.subspan(b * static_cast<size_t>(vocab), static_cast<size_t>(vocab)));
  };
  pick();
  for (int64_t b = 0; b < batch; ++b) items[static_cast<size_t>(b)].ids = {&next[static_cast<size_t>(b)], 1};
  double seconds = 0;  // the forward passes only, as llama-batched-bench's decode rate: not the picks
  for (int64_t i = 0; i < steps; ++i) {
    const auto t0 = Clock::now();
    logits = s.batch(items);
    seconds += std::chrono::duration<double>(Clock::now() - t0).count();
    pick();
  }
  return seconds / static_cast<double>(steps);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kvinfer-bench-batch: aggregate decode tokens/s of 1..64 sequences decoded together, beside the "
               "model's prefill rate",
               "kvinfer-bench-batch"};
  std::string model_path, device = "cpu", json_path, svg_path;
  std::vector<int64_t> batches{1, 2, 4, 8, 16, 32, 64};
  int64_t prompt = 128, steps = 16, prefill_tokens = 512, reps = 3, threads = 0;
  app.add_option("-m,--model", model_path, "model file or directory")->required();
  app.add_option("--device", device, "cpu, cuda or cuda:N (CUDA device N)")->capture_default_str();
  app.add_option("-b,--batches", batches, "batch sizes (sequences decoded together), comma-separated")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--prompt", prompt, "tokens of history each sequence has")->check(tool::at_least(1))->capture_default_str();
  app.add_option("--steps", steps, "decode steps per batch size and repetition (their forward passes are timed, "
                 "not the greedy picks between them)")->check(tool::at_least(1))->capture_default_str();
  app.add_option("--prefill-tokens", prefill_tokens, "tokens of the prefill measurement")->check(tool::at_least(1))->capture_default_str();
  app.add_option("-r,--reps", reps, "repetitions, interleaved: prefill, then every batch size")->check(tool::at_least(1))->capture_default_str();
  app.add_option("-t,--threads", threads, "CPU threads (0: one per core)")->capture_default_str();
  app.add_option("--json", json_path, "write the figures as JSON");
  app.add_option("--svg", svg_path, "write the plot (aggregate tokens/s against the batch size) as SVG");
  tool::ActivationsChoice activations;
  tool::add_activations_options(app, activations);
  app.footer(tool::kExitStatusHelp);
  return tool::run(app, argc, argv, [&] {
    for (int64_t b : batches)
      if (b < 1 || b > 1024) throw tool::UsageError(fmt::format("-b/--batches: {} is not in 1..1024", b));
    const tool::DeviceChoice dev = tool::parse_device(device);
    if (dev.device == kvinfer::Device::Auto) throw tool::UsageError("--device: auto is not offered here; cpu or cuda");
    const int t = tool::checked_threads(threads, "-t/--threads");
    // Begun before the run: a path that cannot be written fails first.
    std::optional<kvinfer::OutputFile> json_out, svg_out;
    for (auto [out, path, flag] : {std::tuple{&json_out, &json_path, "--json"}, std::tuple{&svg_out, &svg_path, "--svg"}}) {
      if (path->empty()) continue;
      try {
        out->emplace(*path);
      } catch (const kvinfer::Error& e) {
        throw kvinfer::Error(e.kind(), fmt::format("{}: {}", flag, e.what()));
      }
    }
    auto model = kvinfer::Model::load(
        model_path, {.device = dev.device, .device_index = dev.index, .activations = activations.value(), .threads = t});
    kvinfer::Session session(model);
    std::mt19937_64 rng(1);
    std::vector<double> prefill;
    std::vector<std::vector<double>> step(batches.size());
    for (int64_t r = 0; r < reps; ++r) {
      prefill.push_back(prefill_rate(session, *model, prefill_tokens, rng));
      for (size_t i = 0; i < batches.size(); ++i)
        step[i].push_back(decode_step_seconds(session, *model, batches[i], prompt, steps, rng));
    }
    const double p = median(prefill);
    std::string out = fmt::format("{} on {}, {} threads: prefill {:.0f} tokens/s (median of {}; {:.0f} .. {:.0f})\n",
                                  model_path, kvinfer::device_name(model->device()), model->threads(), p, reps,
                                  *std::min_element(prefill.begin(), prefill.end()),
                                  *std::max_element(prefill.begin(), prefill.end()));
    out += fmt::format("{:>6} {:>14} {:>22} {:>14} {:>12}\n", "batch", "decode tok/s", "range", "ms per step", "of prefill");
    nlohmann::json j = {{"model", model_path}, {"device", kvinfer::device_name(model->device())},
                        {"threads", model->threads()}, {"prompt", prompt}, {"steps", steps},
                        {"prefill_tokens_per_second", p}, {"batches", nlohmann::json::array()}};
    bench::Series series{"aggregate decode", "#1f77b4", {}, true};
    bench::Series ceiling{"prefill rate", "#d62728", {}, false};
    for (size_t i = 0; i < batches.size(); ++i) {
      const double s = median(step[i]);
      const double rate = static_cast<double>(batches[i]) / s;
      const double lo = static_cast<double>(batches[i]) / *std::max_element(step[i].begin(), step[i].end());
      const double hi = static_cast<double>(batches[i]) / *std::min_element(step[i].begin(), step[i].end());
      out += fmt::format("{:>6} {:>14.1f} {:>22} {:>14.2f} {:>11.0f}%\n", batches[i], rate,
                         fmt::format("{:.1f} .. {:.1f}", lo, hi), s * 1e3, 100 * rate / p);
      j["batches"].push_back({{"batch", batches[i]}, {"decode_tokens_per_second", rate}, {"step_seconds", s},
                              {"fraction_of_prefill", rate / p}});
      series.points.emplace_back(static_cast<double>(batches[i]), rate);
      ceiling.points.emplace_back(static_cast<double>(batches[i]), p);
    }
    tool::write_stdout(out);
    if (json_out) {
      const std::string text = j.dump(1) + "\n";
      json_out->write(text.data(), text.size());
      json_out->commit();
    }
    if (svg_out) {
      const std::string text =
          bench::plot("Batched decode: " + model_path, "sequences decoded together", "tokens/s", {series, ceiling});
      svg_out->write(text.data(), text.size());
      svg_out->commit();
    }
    return tool::kExitOk;
  });
}
