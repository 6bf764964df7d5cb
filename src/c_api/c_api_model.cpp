// The C API (kvinfer/kvinfer_c.h): statuses and messages, enum names, loading a model, its
// tokenizer, and KV caches.
#include <algorithm>
#include <cstring>

#include "c_api/c_api_internal.h"

using namespace kvinfer;
using namespace kvinfer::capi;

namespace kvinfer::capi {
namespace {

thread_local std::string t_error;
thread_local bool t_error_lost = false;  // the message could not be stored (out of memory)

}  // namespace

kvinfer_status status_of(ErrorKind kind) noexcept {
  switch (kind) {
    case ErrorKind::InvalidArgument: return KVINFER_ERR_INVALID_ARGUMENT;
    case ErrorKind::BadFile: return KVINFER_ERR_BAD_FILE;
    case ErrorKind::Unsupported: return KVINFER_ERR_UNSUPPORTED;
    case ErrorKind::OutOfMemory: return KVINFER_ERR_OUT_OF_MEMORY;
    case ErrorKind::ContextFull: return KVINFER_ERR_CONTEXT_FULL;
    case ErrorKind::Cancelled: return KVINFER_ERR_CANCELLED;
    case ErrorKind::Device: return KVINFER_ERR_DEVICE;
    case ErrorKind::Busy: return KVINFER_ERR_BUSY;
  }
  return KVINFER_ERR_INTERNAL;
}

kvinfer_status fail(kvinfer_status status, const char* function, const char* message) noexcept {
  try {
    t_error.assign(function);
    t_error.append(": ");
    t_error.append(message);
    t_error_lost = false;
  } catch (...) {
    t_error.clear();
    t_error_lost = true;
  }
  return status;
}

void clear_error() noexcept {
  t_error.clear();
  t_error_lost = false;
}

void fill_text(std::string_view text, char* buf, size_t capacity, size_t* len_out) {
  need(len_out, "len_out") = text.size();
  if (buf == nullptr && capacity != 0)
    throw StatusError(KVINFER_ERR_INVALID_ARGUMENT, fmt::format("buf is NULL with a capacity of {}", capacity));
  if (text.size() >= capacity)
    throw StatusError(KVINFER_ERR_BUFFER_TOO_SMALL,
                      fmt::format("{} bytes and a NUL needed, the buffer holds {}", text.size(), capacity));
  char* out = &need(buf, "buf");
  std::memcpy(out, text.data(), text.size());
  out[text.size()] = '\0';
}

std::optional<DType> dtype_arg(kvinfer_dtype dtype) {
  if (dtype == KVINFER_DTYPE_DEFAULT) return std::nullopt;
  if (dtype < KVINFER_DTYPE_F32 || dtype > KVINFER_DTYPE_FP8)
    throw StatusError(KVINFER_ERR_INVALID_ARGUMENT, fmt::format("dtype {} is not a kvinfer_dtype", static_cast<int>(dtype)));
  return static_cast<DType>(dtype);
}

kvinfer_dtype to_c(DType dtype) noexcept { return static_cast<kvinfer_dtype>(static_cast<int>(dtype)); }

void fill_config(const ModelConfig& c, kvinfer_config& out) noexcept {
  out = {};
  switch (c.arch) {
    // architecture_name()'s, spelled out here: a string_view promises no NUL.
    case Architecture::Llama: out.architecture = "LlamaForCausalLM"; break;
    case Architecture::Mistral: out.architecture = "MistralForCausalLM"; break;
    case Architecture::Qwen2: out.architecture = "Qwen2ForCausalLM"; break;
    case Architecture::GPT2: out.architecture = "GPT2LMHeadModel"; break;
    case Architecture::Qwen3: out.architecture = "Qwen3ForCausalLM"; break;
    case Architecture::Gemma2: out.architecture = "Gemma2ForCausalLM"; break;
    case Architecture::Gemma3: out.architecture = "Gemma3ForCausalLM"; break;
    case Architecture::Mixtral: out.architecture = "MixtralForCausalLM"; break;
    case Architecture::Qwen2Moe: out.architecture = "Qwen2MoeForCausalLM"; break;
    case Architecture::Qwen3Moe: out.architecture = "Qwen3MoeForCausalLM"; break;
    case Architecture::Phi3: out.architecture = "Phi3ForCausalLM"; break;
  }
  if (out.architecture == nullptr) out.architecture = "?";
  out.vocab_size = c.vocab_size;
  out.hidden_size = c.hidden_size;
  out.intermediate_size = c.intermediate_size;
  out.num_layers = c.num_layers;
  out.num_heads = c.num_heads;
  out.num_kv_heads = c.num_kv_heads;
  out.head_dim = c.head_dim;
  out.max_position_embeddings = c.max_position_embeddings;
  out.sliding_window = c.sliding_window.value_or(0);
  out.rope_theta = c.rope_theta;
  out.norm_eps = c.norm_eps;
  out.tie_word_embeddings = c.tie_word_embeddings;
  out.bos_token_id = c.bos_token_id.value_or(-1);
}

}  // namespace kvinfer::capi

namespace {

const Tokenizer& tokenizer_of(const kvinfer_model* m) {
  const Model& model = *need(m, "model").model;
  if (!model.has_tokenizer())
    throw StatusError(KVINFER_ERR_INVALID_ARGUMENT, "the model was loaded without a tokenizer");
  return model.tokenizer();
}

}  // namespace

extern "C" {

const char* kvinfer_status_name(kvinfer_status status) {
  switch (status) {
    case KVINFER_OK: return "ok";
    case KVINFER_ERR_INVALID_ARGUMENT: return "invalid argument";
    case KVINFER_ERR_BAD_FILE: return "bad file";
    case KVINFER_ERR_UNSUPPORTED: return "unsupported";
    case KVINFER_ERR_OUT_OF_MEMORY: return "out of memory";
    case KVINFER_ERR_CONTEXT_FULL: return "context full";
    case KVINFER_ERR_CANCELLED: return "cancelled";
    case KVINFER_ERR_DEVICE: return "device";
    case KVINFER_ERR_BUFFER_TOO_SMALL: return "buffer too small";
    case KVINFER_ERR_INTERNAL: return "internal error";
    case KVINFER_ERR_BUSY: return "busy";
  }
  return "unknown status";
}

const char* kvinfer_last_error(void) {
  return t_error_lost ? "out of memory (the error message was lost)" : t_error.c_str();
}

const char* kvinfer_dtype_name(kvinfer_dtype dtype) {
  if (dtype < KVINFER_DTYPE_F32 || dtype > KVINFER_DTYPE_FP8) return "?";
  return dtype_name(static_cast<DType>(dtype)).data();  // string literals: NUL-terminated
}

const char* kvinfer_stop_reason_name(kvinfer_stop_reason reason) {  // stop_reason_name's names
  switch (reason) {
    case KVINFER_STOP_EOS: return "eos";
    case KVINFER_STOP_STRING: return "stop_string";
    case KVINFER_STOP_MAX_TOKENS: return "max_tokens";
    case KVINFER_STOP_CONTEXT_FULL: return "context_full";
    case KVINFER_STOP_CALLBACK: return "callback";
    case KVINFER_STOP_CANCELLED: return "cancelled";
  }
  return "?";
}

// ---- loading ----

kvinfer_load_options kvinfer_load_options_default(void) {
  const LoadOptions d;
  kvinfer_load_options o{};
  o.device = static_cast<kvinfer_device>(static_cast<int>(d.device));
  o.kv_tokens = d.kv_tokens;
  o.kv_dtype = d.kv_dtype ? to_c(*d.kv_dtype) : KVINFER_DTYPE_DEFAULT;
  o.memory_limit = d.memory_limit;
  o.context_length = d.context_length;
  o.threads = d.threads;
  o.weights_in_place = d.weights_in_place;
  o.int8_activations = d.activations == kvinfer::ActivationMode::Int8;
  o.check_finite = d.check_finite;
  return o;
}

kvinfer_status kvinfer_model_load(const char* path, const kvinfer_load_options* options, kvinfer_model** out) {
  if (out != nullptr) *out = nullptr;
  return guard(__func__, [&] {
    need(out, "out");
    need(path, "path");
    const std::string file = path;
    const kvinfer_load_options o = options != nullptr ? *options : kvinfer_load_options_default();
    if (o.device < KVINFER_DEVICE_AUTO || o.device > KVINFER_DEVICE_CUDA)
      throw StatusError(KVINFER_ERR_INVALID_ARGUMENT, fmt::format("device {} is not a kvinfer_device", static_cast<int>(o.device)));
    LoadOptions lo;
    lo.device = static_cast<Device>(static_cast<int>(o.device));
    lo.kv_tokens = o.kv_tokens;
    lo.kv_dtype = dtype_arg(o.kv_dtype);
    lo.memory_limit = o.memory_limit;
    lo.context_length = o.context_length;
    lo.threads = o.threads;
    lo.weights_in_place = o.weights_in_place;
    lo.activations = o.int8_activations ? kvinfer::ActivationMode::Int8 : kvinfer::ActivationMode::Exact;
    lo.check_finite = o.check_finite;
    if (o.progress != nullptr)
      lo.on_progress = [cb = o.progress, user = o.progress_user](uint64_t done, uint64_t total) { cb(done, total, user); };
    if (o.cancel != nullptr) lo.cancel = [cb = o.cancel, user = o.cancel_user] { return cb(user); };
    auto handle = std::make_unique<kvinfer_model>();
    handle->model = Model::load(file, lo);
    *out = handle.release();
  });
}

void kvinfer_model_free(kvinfer_model* model) { delete model; }

kvinfer_status kvinfer_model_config(const kvinfer_model* model, kvinfer_config* out) {
  return guard(__func__, [&] { fill_config(need(model, "model").model->config(), need(out, "out")); });
}

int64_t kvinfer_model_vocab_size(const kvinfer_model* model) {
  return model != nullptr ? model->model->config().vocab_size : -1;
}

int64_t kvinfer_model_context_length(const kvinfer_model* model) {
  return model != nullptr ? model->model->context_length() : -1;
}

kvinfer_dtype kvinfer_model_weight_dtype(const kvinfer_model* model) {
  return model != nullptr ? to_c(model->model->weight_dtype()) : KVINFER_DTYPE_DEFAULT;
}

uint64_t kvinfer_model_weight_bytes(const kvinfer_model* model) {
  return model != nullptr ? model->model->weight_bytes() : 0;
}

kvinfer_device kvinfer_model_device(const kvinfer_model* model) {
  return model != nullptr ? static_cast<kvinfer_device>(static_cast<int>(model->model->device())) : KVINFER_DEVICE_AUTO;
}

bool kvinfer_model_has_tokenizer(const kvinfer_model* model) {
  return model != nullptr && model->model->has_tokenizer();
}

kvinfer_status kvinfer_model_eos_ids(const kvinfer_model* model, int32_t* ids, size_t capacity, size_t* n_out) {
  return guard(__func__, [&] {
    const std::vector<int32_t> eos = need(model, "model").model->eos_ids();
    fill_buffer<int32_t>(eos, ids, capacity, n_out, "ids");
  });
}

// ---- tokenizer ----

kvinfer_status kvinfer_tokenize(const kvinfer_model* model, const char* text, size_t text_len, bool add_special,
                                bool parse_special, int32_t* ids, size_t capacity, size_t* n_out) {
  return guard(__func__, [&] {
    need(n_out, "n_out") = 0;
    const Tokenizer& tok = tokenizer_of(model);
    const std::span<const char> bytes = array_arg(text, text_len, "text");
    const std::vector<int32_t> out =
        tok.encode(std::string_view(bytes.data(), bytes.size()), {.add_special = add_special, .parse_special = parse_special});
    fill_buffer<int32_t>(out, ids, capacity, n_out, "ids");
  });
}

kvinfer_status kvinfer_detokenize(const kvinfer_model* model, const int32_t* ids, size_t n_ids, bool skip_special,
                                  char* buf, size_t capacity, size_t* len_out) {
  return guard(__func__, [&] {
    need(len_out, "len_out") = 0;
    const Tokenizer& tok = tokenizer_of(model);
    fill_text(tok.decode(array_arg(ids, n_ids, "ids"), skip_special), buf, capacity, len_out);
  });
}

kvinfer_status kvinfer_token_piece(const kvinfer_model* model, int32_t id, char* buf, size_t capacity,
                                   size_t* len_out) {
  return guard(__func__, [&] {
    need(len_out, "len_out") = 0;
    const Tokenizer& tok = tokenizer_of(model);
    if (id < 0 || id >= tok.vocab_size())
      throw StatusError(KVINFER_ERR_INVALID_ARGUMENT,
                        fmt::format("token id {} is outside the vocabulary (size {})", id, tok.vocab_size()));
    fill_text(tok.token_bytes(id), buf, capacity, len_out);
  });
}

int32_t kvinfer_token_bos(const kvinfer_model* model) {
  if (model == nullptr || !model->model->has_tokenizer()) return -1;
  return model->model->tokenizer().bos_id().value_or(-1);
}

// ---- KV cache ----

kvinfer_status kvinfer_kv_new(const kvinfer_model* model, int64_t capacity, kvinfer_dtype dtype, kvinfer_kv** out) {
  if (out != nullptr) *out = nullptr;
  return guard(__func__, [&] {
    need(out, "out");
    const std::shared_ptr<const Model>& m = need(model, "model").model;
    *out = new kvinfer_kv{m, KvCache(*m, capacity, dtype_arg(dtype))};
  });
}

void kvinfer_kv_free(kvinfer_kv* kv) { delete kv; }

int64_t kvinfer_kv_size(const kvinfer_kv* kv) { return kv != nullptr ? kv->kv.size() : -1; }
int64_t kvinfer_kv_capacity(const kvinfer_kv* kv) { return kv != nullptr ? kv->kv.capacity() : -1; }
uint64_t kvinfer_kv_bytes(const kvinfer_kv* kv) { return kv != nullptr ? kv->kv.bytes() : 0; }
kvinfer_dtype kvinfer_kv_dtype(const kvinfer_kv* kv) { return kv != nullptr ? to_c(kv->kv.dtype()) : KVINFER_DTYPE_DEFAULT; }

int64_t kvinfer_kv_earliest_rewind(const kvinfer_kv* kv) { return kv != nullptr ? kv->kv.earliest_rewind() : -1; }

kvinfer_status kvinfer_kv_truncate(kvinfer_kv* kv, int64_t n) {
  return guard(__func__, [&] {
    KvCache& cache = need(kv, "kv").kv;
    if (n < 0 || n > cache.size())  // KvCache::truncate's precondition, checked here
      throw StatusError(KVINFER_ERR_INVALID_ARGUMENT,
                        fmt::format("truncate to {} positions: the cache holds {}", n, cache.size()));
    cache.truncate(n);  // below earliest_rewind: InvalidArgument naming the positions lost
  });
}

}  // extern "C"
