#pragma once
// Software prefetch of the next weights in decode products.
//
// A decode step reads every weight once. The kernels multiply 4 or 8 weight rows at a time, so
// memory sees 4 or 8 interleaved streams, each only one row long (0.6 to 4 KiB): the hardware
// prefetcher, which learns each stream anew, fetches little ahead of them. Instead, while one
// block of rows is multiplied, the kernel pulls the bytes that follow a fixed distance further on
// (linear.cpp chooses the region) into the caches line by line, as many as it has consumed: one
// sequential stream running ahead of the reads. Prefetches never fault and change no result.
#include <algorithm>
#include <cstddef>

namespace kvinfer::cpu {

class Prefetcher {
 public:
  Prefetcher() = default;
  // The region to fetch: `bytes` from `region` (none when bytes is 0).
  Prefetcher(const std::byte* region, size_t bytes) : base_(reinterpret_cast<const char*>(region)), bytes_(bytes) {}

  // The kernel consumed `bytes` more of its own weights: fetch as many more of the region.
  void advance(size_t bytes) {
    goal_ += bytes;
    const size_t end = std::min(goal_, bytes_);
    for (; fetched_ < end; fetched_ += 64) __builtin_prefetch(base_ + fetched_);  // into L1, for reading
  }

 private:
  const char* base_ = nullptr;
  size_t bytes_ = 0, fetched_ = 0, goal_ = 0;
};

}  // namespace kvinfer::cpu
