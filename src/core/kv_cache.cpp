#include "kvinfer/kv_cache.h"

#include <new>

#include <fmt/format.h>

#include "kvinfer/error.h"
#include "kvinfer/kv_plan.h"
#include "kvinfer/model.h"

namespace kvinfer {

KvCache::KvCache(const Model& model, int64_t capacity_tokens, std::optional<DType> dtype)
    : KvCache(model.config(), capacity_tokens, dtype.value_or(model.weight_dtype())) {}

KvCache::KvCache(const ModelConfig& config, int64_t capacity_tokens, DType dtype)
    : num_layers_(config.num_layers),
      num_kv_heads_(config.num_kv_heads),
      head_dim_(config.head_dim),
      capacity_(capacity_tokens),
      dtype_(dtype) {
  if (capacity_tokens <= 0) throw Error(fmt::format("KV cache capacity must be positive, got {}", capacity_tokens));
  bytes_ = plan_kv_bytes(config, capacity_tokens, dtype);
  // Left uninitialised: positions are written before they are read, and untouched pages
  // cost no memory until the sequence grows into them.
  data_.reset(new (std::nothrow) std::byte[bytes_]);
  if (!data_)
    throw Error(fmt::format("KV cache: cannot allocate {} bytes for {} tokens ({})", bytes_, capacity_tokens,
                            dtype_name(dtype)));
}

void KvCache::truncate(int64_t n) {
  if (n < 0 || n > size_) throw Error(fmt::format("KV cache truncate({}) outside 0..{}", n, size_));
  size_ = n;
}

void KvCache::commit(int64_t n) {
  if (n < 0 || n > remaining())
    throw Error(fmt::format("KV cache commit of {} positions with {} remaining", n, remaining()));
  size_ += n;
}

size_t KvCache::head_offset(int64_t layer, int which, int64_t kv_head) const {
  size_t per_head = static_cast<size_t>(capacity_ * head_dim_) * dtype_size(dtype_);
  return ((static_cast<size_t>(layer) * 2 + static_cast<size_t>(which)) * static_cast<size_t>(num_kv_heads_) +
          static_cast<size_t>(kv_head)) * per_head;
}

std::byte* KvCache::k(int64_t layer, int64_t kv_head) { return data_.get() + head_offset(layer, 0, kv_head); }
std::byte* KvCache::v(int64_t layer, int64_t kv_head) { return data_.get() + head_offset(layer, 1, kv_head); }
const std::byte* KvCache::k(int64_t layer, int64_t kv_head) const {
  return data_.get() + head_offset(layer, 0, kv_head);
}
const std::byte* KvCache::v(int64_t layer, int64_t kv_head) const {
  return data_.get() + head_offset(layer, 1, kv_head);
}

}  // namespace kvinfer
