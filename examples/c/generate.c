/* generate.c: kvinfer's C API end to end. Loads a model, tokenizes a prompt, streams a
 * continuation through the callback, and prints the statistics.
 *
 *   kvinfer-c-generate MODEL PROMPT [MAX_NEW_TOKENS [TEMPERATURE [SEED]]]
 *
 * The continuation goes to stdout (nothing else does); the statistics and errors to stderr.
 * Greedy unless a temperature above 0 is given. Exit status 1 on any error, naming it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvinfer/kvinfer_c.h"

static int failed(const char* what, kvinfer_status status) {
  fprintf(stderr, "error: %s: %s (%s)\n", what, kvinfer_last_error(), kvinfer_status_name(status));
  return 1;
}

static bool print_piece(int32_t id, const char* piece, size_t piece_len, void* user) {
  (void)id;
  (void)user;
  fwrite(piece, 1, piece_len, stdout);
  fflush(stdout);
  return true; /* false would stop generation here */
}

int main(int argc, char** argv) {
  if (argc < 3 || argc > 6) {
    fprintf(stderr, "usage: %s MODEL PROMPT [MAX_NEW_TOKENS [TEMPERATURE [SEED]]]\n", argv[0]);
    return 2;
  }
  const char* path = argv[1];
  const char* prompt = argv[2];
  kvinfer_generate_options options = kvinfer_generate_options_default();
  options.max_new_tokens = argc > 3 ? strtoll(argv[3], NULL, 10) : 64;
  options.sampling.temperature = argc > 4 ? strtof(argv[4], NULL) : 0.0f;
  if (options.sampling.temperature > 0.0f) {
    options.sampling.top_k = 40;
    options.sampling.top_p = 0.95f;
  }
  options.sampling.seed = argc > 5 ? strtoull(argv[5], NULL, 10) : 0;

  int code = 1;
  kvinfer_model* model = NULL;
  kvinfer_session* session = NULL;
  kvinfer_kv* kv = NULL;
  int32_t* ids = NULL;
  kvinfer_status st;

  kvinfer_load_options load = kvinfer_load_options_default();
  load.device = KVINFER_DEVICE_CPU;
  if ((st = kvinfer_model_load(path, &load, &model)) != KVINFER_OK) {
    code = failed("loading the model", st);
    goto done;
  }

  /* A size query first (capacity 0), then the ids. */
  size_t n_ids = 0;
  st = kvinfer_tokenize(model, prompt, strlen(prompt), true, true, NULL, 0, &n_ids);
  if (st != KVINFER_OK && st != KVINFER_ERR_BUFFER_TOO_SMALL) {
    code = failed("tokenizing the prompt", st);
    goto done;
  }
  ids = malloc((n_ids > 0 ? n_ids : 1) * sizeof *ids);
  if (ids == NULL) {
    fprintf(stderr, "error: out of memory\n");
    goto done;
  }
  if ((st = kvinfer_tokenize(model, prompt, strlen(prompt), true, true, ids, n_ids, &n_ids)) != KVINFER_OK) {
    code = failed("tokenizing the prompt", st);
    goto done;
  }

  int64_t capacity = (int64_t)n_ids + options.max_new_tokens;
  if (capacity > kvinfer_model_context_length(model)) capacity = kvinfer_model_context_length(model);
  if ((st = kvinfer_kv_new(model, capacity, KVINFER_DTYPE_DEFAULT, &kv)) != KVINFER_OK) {
    code = failed("making the KV cache", st);
    goto done;
  }
  if ((st = kvinfer_session_new(model, NULL, &session)) != KVINFER_OK) {
    code = failed("making the session", st);
    goto done;
  }

  kvinfer_generate_result result;
  memset(&result, 0, sizeof result);
  if ((st = kvinfer_generate(session, kv, ids, n_ids, &options, print_piece, NULL, &result)) != KVINFER_OK) {
    code = failed("generating", st);
    goto done;
  }
  printf("\n");
  fprintf(stderr, "stop: %s; prompt %lld tokens in %.3f s; %lld generated, decode %.3f s; cache %lld tokens, %llu bytes\n",
          kvinfer_stop_reason_name(result.stop), (long long)result.prompt_tokens, result.prefill_seconds,
          (long long)result.generated_tokens, result.decode_seconds, (long long)result.kv_tokens,
          (unsigned long long)result.kv_bytes);
  code = 0;

done:
  kvinfer_session_free(session);
  kvinfer_kv_free(kv);
  kvinfer_model_free(model);
  free(ids);
  return code;
}
