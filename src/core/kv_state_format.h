#pragma once
// The layout of a KV state file's header (docs/kv-cache.md, "Saving and restoring"), for
// kv_state.cpp and the tests that craft hostile files. Every integer is little-endian.
//
//   offset  size  field (version 2, 88 bytes)
//        0     8  magic "KVISTATE"
//        8     4  version (2; version 1 files still load)
//       12     4  header_bytes (88; version 1: 72)
//       16     8  fingerprint: the model's identity (models/model_access.h)
//       24     4  layers
//       28     4  kv_heads
//       32     4  head_dim
//       36     4  dtype: 0 f32, 1 f16, 2 bf16, 5 int8, 6 fp8 (keys rotated; 3 and 4 were the
//                 8-bit caches before their keys were rotated, no longer read)
//       40     8  capacity: the saved cache's, the default of a restore
//       48     8  tokens: n, the filled positions
//       56     8  held_from: the first position the windowed layers' blocks hold (h <= n)
//       64     4  windowed_layers: how many layers have the sliding window (the model's)
//       68     4  window: their window (0 when none)
//       72     8  payload_checksum: hash64 of the token ids, then of each row block, chained
//       80     8  header_checksum: hash64 of bytes 0 .. 79
//       88  4·n   token ids (int32)
//        …        rows: for each layer, K then V, for each KV head: the rows of positions
//                 [0, n), or [held_from, n) on a windowed layer (its ring held no more), in
//                 position order, head_dim values each, then (int8, fp8) their f32 scales
// Version 1 (72 bytes) has no fields 56 .. 71: payload_checksum at 56, header_checksum (of bytes
// 0 .. 55) at 64, token ids at 72, and every layer's blocks hold [0, n).
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/hash.h"

namespace kvinfer::kv_state {

inline constexpr std::array<char, 8> kMagic{'K', 'V', 'I', 'S', 'T', 'A', 'T', 'E'};
inline constexpr uint32_t kVersion = 2, kVersion1 = 1;
inline constexpr size_t kHeaderBytes = 88, kHeaderBytes1 = 72;
inline constexpr uint32_t kF32 = 0, kF16 = 1, kBF16 = 2, kI8 = 5, kFP8 = 6;
inline constexpr uint32_t kUnrotatedI8 = 3, kUnrotatedFP8 = 4;  // refused

struct Header {
  std::array<char, 8> magic = kMagic;
  uint32_t version = kVersion;
  uint32_t header_bytes = kHeaderBytes;
  uint64_t fingerprint = 0;
  uint32_t layers = 0, kv_heads = 0, head_dim = 0, dtype = 0;
  uint64_t capacity = 0, tokens = 0;
  uint64_t held_from = 0;  // version 2 only (0 in version 1)
  uint32_t windowed_layers = 0, window = 0;
  uint64_t payload_checksum = 0, header_checksum = 0;
};

// The header's bytes (kHeaderBytes; a version 1 header uses the first kHeaderBytes1).
using Bytes = std::array<std::byte, kHeaderBytes>;

// Where a header of `version` keeps its checksums (any version but 1 reads as version 2's layout).
inline size_t payload_checksum_at(uint32_t version) { return version == kVersion1 ? 56 : 72; }
inline size_t header_checksum_at(uint32_t version) { return version == kVersion1 ? 64 : 80; }
inline size_t header_bytes_of(uint32_t version) { return version == kVersion1 ? kHeaderBytes1 : kHeaderBytes; }

inline uint64_t header_checksum(const Bytes& b, uint32_t version) {
  return hash64(b.data(), header_checksum_at(version));
}

namespace detail {
template <typename T>
void put(Bytes& b, size_t at, T v) {
  std::memcpy(b.data() + at, &v, sizeof v);  // little-endian hosts only (hash.h asserts it)
}
template <typename T>
T get(const Bytes& b, size_t at) {
  T v;
  std::memcpy(&v, b.data() + at, sizeof v);
  return v;
}
}  // namespace detail

// The bytes of h in the layout of h.version, with header_checksum computed (h.header_checksum is
// ignored; a version 1 header drops held_from, windowed_layers and window).
inline Bytes encode(const Header& h) {
  Bytes b{};
  std::memcpy(b.data(), h.magic.data(), 8);
  detail::put(b, 8, h.version);
  detail::put(b, 12, h.header_bytes);
  detail::put(b, 16, h.fingerprint);
  detail::put(b, 24, h.layers);
  detail::put(b, 28, h.kv_heads);
  detail::put(b, 32, h.head_dim);
  detail::put(b, 36, h.dtype);
  detail::put(b, 40, h.capacity);
  detail::put(b, 48, h.tokens);
  if (h.version != kVersion1) {
    detail::put(b, 56, h.held_from);
    detail::put(b, 64, h.windowed_layers);
    detail::put(b, 68, h.window);
  }
  detail::put(b, payload_checksum_at(h.version), h.payload_checksum);
  detail::put(b, header_checksum_at(h.version), header_checksum(b, h.version));
  return b;
}

inline Header decode(const Bytes& b) {
  Header h;
  std::memcpy(h.magic.data(), b.data(), 8);
  h.version = detail::get<uint32_t>(b, 8);
  h.header_bytes = detail::get<uint32_t>(b, 12);
  h.fingerprint = detail::get<uint64_t>(b, 16);
  h.layers = detail::get<uint32_t>(b, 24);
  h.kv_heads = detail::get<uint32_t>(b, 28);
  h.head_dim = detail::get<uint32_t>(b, 32);
  h.dtype = detail::get<uint32_t>(b, 36);
  h.capacity = detail::get<uint64_t>(b, 40);
  h.tokens = detail::get<uint64_t>(b, 48);
  if (h.version != kVersion1) {
    h.held_from = detail::get<uint64_t>(b, 56);
    h.windowed_layers = detail::get<uint32_t>(b, 64);
    h.window = detail::get<uint32_t>(b, 68);
  }
  h.payload_checksum = detail::get<uint64_t>(b, payload_checksum_at(h.version));
  h.header_checksum = detail::get<uint64_t>(b, header_checksum_at(h.version));
  return h;
}

}  // namespace kvinfer::kv_state
