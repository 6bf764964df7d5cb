#include <set>

#include "models/weights.h"

namespace kvinfer {

void read_weights(const ModelWeights& w, const std::function<void(uint64_t, uint64_t)>& progress) {
  std::set<const void*> seen;  // a tied LM head is the embedding: read once
  uint64_t total = 0;
  for_each_tensor(w, [&](const auto& t) {
    if (t.data && seen.insert(t.data).second) total += t.bytes();
  });
  seen.clear();
  uint64_t done = 0;
  unsigned sum = 0;
  if (progress) progress(0, total);
  for_each_tensor(w, [&](const auto& t) {
    if (!t.data || !seen.insert(t.data).second) return;
    const auto* p = reinterpret_cast<const volatile unsigned char*>(t.data);
    for (uint64_t i = 0; i < t.bytes(); i += 4096) sum += p[i];
    done += t.bytes();
    if (progress) progress(done, total);
  });
  static_cast<void>(sum);
}

}  // namespace kvinfer
