#pragma once
// The layout of a KV state file's 72-byte header (docs/kv-cache.md, "Saving and restoring"), for
// kv_state.cpp and the tests that craft hostile files. Every integer is little-endian.
//
//   offset  size  field
//        0     8  magic "KVISTATE"
//        8     4  version (1)
//       12     4  header_bytes (72)
//       16     8  fingerprint: the model's identity (models/model_access.h)
//       24     4  layers
//       28     4  kv_heads
//       32     4  head_dim
//       36     4  dtype: 0 f32, 1 f16, 2 bf16, 5 int8, 6 fp8 (keys rotated; 3 and 4 were the
//                 8-bit caches before their keys were rotated, no longer read)
//       40     8  capacity: the saved cache's, the default of a restore
//       48     8  tokens: n, the filled positions
//       56     8  payload_checksum: hash64 of the token ids, then of each row block, chained
//       64     8  header_checksum: hash64 of bytes 0 .. 63
//       72  4·n   token ids (int32)
//        …        rows: for each layer, K then V, for each KV head: n rows of head_dim values,
//                 then (int8, fp8) their n f32 scales
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/hash.h"

namespace kvinfer::kv_state {

inline constexpr std::array<char, 8> kMagic{'K', 'V', 'I', 'S', 'T', 'A', 'T', 'E'};
inline constexpr uint32_t kVersion = 1;
inline constexpr size_t kHeaderBytes = 72;
inline constexpr uint32_t kF32 = 0, kF16 = 1, kBF16 = 2, kI8 = 5, kFP8 = 6;
inline constexpr uint32_t kUnrotatedI8 = 3, kUnrotatedFP8 = 4;  // refused

struct Header {
  std::array<char, 8> magic = kMagic;
  uint32_t version = kVersion;
  uint32_t header_bytes = kHeaderBytes;
  uint64_t fingerprint = 0;
  uint32_t layers = 0, kv_heads = 0, head_dim = 0, dtype = 0;
  uint64_t capacity = 0, tokens = 0;
  uint64_t payload_checksum = 0, header_checksum = 0;
};

inline uint64_t header_checksum(const std::array<std::byte, kHeaderBytes>& b) { return hash64(b.data(), 64); }

namespace detail {
template <typename T>
void put(std::array<std::byte, kHeaderBytes>& b, size_t at, T v) {
  std::memcpy(b.data() + at, &v, sizeof v);  // little-endian hosts only (hash.h asserts it)
}
template <typename T>
T get(const std::array<std::byte, kHeaderBytes>& b, size_t at) {
  T v;
  std::memcpy(&v, b.data() + at, sizeof v);
  return v;
}
}  // namespace detail

// The bytes of h, with header_checksum computed (h.header_checksum is ignored).
inline std::array<std::byte, kHeaderBytes> encode(const Header& h) {
  std::array<std::byte, kHeaderBytes> b{};
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
  detail::put(b, 56, h.payload_checksum);
  detail::put(b, 64, header_checksum(b));
  return b;
}

inline Header decode(const std::array<std::byte, kHeaderBytes>& b) {
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
  h.payload_checksum = detail::get<uint64_t>(b, 56);
  h.header_checksum = detail::get<uint64_t>(b, 64);
  return h;
}

}  // namespace kvinfer::kv_state
