// kvinfer-chat: an interactive conversation over one KV cache. Each turn prefills only its own
// tokens; /reset starts over, /stats shows the last turn and the cache.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <string>

#include <fmt/format.h>

#include "cli_common.h"

namespace {

constexpr const char* kHelp =
    "commands: /reset (forget the conversation), /stats (last turn and cache), /help, /quit; "
    "end a line with \\ to continue it";

// One message from stdin; lines ending in a backslash continue it. false at end of input.
bool read_message(bool interactive, std::string& out) {
  out.clear();
  std::string line;
  for (;;) {
    if (interactive) std::fprintf(stderr, out.empty() ? "> " : ". ");
    if (!std::getline(std::cin, line)) return !out.empty();
    if (!line.empty() && line.back() == '\\') {
      line.back() = '\n';
      out += line;
      continue;
    }
    out += line;
    return true;
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kvinfer-chat: chat with a model; one KV cache across turns", "kvinfer-chat"};
  cli::one_line_errors(app);
  cli::ModelOptions model_opt;
  model_opt.ctx = 4096;
  cli::SamplingOptions sample_opt;
  sample_opt.max_new_tokens = 1024;
  std::string system;
  cli::add_model_options(app, model_opt, "KV cache capacity in tokens for the whole conversation");
  app.add_option("--system", system, "system message (default: the template's own, if any)");
  cli::add_sampling_options(app, sample_opt);
  CLI11_PARSE(app, argc, argv);

  try {
    if (model_opt.ctx <= 0) throw kvinfer::Error("-c/--ctx must be at least 1");
    kvinfer::GenerateOptions options = cli::generate_options(sample_opt);
    auto model = cli::load_model(model_opt);
    kvinfer::Chat chat(model, model_opt.ctx, system, cli::kv_dtype(model_opt));
    const bool interactive = isatty(fileno(stdin));
    if (interactive) std::fprintf(stderr, "%s\n", kHelp);

    std::optional<kvinfer::ChatTurn> last;
    std::string message;
    while (read_message(interactive, message)) {
      if (message.empty()) continue;
      if (message == "/quit" || message == "/exit") break;
      if (message == "/help") {
        std::fprintf(stderr, "%s\n", kHelp);
        continue;
      }
      if (message == "/reset") {
        chat.reset();
        last.reset();
        std::fprintf(stderr, "[conversation and cache cleared]\n");
        continue;
      }
      if (message == "/stats") {
        const kvinfer::KvCache& kv = chat.kv();
        if (last)
          std::fprintf(stderr, "%s\n[last turn: %lld tokens prefilled, %lld reused from the cache]\n",
                       cli::stats_line(last->reply.stats, last->reply.stop, kv, options).c_str(),
                       static_cast<long long>(last->prefilled_tokens), static_cast<long long>(last->reused_tokens));
        std::fprintf(stderr, "[%zu messages; cache %lld/%lld tokens, %s]\n", chat.messages().size(),
                     static_cast<long long>(kv.size()), static_cast<long long>(kv.capacity()),
                     kvinfer::format_bytes(kv.bytes()).c_str());
        continue;
      }
      if (message.front() == '/' && message.find(' ') == std::string::npos) {
        std::fprintf(stderr, "unknown command %s; %s\n", message.c_str(), kHelp);
        continue;
      }
      try {
        last = chat.send(message, options, [](int32_t, std::string_view piece) {
          std::fwrite(piece.data(), 1, piece.size(), stdout);
          std::fflush(stdout);
          return true;
        });
        std::printf("\n");
        std::fflush(stdout);
        if (last->reply.stop == kvinfer::StopReason::ContextFull)
          std::fprintf(stderr, "[the context is full (%lld tokens): /reset to start over, or restart with a larger -c]\n",
                       static_cast<long long>(chat.kv().capacity()));
      } catch (const kvinfer::Error& e) {
        // A turn that does not fit changes nothing; the conversation goes on.
        std::fprintf(stderr, "[%s]\n", e.what());
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvinfer-chat: %s\n", e.what());
    return 1;
  }
  return 0;
}
