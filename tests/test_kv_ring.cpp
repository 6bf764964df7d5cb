// Sliding-window layers' rings (kv_layer_rows): a ring cache gives every attention output the
// bits a full cache gives it, through decode steps, prefill pieces and rewinds, on every CPU
// path and cache dtype; the plan counts the rings; rewinds and prefix copies past what a ring
// still holds are refused, and copies between rings and full caches keep the bits.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/kv_cache_access.h"
#include "cpu/cpu_ops.h"
#include "kvinfer/kvinfer.h"

namespace kvinfer {
namespace {

using ::testing::HasSubstr;

// Two layers, the second windowed (as Gemma 3 mixes them), 2 query heads per KV head.
ModelConfig shape(int64_t window, int64_t head_dim, int64_t kv_heads = 2) {
  ModelConfig c;
  c.arch = Architecture::Llama;
  c.num_layers = 2;
  c.num_heads = 2 * kv_heads;
  c.num_kv_heads = kv_heads;
  c.head_dim = head_dim;
  c.hidden_size = c.num_heads * head_dim;
  if (window > 0) {
    c.sliding_window = window;
    c.sliding_layers = {false, true};
  }
  return c;
}

// One sequence's attention on layer 1 (the windowed one) through cpu::self_attention, which
// splits a call into the pieces a ring takes; q, k, v random, the outputs appended to `out`.
struct Runner {
  Runner(KvCache cache, int64_t w) : kv(std::move(cache)), window(w) {}
  KvCache kv;
  int64_t window;
  std::mt19937 rng{7};
  std::vector<float> out;  // every step's outputs, in order

  void step(int64_t n) {
    const int64_t hd = kv.head_dim(), kvh = kv.num_kv_heads(), heads = 2 * kvh;
    std::normal_distribution<float> d;
    std::vector<float> q(static_cast<size_t>(n * heads * hd)), k(static_cast<size_t>(n * kvh * hd)),
        v(static_cast<size_t>(n * kvh * hd)), att(static_cast<size_t>(n * heads * hd));  // (n, heads|kvh, hd)
    for (auto* x : {&q, &k, &v})
      for (float& f : *x) f = d(rng);
    const SequenceRows s{&kv, kv.size(), 0, n};
    SelfAttention a{1, heads, kvh, hd, window, nullptr, RopeLayout::HalfSplit};
    cpu::self_attention({&s, 1}, a, q.data(), k.data(), v.data(), att.data());
    KvCacheAccess::commit(kv, std::vector<int32_t>(static_cast<size_t>(n), 1));
    out.insert(out.end(), att.begin(), att.end());
  }
};

struct Case {
  DType dtype;
  int64_t window, head_dim, kv_heads;
};

class KvRing : public ::testing::TestWithParam<Case> {};

TEST_P(KvRing, RingGivesTheBitsOfAFullCache) {
  const auto [dtype, window, hd, kvh] = GetParam();
  const int64_t rows = window + std::min<int64_t>(window, 512) - 1, capacity = 4 * rows + 150;
  Runner ring{KvCache(shape(window, hd, kvh), capacity, dtype), window};
  Runner full{KvCache(shape(0, hd, kvh), capacity, dtype), window};
  ASSERT_EQ(ring.kv.layer_rows(1), rows);
  ASSERT_EQ(ring.kv.layer_rows(0), capacity);
  ASSERT_LT(ring.kv.bytes(), full.kv.bytes());
  // Prefills longer than a piece, decode steps, a rewind within a piece: positions wrap the ring
  // many times.
  for (int64_t n : {23, 1, 1, 1, 5, 1, 40, 1, 1, 3, 1, 1, 1, 1, 1, 1, 1, 1, 17, 1, 1}) {
    ring.step(n);
    full.step(n);
  }
  const int64_t back = std::min<int64_t>(window, 512);  // the most a ring always rewinds
  ring.kv.truncate(ring.kv.size() - back);
  full.kv.truncate(full.kv.size() - back);
  for (int64_t n : {2, 1, 1, 9}) {
    ring.step(n);
    full.step(n);
  }
  while (ring.kv.size() <= 3 * rows) {
    ring.step(1);
    full.step(1);
  }
  ASSERT_GT(ring.kv.size(), 3 * rows);
  ASSERT_EQ(ring.out.size(), full.out.size());
  EXPECT_EQ(std::memcmp(ring.out.data(), full.out.data(), ring.out.size() * sizeof(float)), 0);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, KvRing,
                         // One, two and three KV heads: the AVX-512 decode's heads left over to the
                         // team, whole heads per thread, and both (on two threads).
                         ::testing::Values(Case{DType::F32, 5, 64, 2}, Case{DType::F16, 7, 64, 1},
                                           Case{DType::BF16, 4, 40, 3}, Case{DType::I8, 6, 64, 1},
                                           Case{DType::FP8, 5, 32, 2}, Case{DType::F32, 1, 16, 1},
                                           Case{DType::F16, 16, 24, 3}, Case{DType::F32, 40, 128, 1}),
                         [](const auto& c) {
                           return std::string(dtype_name(c.param.dtype)) + "_w" + std::to_string(c.param.window) +
                                  "_hd" + std::to_string(c.param.head_dim) + "_kv" + std::to_string(c.param.kv_heads);
                         });

TEST(KvRingPlan, RowsAndBytes) {
  // Gemma 3 270M: 18 layers, every 6th global, window 512, 1 KV head of 256, f16.
  ModelConfig c;
  c.num_layers = 18;
  c.num_heads = 4;
  c.num_kv_heads = 1;
  c.head_dim = 256;
  c.sliding_window = 512;
  for (int l = 0; l < 18; ++l) c.sliding_layers.push_back((l + 1) % 6 != 0);
  EXPECT_EQ(kv_ring_piece(512), 512);
  EXPECT_EQ(kv_ring_piece(4096), 512);
  EXPECT_EQ(kv_ring_piece(6), 6);
  EXPECT_EQ(kv_layer_rows(c, 0, 32768), 1023);
  EXPECT_EQ(kv_layer_rows(c, 5, 32768), 32768);
  EXPECT_EQ(kv_layer_rows(c, 0, 600), 600);  // a cache shorter than the ring holds every position
  const uint64_t row = 2 * 256 * 2;           // K and V of one position, one layer
  EXPECT_EQ(plan_kv_bytes(c, 32768, DType::F16), row * (15 * 1023 + 3 * 32768));
  EXPECT_EQ(plan_kv_bytes(c, 100, DType::F16), row * 18 * 100);
  EXPECT_EQ(kv_bytes_per_token(c, DType::F16), row * 18);
  // The 8-bit types' scales count per row too.
  EXPECT_EQ(plan_kv_bytes(c, 32768, DType::I8), (2 * (256 + 4)) * uint64_t{15 * 1023 + 3 * 32768});
  const KvCache kv(shape(5, 8), 64, DType::I8);
  EXPECT_EQ(kv.bytes(), plan_kv_bytes(shape(5, 8), 64, DType::I8));
  EXPECT_EQ(kv.bytes(), uint64_t{2 * 2 * (8 + 4)} * (64 + 9));
}

TEST(KvRingRewind, PastTheRingIsRefusedNamingThePositions) {
  Runner r{KvCache(shape(5, 16), 100, DType::F32), 5};  // rows 9: a piece of 5
  r.step(30);
  EXPECT_EQ(r.kv.earliest_rewind(), 30 - 9 + 5 - 1);  // held from 21: the window before 25
  EXPECT_EQ(r.kv.reusable(24), 0);
  EXPECT_EQ(r.kv.reusable(25), 25);
  try {
    r.kv.truncate(24);
    FAIL() << "truncate(24) accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
    EXPECT_THAT(e.what(), HasSubstr("no longer hold positions 20..23 (the least n kept is 25; 0 clears)"));
  }
  EXPECT_EQ(r.kv.size(), 30);
  r.kv.truncate(25);
  r.kv.truncate(0);  // clearing always works, and starts the ring afresh
  EXPECT_EQ(r.kv.earliest_rewind(), 0);
  // A full cache (no ring) rewinds anywhere.
  Runner full{KvCache(shape(0, 16), 100, DType::F32), 5};
  full.step(30);
  EXPECT_EQ(full.kv.earliest_rewind(), 0);
  full.kv.truncate(3);
}

TEST(KvRingRewind, AFailedPassStillCountsWhatItOverwrote) {
  KvCache kv(shape(5, 16), 100, DType::F32);
  KvCacheAccess::commit(kv, std::vector<int32_t>(10, 1));
  EXPECT_EQ(kv.earliest_rewind(), 5);  // 10 written: held from 1
  KvCacheAccess::will_write(kv, 20);   // a pass wrote up to 20 and failed before commit
  EXPECT_EQ(kv.size(), 10);
  EXPECT_EQ(kv.earliest_rewind(), 11 + 4);
  EXPECT_THROW(kv.truncate(9), Error);
}

// Copies between a ring and a full cache, of other capacities, then the same steps on both:
// the bits of the cache they were copied from.
TEST(KvRingCopy, PrefixCopiesKeepTheBits) {
  for (DType dtype : {DType::F32, DType::I8}) {
    Runner a{KvCache(shape(5, 16), 120, dtype), 5};
    a.step(37);
    Runner b{a.kv.copy(60), 5};  // a ring too
    Runner c{KvCache(shape(5, 16), 8, dtype), 5};
    EXPECT_THROW(c.kv.assign_prefix(a.kv, 37), Error);  // capacity 8 < 37
    Runner d{KvCache(shape(5, 16), 50, dtype), 5};
    d.kv.assign_prefix(a.kv, 34);  // rewinds a's 37 by 3 (within a piece)
    EXPECT_EQ(d.kv.size(), 34);
    EXPECT_THROW(d.kv.assign_prefix(a.kv, 20), Error);  // a's ring no longer holds the window before 20
    Runner e{KvCache(shape(5, 16), 120, dtype), 5};
    e.kv.assign_prefix(a.kv, 34);
    a.kv.truncate(34);
    b.kv.truncate(34);
    const size_t mark = a.out.size();
    for (Runner* r : {&a, &b, &d, &e}) {
      r->rng.seed(11);
      r->out.assign(mark, 0.0f);
      for (int64_t n : {1, 6, 1, 1}) r->step(n);
    }
    for (Runner* r : {&b, &d, &e})
      EXPECT_EQ(std::memcmp(r->out.data() + mark, a.out.data() + mark, (a.out.size() - mark) * sizeof(float)), 0)
          << dtype_name(dtype);
    // A cache of another window cannot take the rows.
    KvCache other(shape(6, 16), 120, dtype);
    EXPECT_THROW(other.assign_prefix(a.kv, 30), Error);
  }
}

}  // namespace
}  // namespace kvinfer
