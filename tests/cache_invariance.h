#pragma once
// The central invariant, for every KV dtype: the cache-off run (every step recomputes the whole
// sequence in one batched pass) and the cache-on run give the same bits at every step.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kvinfer/kvinfer.h"

namespace kvinfer::test {

inline void expect_cache_on_equals_off(const std::shared_ptr<const Model>& model, std::span<const int32_t> prompt,
                                       int64_t steps = 32) {
  for (DType dtype : {DType::F32, DType::F16, DType::BF16, DType::I8, DType::FP8}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    std::vector<std::vector<float>> logits[2];  // [cache off, cache on] × (step, vocab)
    std::vector<int32_t> tokens[2];
    for (int cached = 0; cached < 2; ++cached) {
      KvCache kv(*model, static_cast<int64_t>(prompt.size()) + steps, dtype);
      Session s(model);
      GenerateOptions opt;
      opt.max_new_tokens = steps;
      opt.ignore_eos = true;
      opt.use_kv_cache = cached == 1;
      tokens[cached] = generate_greedy(s, kv, prompt, opt, [&](int32_t, std::span<const float> l) {
                         logits[cached].emplace_back(l.begin(), l.end());
                         return true;
                       }).tokens;
    }
    ASSERT_EQ(tokens[0], tokens[1]);
    ASSERT_EQ(logits[0].size(), static_cast<size_t>(steps));
    for (size_t i = 0; i < logits[0].size(); ++i)
      ASSERT_EQ(0, std::memcmp(logits[0][i].data(), logits[1][i].data(), logits[0][i].size() * sizeof(float)))
          << "step " << i << " differs between cache-on and cache-off";
  }
}

}  // namespace kvinfer::test
