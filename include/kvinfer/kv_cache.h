#pragma once
// KvCache: the keys and values of one sequence, for every layer, in one contiguous block whose
// size is exactly plan_kv_bytes(config, capacity, dtype). Heads are num_kv_heads, never the
// repeated query heads: that is what GQA/MQA save.
//
// Layout: (layer, {K, V}, kv_head, row < rows(layer), head_dim), row-major. A layer holds
// rows(layer) = capacity positions, position p in row p; a sliding-window layer only the positions
// its window can still reach, in a ring (kv_layer_rows in kv_plan.h): position p in row
// p mod rows(layer). The 8-bit types (int8, fp8) put the rows' f32 scales first, (layer, {K, V},
// kv_head, row), and the one-byte codes after them in the layout above.
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
  // A cache for any config (no weights needed). device: CPU or CUDA (CUDA device 0). The bytes are
  // checked against the memory available now ($KVINFER_MEMORY_LIMIT, else detected) before
  // anything is allocated.
  KvCache(const ModelConfig& config, int64_t capacity_tokens, DType dtype, Device device = Device::CPU);

  int64_t size() const { return size_; }          // positions filled
  int64_t capacity() const { return capacity_; }  // positions it can hold, fixed at creation
  int64_t remaining() const { return capacity_ - size_; }
  uint64_t bytes() const { return bytes_; }  // == plan_kv_bytes(config, capacity, dtype)
  // Positions layer `layer` holds at a time: capacity(), or a sliding-window layer's ring.
  int64_t layer_rows(int64_t layer) const { return rows_[static_cast<size_t>(layer)]; }
  // The least n > 0 truncate(n) and assign_prefix(·, n) accept: 0 until a sliding-window ring has
  // overwritten a position; then the first position whose window the rings still hold whole.
  // A rewind by up to min(window, 512) positions past the last write is always possible.
  int64_t earliest_rewind() const { return held_from_ == 0 ? 0 : held_from_ + window_ - 1; }
  // n if truncate(n) keeps n positions, else 0 (the positions must be computed again).
  int64_t reusable(int64_t n) const { return n >= earliest_rewind() ? n : 0; }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  // Which CUDA device holds it (its model's LoadOptions::device_index); 0 on the CPU.
  int device_index() const { return device_index_; }
  int64_t num_layers() const { return num_layers_; }
  int64_t num_kv_heads() const { return num_kv_heads_; }
  int64_t head_dim() const { return head_dim_; }

  // The token ids the filled positions were computed from (size() of them), in order.
  std::span<const int32_t> tokens() const { return tokens_; }

  // Forgets every position from n on (rewind), and their token ids; n == 0 or
  // earliest_rewind() <= n <= size().
  void truncate(int64_t n);
  void clear() { truncate(0); }

  // A new cache (a fork) on the same device, of the same shape and dtype, holding this one's
  // positions [0, size()) and their token ids; the two then grow independently. capacity_tokens:
  // at least size(), default capacity(). Checked like any new cache: for a model's cache,
  // against what is left of its memory figure and its context length; otherwise against the
  // memory available now.
  KvCache copy(std::optional<int64_t> capacity_tokens = std::nullopt) const;
  // Replaces this cache's contents with the first n positions of `src` and their token ids (same
  // layers, KV heads, head_dim, windows, dtype and device; n <= src.size(), n <= capacity(), and
  // n == 0 or n >= src.earliest_rewind()): reusing a
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
  KvCache(const ModelConfig& config, int64_t capacity_tokens, DType dtype, Device device, int device_index,
          std::shared_ptr<void> account, int64_t max_capacity);
  size_t head_offset(int64_t layer, int which, int64_t kv_head) const;
  size_t scale_offset(int64_t layer, int which, int64_t kv_head) const;
  // Positions [size(), n) of src (whose first size() positions are this cache's) appended: the
  // rows src still holds and this cache's rings keep, and their token ids.
  void take_positions(const KvCache& src, int64_t n);
  // Copies positions [from, to) of one layer from src's rows to this cache's (each ring's rows in
  // runs that neither ring wraps within).
  void copy_positions(const KvCache& src, int64_t layer, int64_t from, int64_t to);
  // Backend access (KvCacheAccess), pointers on device(). K (or V) of one layer and KV head:
  // (layer_rows(layer), head_dim) elements of dtype(); the heads of one layer follow each other.
  std::byte* k(int64_t layer, int64_t kv_head);
  std::byte* v(int64_t layer, int64_t kv_head);
  const std::byte* k(int64_t layer, int64_t kv_head) const;
  const std::byte* v(int64_t layer, int64_t kv_head) const;
  // The row scales of an 8-bit cache: (layer_rows) f32 for one layer and KV head, the heads of one
  // layer following each other; null for the other types.
  float* scales(int64_t layer, int which, int64_t kv_head);
  const float* scales(int64_t layer, int which, int64_t kv_head) const;
  // Marks ids.size() more positions as filled, computed from these ids; called by the forward
  // pass after it wrote their K/V.
  void commit(std::span<const int32_t> ids);
  // Called before positions up to `end` are written: a ring then loses the positions before
  // end − rows, which earliest_rewind() must know of even when the pass fails before commit.
  void will_write(int64_t end);

  int64_t num_layers_, num_kv_heads_, head_dim_, capacity_;
  DType dtype_;
  Device device_;
  int device_index_ = 0;
  int64_t size_ = 0;
  uint64_t bytes_ = 0;
  std::vector<int64_t> rows_;      // (layers) positions each holds: capacity_, or a window's ring
  std::vector<int64_t> row_base_;  // (layers + 1) rows of the layers before each, per K or V head
  std::vector<bool> sliding_;      // (layers) whether each has the sliding window
  int64_t window_ = 0;             // the sliding-window layers' window (0: none)
  int64_t ring_ = 0;               // their rows when fewer than capacity_ (0: no layer is a ring)
  int64_t held_from_ = 0;          // the first position every sliding-window layer still holds
  // (layer, {K,V}, kv_head, layer_rows, head_dim); host pages are touched only on use.
  std::unique_ptr<std::byte, void (*)(std::byte*)> data_{nullptr, nullptr};
  std::shared_ptr<void> reservation_;  // gives the bytes back to the model's MemoryAccount
  std::shared_ptr<void> account_;      // that MemoryAccount (null for a config's cache), for copy()
  int64_t max_capacity_;               // the model's context length (INT64_MAX for a config's cache)
  std::vector<int32_t> tokens_;        // size_ ids
};

}  // namespace kvinfer
KVINFER_PUBLIC_END
