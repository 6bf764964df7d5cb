/* kvinfer_c.h compiled as C (C11, -Wpedantic -Werror): the header is valid C, and a C caller
 * links and runs. test_c_api.cpp calls this. */
#include <string.h>

#include "kvinfer/kvinfer_c.h"

/* Loads `path`, greedily generates max_new tokens from `prompt` and writes the ids to out
 * (capacity cap). Returns the status of the first call that failed, or KVINFER_OK; *n_out: ids. */
kvinfer_status kvinfer_c_header_generate(const char* path, const char* prompt, int64_t max_new, int32_t* out,
                                         size_t cap, size_t* n_out);

kvinfer_status kvinfer_c_header_generate(const char* path, const char* prompt, int64_t max_new, int32_t* out,
                                         size_t cap, size_t* n_out) {
  kvinfer_model* model = NULL;
  kvinfer_kv* kv = NULL;
  kvinfer_session* session = NULL;
  int32_t ids[64];
  size_t n = 0;
  kvinfer_generate_result result;
  kvinfer_generate_options options = kvinfer_generate_options_default();
  kvinfer_load_options load = kvinfer_load_options_default();
  kvinfer_status st;

  memset(&result, 0, sizeof result);
  *n_out = 0;
  load.device = KVINFER_DEVICE_CPU;
  if ((st = kvinfer_model_load(path, &load, &model)) != KVINFER_OK) goto done;
  if ((st = kvinfer_tokenize(model, prompt, strlen(prompt), true, true, ids, sizeof ids / sizeof ids[0], &n)) != KVINFER_OK)
    goto done;
  if ((st = kvinfer_kv_new(model, (int64_t)n + max_new, KVINFER_DTYPE_DEFAULT, &kv)) != KVINFER_OK) goto done;
  if ((st = kvinfer_session_new(model, NULL, &session)) != KVINFER_OK) goto done;
  options.max_new_tokens = max_new;
  options.ignore_eos = true;
  result.tokens = out;
  result.tokens_capacity = cap;
  if ((st = kvinfer_generate(session, kv, ids, n, &options, NULL, NULL, &result)) != KVINFER_OK) goto done;
  *n_out = result.n_tokens;

done:
  kvinfer_session_free(session);
  kvinfer_kv_free(kv);
  kvinfer_model_free(model);
  return st;
}
