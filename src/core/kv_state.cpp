// KV state files (kvinfer/kv_state.h); the format is docs/kv-cache.md's "Saving and restoring".
#include "kvinfer/kv_state.h"


#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/std.h>

#include "core/hash.h"
#include "core/input_file.h"
#include "core/kv_cache_access.h"
#include "core/kv_state_format.h"
#include "core/mapped_file.h"
#include "core/output_file.h"
#include "cuda/device_memory.h"
#include "kvinfer/error.h"
#include "models/model_internal.h"

namespace kvinfer {

namespace {

using kv_state::Header;
using kv_state::kHeaderBytes;

// What a KV state file may weigh before anything of it is read: far above any real cache.
constexpr InputLimit kKvStateLimit{"a KV state file", uint64_t{1} << 40};

std::optional<DType> dtype_of_code(uint32_t code) {
  switch (code) {
    case kv_state::kF32: return DType::F32;
    case kv_state::kF16: return DType::F16;
    case kv_state::kBF16: return DType::BF16;
    case kv_state::kI8: return DType::I8;
    case kv_state::kFP8: return DType::FP8;
    default: return std::nullopt;
  }
}

uint32_t code_of_dtype(DType d) {
  switch (d) {
    case DType::F32: return kv_state::kF32;
    case DType::F16: return kv_state::kF16;
    case DType::BF16: return kv_state::kBF16;
    case DType::I8: return kv_state::kI8;
    case DType::FP8: return kv_state::kFP8;
    default: throw Error(ErrorKind::Unsupported, fmt::format("a KV cache of dtype {} cannot be saved", dtype_name(d)));
  }
}

void check_shape(const KvCache& kv, const ModelConfig& c) {
  if (kv.num_layers() != c.num_layers || kv.num_kv_heads() != c.num_kv_heads || kv.head_dim() != c.head_dim)
    throw Error(ErrorKind::InvalidArgument,
                fmt::format("save_kv_state: the KV cache is shaped for {} layers × {} KV heads × head_dim {}, the "
                            "model is {} × {} × {}",
                            kv.num_layers(), kv.num_kv_heads(), kv.head_dim(), c.num_layers, c.num_kv_heads,
                            c.head_dim));
}

[[noreturn]] void bad(const std::filesystem::path& file, std::string_view field, const std::string& what) {
  throw Error(ErrorKind::BadFile, fmt::format("{}: KV state file field '{}': {}", file, field, what));
}

// The windowed layers of a config: how many, and their window (one for all of them).
struct Windows {
  uint32_t layers = 0;
  int64_t window = 0;
};
Windows windows_of(const ModelConfig& c) {
  Windows w;
  for (int64_t l = 0; l < c.num_layers; ++l)
    if (c.layer_window(l) > 0) ++w.layers, w.window = c.layer_window(l);
  return w;
}

}  // namespace

void save_kv_state(const KvCache& kv, const Model& model, const std::filesystem::path& file) {
  const ModelConfig& c = model.config();
  check_shape(kv, c);
  const int64_t n = kv.size();
  if (kv.earliest_rewind() > n)
    throw Error(ErrorKind::InvalidArgument,
                fmt::format("save_kv_state: the KV cache's sliding-window rings no longer hold the window before "
                            "position {}, its next (a forward pass failed after writing past it); clear it", n));
  // A windowed layer holds [held_from, n): what its ring has not overwritten, no more than its rows.
  const Windows w = windows_of(c);
  int64_t held_from = 0;
  for (int64_t l = 0; l < c.num_layers; ++l)
    if (c.layer_window(l) > 0) held_from = std::max({held_from, KvCacheAccess::held_from(kv), n - kv.layer_rows(l)});
  const size_t row = static_cast<size_t>(kv.head_dim()) * dtype_size(kv.dtype()), scale = kv_scale_bytes(kv.dtype());

  Header h;
  h.fingerprint = ModelAccess::fingerprint(model);
  h.layers = static_cast<uint32_t>(kv.num_layers());
  h.kv_heads = static_cast<uint32_t>(kv.num_kv_heads());
  h.head_dim = static_cast<uint32_t>(kv.head_dim());
  h.dtype = code_of_dtype(kv.dtype());
  h.capacity = static_cast<uint64_t>(kv.capacity());
  h.tokens = static_cast<uint64_t>(n);
  h.held_from = static_cast<uint64_t>(held_from);
  h.windowed_layers = w.layers;
  h.window = static_cast<uint32_t>(w.window);

  OutputFile out(file);
  uint64_t offset = kHeaderBytes;
  const std::span<const int32_t> ids = kv.tokens();
  uint64_t sum = hash64(ids.data(), ids.size_bytes());
  out.write_at(offset, ids.data(), ids.size_bytes());
  offset += ids.size_bytes();
  std::vector<std::byte> staging(static_cast<size_t>(n) * row);  // (positions, row) one block in position order
  // One block's positions [from, n), from a ring of `rows` rows of `bytes` each.
  auto put = [&](const std::byte* block, int64_t rows, size_t bytes, int64_t from) {
    if (block == nullptr) return;  // no scales: an f32, f16 or bf16 cache
    for_each_run(from, n - 1, rows, [&](int64_t j0, int64_t j1, int64_t r0) {
      std::byte* flat = staging.data() + static_cast<size_t>(j0 - from) * bytes;
      const std::byte* at = block + static_cast<size_t>(r0) * bytes;
      const size_t run = static_cast<size_t>(j1 - j0 + 1) * bytes;
      if (kv.device() == Device::CUDA)
        cuda_backend::copy_to_host(flat, at, run);
      else
        std::memcpy(flat, at, run);
    });
    const size_t size = static_cast<size_t>(n - from) * bytes;
    sum = hash64(staging.data(), size, sum);
    out.write_at(offset, staging.data(), size);
    offset += size;
  };
  for (int64_t l = 0; l < kv.num_layers(); ++l) {
    const int64_t from = c.layer_window(l) > 0 ? held_from : 0, rows = kv.layer_rows(l);
    for (int which = 0; which < 2; ++which)
      for (int64_t g = 0; g < kv.num_kv_heads(); ++g) {
        put(which == 0 ? kv_k(kv, l, g) : kv_v(kv, l, g), rows, row, from);
        put(reinterpret_cast<const std::byte*>(which == 0 ? kv_k_scales(kv, l, g) : kv_v_scales(kv, l, g)), rows,
            scale, from);
      }
  }
  h.payload_checksum = sum;
  const kv_state::Bytes head = kv_state::encode(h);
  out.write_at(0, head.data(), head.size());
  out.commit();
}

KvCache load_kv_state(const Model& model, const std::filesystem::path& file, std::optional<int64_t> capacity_tokens) {
  // The file's kind and size first (a FIFO, a directory, a device are refused unopened); its
  // errors become BadFile.
  std::unique_ptr<MappedFile> f;
  try {
    check_input_file(file, kKvStateLimit);
    f = std::make_unique<MappedFile>(file);
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::BadFile) throw;
    throw Error(ErrorKind::BadFile, e.what());
  }
  const uint64_t size = f->size();
  if (size < kv_state::kHeaderBytes1)
    bad(file, "header", fmt::format("the file has {} bytes, fewer than the {}-byte header", size,
                                    kv_state::kHeaderBytes1));
  kv_state::Bytes head{};  // a version 1 header: its 72 bytes, the rest zero
  f->read_at(0, std::min<uint64_t>(size, kHeaderBytes), head.data());
  const Header h = kv_state::decode(head);
  const uint64_t header_bytes = kv_state::header_bytes_of(h.version);

  // The header on its own: magic, version, its checksum, then every field's range.
  if (std::memcmp(h.magic.data(), kv_state::kMagic.data(), h.magic.size()) != 0)
    bad(file, "magic", "not a kvinfer KV state file (it does not start with \"KVISTATE\")");
  if (h.version != kv_state::kVersion && h.version != kv_state::kVersion1)
    bad(file, "version", fmt::format("format version {}; this build reads versions {} and {}", h.version,
                                     kv_state::kVersion1, kv_state::kVersion));
  if (size < header_bytes)
    bad(file, "header", fmt::format("the file has {} bytes, fewer than the {}-byte header of version {}", size,
                                    header_bytes, h.version));
  if (h.header_bytes != header_bytes)
    bad(file, "header_bytes", fmt::format("{}; version {} headers are {} bytes", h.header_bytes, h.version,
                                          header_bytes));
  if (h.header_checksum != kv_state::header_checksum(head, h.version))
    bad(file, "header_checksum", "does not match the header: the header is corrupt");
  const std::optional<DType> dtype = dtype_of_code(h.dtype);
  if (h.dtype == kv_state::kUnrotatedI8 || h.dtype == kv_state::kUnrotatedFP8)
    bad(file, "dtype", fmt::format("code {}: an 8-bit cache saved before kvinfer stored such keys rotated; this "
                                   "build cannot read it (prefill its tokens again)", h.dtype));
  if (!dtype)
    bad(file, "dtype", fmt::format("unknown cache dtype code {} (0 f32, 1 f16, 2 bf16, 5 int8, 6 fp8)", h.dtype));
  constexpr uint32_t kMaxDim = 1u << 20;
  for (const auto& [name, v] : {std::pair<const char*, uint32_t>{"layers", h.layers}, {"kv_heads", h.kv_heads},
                                {"head_dim", h.head_dim}})
    if (v == 0 || v > kMaxDim) bad(file, name, fmt::format("{} is outside 1 .. {}", v, kMaxDim));
  constexpr uint64_t kMaxPositions = uint64_t{1} << 40;
  if (h.capacity == 0 || h.capacity > kMaxPositions)
    bad(file, "capacity", fmt::format("{} is outside 1 .. {}", h.capacity, kMaxPositions));
  if (h.tokens > h.capacity)
    bad(file, "tokens", fmt::format("{} positions in a cache of capacity {}", h.tokens, h.capacity));
  if (h.windowed_layers > h.layers)
    bad(file, "windowed_layers", fmt::format("{} of {} layers", h.windowed_layers, h.layers));
  if ((h.window == 0) != (h.windowed_layers == 0))
    bad(file, "window", fmt::format("{} for {} windowed layers", h.window, h.windowed_layers));
  if (h.held_from > h.tokens || (h.held_from > 0 && h.held_from + h.window - 1 > h.tokens))
    bad(file, "held_from", fmt::format("{}: the windowed layers (window {}) would not hold the window before "
                                       "position {}", h.held_from, h.window, h.tokens));
  // The sizes the header promises, against the file's, before anything is allocated. Every
  // factor is bounded above, but their product may not fit: checked.
  const uint64_t row = uint64_t{h.head_dim} * dtype_size(*dtype) + kv_scale_bytes(*dtype);  // with its scale
  // Rows of one (K or V, KV head) across the layers: n on each layer, n − held_from on a windowed one.
  const uint64_t layer_rows = uint64_t{h.layers - h.windowed_layers} * h.tokens +
                              uint64_t{h.windowed_layers} * (h.tokens - h.held_from);  // < 2^61
  uint64_t rows_bytes = 0, expected = 0;
  if (__builtin_mul_overflow(layer_rows * 2 * h.kv_heads, row, &rows_bytes) ||
      __builtin_add_overflow(rows_bytes, h.tokens * sizeof(int32_t) + header_bytes, &expected) || expected != size)
    bad(file, "tokens",
        fmt::format("{} positions of {} layers ({} windowed, from position {}) × 2 × {} KV heads × head_dim {} ({}) "
                    "need {} bytes with the header and token ids, but the file has {}: {}",
                    h.tokens, h.layers, h.windowed_layers, h.held_from, h.kv_heads, h.head_dim, dtype_name(*dtype),
                    expected == 0 ? std::string("more than 2^64") : std::to_string(expected), size,
                    size < expected || expected == 0 ? "it is truncated" : "it has trailing bytes"));

  // Whose cache: the fingerprint says which model computed it; its shape must then be this model's.
  const ModelConfig& c = model.config();
  const uint64_t mine = ModelAccess::fingerprint(model);
  const bool same_shape = h.layers == c.num_layers && h.kv_heads == c.num_kv_heads && h.head_dim == c.head_dim;
  if (h.fingerprint != mine)
    throw Error(ErrorKind::InvalidArgument,
                fmt::format("{}: KV state saved by another model: fingerprint {:016x}, this model's {:016x}{}", file,
                            h.fingerprint, mine,
                            same_shape ? std::string(" (same shape: other weights or config)")
                                       : fmt::format(" (its cache: {} layers × {} KV heads × head_dim {}; this "
                                                     "model: {} × {} × {})",
                                                     h.layers, h.kv_heads, h.head_dim, c.num_layers, c.num_kv_heads,
                                                     c.head_dim)));
  if (h.layers != c.num_layers) bad(file, "layers", fmt::format("{}, but the model that saved it has {}", h.layers, c.num_layers));
  if (h.kv_heads != c.num_kv_heads)
    bad(file, "kv_heads", fmt::format("{}, but the model that saved it has {}", h.kv_heads, c.num_kv_heads));
  if (h.head_dim != c.head_dim)
    bad(file, "head_dim", fmt::format("{}, but the model that saved it has {}", h.head_dim, c.head_dim));
  const Windows w = windows_of(c);
  if (h.version != kv_state::kVersion1 && (h.windowed_layers != w.layers || h.window != w.window))
    bad(file, "windowed_layers", fmt::format("{} windowed layers (window {}), but the model that saved it has {} "
                                             "(window {})", h.windowed_layers, h.window, w.layers, w.window));

  const auto n = static_cast<int64_t>(h.tokens);
  const int64_t capacity = capacity_tokens.value_or(static_cast<int64_t>(h.capacity));
  if (capacity < n)
    throw Error(ErrorKind::InvalidArgument,
                fmt::format("{}: a KV cache of capacity {} cannot hold the file's {} positions", file, capacity, n));

  // The token ids, checked against the vocabulary.
  std::vector<int32_t> ids(static_cast<size_t>(n));
  f->read_at(header_bytes, ids.size() * sizeof(int32_t), reinterpret_cast<std::byte*>(ids.data()));
  uint64_t sum = hash64(ids.data(), ids.size() * sizeof(int32_t));
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= c.vocab_size)
      bad(file, "token ids", fmt::format("id {} at position {} is outside the vocabulary (size {})", ids[i], i,
                                         c.vocab_size));

  // The rows, each block through a host buffer, into rows p mod layer_rows of the new cache: a
  // windowed layer keeps what its ring holds, the file's rows from held_from on (version 1: the
  // last layer_rows of them).
  KvCache kv(model, capacity, *dtype);
  const size_t row_bytes = static_cast<size_t>(h.head_dim) * dtype_size(*dtype), scale_bytes = kv_scale_bytes(*dtype);
  std::vector<std::byte> staging(static_cast<size_t>(n) * row_bytes);  // (positions, row) one block
  uint64_t offset = header_bytes + ids.size() * sizeof(int32_t);
  int64_t held_from = 0;  // the windowed layers' first position kept
  auto take = [&](std::byte* block, int64_t rows, size_t bytes, int64_t file_from, int64_t from) {
    if (block == nullptr) return;  // no scales: an f32, f16 or bf16 cache
    const size_t block_bytes = static_cast<size_t>(n - file_from) * bytes;
    f->read_at(offset, block_bytes, staging.data());
    sum = hash64(staging.data(), block_bytes, sum);
    offset += block_bytes;
    for_each_run(from, n - 1, rows, [&](int64_t j0, int64_t j1, int64_t r0) {
      const std::byte* flat = staging.data() + static_cast<size_t>(j0 - file_from) * bytes;
      std::byte* at = block + static_cast<size_t>(r0) * bytes;
      const size_t run = static_cast<size_t>(j1 - j0 + 1) * bytes;
      if (kv.device() == Device::CUDA)
        cuda_backend::copy_to_device(at, flat, run);
      else
        std::memcpy(at, flat, run);
    });
  };
  for (int64_t l = 0; l < kv.num_layers(); ++l) {
    const bool windowed = c.layer_window(l) > 0;
    const int64_t rows = kv.layer_rows(l), file_from = windowed ? static_cast<int64_t>(h.held_from) : 0;
    const int64_t from = std::max(file_from, n - rows);
    if (windowed) held_from = std::max(held_from, from);
    for (int which = 0; which < 2; ++which)
      for (int64_t g = 0; g < kv.num_kv_heads(); ++g) {
        take(which == 0 ? kv_k(kv, l, g) : kv_v(kv, l, g), rows, row_bytes, file_from, from);
        take(reinterpret_cast<std::byte*>(which == 0 ? kv_k_scales(kv, l, g) : kv_v_scales(kv, l, g)), rows,
             scale_bytes, file_from, from);
      }
  }
  if (sum != h.payload_checksum)
    bad(file, "payload_checksum", "does not match the token ids and rows: the file is corrupt");
  KvCacheAccess::commit(kv, ids);
  if (held_from > 0) KvCacheAccess::set_held_from(kv, held_from);  // earliest_rewind as the saved cache's
  return kv;
}

}  // namespace kvinfer
