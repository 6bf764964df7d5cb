/* kvinfer_c.h: the C API of kvinfer, over the same objects as the C++ API (kvinfer/kvinfer.h).
 *
 * Plain C (C99 or later; also valid C++). docs/c-api.md says who frees what and for how long a
 * returned pointer stays valid. In short:
 *  - Every function that can fail returns a kvinfer_status; KVINFER_OK is 0. On failure
 *    kvinfer_last_error() holds a message naming what went wrong (thread-local; "" after a
 *    call that succeeded). No C++ exception ever crosses this API.
 *  - Getters that cannot fail return a value, with a documented sentinel for a NULL handle.
 *  - A NULL pointer where one is required is KVINFER_ERR_INVALID_ARGUMENT, never a crash.
 *  - Handles made by a kvinfer_*_new / _load / _inspect / _copy call are freed by the matching
 *    kvinfer_*_free (NULL is accepted). Sessions, caches and samplers hold their own reference
 *    on the model: they may be freed before or after it.
 *  - Threads: a model may be shared by any number of threads; a session, a cache and a sampler
 *    are used by one thread at a time.
 *  - Callbacks are called on the calling thread and must not throw or longjmp.
 *  - Sizes that fill a caller's buffer follow snprintf: when the buffer is too small the call
 *    returns KVINFER_ERR_BUFFER_TOO_SMALL, writes nothing, and sets *n_out to the count needed.
 */
#ifndef KVINFER_KVINFER_C_H
#define KVINFER_KVINFER_C_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Exported from a shared libkvinfer built with -fvisibility=hidden. */
#ifndef KVINFER_C_API
#if defined(_WIN32)
#define KVINFER_C_API
#else
#define KVINFER_C_API __attribute__((visibility("default")))
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- status and errors ---- */

typedef enum kvinfer_status {
  KVINFER_OK = 0,
  KVINFER_ERR_INVALID_ARGUMENT = 1, /* a value the caller passed (NULL, out of range, id outside the vocabulary) */
  KVINFER_ERR_BAD_FILE = 2,         /* a file missing, unreadable, truncated or malformed */
  KVINFER_ERR_UNSUPPORTED = 3,      /* a well-formed input kvinfer does not handle */
  KVINFER_ERR_OUT_OF_MEMORY = 4,    /* the bytes needed do not fit (host or device) */
  KVINFER_ERR_CONTEXT_FULL = 5,     /* the tokens do not fit in the cache or the context length */
  KVINFER_ERR_CANCELLED = 6,        /* a cancel callback asked to stop */
  KVINFER_ERR_DEVICE = 7,           /* the CUDA device or its libraries failed */
  KVINFER_ERR_BUFFER_TOO_SMALL = 8, /* the caller's buffer is too small: *n_out says what is needed */
  KVINFER_ERR_INTERNAL = 9,         /* anything else (a bug: please report it with the message) */
  KVINFER_ERR_BUSY = 10             /* the work cannot be taken now: try again later */
} kvinfer_status;

/* "ok", "invalid argument", "bad file", ...; "unknown status" for other values. Static strings. */
KVINFER_C_API const char* kvinfer_status_name(kvinfer_status status);
/* The message of the last call on this thread that failed; "" when the last call succeeded.
 * Valid until the next kvinfer call on this thread. Never NULL. */
KVINFER_C_API const char* kvinfer_last_error(void);

/* ---- enumerations (mirroring the C++ ones) ---- */

typedef enum kvinfer_device { KVINFER_DEVICE_AUTO = 0, KVINFER_DEVICE_CPU = 1, KVINFER_DEVICE_CUDA = 2 } kvinfer_device;

typedef enum kvinfer_dtype {
  KVINFER_DTYPE_DEFAULT = -1, /* for a KV cache: the model's default (f16 for quantised weights) */
  KVINFER_DTYPE_F32 = 0,
  KVINFER_DTYPE_F16 = 1,
  KVINFER_DTYPE_BF16 = 2,
  KVINFER_DTYPE_Q8_0 = 3,
  KVINFER_DTYPE_Q4_0 = 4,
  KVINFER_DTYPE_Q4_1 = 5,
  KVINFER_DTYPE_Q5_0 = 6,
  KVINFER_DTYPE_Q5_1 = 7,
  KVINFER_DTYPE_Q4_K = 8,
  KVINFER_DTYPE_Q5_K = 9,
  KVINFER_DTYPE_Q6_K = 10,
  KVINFER_DTYPE_INT8 = 11, /* KV cache only: 8-bit codes and an f32 scale per row */
  KVINFER_DTYPE_FP8 = 12   /* KV cache only: E4M3 codes and an f32 scale per row */
} kvinfer_dtype;
/* "f32", "q4_1", ...; "?" for other values. Static strings. */
KVINFER_C_API const char* kvinfer_dtype_name(kvinfer_dtype dtype);

typedef enum kvinfer_stop_reason {
  KVINFER_STOP_EOS = 0,
  KVINFER_STOP_STRING = 1,
  KVINFER_STOP_MAX_TOKENS = 2,
  KVINFER_STOP_CONTEXT_FULL = 3,
  KVINFER_STOP_CALLBACK = 4,
  KVINFER_STOP_CANCELLED = 5
} kvinfer_stop_reason;
KVINFER_C_API const char* kvinfer_stop_reason_name(kvinfer_stop_reason reason);

typedef enum kvinfer_log_level {
  KVINFER_LOG_DEBUG = 0,
  KVINFER_LOG_INFO = 1,
  KVINFER_LOG_WARNING = 2,
  KVINFER_LOG_ERROR = 3
} kvinfer_log_level;

/* ---- callbacks ---- */

/* Asked between units of work (tensors of a load, chunks of a prefill, decode steps): true stops. */
typedef bool (*kvinfer_cancel_callback)(void* user);
/* Load progress: bytes done of total. */
typedef void (*kvinfer_progress_callback)(uint64_t done, uint64_t total, void* user);
/* A log line (no newline; valid during the call). Called from any thread: must be thread-safe. */
typedef void (*kvinfer_log_callback)(kvinfer_log_level level, const char* message, void* user);
/* Each generated id and the text that became printable with it: piece_len bytes at piece,
 * NUL-terminated, often "" (valid during the call). Return false to stop generation. */
typedef bool (*kvinfer_text_callback)(int32_t id, const char* piece, size_t piece_len, void* user);

/* Process-wide. NULL silences the library (the default). */
KVINFER_C_API kvinfer_status kvinfer_set_log_callback(kvinfer_log_callback callback, void* user,
                                                      kvinfer_log_level min_level);

/* ---- opaque handles ---- */

typedef struct kvinfer_model kvinfer_model;
typedef struct kvinfer_model_info kvinfer_model_info;
typedef struct kvinfer_kv kvinfer_kv;
typedef struct kvinfer_session kvinfer_session;
typedef struct kvinfer_sampler kvinfer_sampler;
typedef struct kvinfer_grammar kvinfer_grammar;

/* ---- model configuration (shared by loaded and inspected models) ---- */

typedef struct kvinfer_config {
  /* HF's class name, static: "LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM",
     "Qwen3ForCausalLM", "Gemma2ForCausalLM", "Gemma3ForCausalLM", "MixtralForCausalLM",
     "Qwen2MoeForCausalLM", "Qwen3MoeForCausalLM", "Phi3ForCausalLM", "GPT2LMHeadModel" */
  const char* architecture;
  int64_t vocab_size;
  int64_t hidden_size;
  int64_t intermediate_size;
  int64_t num_layers;
  int64_t num_heads;
  int64_t num_kv_heads;
  int64_t head_dim;
  int64_t max_position_embeddings;
  int64_t sliding_window; /* 0: none */
  double rope_theta;
  double norm_eps;
  bool tie_word_embeddings;
  int32_t bos_token_id; /* -1: none */
} kvinfer_config;

/* ---- loading ---- */

typedef struct kvinfer_load_options {
  kvinfer_device device;   /* AUTO */
  int64_t kv_tokens;       /* 0: no cache planned in the up-front memory check */
  kvinfer_dtype kv_dtype;  /* DEFAULT */
  uint64_t memory_limit;   /* 0: $KVINFER_MEMORY_LIMIT or detected */
  int64_t context_length;  /* 0: the model's */
  int32_t threads;         /* 0: default_cpu_threads() */
  bool weights_in_place;   /* false */
  bool int8_activations;   /* false */
  bool check_finite;       /* false */
  kvinfer_progress_callback progress; /* NULL */
  void* progress_user;
  kvinfer_cancel_callback cancel; /* NULL */
  void* cancel_user;
} kvinfer_load_options;

/* The defaults of kvinfer::LoadOptions. */
KVINFER_C_API kvinfer_load_options kvinfer_load_options_default(void);

/* Loads a HF model directory or a GGUF file (kvinfer::Model::load). options may be NULL
 * (defaults). *out is set on success, NULL on failure. */
KVINFER_C_API kvinfer_status kvinfer_model_load(const char* path, const kvinfer_load_options* options,
                                                kvinfer_model** out);
KVINFER_C_API void kvinfer_model_free(kvinfer_model* model);

KVINFER_C_API kvinfer_status kvinfer_model_config(const kvinfer_model* model, kvinfer_config* out);
/* -1 for a NULL model. */
KVINFER_C_API int64_t kvinfer_model_vocab_size(const kvinfer_model* model);
KVINFER_C_API int64_t kvinfer_model_context_length(const kvinfer_model* model);
/* KVINFER_DTYPE_DEFAULT (-1) for a NULL model. */
KVINFER_C_API kvinfer_dtype kvinfer_model_weight_dtype(const kvinfer_model* model);
/* 0 for a NULL model. */
KVINFER_C_API uint64_t kvinfer_model_weight_bytes(const kvinfer_model* model);
/* KVINFER_DEVICE_AUTO for a NULL model; CPU or CUDA otherwise. */
KVINFER_C_API kvinfer_device kvinfer_model_device(const kvinfer_model* model);
/* false for a NULL model. */
KVINFER_C_API bool kvinfer_model_has_tokenizer(const kvinfer_model* model);
/* Every id that ends generation (Model::eos_ids()), into ids[0 .. capacity). */
KVINFER_C_API kvinfer_status kvinfer_model_eos_ids(const kvinfer_model* model, int32_t* ids, size_t capacity,
                                                   size_t* n_out);

/* ---- inspecting a checkpoint without loading it (kvinfer::inspect_model) ---- */

typedef enum kvinfer_model_format {
  KVINFER_FORMAT_HF_DIRECTORY = 0,
  KVINFER_FORMAT_GGUF = 1,
  KVINFER_FORMAT_CONFIG_JSON = 2 /* a bare config.json: no weights */
} kvinfer_model_format;

typedef struct kvinfer_tensor_desc {
  const char* name;      /* owned by the info */
  const char* type;      /* as the file spells it ("BF16", "q4_K"); owned by the info */
  kvinfer_dtype dtype;   /* DEFAULT when kvinfer has no dtype for it (a buffer Model::load skips) */
  size_t ndim;
  const int64_t* shape;  /* ndim values, outermost first; owned by the info */
  uint64_t bytes;
} kvinfer_tensor_desc;

KVINFER_C_API kvinfer_status kvinfer_inspect(const char* path, kvinfer_model_info** out);
KVINFER_C_API void kvinfer_model_info_free(kvinfer_model_info* info);
/* The strings and arrays these return are owned by the info and live until it is freed. */
KVINFER_C_API kvinfer_status kvinfer_model_info_config(const kvinfer_model_info* info, kvinfer_config* out);
KVINFER_C_API kvinfer_model_format kvinfer_model_info_format(const kvinfer_model_info* info); /* HF_DIRECTORY for NULL */
KVINFER_C_API const char* kvinfer_model_info_name(const kvinfer_model_info* info);          /* "" for NULL or none */
KVINFER_C_API const char* kvinfer_model_info_chat_template(const kvinfer_model_info* info); /* "" for NULL or none */
KVINFER_C_API bool kvinfer_model_info_has_tokenizer(const kvinfer_model_info* info);
KVINFER_C_API kvinfer_dtype kvinfer_model_info_weight_dtype(const kvinfer_model_info* info); /* DEFAULT for NULL */
KVINFER_C_API uint64_t kvinfer_model_info_weight_bytes(const kvinfer_model_info* info);
KVINFER_C_API size_t kvinfer_model_info_tensor_count(const kvinfer_model_info* info);
KVINFER_C_API kvinfer_status kvinfer_model_info_tensor(const kvinfer_model_info* info, size_t index,
                                                       kvinfer_tensor_desc* out);
/* The bytes a KvCache of `tokens` positions takes in `dtype` (DEFAULT: the model's default). */
KVINFER_C_API kvinfer_status kvinfer_model_info_kv_bytes(const kvinfer_model_info* info, int64_t tokens,
                                                         kvinfer_dtype dtype, uint64_t* out);

/* ---- tokenizer (the model's; KVINFER_ERR_INVALID_ARGUMENT for a model loaded without one) ---- */

/* text: text_len bytes (any bytes). ids may be NULL when capacity is 0 (a size query). */
KVINFER_C_API kvinfer_status kvinfer_tokenize(const kvinfer_model* model, const char* text, size_t text_len,
                                              bool add_special, bool parse_special, int32_t* ids, size_t capacity,
                                              size_t* n_out);
/* The text of ids (Tokenizer::decode), NUL-terminated: needs *len_out + 1 <= capacity. *len_out
 * is the length without the NUL. buf may be NULL when capacity is 0. */
KVINFER_C_API kvinfer_status kvinfer_detokenize(const kvinfer_model* model, const int32_t* ids, size_t n_ids,
                                                bool skip_special, char* buf, size_t capacity, size_t* len_out);
/* The raw bytes one token stands for (Tokenizer::token_bytes; maybe part of a UTF-8 character),
 * with the same convention. */
KVINFER_C_API kvinfer_status kvinfer_token_piece(const kvinfer_model* model, int32_t id, char* buf,
                                                 size_t capacity, size_t* len_out);
/* -1 when the tokenizer has none (or for NULL / a model without a tokenizer). */
KVINFER_C_API int32_t kvinfer_token_bos(const kvinfer_model* model);

/* ---- KV cache ---- */

/* A cache of `capacity` positions for model, on its device (kvinfer::KvCache). */
KVINFER_C_API kvinfer_status kvinfer_kv_new(const kvinfer_model* model, int64_t capacity, kvinfer_dtype dtype,
                                            kvinfer_kv** out);
KVINFER_C_API void kvinfer_kv_free(kvinfer_kv* kv);
KVINFER_C_API int64_t kvinfer_kv_size(const kvinfer_kv* kv);     /* -1 for NULL */
KVINFER_C_API int64_t kvinfer_kv_capacity(const kvinfer_kv* kv); /* -1 for NULL */
KVINFER_C_API uint64_t kvinfer_kv_bytes(const kvinfer_kv* kv);   /* 0 for NULL */
KVINFER_C_API kvinfer_dtype kvinfer_kv_dtype(const kvinfer_kv* kv); /* DEFAULT for NULL */
/* The least n > 0 kvinfer_kv_truncate accepts: 0 until a sliding-window layer's ring (Mistral,
 * Gemma 2/3, Qwen2's window, Phi-3) overwrote a position; then the first position whose window
 * the rings still hold (kvinfer::KvCache::earliest_rewind). -1 for NULL. */
KVINFER_C_API int64_t kvinfer_kv_earliest_rewind(const kvinfer_kv* kv);
/* Forgets every position from n on; n == 0, or kvinfer_kv_earliest_rewind(kv) <= n <= size.
 * KVINFER_ERR_INVALID_ARGUMENT, the cache unchanged, for n outside 0 .. size, or below the earliest
 * rewind (the message names the positions the rings no longer hold: prefill them again from 0). */
KVINFER_C_API kvinfer_status kvinfer_kv_truncate(kvinfer_kv* kv, int64_t n);
/* A fork: an independent cache with the same positions and token ids (KvCache::copy).
 * capacity 0: the same capacity. */
KVINFER_C_API kvinfer_status kvinfer_kv_copy(const kvinfer_kv* kv, int64_t capacity, kvinfer_kv** out);
/* The token ids of the filled positions (KvCache::tokens). */
KVINFER_C_API kvinfer_status kvinfer_kv_tokens(const kvinfer_kv* kv, int32_t* ids, size_t capacity, size_t* n_out);
/* Saves kv's filled positions to path (kvinfer::save_kv_state): a regular file or a new path;
   anything else (a device, FIFO, directory) is KVINFER_ERR_BAD_FILE, left untouched. */
KVINFER_C_API kvinfer_status kvinfer_kv_save(const kvinfer_kv* kv, const kvinfer_model* model, const char* path);
/* A new cache holding what path saved (kvinfer::load_kv_state). capacity 0: the saved one. */
KVINFER_C_API kvinfer_status kvinfer_kv_load(const kvinfer_model* model, const char* path, int64_t capacity,
                                             kvinfer_kv** out);

/* ---- session: forward passes ---- */

typedef struct kvinfer_session_options {
  int32_t threads;              /* 0: the model's */
  int64_t prefill_chunk_tokens; /* 512 */
} kvinfer_session_options;
KVINFER_C_API kvinfer_session_options kvinfer_session_options_default(void);

/* options may be NULL (defaults). */
KVINFER_C_API kvinfer_status kvinfer_session_new(const kvinfer_model* model, const kvinfer_session_options* options,
                                                 kvinfer_session** out);
KVINFER_C_API void kvinfer_session_free(kvinfer_session* session);
/* Asked between the chunks of this session's prefills (NULL: none). */
KVINFER_C_API kvinfer_status kvinfer_session_set_cancel(kvinfer_session* session, kvinfer_cancel_callback cancel,
                                                        void* user);

/* Runs ids[0 .. n) at positions size .. size+n-1 of kv in one pass (Session::prefill). *logits_out
 * (may be NULL) gets the last position's vocab_size logits, owned by the session and valid until
 * its next call. On failure the cache is as it was. */
KVINFER_C_API kvinfer_status kvinfer_prefill(kvinfer_session* session, kvinfer_kv* kv, const int32_t* ids, size_t n,
                                             const float** logits_out);
/* One position (Session::decode); logits as kvinfer_prefill. */
KVINFER_C_API kvinfer_status kvinfer_decode(kvinfer_session* session, kvinfer_kv* kv, int32_t id,
                                            const float** logits_out);
/* As kvinfer_prefill, leaving the logits where they were computed (Session::step): for
 * kvinfer_sample, or kvinfer_session_logits when they are wanted after all. */
KVINFER_C_API kvinfer_status kvinfer_step(kvinfer_session* session, kvinfer_kv* kv, const int32_t* ids, size_t n);
/* The last call's logits on the host (Session::logits): *n_out floats, valid until the next call. */
KVINFER_C_API kvinfer_status kvinfer_session_logits(kvinfer_session* session, const float** logits_out,
                                                    size_t* n_out);

/* ---- sampling ---- */

typedef struct kvinfer_logit_bias {
  int32_t id;
  float bias; /* added to the logit; -INFINITY bans the token */
} kvinfer_logit_bias;

typedef struct kvinfer_sampling_params {
  float temperature;        /* 0: greedy */
  int32_t top_k;            /* 0: off */
  float top_p;              /* 1: off */
  float min_p;              /* 0: off */
  float repetition_penalty; /* 1: off */
  float presence_penalty;   /* 0: off */
  float frequency_penalty;  /* 0: off */
  int32_t penalty_last_n;   /* 64; -1: all, 0: penalties off */
  const kvinfer_logit_bias* logit_bias; /* n_logit_bias pairs (copied when used); may be NULL */
  size_t n_logit_bias;
  uint64_t seed;
  const kvinfer_grammar* grammar; /* constrained output (kvinfer_grammar_*); NULL: none. Kept alive by
                                     the samplers and generations that use it */
} kvinfer_sampling_params;

/* Greedy with every filter and penalty off: temperature 0, top_k 0, top_p 1, min_p 0,
 * repetition_penalty 1, presence and frequency 0, penalty_last_n 64, no bias, seed 0. */
KVINFER_C_API kvinfer_sampling_params kvinfer_sampling_default(void);

/* A sampler for vocab_size ids (kvinfer::Sampler); params may be NULL (defaults). */
KVINFER_C_API kvinfer_status kvinfer_sampler_new(const kvinfer_sampling_params* params, int32_t vocab_size,
                                                 kvinfer_sampler** out);
KVINFER_C_API void kvinfer_sampler_free(kvinfer_sampler* sampler);
/* The next id from the last row of the session's last call's logits (Session::sample); does not
 * accept it into the sampler's history. */
KVINFER_C_API kvinfer_status kvinfer_sample(kvinfer_sampler* sampler, kvinfer_session* session, int32_t* id_out);
/* The next id from n logits on the host (Sampler::sample). */
KVINFER_C_API kvinfer_status kvinfer_sampler_sample_logits(kvinfer_sampler* sampler, const float* logits, size_t n,
                                                           int32_t* id_out);
/* Records ids for the penalties (Sampler::accept); nothing is recorded on failure. */
KVINFER_C_API kvinfer_status kvinfer_sampler_accept(kvinfer_sampler* sampler, const int32_t* ids, size_t n);
/* Clears the history; the RNG restarts from the seed. */
KVINFER_C_API kvinfer_status kvinfer_sampler_reset(kvinfer_sampler* sampler);

/* ---- structured output (docs/structured-output.md) ---- */

/* A grammar compiled for the model's vocabulary (Grammar::from_gbnf with
 * Model::grammar_vocabulary()): `text` in kvinfer's GBNF-style format. Set it as
 * kvinfer_sampling_params.grammar; freed by kvinfer_grammar_free (samplers keep their own
 * reference). */
KVINFER_C_API kvinfer_status kvinfer_grammar_from_gbnf(const kvinfer_model* model, const char* text,
                                                       kvinfer_grammar** out);
/* From a JSON schema (Grammar::from_json_schema): KVINFER_ERR_UNSUPPORTED names a keyword outside
 * the subset. whitespace: nonzero allows whitespace between JSON tokens, 0 compact JSON only. */
KVINFER_C_API kvinfer_status kvinfer_grammar_from_json_schema(const kvinfer_model* model, const char* schema,
                                                              int whitespace, kvinfer_grammar** out);
/* Any JSON value (Grammar::any_json). */
KVINFER_C_API kvinfer_status kvinfer_grammar_any_json(const kvinfer_model* model, kvinfer_grammar** out);
KVINFER_C_API void kvinfer_grammar_free(kvinfer_grammar* grammar);
/* Nonzero when the sampler's grammar says the output is complete and nothing may follow
 * (Sampler::grammar_finished); 0 without a grammar or for NULL. */
KVINFER_C_API int kvinfer_sampler_grammar_finished(const kvinfer_sampler* sampler);

/* ---- generation ---- */

typedef struct kvinfer_generate_options {
  int64_t max_new_tokens;             /* 256 */
  bool use_kv_cache;                  /* true */
  const int32_t* stop_ids;            /* n_stop_ids ids; none: the model's eos ids */
  size_t n_stop_ids;
  bool ignore_eos;                    /* false */
  kvinfer_sampling_params sampling;   /* kvinfer_sampling_default() */
  const char* const* stop_strings;    /* n_stop_strings NUL-terminated strings (needs a tokenizer) */
  size_t n_stop_strings;
  kvinfer_cancel_callback cancel;     /* NULL */
  void* cancel_user;
} kvinfer_generate_options;
KVINFER_C_API kvinfer_generate_options kvinfer_generate_options_default(void);

typedef struct kvinfer_generate_result {
  /* In: where to copy the generated ids (may be NULL with capacity 0). */
  int32_t* tokens;
  size_t tokens_capacity;
  /* Out. n_tokens: every id generated (the final end id included); min(n_tokens,
   * tokens_capacity) of them are copied. No error when the buffer is too small. */
  size_t n_tokens;
  kvinfer_stop_reason stop;
  int64_t prompt_tokens;
  int64_t generated_tokens;
  double prefill_seconds;
  double ttft_seconds;
  double decode_seconds;
  uint64_t kv_bytes;
  int64_t kv_tokens;
} kvinfer_generate_result;

/* Prefills prompt[0 .. n_prompt) at kv's end, then samples and decodes until an end id, a stop
 * string, max_new_tokens, a full cache, the callback returning false or cancel
 * (kvinfer::generate). With a tokenizer the callback gets each id's printable text; without one
 * (stop strings then refused) it gets "". callback and result may be NULL; options NULL:
 * defaults. Stopping for any of those reasons is KVINFER_OK, with result->stop saying which. */
KVINFER_C_API kvinfer_status kvinfer_generate(kvinfer_session* session, kvinfer_kv* kv, const int32_t* prompt,
                                              size_t n_prompt, const kvinfer_generate_options* options,
                                              kvinfer_text_callback callback, void* user,
                                              kvinfer_generate_result* result);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* KVINFER_KVINFER_C_H */
