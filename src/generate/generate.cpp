// The generation loop: prefill, then sample → (stop?) → decode, one token at a time; with
// speculative decoding on, generate/speculative.cpp's loop instead.
#include "kvinfer/generate.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "generate/speculative.h"
#include "generate/stop_strings.h"
#include "kvinfer/error.h"
#include "kvinfer/tokenizer.h"

namespace kvinfer {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

using detail::Step;

GenerateResult run(Session& session, KvCache& kv, std::span<const int32_t> prompt, const GenerateOptions& options,
                   Sampler& sampler, const Step& step) {
  detail::validate_speculative(options.speculative, options.use_kv_cache);
  if (options.max_new_tokens < 0)
    throw Error(ErrorKind::InvalidArgument, fmt::format("max_new_tokens must be >= 0, got {}", options.max_new_tokens));
  if (prompt.empty()) throw Error(ErrorKind::InvalidArgument, "generation needs a prompt of at least one token");
  std::vector<int32_t> stop_ids = options.stop_ids;
  if (stop_ids.empty() && !options.ignore_eos) stop_ids = session.model().eos_ids();

  GenerateResult r;
  r.stats.prompt_tokens = static_cast<int64_t>(prompt.size());
  r.stats.kv_bytes = kv.bytes();
  const int64_t vocab = session.model().config().vocab_size;
  for (size_t i = 0; i < prompt.size(); ++i)
    if (prompt[i] < 0 || prompt[i] >= vocab)
      throw Error(ErrorKind::InvalidArgument, fmt::format("prompt token id {} at position {} is outside the vocabulary "
                                                          "(size {})",
                                                          prompt[i], i, vocab));
  sampler.accept(prompt);
  sampler.set_end_ids(stop_ids);
  if (options.max_new_tokens == 0) {
    r.stats.kv_tokens = kv.size();
    return r;
  }
  if (options.speculative.enabled())
    return detail::run_speculative(session, kv, prompt, options, stop_ids, sampler, step, std::move(r));

  // Cache-off: the whole sequence so far, recomputed from an empty cache every step.
  std::vector<int32_t> sequence;
  if (!options.use_kv_cache) {
    sequence.assign(prompt.begin(), prompt.end());
    kv.clear();
  }

  const auto t0 = Clock::now();
  try {
    session.step(kv, prompt, options.cancel);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::Cancelled) throw;
    r.stop = StopReason::Cancelled;  // the cache is as it was
    r.stats.prefill_seconds = seconds_since(t0);
    r.stats.kv_tokens = kv.size();
    return r;
  }
  r.stats.prefill_seconds = seconds_since(t0);
  Clock::time_point first_token;

  for (;;) {
    const int32_t id = session.sample(sampler);
    sampler.accept(id);
    r.tokens.push_back(id);
    if (r.tokens.size() == 1) {
      first_token = Clock::now();
      r.stats.ttft_seconds = std::chrono::duration<double>(first_token - t0).count();
    }
    bool last = true;
    // An end id, or a grammar's output that nothing may follow.
    if (std::find(stop_ids.begin(), stop_ids.end(), id) != stop_ids.end() || sampler.grammar_finished())
      r.stop = StopReason::Eos;
    else if (static_cast<int64_t>(r.tokens.size()) >= options.max_new_tokens)
      r.stop = StopReason::MaxTokens;
    else if (kv.remaining() == 0)  // in both modes: the next position has no room
      r.stop = StopReason::ContextFull;
    else
      last = false;
    if (!step.fn(id, step.wants_logits ? session.logits() : std::span<const float>(), last, r.stop) || last) break;
    if (options.cancel && options.cancel()) {
      r.stop = StopReason::Cancelled;
      break;
    }
    if (options.use_kv_cache) {
      session.step(kv, id);
    } else {
      sequence.push_back(id);
      kv.clear();
      try {
        session.step(kv, sequence, options.cancel);
      } catch (const Error& e) {
        if (e.kind() != ErrorKind::Cancelled) throw;
        r.stop = StopReason::Cancelled;
        break;
      }
    }
  }
  r.stats.decode_seconds = seconds_since(first_token);
  r.stats.generated_tokens = static_cast<int64_t>(r.tokens.size());
  r.stats.kv_tokens = kv.size();
  return r;
}

Step token_step(const TokenCallback& on_token) {
  return {[&on_token](int32_t id, std::span<const float> logits, bool, StopReason& stop) {
    if (on_token && !on_token(id, logits)) {
      stop = StopReason::Callback;
      return false;
    }
    return true;
  },
          static_cast<bool>(on_token)};
}

}  // namespace

double GenerationStats::prefill_tokens_per_second() const {
  return prefill_seconds > 0 ? static_cast<double>(prompt_tokens) / prefill_seconds : 0.0;
}

double GenerationStats::decode_tokens_per_second() const {
  return decode_seconds > 0 && generated_tokens > 1 ? static_cast<double>(generated_tokens - 1) / decode_seconds
                                                    : 0.0;
}

int32_t argmax(std::span<const float> logits) {
  if (logits.empty()) throw Error(ErrorKind::InvalidArgument, "argmax of empty logits");
  // std::max_element keeps the first of equal maxima, as torch.argmax.
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

std::string_view stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::Eos: return "eos";
    case StopReason::StopString: return "stop_string";
    case StopReason::MaxTokens: return "max_tokens";
    case StopReason::ContextFull: return "context_full";
    case StopReason::Callback: return "callback";
    case StopReason::Cancelled: return "cancelled";
  }
  return "?";
}

GenerateResult generate_tokens(Session& session, KvCache& kv, std::span<const int32_t> prompt,
                               const GenerateOptions& options, const TokenCallback& on_token) {
  Sampler sampler(options.sampling, static_cast<int32_t>(session.model().config().vocab_size));
  return run(session, kv, prompt, options, sampler, token_step(on_token));
}

GenerateResult generate_greedy(Session& session, KvCache& kv, std::span<const int32_t> prompt,
                               const GenerateOptions& options, const TokenCallback& on_token) {
  Sampler sampler(SamplingParams::greedy(), static_cast<int32_t>(session.model().config().vocab_size));
  return run(session, kv, prompt, options, sampler, token_step(on_token));
}

GenerateResult generate(Session& session, KvCache& kv, const Tokenizer& tokenizer, std::span<const int32_t> prompt,
                        const GenerateOptions& options, const TextCallback& on_text) {
  Sampler sampler(options.sampling, static_cast<int32_t>(session.model().config().vocab_size));
  StreamDecoder stream(tokenizer, /*skip_special=*/true);
  StopStringFilter stops(options.stop_strings);
  std::string text;
  GenerateResult r = run(session, kv, prompt, options, sampler,
                         {[&](int32_t id, std::span<const float>, bool last, StopReason& stop) {
                           std::string piece = id < tokenizer.vocab_size() ? stream.push(id) : std::string();
                           if (last) piece += stream.flush();
                           piece = stops.push(piece, last);
                           text += piece;
                           const bool go_on = !on_text || on_text(id, piece);
                           if (stops.matched()) {
                             stop = StopReason::StopString;
                             return false;
                           }
                           if (!go_on) stop = StopReason::Callback;
                           return go_on;
                         }});
  r.text = std::move(text);
  return r;
}

}  // namespace kvinfer
