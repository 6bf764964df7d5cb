#include "kvinfer/kv_cache.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <new>

#include <fmt/format.h>

#include "core/memory.h"
#include "cuda/device_memory.h"
#include "kvinfer/error.h"
#include "kvinfer/kv_plan.h"
#include "kvinfer/model.h"
#include "models/model_internal.h"

namespace kvinfer {

namespace {
void free_host(std::byte* p) { delete[] p; }
void free_device(std::byte* p) { cuda_backend::device_free(p); }

std::string cache_name(int64_t capacity_tokens, DType dtype) {
  return fmt::format("KV cache of {} tokens ({})", capacity_tokens, dtype_name(dtype));
}
}  // namespace

namespace {
// A cache longer than the model's context would hold positions the model cannot use well (rotary)
// or at all (learned positions): refused before anything is allocated.
int64_t within_context(int64_t capacity_tokens, int64_t context_length) {
  if (capacity_tokens > context_length)
    throw Error(ErrorKind::ContextFull, fmt::format("a KV cache of {} tokens is beyond the model's context length of {} tokens "
                            "(LoadOptions::context_length allows a longer one for rotary models)",
                            format_count(capacity_tokens), format_count(context_length)));
  return capacity_tokens;
}
}  // namespace

KvCache::KvCache(const Model& model, int64_t capacity_tokens, std::optional<DType> dtype)
    : KvCache(model.config(), within_context(capacity_tokens, model.context_length()),
              dtype.value_or(default_kv_dtype(model.weight_dtype())), model.device(), model.device_index(),
              ModelAccess::memory(model), model.context_length()) {}

KvCache::KvCache(const ModelConfig& config, int64_t capacity_tokens, DType dtype, Device device)
    : KvCache(config, capacity_tokens, dtype, device, 0, nullptr, std::numeric_limits<int64_t>::max()) {}

KvCache::KvCache(const ModelConfig& config, int64_t capacity_tokens, DType dtype, Device device, int device_index,
                 std::shared_ptr<void> account, int64_t max_capacity)
    : num_layers_(config.num_layers),
      num_kv_heads_(config.num_kv_heads),
      head_dim_(config.head_dim),
      capacity_(capacity_tokens),
      dtype_(dtype),
      device_(device),
      device_index_(device == Device::CUDA ? device_index : 0),
      account_(std::move(account)),
      max_capacity_(max_capacity) {
  const auto memory = std::static_pointer_cast<MemoryAccount>(account_);
  if (capacity_tokens <= 0) throw Error(ErrorKind::InvalidArgument, fmt::format("KV cache capacity must be positive, got {}", capacity_tokens));
  if (is_quantized(dtype))
    throw Error(ErrorKind::InvalidArgument,
                fmt::format("KV cache dtype {} is a quantised weight format; a cache holds f32, f16, bf16, int8 or fp8",
                            dtype_name(dtype)));
  if (device != Device::CPU && device != Device::CUDA)
    throw Error(ErrorKind::InvalidArgument, fmt::format("{}: device must be CPU or CUDA", cache_name(capacity_tokens, dtype)));
  bytes_ = plan_kv_bytes(config, capacity_tokens, dtype);
  row_base_.push_back(0);
  for (int64_t l = 0; l < num_layers_; ++l) {
    rows_.push_back(kv_layer_rows(config, l, capacity_tokens));
    row_base_.push_back(row_base_.back() + rows_.back());
    sliding_.push_back(config.layer_window(l) > 0);
    if (sliding_.back()) window_ = config.layer_window(l);
    if (rows_.back() < capacity_tokens) ring_ = rows_.back();
  }
  const std::string what = cache_name(capacity_tokens, dtype);
  // Checked before a byte is allocated: the host allocation is lazy (untouched pages cost
  // nothing), so without this a cache far beyond the machine's memory would be "allocated" and
  // the process killed when the sequence grows into it.
  if (memory) {
    memory->reserve(bytes_, what);  // what is left of the model's figure after its weights and caches
    const uint64_t reserved = bytes_;
    reservation_ = std::shared_ptr<void>(nullptr, [memory, reserved](void*) { memory->release(reserved); });
  }
  if (device == Device::CUDA) {
    const cuda_backend::DeviceScope on(device_index_);  // the model's device, for the check and the memory
    if (!memory) require_memory(memory_budget(device), bytes_, what);  // the memory available now
    data_ = {static_cast<std::byte*>(cuda_backend::device_alloc(bytes_, what)), free_device};
    return;
  }
  if (!memory) require_memory(memory_budget(device), bytes_, what);
  // Left uninitialised: positions are written before they are read, and untouched pages
  // cost no memory until the sequence grows into them.
  data_ = {new (std::nothrow) std::byte[bytes_], free_host};
  if (!data_) throw Error(ErrorKind::OutOfMemory, fmt::format("{}: cannot allocate {} bytes of host memory", what, bytes_));
}

void KvCache::truncate(int64_t n) {
  if (n < 0 || n > size_)
    throw Error(ErrorKind::InvalidArgument, fmt::format("KV cache truncate({}) outside 0..{}", n, size_));
  if (n > 0 && n < earliest_rewind())
    throw Error(ErrorKind::InvalidArgument,
                fmt::format("KV cache truncate({}): the sliding-window layers' rings of {} rows no longer hold "
                            "positions {}..{} (the least n kept is {}; 0 clears)",
                            n, ring_, std::max<int64_t>(0, n - window_ + 1), n - 1, earliest_rewind()));
  if (n == 0) held_from_ = 0;  // every position is written again before it is read
  size_ = n;
  tokens_.resize(static_cast<size_t>(n));
}

void KvCache::will_write(int64_t end) {
  if (ring_ > 0) held_from_ = std::max(held_from_, end - ring_);
}

void KvCache::commit(std::span<const int32_t> ids) {
  const auto n = static_cast<int64_t>(ids.size());
  if (n > remaining())
    throw Error(ErrorKind::ContextFull,
                fmt::format("KV cache commit of {} positions with {} remaining", n, remaining()));
  will_write(size_ + n);  // a CUDA graph's replays write without the host passing will_write
  tokens_.insert(tokens_.end(), ids.begin(), ids.end());
  size_ += n;
}

KvCache KvCache::copy(std::optional<int64_t> capacity_tokens) const {
  const int64_t capacity = capacity_tokens.value_or(capacity_);
  if (capacity < size_)
    throw Error(ErrorKind::InvalidArgument,
                fmt::format("a copy of a KV cache holding {} positions cannot have a capacity of {}", size_, capacity));
  if (capacity > max_capacity_)
    throw Error(ErrorKind::ContextFull,
                fmt::format("a KV cache of {} tokens is beyond the model's context length of {} tokens",
                            format_count(capacity), format_count(max_capacity_)));
  ModelConfig shape;
  shape.num_layers = num_layers_;
  shape.num_kv_heads = num_kv_heads_;
  shape.head_dim = head_dim_;
  if (window_ > 0) {
    shape.sliding_window = window_;
    shape.sliding_layers = sliding_;
  }
  KvCache out(shape, capacity, dtype_, device_, device_index_, account_, max_capacity_);
  out.assign_prefix(*this, size_);
  return out;
}

void KvCache::assign_prefix(const KvCache& src, int64_t n) {
  if (src.num_layers_ != num_layers_ || src.num_kv_heads_ != num_kv_heads_ || src.head_dim_ != head_dim_ ||
      src.dtype_ != dtype_ || src.device_ != device_ || src.device_index_ != device_index_)
    throw Error(ErrorKind::InvalidArgument,
                fmt::format("assign_prefix: a {} × {} × {} {} cache on {} cannot take rows of a {} × {} × {} {} cache on {}",
                            num_layers_, num_kv_heads_, head_dim_, dtype_name(dtype_), device_name(device_),
                            src.num_layers_, src.num_kv_heads_, src.head_dim_, dtype_name(src.dtype_),
                            device_name(src.device_)));
  if (src.window_ != window_ || src.sliding_ != sliding_)
    throw Error(ErrorKind::InvalidArgument,
                fmt::format("assign_prefix: a cache whose layers have a sliding window of {} cannot take rows of one "
                            "whose layers have {} (or on other layers)", window_, src.window_));
  if (n < 0 || n > src.size_ || n > capacity_)
    throw Error(ErrorKind::InvalidArgument,
                fmt::format("assign_prefix: {} positions asked of a cache holding {}, into one of capacity {}", n,
                            src.size_, capacity_));
  if (n > 0 && n < src.earliest_rewind())
    throw Error(ErrorKind::InvalidArgument,
                fmt::format("assign_prefix: the source's sliding-window rings no longer hold the window before "
                            "position {} (the least n is {})", n, src.earliest_rewind()));
  if (&src == this) {
    truncate(n);
    return;
  }
  held_from_ = 0;
  size_ = 0;
  tokens_.clear();
  take_positions(src, n);
}

void KvCache::take_positions(const KvCache& src, int64_t n) {
  const int64_t common = size_;
  for (int64_t l = 0; l < num_layers_; ++l) {
    const auto i = static_cast<size_t>(l);
    // What src still holds of [common, n) (all of it but on a ring that wrapped), and what fits here.
    const int64_t from = std::max({common, n - rows_[i], sliding_[i] ? src.held_from_ : 0});
    copy_positions(src, l, from, n);
    if (sliding_[i] && from > common) held_from_ = std::max(held_from_, from);
  }
  tokens_.insert(tokens_.end(), src.tokens_.begin() + common, src.tokens_.begin() + n);
  size_ = n;
  will_write(n);  // the copies overwrote what a ring held before n − rows
}

void KvCache::copy_positions(const KvCache& src, int64_t layer, int64_t from, int64_t to) {
  const auto i = static_cast<size_t>(layer);
  const size_t row = static_cast<size_t>(head_dim_) * dtype_size(dtype_), scale = kv_scale_bytes(dtype_);
  auto copy = [&](std::byte* dst, const std::byte* at, size_t bytes) {
    if (bytes == 0) return;
    if (device_ == Device::CUDA)
      cuda_backend::copy_on_device(dst, at, bytes);
    else
      std::memcpy(dst, at, bytes);
  };
  for (int64_t p = from; p < to;) {
    const int64_t s = p % src.rows_[i], d = p % rows_[i];
    const int64_t run = std::min({to - p, src.rows_[i] - s, rows_[i] - d});  // neither ring wraps within
    for (int which = 0; which < 2; ++which)
      for (int64_t h = 0; h < num_kv_heads_; ++h) {
        copy(data_.get() + head_offset(layer, which, h) + static_cast<size_t>(d) * row,
             src.data_.get() + src.head_offset(layer, which, h) + static_cast<size_t>(s) * row,
             static_cast<size_t>(run) * row);
        copy(data_.get() + scale_offset(layer, which, h) + static_cast<size_t>(d) * scale,
             src.data_.get() + src.scale_offset(layer, which, h) + static_cast<size_t>(s) * scale,
             static_cast<size_t>(run) * scale);
      }
    p += run;
  }
}

// The (layer, {K,V}, kv_head) blocks in order, each of its layer's rows: the scales' (8-bit
// types), then the rows'. first_row: the rows of the blocks before (layer, which, kv_head).
namespace {
size_t first_row(const std::vector<int64_t>& row_base, const std::vector<int64_t>& rows, int64_t layer, int which,
                 int64_t kv_head, int64_t kv_heads) {
  const auto l = static_cast<size_t>(layer);
  return static_cast<size_t>(2 * kv_heads * row_base[l] + (which * kv_heads + kv_head) * rows[l]);
}
}  // namespace

size_t KvCache::head_offset(int64_t layer, int which, int64_t kv_head) const {
  const size_t all_rows = static_cast<size_t>(2 * num_kv_heads_ * row_base_.back());
  return all_rows * kv_scale_bytes(dtype_) +  // all the blocks' scales
         first_row(row_base_, rows_, layer, which, kv_head, num_kv_heads_) * static_cast<size_t>(head_dim_) *
             dtype_size(dtype_);
}

size_t KvCache::scale_offset(int64_t layer, int which, int64_t kv_head) const {
  return first_row(row_base_, rows_, layer, which, kv_head, num_kv_heads_) * kv_scale_bytes(dtype_);
}

float* KvCache::scales(int64_t layer, int which, int64_t kv_head) {
  if (!is_scaled_kv(dtype_)) return nullptr;
  return reinterpret_cast<float*>(data_.get() + scale_offset(layer, which, kv_head));
}
const float* KvCache::scales(int64_t layer, int which, int64_t kv_head) const {
  return const_cast<KvCache*>(this)->scales(layer, which, kv_head);
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
