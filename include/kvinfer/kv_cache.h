#pragma once
// KvCache: the keys and values of one sequence, for every layer, in one contiguous block whose
// size is exactly plan_kv_bytes(config, capacity, dtype). Heads are num_kv_heads, never the
// repeated query heads: that is what GQA/MQA save.
//
// Layout: (layer, {K, V}, kv_head, position < capacity, head_dim), row-major.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "kvinfer/config.h"
#include "kvinfer/device.h"
#include "kvinfer/dtype.h"
#include "kvinfer/export.h"

KVINFER_PUBLIC_BEGIN
namespace kvinfer {

class Model;
class MemoryAccount;  // src/core/memory.h

class KvCache {
 public:
  // A cache for `model`, on the model's device. The dtype defaults to the model's weight dtype
  // (f32, f16 or bf16), and to f16 for quantised weights, as llama.cpp does (default_kv_dtype in
  // kv_plan.h); a quantised cache dtype is refused. Before anything is allocated, the bytes are
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

  // Forgets every position from n on (rewind); 0 <= n <= size().
  void truncate(int64_t n);
  void clear() { size_ = 0; }

  // Backend access, pointers on device(). K (or V) of one layer and KV head: (capacity,
  // head_dim) elements of dtype(); the heads of one layer follow each other.
  std::byte* k(int64_t layer, int64_t kv_head);
  std::byte* v(int64_t layer, int64_t kv_head);
  const std::byte* k(int64_t layer, int64_t kv_head) const;
  const std::byte* v(int64_t layer, int64_t kv_head) const;
  // Marks n more positions as filled; called by the forward pass after it wrote their K/V.
  void commit(int64_t n);

 private:
  KvCache(const ModelConfig& config, int64_t capacity_tokens, DType dtype, Device device,
          const std::shared_ptr<MemoryAccount>& memory);
  size_t head_offset(int64_t layer, int which, int64_t kv_head) const;

  int64_t num_layers_, num_kv_heads_, head_dim_, capacity_;
  DType dtype_;
  Device device_;
  int64_t size_ = 0;
  uint64_t bytes_ = 0;
  // (layer, {K,V}, kv_head, capacity, head_dim); host pages are touched only on use.
  std::unique_ptr<std::byte, void (*)(std::byte*)> data_{nullptr, nullptr};
  std::shared_ptr<void> reservation_;  // gives the bytes back to the model's MemoryAccount
};

}  // namespace kvinfer
KVINFER_PUBLIC_END
