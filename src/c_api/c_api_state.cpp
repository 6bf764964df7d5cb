// The C API (kvinfer/kvinfer_c.h): inspecting a checkpoint, forking, saving and restoring KV
// caches, and the log callback. Kept apart from the rest: a program that uses none of these does
// not link their C++ implementations.
#include <mutex>

#include "c_api/c_api_internal.h"

using namespace kvinfer;
using namespace kvinfer::capi;

extern "C" {

// ---- inspect ----

kvinfer_status kvinfer_inspect(const char* path, kvinfer_model_info** out) {
  if (out != nullptr) *out = nullptr;
  return guard(__func__, [&] {
    need(out, "out");
    need(path, "path");
    auto handle = std::make_unique<kvinfer_model_info>();
    handle->info = inspect_model(path);
    handle->name = handle->info.name;
    *out = handle.release();
  });
}

void kvinfer_model_info_free(kvinfer_model_info* info) { delete info; }

kvinfer_status kvinfer_model_info_config(const kvinfer_model_info* info, kvinfer_config* out) {
  return guard(__func__, [&] { fill_config(need(info, "info").info.config, need(out, "out")); });
}

kvinfer_model_format kvinfer_model_info_format(const kvinfer_model_info* info) {
  if (info == nullptr) return KVINFER_FORMAT_HF_DIRECTORY;
  switch (info->info.format) {
    case ModelFormat::HfDirectory: return KVINFER_FORMAT_HF_DIRECTORY;
    case ModelFormat::Gguf: return KVINFER_FORMAT_GGUF;
    case ModelFormat::ConfigJson: return KVINFER_FORMAT_CONFIG_JSON;
  }
  return KVINFER_FORMAT_HF_DIRECTORY;
}

const char* kvinfer_model_info_name(const kvinfer_model_info* info) {
  return info != nullptr ? info->name.c_str() : "";
}

const char* kvinfer_model_info_chat_template(const kvinfer_model_info* info) {
  return info != nullptr ? info->info.chat_template.c_str() : "";
}

bool kvinfer_model_info_has_tokenizer(const kvinfer_model_info* info) {
  return info != nullptr && info->info.has_tokenizer;
}

kvinfer_dtype kvinfer_model_info_weight_dtype(const kvinfer_model_info* info) {
  return info != nullptr ? to_c(info->info.weight_dtype) : KVINFER_DTYPE_DEFAULT;
}

uint64_t kvinfer_model_info_weight_bytes(const kvinfer_model_info* info) {
  return info != nullptr ? info->info.weight_bytes : 0;
}

size_t kvinfer_model_info_tensor_count(const kvinfer_model_info* info) {
  return info != nullptr ? info->info.tensors.size() : 0;
}

kvinfer_status kvinfer_model_info_tensor(const kvinfer_model_info* info, size_t index, kvinfer_tensor_desc* out) {
  return guard(__func__, [&] {
    const std::vector<TensorInfo>& tensors = need(info, "info").info.tensors;
    kvinfer_tensor_desc& d = need(out, "out");
    if (index >= tensors.size())
      throw StatusError(KVINFER_ERR_INVALID_ARGUMENT,
                        fmt::format("tensor index {} is out of range: the model has {} tensors", index, tensors.size()));
    const TensorInfo& t = tensors[index];
    d.name = t.name.c_str();
    d.type = t.type.c_str();
    d.dtype = t.dtype ? to_c(*t.dtype) : KVINFER_DTYPE_DEFAULT;
    d.ndim = t.shape.size();
    d.shape = t.shape.data();
    d.bytes = t.bytes;
  });
}

kvinfer_status kvinfer_model_info_kv_bytes(const kvinfer_model_info* info, int64_t tokens, kvinfer_dtype dtype,
                                           uint64_t* out) {
  return guard(__func__, [&] {
    need(out, "out") = 0;
    *out = need(info, "info").info.kv_bytes(tokens, dtype_arg(dtype));
  });
}

// ---- KV state ----

kvinfer_status kvinfer_kv_copy(const kvinfer_kv* kv, int64_t capacity, kvinfer_kv** out) {
  if (out != nullptr) *out = nullptr;
  return guard(__func__, [&] {
    need(out, "out");
    const kvinfer_kv& src = need(kv, "kv");
    if (capacity < 0)
      throw StatusError(KVINFER_ERR_INVALID_ARGUMENT, fmt::format("capacity {} is negative", capacity));
    *out = new kvinfer_kv{src.model, src.kv.copy(capacity == 0 ? std::nullopt : std::optional<int64_t>(capacity))};
  });
}

kvinfer_status kvinfer_kv_tokens(const kvinfer_kv* kv, int32_t* ids, size_t capacity, size_t* n_out) {
  return guard(__func__, [&] {
    need(n_out, "n_out") = 0;
    const std::span<const int32_t> t = need(kv, "kv").kv.tokens();
    fill_buffer<int32_t>(t, ids, capacity, n_out, "ids");
  });
}

kvinfer_status kvinfer_kv_save(const kvinfer_kv* kv, const kvinfer_model* model, const char* path) {
  return guard(__func__, [&] {
    need(path, "path");
    save_kv_state(need(kv, "kv").kv, *need(model, "model").model, path);
  });
}

kvinfer_status kvinfer_kv_load(const kvinfer_model* model, const char* path, int64_t capacity, kvinfer_kv** out) {
  if (out != nullptr) *out = nullptr;
  return guard(__func__, [&] {
    need(out, "out");
    need(path, "path");
    const std::shared_ptr<const Model>& m = need(model, "model").model;
    if (capacity < 0)
      throw StatusError(KVINFER_ERR_INVALID_ARGUMENT, fmt::format("capacity {} is negative", capacity));
    *out = new kvinfer_kv{m, load_kv_state(*m, path, capacity == 0 ? std::nullopt : std::optional<int64_t>(capacity))};
  });
}

// ---- log ----

kvinfer_status kvinfer_set_log_callback(kvinfer_log_callback callback, void* user, kvinfer_log_level min_level) {
  return guard(__func__, [&] {
    if (min_level < KVINFER_LOG_DEBUG || min_level > KVINFER_LOG_ERROR)
      throw StatusError(KVINFER_ERR_INVALID_ARGUMENT,
                        fmt::format("log level {} is not a kvinfer_log_level", static_cast<int>(min_level)));
    LogCallback cb;
    if (callback != nullptr)
      cb = [callback, user](LogLevel level, std::string_view message) {
        try {
          const std::string line(message);  // NUL-terminated for C
          callback(static_cast<kvinfer_log_level>(static_cast<int>(level)), line.c_str(), user);
        } catch (...) {  // a log line that cannot be copied is dropped, never thrown into the library's caller
        }
      };
    set_log_callback(std::move(cb), static_cast<LogLevel>(static_cast<int>(min_level)));
  });
}

}  // extern "C"
