// The C API (kvinfer/kvinfer_c.h): sessions (prefill, decode, step), samplers and generation.
#include "c_api/c_api_internal.h"

using namespace kvinfer;
using namespace kvinfer::capi;

namespace kvinfer::capi {

SamplingParams sampling_arg(const kvinfer_sampling_params& p) {
  SamplingParams s = SamplingParams::greedy();
  s.temperature = p.temperature;
  s.top_k = p.top_k;
  s.top_p = p.top_p;
  s.min_p = p.min_p;
  s.repetition_penalty = p.repetition_penalty;
  s.presence_penalty = p.presence_penalty;
  s.frequency_penalty = p.frequency_penalty;
  s.penalty_last_n = p.penalty_last_n;
  s.seed = p.seed;
  if (p.grammar != nullptr) s.grammar = p.grammar->grammar;
  s.logit_bias.clear();
  for (const kvinfer_logit_bias& b : array_arg(p.logit_bias, p.n_logit_bias, "logit_bias"))
    s.logit_bias.emplace_back(b.id, b.bias);
  return s;
}

}  // namespace kvinfer::capi

namespace {

CancelCallback cancel_fn(kvinfer_cancel_callback cb, void* user) {
  if (cb == nullptr) return {};
  return [cb, user] { return cb(user); };
}

kvinfer_stop_reason to_c(StopReason r) {
  switch (r) {
    case StopReason::Eos: return KVINFER_STOP_EOS;
    case StopReason::StopString: return KVINFER_STOP_STRING;
    case StopReason::MaxTokens: return KVINFER_STOP_MAX_TOKENS;
    case StopReason::ContextFull: return KVINFER_STOP_CONTEXT_FULL;
    case StopReason::Callback: return KVINFER_STOP_CALLBACK;
    case StopReason::Cancelled: return KVINFER_STOP_CANCELLED;
  }
  throw StatusError(KVINFER_ERR_INTERNAL, "a StopReason the C API does not know");
}

void set_logits(std::span<const float> logits, const float** logits_out) {
  if (logits_out != nullptr) *logits_out = logits.data();
}

}  // namespace

extern "C" {

// ---- session ----

kvinfer_session_options kvinfer_session_options_default(void) {
  const SessionOptions d;
  kvinfer_session_options o{};
  o.threads = d.threads;
  o.prefill_chunk_tokens = d.prefill_chunk_tokens;
  return o;
}

kvinfer_status kvinfer_session_new(const kvinfer_model* model, const kvinfer_session_options* options,
                                   kvinfer_session** out) {
  if (out != nullptr) *out = nullptr;
  return guard(__func__, [&] {
    need(out, "out");
    const std::shared_ptr<const Model>& m = need(model, "model").model;
    const kvinfer_session_options o = options != nullptr ? *options : kvinfer_session_options_default();
    SessionOptions so;
    so.threads = o.threads;
    so.prefill_chunk_tokens = o.prefill_chunk_tokens;
    *out = new kvinfer_session{Session(m, so)};
  });
}

void kvinfer_session_free(kvinfer_session* session) { delete session; }

kvinfer_status kvinfer_session_set_cancel(kvinfer_session* session, kvinfer_cancel_callback cancel, void* user) {
  return guard(__func__, [&] {
    kvinfer_session& s = need(session, "session");
    s.cancel = cancel;
    s.cancel_user = user;
  });
}

kvinfer_status kvinfer_prefill(kvinfer_session* session, kvinfer_kv* kv, const int32_t* ids, size_t n,
                               const float** logits_out) {
  if (logits_out != nullptr) *logits_out = nullptr;
  return guard(__func__, [&] {
    kvinfer_session& s = need(session, "session");
    KvCache& cache = need(kv, "kv").kv;
    set_logits(s.session.prefill(cache, array_arg(ids, n, "ids"), Logits::Last, cancel_fn(s.cancel, s.cancel_user)),
               logits_out);
  });
}

kvinfer_status kvinfer_decode(kvinfer_session* session, kvinfer_kv* kv, int32_t id, const float** logits_out) {
  if (logits_out != nullptr) *logits_out = nullptr;
  return guard(__func__, [&] {
    kvinfer_session& s = need(session, "session");
    set_logits(s.session.decode(need(kv, "kv").kv, id), logits_out);
  });
}

kvinfer_status kvinfer_step(kvinfer_session* session, kvinfer_kv* kv, const int32_t* ids, size_t n) {
  return guard(__func__, [&] { need(session, "session").session.step(need(kv, "kv").kv, array_arg(ids, n, "ids")); });
}

kvinfer_status kvinfer_session_logits(kvinfer_session* session, const float** logits_out, size_t* n_out) {
  if (logits_out != nullptr) *logits_out = nullptr;
  if (n_out != nullptr) *n_out = 0;
  return guard(__func__, [&] {
    need(logits_out, "logits_out");
    need(n_out, "n_out");
    const std::span<const float> l = need(session, "session").session.logits();
    *logits_out = l.data();
    *n_out = l.size();
  });
}

// ---- sampling ----

kvinfer_sampling_params kvinfer_sampling_default(void) {
  // SamplingParams::greedy()'s values, spelled out: the C defaults do not move with the C++ ones.
  kvinfer_sampling_params p{};
  p.temperature = 0.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.repetition_penalty = 1.0f;
  p.presence_penalty = 0.0f;
  p.frequency_penalty = 0.0f;
  p.penalty_last_n = 64;
  p.logit_bias = nullptr;
  p.n_logit_bias = 0;
  p.seed = 0;
  p.grammar = nullptr;
  return p;
}

kvinfer_status kvinfer_sampler_new(const kvinfer_sampling_params* params, int32_t vocab_size, kvinfer_sampler** out) {
  if (out != nullptr) *out = nullptr;
  return guard(__func__, [&] {
    need(out, "out");
    const kvinfer_sampling_params p = params != nullptr ? *params : kvinfer_sampling_default();
    *out = new kvinfer_sampler{Sampler(sampling_arg(p), vocab_size)};
  });
}

void kvinfer_sampler_free(kvinfer_sampler* sampler) { delete sampler; }

kvinfer_status kvinfer_sample(kvinfer_sampler* sampler, kvinfer_session* session, int32_t* id_out) {
  return guard(__func__, [&] {
    need(id_out, "id_out") = -1;
    *id_out = need(session, "session").session.sample(need(sampler, "sampler").sampler);
  });
}

kvinfer_status kvinfer_sampler_sample_logits(kvinfer_sampler* sampler, const float* logits, size_t n,
                                             int32_t* id_out) {
  return guard(__func__, [&] {
    need(id_out, "id_out") = -1;
    *id_out = need(sampler, "sampler").sampler.sample(array_arg(logits, n, "logits"));
  });
}

kvinfer_status kvinfer_sampler_accept(kvinfer_sampler* sampler, const int32_t* ids, size_t n) {
  return guard(__func__, [&] {
    Sampler& s = need(sampler, "sampler").sampler;
    const std::span<const int32_t> all = array_arg(ids, n, "ids");
    for (size_t i = 0; i < all.size(); ++i)  // all or nothing: check before recording any
      if (all[i] < 0 || all[i] >= s.vocab_size())
        throw StatusError(KVINFER_ERR_INVALID_ARGUMENT, fmt::format("token id {} at index {} is outside the vocabulary (size {})",
                                                                    all[i], i, s.vocab_size()));
    s.accept(all);
  });
}

kvinfer_status kvinfer_sampler_reset(kvinfer_sampler* sampler) {
  return guard(__func__, [&] { need(sampler, "sampler").sampler.reset(); });
}

// ---- generation ----

kvinfer_generate_options kvinfer_generate_options_default(void) {
  const GenerateOptions d;
  kvinfer_generate_options o{};
  o.max_new_tokens = d.max_new_tokens;
  o.use_kv_cache = d.use_kv_cache;
  o.ignore_eos = d.ignore_eos;
  o.sampling = kvinfer_sampling_default();
  return o;
}

kvinfer_status kvinfer_generate(kvinfer_session* session, kvinfer_kv* kv, const int32_t* prompt, size_t n_prompt,
                                const kvinfer_generate_options* options, kvinfer_text_callback callback, void* user,
                                kvinfer_generate_result* result) {
  if (result != nullptr) {
    result->n_tokens = 0;
    result->stop = KVINFER_STOP_MAX_TOKENS;
    result->prompt_tokens = result->generated_tokens = result->kv_tokens = 0;
    result->prefill_seconds = result->ttft_seconds = result->decode_seconds = 0;
    result->kv_bytes = 0;
  }
  return guard(__func__, [&] {
    Session& s = need(session, "session").session;
    KvCache& cache = need(kv, "kv").kv;
    const std::span<const int32_t> ids = array_arg(prompt, n_prompt, "prompt");
    if (result != nullptr) array_arg(result->tokens, result->tokens_capacity, "result->tokens");
    const kvinfer_generate_options o = options != nullptr ? *options : kvinfer_generate_options_default();
    GenerateOptions go;
    go.max_new_tokens = o.max_new_tokens;
    go.use_kv_cache = o.use_kv_cache;
    const std::span<const int32_t> stop_ids = array_arg(o.stop_ids, o.n_stop_ids, "options->stop_ids");
    go.stop_ids.assign(stop_ids.begin(), stop_ids.end());
    go.ignore_eos = o.ignore_eos;
    go.sampling = sampling_arg(o.sampling);
    for (const char* stop : array_arg(o.stop_strings, o.n_stop_strings, "options->stop_strings"))
      go.stop_strings.emplace_back(&need(stop, "an entry of options->stop_strings"));
    go.cancel = cancel_fn(o.cancel, o.cancel_user);

    GenerateResult r;
    if (s.model().has_tokenizer()) {
      std::string piece;  // NUL-terminated for the callback
      TextCallback on_text;
      if (callback != nullptr)
        on_text = [&](int32_t id, std::string_view text) {
          piece.assign(text);
          return callback(id, piece.c_str(), piece.size(), user);
        };
      r = generate(s, cache, s.model().tokenizer(), ids, go, on_text);
    } else {
      if (!go.stop_strings.empty())
        throw StatusError(KVINFER_ERR_INVALID_ARGUMENT, "stop strings need a model with a tokenizer");
      TokenCallback on_token;
      if (callback != nullptr) on_token = [&](int32_t id, std::span<const float>) { return callback(id, "", 0, user); };
      r = generate_tokens(s, cache, ids, go, on_token);
    }
    if (result != nullptr) {
      result->n_tokens = r.tokens.size();
      std::copy_n(r.tokens.begin(), std::min(r.tokens.size(), result->tokens_capacity), result->tokens);
      result->stop = to_c(r.stop);
      result->prompt_tokens = r.stats.prompt_tokens;
      result->generated_tokens = r.stats.generated_tokens;
      result->prefill_seconds = r.stats.prefill_seconds;
      result->ttft_seconds = r.stats.ttft_seconds;
      result->decode_seconds = r.stats.decode_seconds;
      result->kv_bytes = r.stats.kv_bytes;
      result->kv_tokens = r.stats.kv_tokens;
    }
  });
}

}  // extern "C"
