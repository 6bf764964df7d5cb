// Mixture-of-experts ops on the CPU (src/cpu/moe.cpp) against naive double-precision references:
// the routing (softmax, top k, renormalisation, ties), the experts' weighted sum, its batch
// invariance, and that a decode step reads only the experts its token chose.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "core/moe.h"
#include "cpu/cpu_ops.h"
#include "kvinfer/kvinfer.h"
#include "models/decode_bytes.h"
#include "models/weights.h"
#include "reference.h"

namespace kvinfer {
namespace {

std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// (ids, weights) of one row in double: the k largest softmax probabilities (lower index first on
// ties), optionally renormalised, sorted by expert.
void naive_route(const float* logits, int experts, int k, bool normalize, std::vector<int>& ids, std::vector<double>& w) {
  double max = logits[0], sum = 0;
  for (int e = 0; e < experts; ++e) max = std::max(max, static_cast<double>(logits[e]));
  std::vector<double> p(static_cast<size_t>(experts));
  for (int e = 0; e < experts; ++e) sum += p[static_cast<size_t>(e)] = std::exp(logits[e] - max);
  for (double& x : p) x /= sum;
  std::vector<int> order(static_cast<size_t>(experts));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[static_cast<size_t>(a)] > p[static_cast<size_t>(b)]; });
  ids.assign(order.begin(), order.begin() + k);
  std::sort(ids.begin(), ids.end());
  double total = 0;
  for (int e : ids) total += p[static_cast<size_t>(e)];
  w.clear();
  for (int e : ids) w.push_back(normalize ? p[static_cast<size_t>(e)] / total : p[static_cast<size_t>(e)]);
}

TEST(MoeRoute, TopKOfTheSoftmaxSortedByExpertAsTheNaiveReference) {
  for (bool normalize : {true, false})
    for (auto [experts, k] : {std::pair{4, 2}, {8, 2}, {60, 4}, {128, 8}, {5, 5}, {3, 1}}) {
      const int64_t n = 13;
      const std::vector<float> logits = random_floats(static_cast<size_t>(n * experts), static_cast<uint32_t>(experts * 10 + k), 2.0f);
      std::vector<int32_t> ids(static_cast<size_t>(n * k));
      std::vector<float> w(static_cast<size_t>(n * k));
      cpu::moe_route(logits.data(), n, experts, k, normalize, ids.data(), w.data());
      for (int64_t t = 0; t < n; ++t) {
        std::vector<int> want_ids;
        std::vector<double> want_w;
        naive_route(logits.data() + t * experts, experts, k, normalize, want_ids, want_w);
        double sum = 0;
        for (int j = 0; j < k; ++j) {
          const auto i = static_cast<size_t>(t * k + j);
          EXPECT_EQ(ids[i], want_ids[static_cast<size_t>(j)]) << "row " << t << " slot " << j;
          EXPECT_NEAR(w[i], want_w[static_cast<size_t>(j)], 1e-6 * want_w[static_cast<size_t>(j)] + 1e-9);
          sum += w[i];
        }
        if (normalize) {
          EXPECT_NEAR(sum, 1.0, 1e-6);
        }
      }
    }
}

TEST(MoeRoute, TiesGoToTheLowerExpertIndex) {
  const float logits[] = {0.5f, 1.0f, 1.0f, 1.0f, -2.0f};
  int32_t ids[2];
  float w[2];
  core::route_top_k(logits, 5, 2, true, ids, w);
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(ids[1], 2);
  EXPECT_EQ(w[0], 0.5f);
  EXPECT_EQ(w[1], 0.5f);
}

// Experts whose matrices each live in their own pages: moe_experts may then be checked to read
// only some of them (the others made unreadable).
struct PagedExperts {
  MoeWeights m;
  std::vector<std::pair<void*, size_t>> maps;  // one mapping per expert: gate, up, down
  int64_t hidden, inter;
  PagedExperts(int64_t experts, int64_t hidden_, int64_t inter_, uint32_t seed) : hidden(hidden_), inter(inter_) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t each = static_cast<size_t>(hidden * inter) * sizeof(float);
    const size_t bytes = (3 * each + page - 1) / page * page;
    for (int64_t e = 0; e < experts; ++e) {
      void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      EXPECT_NE(p, MAP_FAILED);
      maps.emplace_back(p, bytes);
      auto* f = static_cast<float*>(p);
      const std::vector<float> values = random_floats(3 * static_cast<size_t>(hidden * inter), seed + static_cast<uint32_t>(e), 0.2f);
      std::memcpy(f, values.data(), 3 * each);
      const auto matrix = [&](int part, int64_t rows, int64_t cols) {
        return Linear{Matrix{DType::F32, reinterpret_cast<const std::byte*>(f + part * hidden * inter), rows, cols}, {}};
      };
      m.gate.push_back(matrix(0, inter, hidden));
      m.up.push_back(matrix(1, inter, hidden));
      m.down.push_back(matrix(2, hidden, inter));
    }
  }
  ~PagedExperts() {
    for (auto [p, n] : maps) munmap(p, n);
  }
  void protect(int64_t e, bool readable) {
    auto [p, n] = maps[static_cast<size_t>(e)];
    ASSERT_EQ(mprotect(p, n, readable ? PROT_READ | PROT_WRITE : PROT_NONE), 0);
  }
};

struct Scratch {
  std::vector<float> x, gate, up, y;
  Scratch(int64_t n, int64_t k, int64_t hidden, int64_t inter)
      : x(static_cast<size_t>(n * hidden)), gate(static_cast<size_t>(n * k * inter)), up(gate.size()),
        y(static_cast<size_t>(n * k * hidden)) {}
  MoeScratch get() { return {x.data(), gate.data(), up.data(), y.data()}; }
};

// out row t = Σ_j w · down(silu(gate·x) ⊙ up·x) in double.
std::vector<double> naive_experts(const PagedExperts& p, const std::vector<float>& x, int64_t n,
                                  const std::vector<int32_t>& ids, const std::vector<float>& w, int64_t k) {
  const int64_t H = p.hidden, I = p.inter;
  std::vector<double> out(static_cast<size_t>(n * H), 0.0);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t j = 0; j < k; ++j) {
      const auto e = static_cast<size_t>(ids[static_cast<size_t>(t * k + j)]);
      const auto* g = reinterpret_cast<const float*>(p.m.gate[e].weight.data);
      const auto* u = reinterpret_cast<const float*>(p.m.up[e].weight.data);
      const auto* d = reinterpret_cast<const float*>(p.m.down[e].weight.data);
      std::vector<double> a(static_cast<size_t>(I));
      for (int64_t i = 0; i < I; ++i) {
        double gs = 0, us = 0;
        for (int64_t c = 0; c < H; ++c) {
          gs += static_cast<double>(g[i * H + c]) * x[static_cast<size_t>(t * H + c)];
          us += static_cast<double>(u[i * H + c]) * x[static_cast<size_t>(t * H + c)];
        }
        a[static_cast<size_t>(i)] = gs / (1 + std::exp(-gs)) * us;
      }
      for (int64_t c = 0; c < H; ++c) {
        double s = 0;
        for (int64_t i = 0; i < I; ++i) s += static_cast<double>(d[c * I + i]) * a[static_cast<size_t>(i)];
        out[static_cast<size_t>(t * H + c)] += w[static_cast<size_t>(t * k + j)] * s;
      }
    }
  return out;
}

TEST(MoeExperts, WeightedSumOfTheChosenExpertsAndEveryRowHasItsSoloBits) {
  const int64_t experts = 6, k = 2, n = 9, hidden = 40, inter = 24;
  PagedExperts p(experts, hidden, inter, 100);
  const std::vector<float> x = random_floats(static_cast<size_t>(n * hidden), 7);
  const std::vector<float> logits = random_floats(static_cast<size_t>(n * experts), 8, 2.0f);
  std::vector<int32_t> ids(static_cast<size_t>(n * k));
  std::vector<float> w(ids.size());
  cpu::moe_route(logits.data(), n, experts, k, true, ids.data(), w.data());
  Scratch s(n, k, hidden, inter);
  std::vector<float> out(static_cast<size_t>(n * hidden), NAN);
  cpu::moe_experts(p.m, x.data(), n, hidden, ids.data(), w.data(), k, s.get(), out.data());
  const std::vector<double> want = naive_experts(p, x, n, ids, w, k);
  double scale = 0;
  for (double v : want) scale = std::max(scale, std::abs(v));
  for (size_t i = 0; i < out.size(); ++i) EXPECT_NEAR(out[i], want[i], 1e-5 * scale) << i;
  // Each row alone: the same bits (batch invariance, as cache-on == cache-off needs).
  for (int64_t t = 0; t < n; ++t) {
    std::vector<float> one(static_cast<size_t>(hidden));
    Scratch s1(1, k, hidden, inter);
    cpu::moe_experts(p.m, x.data() + t * hidden, 1, hidden, ids.data() + t * k, w.data() + t * k, k, s1.get(), one.data());
    EXPECT_EQ(std::memcmp(one.data(), out.data() + t * hidden, one.size() * sizeof(float)), 0) << "row " << t;
  }
}

// A decode step (one row) reads only the k experts its token chose: the others are unreadable
// (PROT_NONE), so a read of any of their bytes would end the test with SIGSEGV.
TEST(MoeExperts, OneRowReadsOnlyItsChosenExperts) {
  const int64_t experts = 8, k = 2, hidden = 64, inter = 32;
  PagedExperts p(experts, hidden, inter, 200);
  const std::vector<float> x = random_floats(static_cast<size_t>(hidden), 9);
  for (auto [a, b] : {std::pair{0, 7}, {3, 4}, {1, 6}}) {
    const int32_t ids[] = {a, b};
    const float w[] = {0.25f, 0.75f};
    for (int64_t e = 0; e < experts; ++e) p.protect(e, e == a || e == b);
    Scratch s(1, k, hidden, inter);
    std::vector<float> out(static_cast<size_t>(hidden));
    cpu::moe_experts(p.m, x.data(), 1, hidden, ids, w, k, s.get(), out.data());
    for (int64_t e = 0; e < experts; ++e) p.protect(e, true);
    const std::vector<double> want = naive_experts(p, x, 1, {ids[0], ids[1]}, {w[0], w[1]}, k);
    for (size_t i = 0; i < out.size(); ++i) EXPECT_NEAR(out[i], want[i], 1e-4) << i;
  }
}

// Weight accounting: weight_bytes counts every expert of every layer (the file's bytes), a decode
// step's bytes the router and k experts per mixture-of-experts layer.
TEST(MoeModel, WeightBytesCountEveryExpertAndAStepItsKExperts) {
  for (const char* name : {"mixtral_tiny", "qwen2_moe_tiny", "qwen3_moe_tiny"}) {
    const auto m = Model::load(test::model_dir(name), {.device = Device::CPU});
    const ModelConfig& c = m->config();
    int64_t moe_layers = 0;
    for (int64_t l = 0; l < c.num_layers; ++l) moe_layers += c.is_moe_layer(l);
    const uint64_t expert = static_cast<uint64_t>(3 * c.hidden_size * c.moe_intermediate_size) * sizeof(float);
    const uint64_t experts = expert * static_cast<uint64_t>(c.num_experts * moe_layers);
    // Everything but the unchosen experts and all but one embedding row is read by a step.
    const uint64_t unread = experts - expert * static_cast<uint64_t>(c.num_experts_per_tok * moe_layers) +
                            static_cast<uint64_t>((c.vocab_size - 1) * c.hidden_size) * sizeof(float);
    EXPECT_EQ(m->weight_bytes() - m->step_weight_bytes(), unread) << name;
    EXPECT_EQ(decode_step_bytes(*m, 1, DType::F32).weights(), m->step_weight_bytes()) << name;
  }
}

}  // namespace
}  // namespace kvinfer
