// kvinfer-generate: text in, streamed text out, then one stats line on stderr.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <iterator>
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
      throw kvinfer::Error(fmt::format("--ids: '{}' is not a token id", item));
    ids.push_back(static_cast<int32_t>(v));
  }
  if (ids.empty()) throw kvinfer::Error("--ids: no token ids given");
  return ids;
}

std::string read_stdin() {
  if (isatty(fileno(stdin))) throw kvinfer::Error("no prompt: give -p PROMPT, --ids, or pipe the prompt on stdin");
  return {std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kvinfer-generate: generate text with a model, streaming it to stdout", "kvinfer-generate"};
  cli::one_line_errors(app);
  cli::ModelOptions model_opt;
  cli::SamplingOptions sample_opt;
  std::string prompt, ids_text, system;
  bool no_cache = false, chat = false;
  cli::add_model_options(app, model_opt, "KV cache capacity in tokens; 0 = prompt + max new tokens");
  app.add_option("-p,--prompt", prompt, "prompt text (default: read stdin)");
  app.add_option("--ids", ids_text, "prompt as token ids, comma separated (prints ids; no tokenizer needed)");
  app.add_flag("--chat", chat, "wrap the prompt as a user message in the model's chat template");
  app.add_option("--system", system, "system message for --chat");
  app.add_flag("--no-kv-cache", no_cache, "recompute the whole sequence every step (cache-off baseline)");
  cli::add_sampling_options(app, sample_opt);
  CLI11_PARSE(app, argc, argv);

  try {
    if (!system.empty() && !chat) throw kvinfer::Error("--system needs --chat");
    if (!ids_text.empty() && (chat || !prompt.empty())) throw kvinfer::Error("--ids cannot be combined with -p or --chat");
    kvinfer::GenerateOptions options = cli::generate_options(sample_opt);
    options.use_kv_cache = !no_cache;
    auto model = cli::load_model(model_opt);

    std::vector<int32_t> ids;
    if (!ids_text.empty()) {
      ids = parse_ids(ids_text);
    } else {
      if (prompt.empty()) prompt = read_stdin();
      const kvinfer::Tokenizer& tok = model->tokenizer();
      if (chat) {
        if (tok.chat_template().empty())
          throw kvinfer::Error(fmt::format("{}: the model has no chat template; run without --chat",
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
    const int64_t capacity =
        model_opt.ctx > 0 ? model_opt.ctx : static_cast<int64_t>(ids.size()) + options.max_new_tokens;
    kvinfer::KvCache kv(*model, capacity, cli::kv_dtype(model_opt));
    kvinfer::Session session(model);

    kvinfer::GenerateResult result;
    if (!ids_text.empty()) {
      result = kvinfer::generate_tokens(session, kv, ids, options, [](int32_t id, std::span<const float>) {
        std::printf("%d ", id);
        std::fflush(stdout);
        return true;
      });
    } else {
      result = kvinfer::generate(session, kv, model->tokenizer(), ids, options, [](int32_t, std::string_view piece) {
        std::fwrite(piece.data(), 1, piece.size(), stdout);
        std::fflush(stdout);
        return true;
      });
    }
    std::printf("\n");
    std::fflush(stdout);
    std::fprintf(stderr, "%s\n", cli::stats_line(result.stats, result.stop, kv, options).c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvinfer-generate: %s\n", e.what());
    return 1;
  }
  return 0;
}
