// A multi-turn chat over one KV cache: each turn prefills only what the cache does not hold yet.
// Reads one user message per line from stdin; when the conversation outgrows the cache it starts
// over (the error's kind says so, not its text).
//
//   kvinfer-example-chat MODEL [CONTEXT_TOKENS [MAX_NEW_TOKENS]] < questions.txt
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include <kvinfer/kvinfer.h>

int main(int argc, char** argv) {
  if (argc < 2 || argc > 4) {
    std::fprintf(stderr, "usage: %s MODEL [CONTEXT_TOKENS [MAX_NEW_TOKENS]] < messages\n", argv[0]);
    return 2;
  }
  try {
    const auto model = kvinfer::Model::load(argv[1]);
    const int64_t context = argc >= 3 ? std::atoll(argv[2]) : 2048;
    kvinfer::Chat chat(model, std::min(context, model->context_length()), "You are a concise assistant.");
    kvinfer::GenerateOptions options;
    options.max_new_tokens = argc == 4 ? std::atoi(argv[3]) : 128;

    std::string line;
    while (std::getline(std::cin, line)) {
      if (line.empty()) continue;
      std::printf("> %s\n", line.c_str());
      kvinfer::ChatTurn turn;
      try {
        turn = chat.send(line, options, [](int32_t, std::string_view piece) {
          std::fwrite(piece.data(), 1, piece.size(), stdout);
          return true;
        });
      } catch (const kvinfer::Error& e) {
        if (e.kind() != kvinfer::ErrorKind::ContextFull) throw;
        std::printf("[the conversation no longer fits in %lld tokens: starting over]\n",
                    static_cast<long long>(chat.kv().capacity()));
        chat.reset();
        continue;
      }
      std::printf("\n[prefilled %lld tokens, reused %lld from earlier turns]\n",
                  static_cast<long long>(turn.prefilled_tokens), static_cast<long long>(turn.reused_tokens));
    }
    return 0;
  } catch (const kvinfer::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
