// kvinfer-chat: an interactive conversation over one KV cache. Each turn prefills only its own
// tokens; /reset starts over, /stats shows the last turn and the cache.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <string>

#include <fmt/format.h>

#include "cli_common.h"
#include "core/input_file.h"

namespace {

constexpr const char* kHelp =
    "commands: /reset (forget the conversation), /stats (last turn and cache), /help, /quit; "
    "end a line with \\ to continue it";
// The cache when -c is not given (or 0): long enough for a conversation, small enough to plan.
constexpr int64_t kDefaultContext = 4096;

[[noreturn]] void message_too_long() {
  throw kvinfer::Error(kvinfer::ErrorKind::InvalidArgument, fmt::format("stdin: a message longer than the {} {} may be (docs/reliability.md)",
                                   kvinfer::format_bytes(kvinfer::kPromptLimit.bytes), kvinfer::kPromptLimit.kind));
}

// One line of stdin without its newline, at most kvinfer::kPromptLimit bytes. false at end of input.
// A line ends with LF or CRLF (Windows files, pasted text); the CR is not part of it.
bool read_line(std::string& line) {
  line.clear();
  std::streambuf& in = *std::cin.rdbuf();
  const auto end = [&] {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    return true;
  };
  for (int c = in.sbumpc(); c != std::char_traits<char>::eof(); c = in.sbumpc()) {
    if (c == '\n') return end();
    if (line.size() >= kvinfer::kPromptLimit.bytes)
      message_too_long();
    line.push_back(static_cast<char>(c));
  }
  return !line.empty() && end();
}

// One message from stdin; lines ending in a backslash continue it. false at end of input.
bool read_message(bool interactive, std::string& out) {
  out.clear();
  std::string line;
  for (;;) {
    if (interactive) std::fprintf(stderr, out.empty() ? "> " : ". ");
    if (!read_line(line)) return !out.empty();
    if (!line.empty() && line.back() == '\\') {
      line.back() = '\n';
      out += line;
    } else {
      out += line;
      return true;
    }
    if (out.size() > kvinfer::kPromptLimit.bytes)
      message_too_long();
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kvinfer-chat: chat with a model; one KV cache across turns", "kvinfer-chat"};
  cli::ModelOptions model_opt;
  cli::SamplingOptions sample_opt;
  sample_opt.max_new_tokens = 1024;
  std::string system;
  cli::add_model_options(app, model_opt,
                         fmt::format("KV cache capacity in tokens for the whole conversation, at most the model's "
                                     "context length; 0 = {}, or the context length when shorter",
                                     kDefaultContext)
                             .c_str());
  app.add_option("--system", system, "system message (default: the template's own, if any)");
  cli::add_sampling_options(app, sample_opt);
  app.footer(tool::kExitStatusHelp);
  return tool::run(app, argc, argv, [&] {
    kvinfer::GenerateOptions options = cli::generate_options(sample_opt);
    const std::optional<cli::GrammarSpec> grammar = cli::grammar_spec(sample_opt);
    auto model = cli::load_model(model_opt);
    cli::set_grammar(options, grammar, *model);
    cli::check_generate_options(options, *model);
    const int64_t capacity = model_opt.ctx > 0 ? model_opt.ctx : std::min(kDefaultContext, model->context_length());
    kvinfer::Chat chat(model, capacity, system, cli::kv_dtype(model_opt));
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
          std::fprintf(stderr, "%s\n[last turn: %s tokens prefilled, %s reused from the cache]\n",
                       cli::stats_line(last->reply.stats, last->reply.stop, kv, options).c_str(),
                       kvinfer::format_count(last->prefilled_tokens).c_str(),
                       kvinfer::format_count(last->reused_tokens).c_str());
        std::fprintf(stderr, "[%zu messages; cache %s/%s tokens, %s]\n", chat.messages().size(),
                     kvinfer::format_count(kv.size()).c_str(), kvinfer::format_count(kv.capacity()).c_str(),
                     kvinfer::format_bytes(kv.bytes()).c_str());
        continue;
      }
      if (message.front() == '/' && message.find(' ') == std::string::npos) {
        std::fprintf(stderr, "unknown command %s; %s\n", tool::printable(message).c_str(), kHelp);
        continue;
      }
      try {
        last = chat.send(message, options, [](int32_t, std::string_view piece) {
          tool::write_stdout(piece);
          return true;
        });
        tool::write_stdout("\n");
        if (last->reply.stop == kvinfer::StopReason::ContextFull)
          std::fprintf(stderr, "[the context is full (%s tokens): /reset to start over, or restart with a larger -c]\n",
                       kvinfer::format_count(chat.kv().capacity()).c_str());
      } catch (const kvinfer::Error& e) {
        // A turn that does not fit changes nothing; the conversation goes on. (A failed write to
        // stdout is a tool::OutputError, which ends the tool.)
        std::fprintf(stderr, "[%s]\n", tool::printable(e.what()).c_str());
      }
    }
    return tool::kExitOk;
  });
}
