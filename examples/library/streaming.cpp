// Streams a model's continuation of a prompt, token by token, as it is generated. Ctrl-C stops
// generation cleanly (the cancel callback), and each kind of failure gets its own exit status.
//
//   kvinfer-example-streaming MODEL "The KV cache" [max_new_tokens]
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <kvinfer/kvinfer.h>

namespace {
std::atomic<bool> interrupted{false};
}

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4) {
    std::fprintf(stderr, "usage: %s MODEL PROMPT [MAX_NEW_TOKENS]\n", argv[0]);
    return 2;
  }
  std::signal(SIGINT, [](int) { interrupted = true; });
  try {
    const auto model = kvinfer::Model::load(argv[1]);
    const kvinfer::Tokenizer& tokenizer = model->tokenizer();
    const std::vector<int32_t> prompt = tokenizer.encode(argv[2]);

    kvinfer::GenerateOptions options;  // greedy unless sampling is set
    options.max_new_tokens = argc == 4 ? std::atoi(argv[3]) : 64;
    options.cancel = [] { return interrupted.load(); };

    kvinfer::Session session(model);
    kvinfer::KvCache kv(*model, static_cast<int64_t>(prompt.size()) + options.max_new_tokens);
    std::fputs(argv[2], stdout);
    const kvinfer::GenerateResult r =
        kvinfer::generate(session, kv, tokenizer, prompt, options, [](int32_t, std::string_view piece) {
          std::fwrite(piece.data(), 1, piece.size(), stdout);
          std::fflush(stdout);
          return true;
        });
    std::fprintf(stderr, "\n[%lld tokens, %.1f tok/s, stop: %.*s]\n", static_cast<long long>(r.stats.generated_tokens),
                 r.stats.decode_tokens_per_second(), static_cast<int>(kvinfer::stop_reason_name(r.stop).size()),
                 kvinfer::stop_reason_name(r.stop).data());
    return 0;
  } catch (const kvinfer::Error& e) {
    std::fprintf(stderr, "error (%.*s): %s\n", static_cast<int>(kvinfer::error_kind_name(e.kind()).size()),
                 kvinfer::error_kind_name(e.kind()).data(), e.what());
    return e.kind() == kvinfer::ErrorKind::BadFile ? 3 : 1;
  }
}
