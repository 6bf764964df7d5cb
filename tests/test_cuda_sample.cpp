// Device sampling (kernels/sample.cu, cuda_backend::scan_logits/top_k_candidates) against the CPU
// Sampler, its reference: the argmax and first non-finite index, the exact top-k set (ties at the
// maximum and at the k-th value planted, -0.0 beside +0.0), and the sampled tokens of whole runs
// with every filter, penalty and bias, which must equal the CPU Sampler's bit for bit. Fresh random
// logits (never zeros) on vocabularies of 1, 7, 49152 and 151936. Skips where no CUDA device exists.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "cuda/cuda_backend.h"
#include "cuda_check.h"
#include "cuda_sample.h"
#include "cuda_test_buffer.h"
#include "kvinfer/device.h"
#include "kvinfer/sampler.h"
#include "sampling_presets.h"

namespace kvinfer_test {
namespace {

using kvinfer::Sampler;
using kvinfer::SamplingParams;
namespace cuda = kvinfer::cuda;
namespace backend = kvinfer::cuda_backend;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr int32_t kVocabs[] = {1, 7, 49152, 151936};

#define SKIP_WITHOUT_DEVICE()                                                                  \
  do {                                                                                         \
    if (kvinfer::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: these tests need one"; \
  } while (0)


// Model-like logits, normal(0, 2), never zero; with `coarse`, rounded to quarters so that ties
// are everywhere (zeros then appear, both +0.0 and -0.0).
std::vector<float> random_logits(int32_t vocab, uint64_t seed, bool coarse = false) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> v(static_cast<size_t>(vocab));
  for (float& x : v) {
    x = normal(rng);
    if (coarse) x = std::round(x * 4.0f) / 4.0f;  // ±0 keep the sign of x
    if (!coarse && x == 0.0f) x = 1e-3f;
  }
  return v;
}

// The first k by (value descending, id ascending), as a sorted set of ids: the definition.
std::vector<int32_t> reference_top_k(const std::vector<float>& v, int32_t k) {
  std::vector<int32_t> ids(v.size());
  for (size_t i = 0; i < v.size(); ++i) ids[i] = static_cast<int32_t>(i);
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return v[a] > v[b]; });
  ids.resize(static_cast<size_t>(k));
  std::sort(ids.begin(), ids.end());
  return ids;
}

// Copies the value ranked `rank` (0 = largest) to `copies` other ids spread over the row, below
// and above it: ties at the maximum (rank 0) or at the k-th value (rank k - 1).
void plant_ties(std::vector<float>& v, int32_t rank, int copies, uint64_t seed) {
  if (v.size() < 2) return;
  std::vector<float> sorted = v;
  std::nth_element(sorted.begin(), sorted.begin() + rank, sorted.end(), std::greater<>());
  const float value = sorted[static_cast<size_t>(rank)];
  std::mt19937_64 rng(seed);
  for (int c = 0; c < copies; ++c) v[rng() % v.size()] = value;
  v.front() = value;  // the lowest id ties too
}

struct Scan {
  int32_t argmax, first_nonfinite;
  float max_value;
};

Scan device_scan(const std::vector<float>& v) {
  DeviceBuffer d(v), out(cuda::kScanInts * sizeof(int32_t));
  cuda::scan_logits(d.as<float>(), static_cast<int64_t>(v.size()), out.as<int32_t>(), nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  const auto h = out.to_host<int32_t>();
  Scan s{h[0], h[1], 0.0f};
  std::memcpy(&s.max_value, &h[2], sizeof s.max_value);
  return s;
}

std::vector<int32_t> device_top_k(const std::vector<float>& v, int32_t k, std::vector<float>* values = nullptr) {
  DeviceBuffer d(v), ids(static_cast<size_t>(k) * 4), vals(static_cast<size_t>(k) * 4);
  cuda::top_k(d.as<float>(), static_cast<int64_t>(v.size()), k, ids.as<int32_t>(), vals.as<float>(), nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  if (values) *values = vals.to_host<float>();
  return ids.to_host<int32_t>();
}

TEST(CudaSampleKernels, ScanFindsTheFirstMaximumAndTheFirstNonFinite) {
  SKIP_WITHOUT_DEVICE();
  for (int32_t vocab : kVocabs) {
    for (uint64_t seed : {1u, 2u}) {
      auto v = random_logits(vocab, seed * 1000 + static_cast<uint64_t>(vocab));
      if (seed == 2) plant_ties(v, 0, 5, seed);
      const auto want = static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
      Scan s = device_scan(v);
      EXPECT_EQ(s.argmax, want) << "vocab " << vocab << " seed " << seed;
      EXPECT_EQ(s.max_value, v[static_cast<size_t>(want)]);
      EXPECT_EQ(s.first_nonfinite, -1);
      if (seed == 2 && vocab > 1) {
        EXPECT_EQ(s.argmax, 0) << "the planted tie at id 0 is the first maximum";
      }
    }
    // Non-finite values: the lowest index of any of them, whatever the kind.
    const auto base = random_logits(vocab, 77);
    const int32_t hi = vocab - 1, lo = vocab / 3;
    for (float bad : {kNaN, kInf, -kInf}) {
      auto v = base;
      v[static_cast<size_t>(hi)] = bad;
      EXPECT_EQ(device_scan(v).first_nonfinite, hi) << bad << " vocab " << vocab;
      v[static_cast<size_t>(lo)] = bad == kNaN ? kInf : kNaN;
      EXPECT_EQ(device_scan(v).first_nonfinite, lo) << bad << " vocab " << vocab;
    }
  }
}

TEST(CudaSampleKernels, TopKIsExactlyTheFirstKWithTiesByLowestId) {
  SKIP_WITHOUT_DEVICE();
  for (int32_t vocab : kVocabs) {
    for (int32_t k : {1, 2, 40, 1000, 1024}) {
      if (k > vocab) k = vocab;
      for (int variant = 0; variant < 3; ++variant) {
        const uint64_t seed = static_cast<uint64_t>(vocab) * 31 + static_cast<uint64_t>(k) * 7 + variant;
        auto v = random_logits(vocab, seed, /*coarse=*/variant == 2);
        if (variant == 1) {
          plant_ties(v, 0, 3, seed);
          plant_ties(v, k - 1, 7, seed + 1);
        }
        std::vector<float> values;
        const auto got = device_top_k(v, k, &values);
        const auto want = reference_top_k(v, k);
        ASSERT_EQ(got, want) << "vocab " << vocab << " k " << k << " variant " << variant;
        for (int32_t i = 0; i < k; ++i)
          ASSERT_EQ(std::memcmp(&values[i], &v[static_cast<size_t>(got[i])], 4), 0) << "value of id " << got[i];
      }
    }
  }
}

TEST(CudaSampleKernels, TopKTreatsMinusZeroAsZeroAndKeepsMinusInfLast) {
  SKIP_WITHOUT_DEVICE();
  // -0.0 == +0.0: a tie, broken by id, whichever sign each has.
  std::vector<float> v = {-1.0f, 0.0f, -0.0f, -0.0f, 0.0f, -kInf, -2.0f, -kInf};
  EXPECT_EQ(device_top_k(v, 2), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(device_top_k(v, 3), (std::vector<int32_t>{1, 2, 3}));
  v[1] = -0.0f;
  v[4] = 0.0f;
  EXPECT_EQ(device_top_k(v, 2), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(device_top_k(v, 7), (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(device_top_k(v, 8), (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7}));
}

// ---- the whole pipeline: what Session::sample does, against Sampler::sample on the same logits ----

struct Case {
  std::string name;
  SamplingParams p;
};

std::vector<Case> cases(int32_t vocab) {
  std::vector<Case> out;
  auto add = [&](std::string name, auto&& edit) {
    SamplingParams p = kvinfer::test::llama_cpp_sampling();  // llama.cpp's defaults
    edit(p);
    out.push_back({std::move(name), std::move(p)});
  };
  const int32_t last = vocab - 1;
  const std::vector<std::pair<int32_t, float>> bias = {
      {0, 2.5f}, {last, -kInf}, {vocab / 2, 1.25f}, {0, -0.75f}, {vocab / 3, 40.0f}, {vocab / 2, 0.125f}};
  add("greedy", [](SamplingParams& p) { p = SamplingParams::greedy(); });
  add("greedy_bias", [&](SamplingParams& p) {
    p = SamplingParams::greedy();
    p.logit_bias = bias;
  });
  add("greedy_penalties", [](SamplingParams& p) {
    p = SamplingParams::greedy();
    p.repetition_penalty = 1.3f;
    p.frequency_penalty = 0.4f;
    p.presence_penalty = 0.6f;
  });
  add("defaults", [](SamplingParams&) {});
  add("k1", [](SamplingParams& p) { p.top_k = 1; });
  add("k1024_no_filters", [](SamplingParams& p) {
    p.top_k = 1024;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.temperature = 1.5f;
  });
  add("top_p_only", [](SamplingParams& p) {
    p.top_k = 300;
    p.min_p = 0.0f;
    p.top_p = 0.7f;
  });
  add("min_p_only", [](SamplingParams& p) {
    p.top_k = 500;
    p.top_p = 1.0f;
    p.min_p = 0.2f;
  });
  add("all_penalties_bias", [&](SamplingParams& p) {
    p.repetition_penalty = 1.1f;
    p.frequency_penalty = 0.25f;
    p.presence_penalty = 0.5f;
    p.penalty_last_n = 16;
    p.logit_bias = bias;
  });
  add("whole_history_penalties_tiny_t", [&](SamplingParams& p) {
    p.temperature = 0.05f;
    p.repetition_penalty = 0.8f;  // < 1 rewards repeats
    p.frequency_penalty = -0.3f;
    p.penalty_last_n = -1;
    p.top_k = 64;
  });
  add("top_k_off", [](SamplingParams& p) { p.top_k = 0; });  // the row is copied: the CPU's path
  return out;
}

// Session::sample's choice with the logits on the device (the host row only for its fallback).
int32_t device_sample(backend::Context& ctx, Sampler& s, const float* d_logits, const std::vector<float>& host) {
  return backend::sample_row(ctx, s, d_logits, s.vocab_size(), [&] { return std::span<const float>(host); });
}

// The id picked, or -1 and the error's message.
template <typename F>
std::pair<int32_t, std::string> outcome(F&& f) {
  try {
    return {f(), ""};
  } catch (const kvinfer::Error& e) {
    return {-1, e.what()};
  }
}

void expect_same_tokens(int32_t vocab, int steps) {
  auto ctx = backend::create_context();
  DeviceBuffer d(static_cast<size_t>(vocab) * sizeof(float));
  for (const Case& c : cases(vocab)) {
    for (uint64_t seed : {0u, 12345u}) {
      SamplingParams p = c.p;
      p.seed = seed;
      Sampler cpu(p, vocab), gpu(p, vocab);
      int device_picks = 0;
      for (int i = 0; i < steps; ++i) {
        const auto v = random_logits(vocab, seed * 100003 + static_cast<uint64_t>(i) * 7919 + vocab, i % 3 == 1);
        d.upload(v);
        const auto [want, want_error] = outcome([&] { return cpu.sample(v); });
        const auto [got, got_error] = outcome([&] { return device_sample(*ctx, gpu, d.as<float>(), v); });
        device_picks += gpu.top_k_size() <= backend::max_device_top_k();
        ASSERT_EQ(got, want) << c.name << " seed " << seed << " step " << i << " vocab " << vocab;
        ASSERT_EQ(got_error, want_error) << c.name << " seed " << seed << " step " << i << " vocab " << vocab;
        const auto a = cpu.last_candidates(), b = gpu.last_candidates();
        ASSERT_TRUE(std::equal(a.begin(), a.end(), b.begin(), b.end())) << c.name << " step " << i;
        if (want < 0) continue;
        cpu.accept(want);
        gpu.accept(got);
      }
      if (c.name != "top_k_off" || vocab <= backend::max_device_top_k()) {
        EXPECT_EQ(device_picks, steps) << c.name << ": the device path was taken";
      }
    }
  }
}

TEST(CudaSamplePipeline, SameTokensAsTheCpuSamplerSmallVocabularies) {
  SKIP_WITHOUT_DEVICE();
  expect_same_tokens(1, 20);
  expect_same_tokens(7, 200);
  expect_same_tokens(3000, 200);
}

TEST(CudaSamplePipeline, SameTokensAsTheCpuSamplerLargeVocabularies) {
  SKIP_WITHOUT_DEVICE();
  expect_same_tokens(49152, 12);
  expect_same_tokens(151936, 6);
}

// The adjusted logits the device returns are the Sampler's, bit for bit: bias entries added in
// their order (three entries for one id round differently in another order), then the penalty in
// the documented float operations, none fused. The touched ids are pushed into the top-k set.
TEST(CudaSamplePipeline, AdjustedLogitsAreTheSamplersBitForBit) {
  SKIP_WITHOUT_DEVICE();
  auto ctx = backend::create_context();
  const int32_t vocab = 4096, k = 1024;
  for (uint64_t seed : {1u, 2u, 3u}) {
    const auto v = random_logits(vocab, seed);
    DeviceBuffer d(v);
    std::mt19937_64 rng(seed);
    std::vector<std::pair<int32_t, float>> bias;
    std::vector<std::pair<int32_t, int32_t>> penalised;
    for (int i = 0; i < 300; ++i) {
      const auto id = static_cast<int32_t>(rng() % vocab);
      bias.emplace_back(id, 20.3f);
      bias.emplace_back(static_cast<int32_t>(rng() % vocab), 0.37f);
      bias.emplace_back(id, -0.011f * static_cast<float>(i % 7));
      bias.emplace_back(id, 1.7f);
    }
    std::set<int32_t> seen;
    for (const auto& [id, b] : bias)
      if (seen.insert(id).second && rng() % 2 == 0) penalised.emplace_back(id, static_cast<int32_t>(1 + rng() % 60));
    const float r = 1.3f, presence = 0.113f, frequency = 0.0371f;
    // The definition (docs/sampling.md steps 2 and 3).
    std::vector<float> want = v;
    for (const auto& [id, b] : bias) want[static_cast<size_t>(id)] += b;
    for (const auto& [id, c] : penalised) {
      float& l = want[static_cast<size_t>(id)];
      l = l > 0.0f ? l / r : l * r;
      const float sub = static_cast<float>(c) * frequency;
      l -= sub + presence;
    }
    backend::LogitAdjustments adjust;
    adjust.bias = bias;
    adjust.penalised = penalised;
    adjust.repetition = r;
    adjust.presence = presence;
    adjust.frequency = frequency;
    const auto got = backend::top_k_candidates(*ctx, d.as<float>(), vocab, adjust, k);
    ASSERT_EQ(got.size(), static_cast<size_t>(k));
    std::vector<int32_t> ids;
    for (const auto& [id, l] : got) {
      ids.push_back(id);
      ASSERT_EQ(std::memcmp(&l, &want[static_cast<size_t>(id)], sizeof l), 0)
          << "id " << id << ": " << l << " vs " << want[static_cast<size_t>(id)];
    }
    EXPECT_EQ(ids, reference_top_k(want, k));
    size_t touched = 0;
    for (int32_t id : seen) touched += std::binary_search(ids.begin(), ids.end(), id) ? 1 : 0;
    EXPECT_GT(touched, seen.size() / 2) << "the bias puts most touched ids in the top-k set";
  }
}

// An adjusted logit that overflows to +inf, or every token banned: the CPU Sampler's errors.
TEST(CudaSamplePipeline, OverflowsAndBansAreTheCpuSamplersErrors) {
  SKIP_WITHOUT_DEVICE();
  auto ctx = backend::create_context();
  const int32_t vocab = 64;
  auto v = random_logits(vocab, 5);
  v[3] = 3e38f;
  DeviceBuffer d(v);
  SamplingParams p = kvinfer::test::llama_cpp_sampling();
  p.logit_bias = {{3, 3e38f}};
  Sampler s(p, vocab);
  EXPECT_THROW(device_sample(*ctx, s, d.as<float>(), v), kvinfer::Error);
  // Banning everything but one token: that token, on both paths; banning all: the error.
  SamplingParams q;
  for (int32_t i = 0; i < vocab; ++i)
    if (i != 17) q.logit_bias.emplace_back(i, -kInf);
  Sampler a(q, vocab), b(q, vocab);
  EXPECT_EQ(device_sample(*ctx, a, d.as<float>(), v), 17);
  EXPECT_EQ(b.sample(v), 17);
  q.logit_bias.emplace_back(17, -kInf);
  Sampler c(q, vocab);
  try {
    device_sample(*ctx, c, d.as<float>(), v);
    ADD_FAILURE() << "no error";
  } catch (const kvinfer::Error& e) {
    EXPECT_NE(std::string(e.what()).find("every token is banned"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kvinfer_test
