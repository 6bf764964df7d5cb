#pragma once
// Scratch buffers aligned to a cache line, for the kernels whose 64-byte loads would otherwise
// straddle two lines (linear_avx512.h).
#include <cstddef>
#include <new>
#include <utility>
#include <vector>

namespace kvinfer::cpu {

inline constexpr std::size_t kCacheLine = 64;

template <class T>
struct CacheLineAllocator {
  using value_type = T;
  CacheLineAllocator() = default;
  template <class U>
  CacheLineAllocator(const CacheLineAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{kCacheLine})); }
  void deallocate(T* p, std::size_t) noexcept { ::operator delete(p, std::align_val_t{kCacheLine}); }
  // Elements made without a value are left uninitialised (scratch is always written before it is
  // read): no pass that zeroes megabytes of it on every call.
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
  friend bool operator==(CacheLineAllocator, CacheLineAllocator) { return true; }
};

// A std::vector whose data() starts on a cache line, and whose new elements are uninitialised.
template <class T>
using AlignedVector = std::vector<T, CacheLineAllocator<T>>;

}  // namespace kvinfer::cpu
