#pragma once
// Greedy runs with forced tokens, for the KV state tests (test_kv_state.cpp, test_cuda_kv_state.cpp):
// every step's logits are recorded, so that two ways of reaching the same positions can be
// compared bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <span>
#include <vector>

#include "kvinfer/kvinfer.h"

namespace kvinfer::test {

inline int32_t argmax(std::span<const float> l) {
  return static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
}

// What a run fed and computed: the ids of its decode steps and each step's logits (vocab each),
// the prefill's last row first.
struct Trace {
  std::vector<int32_t> fed;
  std::vector<float> logits;
};

// Decode steps from..to-1 of a run: step i feeds forced[i] when given, else the argmax of the last
// logits (`last`, updated).
inline void run_steps(Session& s, KvCache& kv, std::vector<float>& last, int from, int to,
                      const std::map<int, int32_t>& forced, Trace& t) {
  for (int i = from; i < to; ++i) {
    const auto it = forced.find(i);
    const int32_t id = it != forced.end() ? it->second : argmax(last);
    const auto l = s.decode(kv, id);
    last.assign(l.begin(), l.end());
    t.fed.push_back(id);
    t.logits.insert(t.logits.end(), l.begin(), l.end());
  }
}

// Prefill `prompt`, recording its last row.
inline std::vector<float> prefill(Session& s, KvCache& kv, std::span<const int32_t> prompt, Trace& t) {
  const auto l = s.prefill(kv, prompt);
  t.logits.insert(t.logits.end(), l.begin(), l.end());
  return {l.begin(), l.end()};
}

// An uninterrupted run of `steps` decode steps after the prompt, in a fresh cache of `capacity`.
inline Trace fresh_run(const std::shared_ptr<const Model>& model, std::span<const int32_t> prompt, int steps,
                       const std::map<int, int32_t>& forced = {}, int64_t capacity = 64) {
  Session s(model);
  KvCache kv(*model, capacity);
  Trace t;
  auto last = prefill(s, kv, prompt, t);
  run_steps(s, kv, last, 0, steps, forced, t);
  return t;
}

inline bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size_bytes()) == 0;
}

}  // namespace kvinfer::test
