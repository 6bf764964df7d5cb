#include "core/large_buffer.h"

#include <new>
#include <utility>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace kvinfer {

LargeBuffer::LargeBuffer(size_t bytes) : size_(bytes), alignment_(bytes >= kHugePage ? kHugePage : 64) {
  if (bytes == 0) return;
  data_ = static_cast<std::byte*>(::operator new(bytes, std::align_val_t{alignment_}));  // throws std::bad_alloc
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  // The whole 2 MiB pages of the buffer (a last partial one keeps 4 KiB pages). Failure (no THP
  // in this kernel, or THP turned off) leaves it as it was.
  if (alignment_ == kHugePage) ::madvise(data_, bytes / kHugePage * kHugePage, MADV_HUGEPAGE);
#endif
}

LargeBuffer::~LargeBuffer() { release(); }

LargeBuffer::LargeBuffer(LargeBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)), alignment_(other.alignment_) {}

LargeBuffer& LargeBuffer::operator=(LargeBuffer&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    alignment_ = other.alignment_;
  }
  return *this;
}

void LargeBuffer::release() noexcept {
  if (data_) ::operator delete(data_, std::align_val_t{alignment_});
  data_ = nullptr;
}

}  // namespace kvinfer
