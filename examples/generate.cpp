// kvinfer-generate: text in, streamed text out, then one stats line on stderr.
#include <algorithm>
#include <cstdio>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli_common.h"

namespace {

std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || item.find_first_not_of(" \t", used) != std::string::npos || v < 0 || v > INT32_MAX)
      throw tool::UsageError(fmt::format("--ids: '{}' is not a token id", item));
    ids.push_back(static_cast<int32_t>(v));
  }
  if (ids.empty()) throw tool::UsageError("--ids: no token ids given");
  return ids;
}

// Saturating: -n may be as large as int64 allows.
int64_t saturating_add(int64_t a, int64_t b) {
  int64_t r = 0;
  return __builtin_add_overflow(a, b, &r) ? INT64_MAX : r;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kvinfer-generate: generate text with a model, streaming it to stdout", "kvinfer-generate"};
  cli::ModelOptions model_opt;
  cli::SamplingOptions sample_opt;
  cli::SpeculativeFlags spec_opt;
  cli::BeamFlags beam_opt;
  std::string prompt, prompt_file, ids_text, system;
  bool no_cache = false, chat = false;
  cli::add_model_options(app, model_opt,
                         "KV cache capacity in tokens, at most the model's context length; 0 = prompt + max new "
                         "tokens, up to the context length");
  app.add_option("-p,--prompt", prompt, "prompt text (default: read stdin)");
  app.add_option("-f,--file", prompt_file, "read the prompt from FILE (- = stdin)")->check(tool::not_empty());
  app.add_option("--ids", ids_text, "prompt as token ids, comma separated (prints ids; no tokenizer needed)");
  app.add_flag("--chat", chat, "wrap the prompt as a user message in the model's chat template");
  app.add_option("--system", system, "system message for --chat");
  app.add_flag("--no-kv-cache", no_cache, "recompute the whole sequence every step (cache-off baseline)");
  cli::add_sampling_options(app, sample_opt);
  cli::add_speculative_options(app, spec_opt);
  cli::add_beam_options(app, beam_opt);
  app.footer(tool::kExitStatusHelp);
  return tool::run(app, argc, argv, [&] {
    const bool given_ids = app.count("--ids") > 0, given_prompt = app.count("--prompt") > 0;
    if (!system.empty() && !chat) throw tool::UsageError("--system needs --chat");
    if (given_ids && (chat || given_prompt || !prompt_file.empty()))
      throw tool::UsageError("--ids cannot be combined with -p, -f or --chat");
    if (given_prompt && !prompt_file.empty()) throw tool::UsageError("-p and -f both give the prompt: use one");
    kvinfer::GenerateOptions options = cli::generate_options(sample_opt);
    options.use_kv_cache = !no_cache;
    const bool speculative = cli::check_speculative_options(app, spec_opt, no_cache);
    const std::optional<kvinfer::BeamSearchOptions> beams = cli::beam_options(app, beam_opt, sample_opt, speculative, no_cache);
    const std::optional<cli::GrammarSpec> grammar = cli::grammar_spec(sample_opt);
    if (grammar && beams) throw tool::UsageError("--num-beams cannot be combined with --grammar, --json-schema or --json");
    std::vector<int32_t> ids;
    if (given_ids) ids = parse_ids(ids_text);
    // Read before the model loads: an unreadable prompt should not cost a load.
    if (!given_ids && !given_prompt) prompt = prompt_file.empty() ? tool::read_stdin_prompt() : tool::read_prompt_file(prompt_file);
    auto model = cli::load_model(model_opt);
    cli::set_grammar(options, grammar, *model);
    cli::check_generate_options(options, *model);

    if (given_ids) {
      for (int32_t id : ids) cli::check_token_id(id, *model, "--ids");
    } else {
      const kvinfer::Tokenizer& tok = model->tokenizer();
      if (chat) {
        if (tok.chat_template().empty())
          throw kvinfer::Error(kvinfer::ErrorKind::Unsupported, fmt::format("{}: the model has no chat template; run without --chat",
                                           cli::model_path(model_opt.model).string()));
        kvinfer::ChatTemplate tmpl(tok.chat_template(), tok.bos_text(), tok.eos_text());
        std::vector<kvinfer::ChatMessage> messages;
        if (!system.empty()) messages.push_back({"system", system});
        messages.push_back({"user", prompt});
        ids = tok.encode(tmpl.render(messages, true), {.add_special = false, .parse_special = true});
      } else {
        ids = tok.encode(prompt);
      }
    }
    // The cache holds the prompt and what is generated, never more than the model's context:
    // generation that reaches its end stops with "context full".
    const auto prompt_tokens = static_cast<int64_t>(ids.size());
    const int64_t capacity = model_opt.ctx > 0
                                 ? model_opt.ctx
                                 : std::min(saturating_add(prompt_tokens, options.max_new_tokens), model->context_length());
    if (prompt_tokens > capacity)
      throw kvinfer::Error(kvinfer::ErrorKind::InvalidArgument, fmt::format(
          "the prompt is {} tokens, more than the {} a KV cache of this model can hold ({})",
          kvinfer::format_count(prompt_tokens), kvinfer::format_count(capacity),
          model_opt.ctx > 0 ? "-c/--ctx" : "the model's context length"));
    kvinfer::KvCache kv(*model, std::max<int64_t>(capacity, 1), cli::kv_dtype(model_opt));
    kvinfer::Session session(model);
    if (beams) {
      const kvinfer::BeamSearchResult r = kvinfer::beam_search(session, kv, ids, *beams);
      for (size_t i = 0; i < r.sequences.size(); ++i) {
        const kvinfer::BeamHypothesis& h = r.sequences[i];
        if (r.sequences.size() > 1) tool::write_stdout(fmt::format("# hypothesis {}: score {:.6g}\n", i + 1, h.score));
        if (given_ids) {
          for (int32_t id : h.tokens) tool::write_stdout(fmt::format("{} ", id));
        } else {
          // The end id that finished a hypothesis is not text (as plain generation does not print it).
          std::span<const int32_t> tokens = h.tokens;
          const std::vector<int32_t> eos = model->eos_ids();
          if (!beams->ignore_eos && !tokens.empty() && std::ranges::find(eos, tokens.back()) != eos.end())
            tokens = tokens.first(tokens.size() - 1);
          tool::write_stdout(model->tokenizer().decode(tokens));
        }
        tool::write_stdout("\n");
      }
      std::fprintf(stderr, "%s\n", cli::beam_stats_line(r.stats, beams->num_beams, kv).c_str());
      return tool::kExitOk;
    }
    // The draft's cache holds what the target's does (the draft never runs past it).
    const std::unique_ptr<kvinfer::DraftModel> draft = cli::load_draft_model(spec_opt, model_opt, *model, kv.capacity());
    cli::set_speculative(options, spec_opt, draft.get());

    kvinfer::GenerateResult result;
    if (given_ids) {
      result = kvinfer::generate_tokens(session, kv, ids, options, [](int32_t id, std::span<const float>) {
        tool::write_stdout(fmt::format("{} ", id));
        return true;
      });
    } else {
      result = kvinfer::generate(session, kv, model->tokenizer(), ids, options, [](int32_t, std::string_view piece) {
        tool::write_stdout(piece);
        return true;
      });
    }
    tool::write_stdout("\n");
    std::fprintf(stderr, "%s\n", cli::stats_line(result.stats, result.stop, kv, options).c_str());
    return tool::kExitOk;
  });
}
