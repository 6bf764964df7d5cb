#pragma once
// Memory for a model's large matrices, which every decode step reads whole, once.
//
// Streaming them through 4 KiB pages costs a page-table walk every 4 KiB the TLB misses. Buffers
// of 2 MiB and more here start on a 2 MiB boundary and, on Linux, are advised onto transparent huge
// pages (madvise MADV_HUGEPAGE: the kernel's "madvise" mode, Debian's default, gives them only to
// memory that asks). On a 2-core Xeon VM this made whole decode steps of the synthetic models
// 5-21 % faster (docs/benchmarks-history.md). It is advice: where the kernel declines, the buffer simply keeps
// 4 KiB pages. The bytes are left uninitialised, and no page is touched until it is written.
#include <cstddef>

namespace kvinfer {

class LargeBuffer {
 public:
  static constexpr size_t kHugePage = size_t{2} << 20;

  explicit LargeBuffer(size_t bytes);
  ~LargeBuffer();
  LargeBuffer(LargeBuffer&& other) noexcept;
  LargeBuffer& operator=(LargeBuffer&& other) noexcept;
  LargeBuffer(const LargeBuffer&) = delete;
  LargeBuffer& operator=(const LargeBuffer&) = delete;

  std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  // The alignment the buffer has: 2 MiB for buffers of that size or more, else a cache line.
  size_t alignment() const { return alignment_; }

 private:
  void release() noexcept;
  std::byte* data_ = nullptr;
  size_t size_ = 0, alignment_ = 64;
};

}  // namespace kvinfer
