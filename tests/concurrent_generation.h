#pragma once
// Concurrent sessions over one shared model, for tests/test_concurrency.cpp (CPU) and
// tests/test_cuda_e2e.cpp (CUDA): 4 threads generate at once, each with its own Session, KvCache
// and sampler (threads 0 and 1 with the cache, 2 and 3 recomputing every step), twice, and every
// thread's tokens and logits equal, bit for bit, those of the same request run alone.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kvinfer/generate.h"
#include "kvinfer/model.h"
#include "kvinfer/session.h"

namespace kvinfer::test {

// One request's result: its tokens, and the bits of every logit it was sampled from.
struct Run {
  std::vector<int32_t> tokens;
  std::vector<uint32_t> logit_bits;
  bool operator==(const Run&) const = default;
};

inline Run generate_one(const std::shared_ptr<const Model>& model, const std::vector<int32_t>& prompt, uint64_t seed,
                        bool use_kv_cache, int64_t tokens) {
  Session session(model);
  KvCache kv(*model, 64);
  GenerateOptions opt;
  opt.max_new_tokens = tokens;
  opt.ignore_eos = true;
  opt.use_kv_cache = use_kv_cache;
  opt.sampling = SamplingParams{};  // temperature 0.8, top-k 40, top-p 0.95, min-p 0.05
  opt.sampling.seed = seed;
  Run run;
  const auto result = generate_tokens(session, kv, prompt, opt, [&](int32_t, std::span<const float> logits) {
    for (float v : logits) {
      uint32_t bits;
      std::memcpy(&bits, &v, sizeof bits);
      run.logit_bits.push_back(bits);
    }
    return true;
  });
  run.tokens = result.tokens;
  return run;
}

inline void expect_concurrent_equals_sequential(const std::shared_ptr<const Model>& model, int64_t tokens = 12) {
  const int64_t vocab = model->config().vocab_size;
  std::vector<std::vector<int32_t>> prompts;
  for (int k = 0; k < 4; ++k) {
    std::vector<int32_t> p;
    for (int i = 0; i < 5 + 3 * k; ++i) p.push_back(static_cast<int32_t>((17 * i + 29 * k + 3) % vocab));
    prompts.push_back(p);
  }
  auto request = [&](size_t k) { return generate_one(model, prompts[k], 1000 + k, k < 2, tokens); };
  std::vector<Run> alone;
  for (size_t k = 0; k < 4; ++k) {
    alone.push_back(request(k));
    ASSERT_EQ(alone.back().tokens.size(), static_cast<size_t>(tokens));
    ASSERT_EQ(alone.back().logit_bits.size(), static_cast<size_t>(tokens * vocab));
  }
  for (int round = 0; round < 2; ++round) {
    std::vector<Run> together(4);
    std::vector<std::string> errors(4);
    std::vector<std::thread> threads;
    for (size_t k = 0; k < 4; ++k)
      threads.emplace_back([&, k] {
        try {
          together[k] = request(k);
        } catch (const std::exception& e) {  // an exception escaping a thread would abort the run
          errors[k] = e.what();
        }
      });
    for (auto& t : threads) t.join();
    for (size_t k = 0; k < 4; ++k) {
      ASSERT_EQ(errors[k], "") << "thread " << k << ", round " << round;
      EXPECT_EQ(together[k].tokens, alone[k].tokens) << "thread " << k << ", round " << round;
      EXPECT_TRUE(together[k].logit_bits == alone[k].logit_bits) << "thread " << k << ", round " << round;
    }
  }
}

}  // namespace kvinfer::test
