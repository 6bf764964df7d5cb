#include "generate/no_repeat_ngram.h"

#include <algorithm>

namespace kvinfer {

void banned_ngram_tokens(std::span<const int32_t> sequence, int32_t n, std::vector<int32_t>& banned) {
  const auto len = static_cast<int64_t>(sequence.size());
  if (n < 1 || len < n) return;
  const auto prefix = sequence.last(static_cast<size_t>(n - 1));
  // Windows start at 0 .. len - n: the window at the prefix itself would need one token more.
  for (int64_t start = 0; start + n <= len; ++start) {
    const auto window = sequence.subspan(static_cast<size_t>(start), static_cast<size_t>(n));
    if (std::equal(prefix.begin(), prefix.end(), window.begin())) banned.push_back(window.back());
  }
}

}  // namespace kvinfer
