// kvinfer-perplexity: the perplexity of a model on a text, over consecutive windows of -c tokens
// (as llama.cpp's llama-perplexity), and with --save-logits / --kl-base the KL divergence of this
// run's next-token distributions from a saved run's (llama.cpp's --kl-divergence).
// docs/perplexity.md says what is computed; perplexity_eval.h computes it.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "core/input_file.h"
#include "core/output_file.h"
#include "perplexity_eval.h"

namespace {

constexpr int64_t kDefaultWindow = 512;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string fixed(double v, int digits) { return fmt::format("{:.{}f}", v, digits); }

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "kvinfer-perplexity: a model's perplexity on a text, over consecutive windows of -c tokens, each in a fresh KV "
      "cache, scoring the second half of each window; --save-logits and --kl-base compare two runs' next-token "
      "distributions (KL divergence, top-1 agreement)",
      "kvinfer-perplexity"};
  cli::ModelOptions model_opt;
  std::string text_file, save_path, base_path;
  int64_t chunks = 0;
  bool json = false;
  cli::add_model_options(app, model_opt,
                         "window length N in tokens, at least 8: the text is cut into consecutive windows of N tokens, "
                         "each run in a fresh KV cache of N positions, and positions N/2 to N-2 of each predict the next "
                         "token; 0 = 512, or the model's context length when it is shorter");
  app.add_option("-f,--file", text_file, "the text to score (- = stdin), tokenized whole without special tokens")
      ->required()
      ->check(tool::not_empty());
  app.add_option("--chunks", chunks, "score the first K windows only; 0 = every whole window of the text")
      ->check(tool::at_least(0))
      ->capture_default_str();
  app.add_option("--save-logits", save_path,
                 "write every scored position's next-token log-probabilities (uint16 over the top 24 nats), the "
                 "correct token's exact log-prob and the argmax to OUT, for a later --kl-base (replaced whole)")
      ->type_name("OUT")
      ->check(tool::not_empty());
  app.add_option("--kl-base", base_path,
                 "compare with BASE, a --save-logits file of the same text, -c and --chunks: KL(base ‖ this run), "
                 "top-1 agreement, |Δp|")
      ->type_name("BASE")
      ->check(tool::not_empty());
  app.add_flag("--json", json, "print one JSON object instead of the report");
  app.footer(tool::kExitStatusHelp);
  return tool::run(app, argc, argv, [&] {
    if (model_opt.ctx > 0 && model_opt.ctx < ppl::kMinWindow)
      throw tool::UsageError(fmt::format("-c/--ctx: {} tokens is too short a window: at least {} (0 = the default)",
                                         model_opt.ctx, ppl::kMinWindow));
    if (!save_path.empty()) {
      try {
        kvinfer::output_path(save_path);
      } catch (const kvinfer::Error& e) {
        throw kvinfer::Error(e.kind(), fmt::format("--save-logits: {}", e.what()));
      }
    }
    // The inputs before the model: a missing text or a bad base should not cost a load.
    const std::string text = tool::read_prompt_file(text_file);
    std::optional<ppl::Reader> base;
    if (!base_path.empty()) base.emplace(base_path);

    auto model = cli::load_model(model_opt);
    const int64_t n = model_opt.ctx > 0 ? model_opt.ctx : std::min(kDefaultWindow, model->context_length());
    if (n < ppl::kMinWindow)
      throw kvinfer::Error(kvinfer::ErrorKind::ContextFull,
                           fmt::format("the model's context length is {} tokens, shorter than the shortest window ({})",
                                       n, ppl::kMinWindow));
    const kvinfer::Tokenizer& tok = model->tokenizer();
    std::vector<int32_t> ids = tok.encode(text, {.add_special = false, .parse_special = false});
    // As llama.cpp: when the tokenizer adds a BOS, the text starts with one, and so does every window.
    const std::vector<int32_t> special = tok.encode("", {.add_special = true, .parse_special = false});
    std::optional<int32_t> bos;
    if (tok.bos_id() && !special.empty() && special.front() == *tok.bos_id()) bos = tok.bos_id();
    if (bos) ids.insert(ids.begin(), *bos);
    const auto text_tokens = static_cast<int64_t>(ids.size());
    if (text_tokens < n)
      throw kvinfer::Error(kvinfer::ErrorKind::InvalidArgument,
                           fmt::format("{}: the text is {} tokens, fewer than one window: it needs at least {} tokens "
                                       "(-c/--ctx)",
                                       text_file == "-" ? "stdin" : text_file, kvinfer::format_count(text_tokens),
                                       kvinfer::format_count(n)));
    const ppl::Windows windows = ppl::make_windows(ids, n, bos, chunks);
    const int64_t vocab = model->config().vocab_size;
    const int64_t per_window = ppl::scored_per_window(n), first = ppl::first_scored(n);

    kvinfer::KvCache kv(*model, n, cli::kv_dtype(model_opt));
    kvinfer::Session session(model);
    const ppl::Header run{.vocab = vocab,
                          .window = n,
                          .scored = windows.count * per_window,
                          .hash = ppl::windows_hash(windows),
                          .kv_dtype = std::string(kvinfer::dtype_name(kv.dtype()))};
    if (base) base->check(run);
    std::optional<ppl::Writer> writer;
    if (!save_path.empty()) writer.emplace(save_path, run);

    const bool progress = isatty(fileno(stderr)) != 0;
    std::vector<double> nll, base_nll;
    std::vector<ppl::PositionComparison> compared;
    nll.reserve(static_cast<size_t>(run.scored));
    ppl::LogProbs lp;
    ppl::SavedPosition saved, from_base;
    double forward_seconds = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t w = 0; w < windows.count; ++w) {
      if (progress) std::fprintf(stderr, "\rwindow %lld of %lld", static_cast<long long>(w + 1), static_cast<long long>(windows.count));
      const std::span<const int32_t> window(windows.tokens.data() + w * n, static_cast<size_t>(n));
      kv.clear();
      const auto tf = std::chrono::steady_clock::now();
      const std::span<const float> logits = session.prefill(kv, window, kvinfer::Logits::All);
      forward_seconds += seconds_since(tf);
      for (int64_t i = first; i < n - 1; ++i) {
        const int32_t correct = window[static_cast<size_t>(i + 1)];
        ppl::log_softmax(logits.subspan(static_cast<size_t>(i * vocab), static_cast<size_t>(vocab)), lp);
        nll.push_back(-lp.values[static_cast<size_t>(correct)]);
        if (writer) {
          ppl::quantize_position(lp, correct, saved);
          writer->write(saved);
        }
        if (base) {
          base->next(from_base);
          base_nll.push_back(-static_cast<double>(from_base.correct_logprob));
          compared.push_back(ppl::compare_position(from_base, lp, correct));
        }
      }
    }
    if (progress) std::fprintf(stderr, "\n");
    const uint64_t saved_bytes = writer ? writer->finish() : 0;
    const double seconds = seconds_since(t0);
    const int64_t evaluated = windows.count * n;
    const double rate = forward_seconds > 0 ? static_cast<double>(evaluated) / forward_seconds : 0;
    const ppl::Perplexity p = ppl::perplexity(nll);
    const std::string model_file = cli::model_path(model_opt.model).string();
    const std::string dtype(kvinfer::dtype_name(kv.dtype()));
    const std::string device(kvinfer::device_name(kv.device()));

    std::optional<ppl::Perplexity> pb;
    std::optional<ppl::KlSummary> kl;
    if (base) {
      pb = ppl::perplexity(base_nll);
      kl = ppl::summarize(compared);
    }

    if (json) {
      nlohmann::json j = {{"model", model_file},
                          {"file", text_file},
                          {"text_tokens", text_tokens},
                          {"bos_added", bos.has_value()},
                          {"window", n},
                          {"windows", windows.count},
                          {"first_scored_position", first},
                          {"scored", run.scored},
                          {"kv_dtype", dtype},
                          {"device", device},
                          {"mean_nll", p.mean_nll},
                          {"mean_nll_stderr", p.nll_stderr},
                          {"ppl", p.ppl},
                          {"ppl_stderr", p.ppl_stderr},
                          {"tokens_evaluated", evaluated},
                          {"seconds", seconds},
                          {"forward_seconds", forward_seconds},
                          {"tokens_per_second", rate},
                          {"saved_logits", nullptr},
                          {"saved_bytes", nullptr},
                          {"kl_base", nullptr}};
      if (writer) {
        j["saved_logits"] = save_path;
        j["saved_bytes"] = saved_bytes;
      }
      if (base)
        j["kl_base"] = {{"file", base_path},
                        {"kv_dtype", base->header().kv_dtype},
                        {"checksums_checked", base->version() >= 2},
                        {"positions", kl->positions},
                        {"base_mean_nll", pb->mean_nll},
                        {"base_ppl", pb->ppl},
                        {"base_ppl_stderr", pb->ppl_stderr},
                        {"ppl", p.ppl},
                        {"ppl_ratio", p.ppl / pb->ppl},
                        {"kl_mean", kl->kl.mean},
                        {"kl_stderr", kl->kl.se},
                        {"kl_median", kl->kl_median},
                        {"kl_p99", kl->kl_p99},
                        {"kl_max", kl->kl_max},
                        {"top1_same", kl->same_top1},
                        {"top1_agreement_percent", kl->top1_percent},
                        {"max_abs_dp_mean", kl->max_abs_dp_mean},
                        {"max_abs_dp_max", kl->max_abs_dp_max},
                        {"dp_correct_mean", kl->dp_correct_mean}};
      tool::write_stdout(j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
      return tool::kExitOk;
    }

    using kvinfer::format_count;
    std::string out;
    out.append(fmt::format("model       {}\n", tool::printable(model_file)));
    out.append(fmt::format("text        {}: {} tokens{}\n", tool::printable(text_file), format_count(text_tokens),
                           bos ? " (a BOS first)" : ""));
    out.append(fmt::format("windows     {} of {} tokens{}, KV cache {} on {}; {} positions scored ({} to {} of each window)\n",
                           format_count(windows.count), format_count(n), bos ? " (each starting with BOS)" : "", dtype,
                           device, format_count(run.scored), first, n - 2));
    out.append(fmt::format("perplexity  {} ± {} (mean NLL {} ± {} nats)\n", fixed(p.ppl, 4), fixed(p.ppl_stderr, 4),
                           fixed(p.mean_nll, 6), fixed(p.nll_stderr, 6)));
    out.append(fmt::format("speed       {} tokens in {:.2f} s of forward passes: {:.1f} tokens/s ({:.2f} s in all)\n",
                           format_count(evaluated), forward_seconds, rate, seconds));
    if (writer)
      out.append(fmt::format("saved       {}: {} positions, {}\n", tool::printable(save_path), format_count(run.scored),
                             kvinfer::format_bytes(saved_bytes)));
    if (base) {
      out.append(fmt::format("base        {} (KV cache {}{})\n", tool::printable(base_path),
                             tool::printable(base->header().kv_dtype),
                             base->version() == 1 ? "; a version 1 file: no checksums were checked" : ""));
      out.append(fmt::format("PPL         base {} ± {}, this run {} ± {} (ratio {:.6f})\n", fixed(pb->ppl, 4),
                             fixed(pb->ppl_stderr, 4), fixed(p.ppl, 4), fixed(p.ppl_stderr, 4), p.ppl / pb->ppl));
      out.append(fmt::format("KL          mean {:.6g} ± {:.3g}, median {:.6g}, 99th percentile {:.6g}, max {:.6g} "
                             "(nats, KL(base ‖ this run); percentiles by nearest rank)\n",
                             kl->kl.mean, kl->kl.se, kl->kl_median, kl->kl_p99, kl->kl_max));
      out.append(fmt::format("top-1       {:.3f} % the same ({} of {} positions)\n", kl->top1_percent,
                             format_count(kl->same_top1), format_count(kl->positions)));
      out.append(fmt::format("max |Δp|    mean {:.6g}, max {:.6g} (per position, over the vocabulary)\n",
                             kl->max_abs_dp_mean, kl->max_abs_dp_max));
      out.append(fmt::format("Δp correct  mean {:.6g} (this run − base)\n", kl->dp_correct_mean));
    }
    tool::write_stdout(out);
    return tool::kExitOk;
  });
}
