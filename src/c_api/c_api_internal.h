#pragma once
// What the C API's translation units share: the handles behind the opaque pointers of
// kvinfer/kvinfer_c.h, the conversions of its enums and structs, and guard(), which runs a call's
// body and turns every exception into a status and a thread-local message.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "kvinfer/kvinfer.h"
#include "kvinfer/kvinfer_c.h"

struct kvinfer_model {
  std::shared_ptr<const kvinfer::Model> model;
};

struct kvinfer_model_info {
  kvinfer::ModelInfo info;
  std::string name;  // info.name, kept for its c_str()
};

struct kvinfer_kv {
  std::shared_ptr<const kvinfer::Model> model;  // keeps the model (and its memory account) alive
  kvinfer::KvCache kv;
};

struct kvinfer_session {
  kvinfer::Session session;
  kvinfer_cancel_callback cancel = nullptr;
  void* cancel_user = nullptr;
};

struct kvinfer_sampler {
  kvinfer::Sampler sampler;
};

struct kvinfer_grammar {
  std::shared_ptr<const kvinfer::Grammar> grammar;
};

namespace kvinfer::capi {

// A failure the C layer itself detects (a NULL argument, a buffer too small), with its status.
class StatusError : public std::runtime_error {
 public:
  StatusError(kvinfer_status status, const std::string& message) : std::runtime_error(message), status_(status) {}
  kvinfer_status status() const noexcept { return status_; }

 private:
  kvinfer_status status_;
};

kvinfer_status status_of(ErrorKind kind) noexcept;
// Records `message` (prefixed with the function's name) as this thread's last error; returns status.
kvinfer_status fail(kvinfer_status status, const char* function, const char* message) noexcept;
void clear_error() noexcept;

// Runs body(); KVINFER_OK when it returns, else the status of what it threw. Never throws.
template <class Body>
kvinfer_status guard(const char* function, Body&& body) noexcept {
  try {
    body();
    clear_error();
    return KVINFER_OK;
  } catch (const StatusError& e) {
    return fail(e.status(), function, e.what());
  } catch (const Error& e) {
    return fail(status_of(e.kind()), function, e.what());
  } catch (const std::bad_alloc&) {
    return fail(KVINFER_ERR_OUT_OF_MEMORY, function, "out of memory (std::bad_alloc)");
  } catch (const std::exception& e) {
    return fail(KVINFER_ERR_INTERNAL, function, e.what());
  } catch (...) {
    return fail(KVINFER_ERR_INTERNAL, function, "unknown exception");
  }
}

// *p, or StatusError(INVALID_ARGUMENT) naming the argument when p is NULL.
template <class T>
T& need(T* p, const char* name) {
  if (p == nullptr) throw StatusError(KVINFER_ERR_INVALID_ARGUMENT, fmt::format("{} is NULL", name));
  return *p;
}

// n elements at p; p may be NULL only when n is 0.
template <class T>
std::span<const T> array_arg(const T* p, size_t n, const char* name) {
  if (p == nullptr && n != 0)
    throw StatusError(KVINFER_ERR_INVALID_ARGUMENT, fmt::format("{} is NULL with a count of {}", name, n));
  return p == nullptr ? std::span<const T>() : std::span<const T>(p, n);
}

// Copies src into dst[0 .. capacity) and sets *n_out = src.size(); BUFFER_TOO_SMALL (nothing
// copied) when it does not fit; dst may be NULL only with capacity 0.
template <class T>
void fill_buffer(std::span<const T> src, T* dst, size_t capacity, size_t* n_out, const char* what) {
  need(n_out, "n_out") = src.size();
  if (dst == nullptr && capacity != 0)
    throw StatusError(KVINFER_ERR_INVALID_ARGUMENT, fmt::format("the {} buffer is NULL with a capacity of {}", what, capacity));
  if (src.size() > capacity)
    throw StatusError(KVINFER_ERR_BUFFER_TOO_SMALL,
                      fmt::format("{} {} needed, the buffer holds {}", src.size(), what, capacity));
  std::copy(src.begin(), src.end(), dst);
}

// Copies text and a NUL into buf[0 .. capacity) and sets *len_out = text.size(); BUFFER_TOO_SMALL
// when text.size() + 1 > capacity.
void fill_text(std::string_view text, char* buf, size_t capacity, size_t* len_out);

std::optional<DType> dtype_arg(kvinfer_dtype dtype);  // DEFAULT: nullopt; INVALID_ARGUMENT when out of range
kvinfer_dtype to_c(DType dtype) noexcept;
void fill_config(const ModelConfig& c, kvinfer_config& out) noexcept;
SamplingParams sampling_arg(const kvinfer_sampling_params& p);

}  // namespace kvinfer::capi
