#pragma once
// Software prefetch of the weights a product reads next (and of the KV rows attention reads).
//
// A decode step reads every weight once. The kernels multiply 4 to 16 weight rows at a time: read
// row-major, memory sees as many interleaved streams, each only one row long (0.6 to 4 KiB), and
// the hardware prefetcher, which learns each stream anew, fetches little ahead of them (packed
// rows, packed_rows.h, are one stream, which it follows; they need a short lead). Instead, while one
// block of rows is multiplied, the kernel pulls the bytes that follow a fixed distance further on
// (linear.cpp chooses the region) towards the core line by line, as many as it has consumed: one
// sequential stream running ahead of the reads. Those fetches use prefetcht2 (Into::Outer), not
// prefetcht0: on a Xeon whose two cores read 27-32 GB/s, fetches into L1 held decode's bf16,
// Q8_0 and 8-bit products at 60-70 % of that, and prefetcht2 gained 8-15 % on them
// (docs/benchmarks-history.md). Prefetches never fault and change no result. A kernel advances a local
// copy and writes it back when done: through the reference, the compiler stored the counters at
// every step, which slowed the bf16 decode kernel by a fifth on weights in L2.
//
// Prefill reads each block of weight rows from L3 or memory once, then reuses it from L2: the
// widening of a stored block, or the first f32 tile to read each part of it, would wait on
// those reads at one core's share of L3. There the tiles of one block pull the next block's
// bytes into L2 (only), a few bytes further at each step of their loops (take), so that the next
// block finds them in L2 and no burst of fetches holds up the current one.
#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace kvinfer::cpu {

class Prefetcher {
 public:
  Prefetcher() = default;
  // Where the lines go: L2 (prefetcht1), for prefill to reuse them from there; or the caches the
  // core picks for the hint "outer levels" (prefetcht2), for decode, which reads them once.
  enum class Into { L2, Outer };
  // The region to fetch: `bytes` from `region` (none when bytes is 0).
  Prefetcher(const std::byte* region, size_t bytes, Into into)
      : base_(reinterpret_cast<const char*>(region)), bytes_(bytes), l2_(into == Into::L2) {}

  size_t bytes() const { return bytes_; }

  // The next `bytes` of the region, for a loop to fetch into L2 itself, spread over its steps (a
  // tile of linear_avx512.cpp): where they start. They count as fetched. (Near the region's end
  // a loop's stretch may run past it, by less than its own length: prefetches never fault.)
  const char* take(size_t bytes) {
    const char* from = base_ + fetched_;
    fetched_ = goal_ = std::min(bytes_, fetched_ + bytes);
    return from;
  }

  // The kernel consumed `bytes` more of its own weights: fetch as many more of the region.
  void advance(size_t bytes) {
    goal_ += bytes;
    const size_t end = std::min(goal_, bytes_);
    for (; fetched_ < end; fetched_ += 64) {
      if (l2_)
        __builtin_prefetch(base_ + fetched_, 0, 2);  // prefetcht1: into L2, for reading
      else
        __builtin_prefetch(base_ + fetched_, 0, 1);  // prefetcht2: the outer levels, for reading
    }
  }

 private:
  const char* base_ = nullptr;
  size_t bytes_ = 0, fetched_ = 0, goal_ = 0;
  bool l2_ = false;
};

// Two regions fetched one after the other into the outer levels (prefetcht2), as many bytes as a
// loop consumes of its own, from `start` bytes into the first: a lead that carries over from one
// region into the next. Attention's decode reads a KV head's K rows, then its V rows, then the
// next head's K rows: each read fetches the bytes `start` further on, across those seams.
class ChainedPrefetcher {
 public:
  ChainedPrefetcher() = default;
  ChainedPrefetcher(const std::byte* first, size_t first_bytes, const std::byte* then, size_t then_bytes, size_t start)
      : first_(reinterpret_cast<const char*>(first)),
        then_(reinterpret_cast<const char*>(then)),
        first_bytes_(first_bytes),
        total_(first_bytes + then_bytes),
        fetched_(std::min(start, total_)),
        goal_(start) {}

  void advance(size_t bytes) {
    goal_ += bytes;
    const size_t end = std::min(goal_, total_);
    for (; fetched_ < end; fetched_ += 64)
      __builtin_prefetch(fetched_ < first_bytes_ ? first_ + fetched_ : then_ + (fetched_ - first_bytes_), 0, 1);
  }

 private:
  const char* first_ = nullptr;
  const char* then_ = nullptr;
  size_t first_bytes_ = 0, total_ = 0, fetched_ = 0, goal_ = 0;
};

// Every line of [p, p + bytes) fetched at once: for reads a few µs away, too short for a stream
// prefetcher to learn (a KV head's rows: a few KiB). Into the outer levels (prefetcht2), for
// reading; or into L1 for writing (prefetchw), so that the stores do not each wait for their line.
inline void prefetch_lines(const std::byte* p, size_t bytes) {
  const uintptr_t end = reinterpret_cast<uintptr_t>(p) + bytes;
  for (uintptr_t a = reinterpret_cast<uintptr_t>(p) & ~uintptr_t{63}; a < end; a += 64)
    __builtin_prefetch(reinterpret_cast<const void*>(a), 0, 1);
}
inline void prefetch_lines_for_write(std::byte* p, size_t bytes) {
  const uintptr_t end = reinterpret_cast<uintptr_t>(p) + bytes;
  for (uintptr_t a = reinterpret_cast<uintptr_t>(p) & ~uintptr_t{63}; a < end; a += 64)
    __builtin_prefetch(reinterpret_cast<void*>(a), 1, 3);
}

}  // namespace kvinfer::cpu
