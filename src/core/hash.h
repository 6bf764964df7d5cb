#pragma once
// hash64: a small, fast, non-cryptographic 64-bit hash (8 bytes a step, then a final avalanche),
// for checksums and fingerprints that catch accidents, not attacks. Defined byte for byte
// (little-endian words), so its values may be stored in files: do not change it.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace kvinfer {

static_assert(std::endian::native == std::endian::little, "hash64 reads little-endian words");

inline constexpr uint64_t kHash64Seed = 0x6b76696e66657221ull;  // "kvinfer!"

// The hash of [p, p + n) continuing from `seed` (a previous hash64, to chain pieces in order).
inline uint64_t hash64(const void* p, size_t n, uint64_t seed = kHash64Seed) {
  constexpr uint64_t k1 = 0x9e3779b97f4a7c15ull, k2 = 0xbf58476d1ce4e5b9ull, k3 = 0x94d049bb133111ebull;
  const auto* b = static_cast<const unsigned char*>(p);
  uint64_t h = seed ^ (static_cast<uint64_t>(n) * k1);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, b + i, 8);
    h = std::rotl(h ^ (w * k2), 29) * k1;
  }
  uint64_t tail = 0;
  for (size_t j = 0; i + j < n; ++j) tail |= static_cast<uint64_t>(b[i + j]) << (8 * j);
  h = std::rotl(h ^ (tail * k2), 29) * k1;
  h ^= h >> 30;
  h *= k2;
  h ^= h >> 27;
  h *= k3;
  h ^= h >> 31;
  return h;
}

}  // namespace kvinfer
