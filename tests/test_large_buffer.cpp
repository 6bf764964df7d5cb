// LargeBuffer (core/large_buffer.h): the memory of the matrices a model makes at load (GPT-2's
// transposes, synthetic weights). Buffers of 2 MiB and more start on a 2 MiB boundary and, where
// the kernel's transparent huge pages are on for memory that asks, get 2 MiB pages.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

#include "core/large_buffer.h"

namespace kvinfer {
namespace {

TEST(LargeBuffer, AlignsLargeBuffersToTwoMebibytesAndSmallOnesToALine) {
  const LargeBuffer none(0);
  EXPECT_EQ(none.data(), nullptr);
  for (size_t bytes : {size_t{1}, size_t{100}, LargeBuffer::kHugePage - 1}) {
    const LargeBuffer b(bytes);
    EXPECT_EQ(b.alignment(), 64u) << bytes;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 64, 0u) << bytes;
  }
  for (size_t bytes : {LargeBuffer::kHugePage, 3 * LargeBuffer::kHugePage + 5}) {
    LargeBuffer b(bytes);
    EXPECT_EQ(b.alignment(), LargeBuffer::kHugePage) << bytes;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % LargeBuffer::kHugePage, 0u) << bytes;
    std::memset(b.data(), 0x5A, bytes);  // every byte is ours
    EXPECT_EQ(b.data()[bytes - 1], std::byte{0x5A});
  }
}

TEST(LargeBuffer, MovesOwnership) {
  LargeBuffer a(LargeBuffer::kHugePage);
  std::byte* p = a.data();
  LargeBuffer b(std::move(a));
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(a.data(), nullptr);  // NOLINT(bugprone-use-after-move): moved from, empty
  LargeBuffer c(10);
  c = std::move(b);
  EXPECT_EQ(c.data(), p);
  EXPECT_EQ(c.size(), LargeBuffer::kHugePage);
  EXPECT_EQ(c.alignment(), LargeBuffer::kHugePage);
}

// The setting in brackets in a /sys/kernel/mm/transparent_hugepage file ("always [madvise] never").
std::string thp_setting(const std::string& file) {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/" + file);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto open = text.find('['), close = text.find(']');
  return open == std::string::npos || close == std::string::npos ? "" : text.substr(open + 1, close - open - 1);
}

// AnonHugePages (kB) of the mapping in /proc/self/smaps that holds p.
int64_t anon_huge_kb_at(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto at = reinterpret_cast<uintptr_t>(p);
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream range(line);
    if (range >> std::hex >> lo >> dash >> hi && dash == '-' && line.find(':') > line.find(' ')) {
      inside = lo <= at && at < hi;
      continue;
    }
    if (inside && line.rfind("AnonHugePages:", 0) == 0) return std::stoll(line.substr(14));
  }
  return -1;
}

TEST(LargeBuffer, GetsHugePagesWhereTheKernelGivesThemOnRequest) {
#if !defined(__linux__)
  GTEST_SKIP() << "transparent huge pages are a Linux feature";
#else
  const std::string enabled = thp_setting("enabled"), defrag = thp_setting("defrag");
  if (enabled != "always" && enabled != "madvise")
    GTEST_SKIP() << "transparent huge pages are '" << enabled << "' here (not always/madvise): nothing to check";
  if (defrag != "always" && defrag != "madvise" && defrag != "defer+madvise")
    GTEST_SKIP() << "THP defrag is '" << defrag << "': a page fault may fall back to 4 KiB pages without trying";
  LargeBuffer b(8 * LargeBuffer::kHugePage);
  std::memset(b.data(), 1, b.size());  // fault every page in
  const int64_t kb = anon_huge_kb_at(b.data());
  ASSERT_GE(kb, 0) << "no mapping in /proc/self/smaps holds the buffer";
  EXPECT_GE(kb, 2048) << "a 16 MiB buffer advised MADV_HUGEPAGE got no 2 MiB page (THP enabled '" << enabled
                      << "', defrag '" << defrag << "')";
#endif
}

}  // namespace
}  // namespace kvinfer
