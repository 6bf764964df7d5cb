#pragma once
// KvCache: the keys and values of one sequence, for every layer, in one contiguous block whose
// size is exactly plan_kv_bytes(config, capacity, dtype). Heads are num_kv_heads, never the
// repeated query heads: that is what GQA/MQA save.
//
// Layout: (layer, {K, V}, kv_head, position < capacity, head_dim), row-major. The 8-bit types
// (int8, fp8) put the rows' f32 scales first, (layer, {K, V}, kv_head, position < capacity), and
// the one-byte codes after them in the layout above.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "kvinfer/config.h"
#include "kvinfer/device.h"
#include "kvinfer/dtype.h"
#include "kvinfer/export.h"

KVINFER_PUBLIC_BEGIN
namespace kvinfer {

class Model;

class KvCache {
 public:
  // A cache for `model`, on the model's device. The dtype defaults to the model's weight dtype
  // (f32, f16 or bf16), and to f16 for quantised weights, as llama.cpp does (default_kv_dtype in
  // kv_plan.h); int8 and fp8 store each row as 8-bit codes and a scale (docs/kv-cache.md); a
  // quantised weight format is refused. Before anything is allocated, the bytes are
  // checked against what is left of the memory the model was loaded against (LoadOptions::
  // memory_limit, $KVINFER_MEMORY_LIMIT or the memory detected at load) after its weights and
  // its other live caches; the error names the bytes needed and available. On CUDA the device's
  // free memory is checked too.
  KvCache(const Model& model, int64_t capacity_tokens, std::optional<DType> dtype = std::nullopt);
  // A cache for any config (no weights needed). device: CPU or CUDA. The bytes are checked against
  // the memory available now ($KVINFER_MEMORY_LIMIT, else detected) before anything is allocated.
  KvCache(const ModelConfig& config, int64_t capacity_tokens, DType dtype, Device device = Device::CPU);

  int64_t size() const { return size_; }          // positions filled
  int64_t capacity() const { return capacity_; }  // positions it can hold, fixed at creation
  int64_t remaining() const { return capacity_ - size_; }
  uint64_t bytes() const { return bytes_; }  // == plan_kv_bytes(config, capacity, dtype)
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  int64_t num_layers() const { return num_layers_; }
  int64_t num_kv_heads() const { return num_kv_heads_; }
  int64_t head_dim() const { return head_dim_; }

  // The token ids the filled positions were computed from (size() of them), in order.
  std::span<const int32_t> tokens() const { return tokens_; }

  // Forgets every position from n on (rewind), and their token ids; 0 <= n <= size().
  void truncate(int64_t n);
  void clear() { truncate(0); }

  // A new cache (a fork) on the same device, of the same shape and dtype, holding this one's
  // positions [0, size()) and their token ids; the two then grow independently. capacity_tokens:
  // at least size(), default capacity(). Checked like any new cache: for a model's cache,
  // against what is left of its memory figure and its context length; otherwise against the
  // memory available now.
  KvCache copy(std::optional<int64_t> capacity_tokens = std::nullopt) const;
  // Replaces this cache's contents with the first n positions of `src` and their token ids (same
  // layers, KV heads, head_dim, dtype and device; n <= src.size() and n <= capacity()): reusing a
  // shared prompt prefix costs a copy of n rows per layer and head instead of their forward pass,
  // and gives the same bits (a position's K/V depend only on the tokens up to it).
  void assign_prefix(const KvCache& src, int64_t n);

  KvCache(KvCache&&) noexcept = default;
  KvCache& operator=(KvCache&&) noexcept = default;
  KvCache(const KvCache&) = delete;  // copy() says what a copy costs
  KvCache& operator=(const KvCache&) = delete;
  ~KvCache() = default;

 private:
  friend struct KvCacheAccess;
  // account: the model's MemoryAccount (src/core/memory.h), or null; max_capacity: the model's
  // context length (what a copy may grow to).
  KvCache(const ModelConfig& config, int64_t capacity_tokens, DType dtype, Device device,
          std::shared_ptr<void> account, int64_t max_capacity);
  size_t head_offset(int64_t layer, int which, int64_t kv_head) const;
  size_t scale_offset(int64_t layer, int which, int64_t kv_head) const;
  // Backend access (KvCacheAccess), pointers on device(). K (or V) of one layer and KV head:
  // (capacity, head_dim) elements of dtype(); the heads of one layer follow each other.
  std::byte* k(int64_t layer, int64_t kv_head);
  std::byte* v(int64_t layer, int64_t kv_head);
  const std::byte* k(int64_t layer, int64_t kv_head) const;
  const std::byte* v(int64_t layer, int64_t kv_head) const;
  // The row scales of an 8-bit cache: (capacity) f32 for one layer and KV head, the heads of one
  // layer following each other; null for the other types.
  float* scales(int64_t layer, int which, int64_t kv_head);
  const float* scales(int64_t layer, int which, int64_t kv_head) const;
  // Marks ids.size() more positions as filled, computed from these ids; called by the forward
  // pass after it wrote their K/V.
  void commit(std::span<const int32_t> ids);

  int64_t num_layers_, num_kv_heads_, head_dim_, capacity_;
  DType dtype_;
  Device device_;
  int64_t size_ = 0;
  uint64_t bytes_ = 0;
  // (layer, {K,V}, kv_head, capacity, head_dim); host pages are touched only on use.
  std::unique_ptr<std::byte, void (*)(std::byte*)> data_{nullptr, nullptr};
  std::shared_ptr<void> reservation_;  // gives the bytes back to the model's MemoryAccount
  std::shared_ptr<void> account_;      // that MemoryAccount (null for a config's cache), for copy()
  int64_t max_capacity_;               // the model's context length (INT64_MAX for a config's cache)
  std::vector<int32_t> tokens_;        // size_ ids
};

}  // namespace kvinfer
KVINFER_PUBLIC_END
