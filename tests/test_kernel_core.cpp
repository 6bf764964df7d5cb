// The scalar math shared by the CPU backend and the CUDA kernels (kernels/core/), checked on the
// CPU against double precision: online softmax, split combine, split-K planning, KV row widening.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/convert.h"
#include "core/kv_load.h"
#include "core/online_softmax.h"
#include "core/split_plan.h"

namespace kvinfer::core {
namespace {

constexpr int kDim = 24;  // value vector width: not a power of two on purpose

// Scores (natural domain, -inf = masked) and value rows for one attention row.
struct Row {
  std::vector<float> x;  // (n) q·k·scale, or -inf when masked
  std::vector<float> v;  // (n, kDim)
};

Row random_row(std::mt19937& rng, int n, float spread, float masked_fraction) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f), p(0.0f, 1.0f);
  Row r;
  r.x.resize(static_cast<size_t>(n));
  r.v.resize(static_cast<size_t>(n) * kDim);
  for (auto& x : r.x) x = p(rng) < masked_fraction ? -INFINITY : spread * u(rng);
  for (auto& v : r.v) v = u(rng);
  return r;
}

// Double-precision softmax-weighted sum over the unmasked positions [b, e); zeros if none.
std::vector<double> reference(const Row& r, int b, int e) {
  std::vector<double> out(kDim, 0.0);
  double mx = -INFINITY;
  for (int i = b; i < e; ++i) mx = std::max(mx, static_cast<double>(r.x[static_cast<size_t>(i)]));
  if (mx == -INFINITY) return out;
  double sum = 0.0;
  for (int i = b; i < e; ++i) {
    const double w = std::exp(static_cast<double>(r.x[static_cast<size_t>(i)]) - mx);
    sum += w;
    for (int d = 0; d < kDim; ++d) out[static_cast<size_t>(d)] += w * r.v[static_cast<size_t>(i * kDim + d)];
  }
  for (auto& o : out) o /= sum;
  return out;
}

// One partial state over [b, e), fed to OnlineSoftmax in blocks whose ends are `cuts`.
struct Partial {
  OnlineSoftmax st;
  std::vector<float> o = std::vector<float>(kDim, 0.0f);  // unnormalised accumulator
};

Partial run_blocks(const Row& r, const std::vector<int>& cuts) {
  Partial p;
  for (size_t c = 0; c + 1 < cuts.size(); ++c) {
    const int b = cuts[c], e = cuts[c + 1];
    std::vector<float> s(static_cast<size_t>(std::max(0, e - b)));  // (block) base-2 scores
    float block_max = -INFINITY;
    for (int i = b; i < e; ++i) {
      s[static_cast<size_t>(i - b)] = r.x[static_cast<size_t>(i)] * kLog2e;
      block_max = std::max(block_max, s[static_cast<size_t>(i - b)]);
    }
    const float alpha = p.st.rescale(block_max);
    for (auto& o : p.o) o *= alpha;
    float sum = 0.0f;
    for (int i = b; i < e; ++i) {
      const float w = p.st.weight(s[static_cast<size_t>(i - b)]);
      sum += w;
      for (int d = 0; d < kDim; ++d) p.o[static_cast<size_t>(d)] += w * r.v[static_cast<size_t>(i * kDim + d)];
    }
    p.st.add(sum);
  }
  return p;
}

// Random block boundaries over [b, e), with empty blocks (repeated cuts) mixed in.
std::vector<int> random_cuts(std::mt19937& rng, int b, int e) {
  std::vector<int> cuts{b, e};
  const int extra = std::uniform_int_distribution<int>(0, 12)(rng);
  for (int i = 0; i < extra; ++i) cuts.push_back(std::uniform_int_distribution<int>(b, e)(rng));
  std::sort(cuts.begin(), cuts.end());
  return cuts;
}

std::vector<float> finish(const Partial& p) {
  std::vector<float> out(p.o);
  for (auto& o : out) o *= p.st.inv_sum();
  return out;
}

// max|got - ref| / max|ref| (ref all zero: max|got|).
double rel_error(const std::vector<float>& got, const std::vector<double>& ref) {
  double err = 0.0, scale = 0.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    err = std::max(err, std::abs(static_cast<double>(got[i]) - ref[i]));
    scale = std::max(scale, std::abs(ref[i]));
  }
  return scale > 0.0 ? err / scale : err;
}

// Tolerance: f32 accumulation of n ≤ 3000 weights and rows plus one exp2f and one rescale per
// block. Rounding errors grow like sqrt(n)·2⁻²⁴ ≈ 3e-6 in practice; a wrong rescale or a lost
// block is an O(1e-2..1) error. 2e-5 separates the two with margin.
constexpr double kTol = 2e-5;

TEST(OnlineSoftmax, BlockwiseMatchesDoubleReference) {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 400; ++trial) {
    const int n = std::uniform_int_distribution<int>(1, trial < 200 ? 64 : 3000)(rng);
    const float spread = trial % 3 == 0 ? 20.0f : 4.0f;  // peaked and flat softmaxes
    Row r = random_row(rng, n, spread, trial % 4 == 0 ? 0.5f : 0.0f);
    // A run of fully masked positions (a window or causal mask covering whole blocks).
    if (trial % 5 == 0) {
      const int mb = std::uniform_int_distribution<int>(0, n - 1)(rng);
      for (int i = mb; i < std::min(n, mb + 100); ++i) r.x[static_cast<size_t>(i)] = -INFINITY;
    }
    const Partial p = run_blocks(r, random_cuts(rng, 0, n));
    EXPECT_LE(rel_error(finish(p), reference(r, 0, n)), kTol) << "trial " << trial << " n " << n;
  }
}

TEST(OnlineSoftmax, NothingSeenGivesZerosNotNaN) {
  std::mt19937 rng(7);
  Row r = random_row(rng, 50, 4.0f, 1.0f);  // every position masked
  const Partial p = run_blocks(r, {0, 10, 10, 30, 50});
  EXPECT_EQ(p.st.m, -INFINITY);
  EXPECT_EQ(p.st.l, 0.0f);
  for (float o : finish(p)) EXPECT_EQ(o, 0.0f);
  const Partial none = run_blocks(r, {0, 0});  // no block at all but an empty one
  for (float o : finish(none)) EXPECT_EQ(o, 0.0f);
}

// Masked blocks before any real score, then real scores: the first real block must not be
// scaled by a factor computed from -inf.
TEST(OnlineSoftmax, MaskedBlocksFirstThenScores) {
  std::mt19937 rng(11);
  Row r = random_row(rng, 200, 6.0f, 0.0f);
  for (int i = 0; i < 120; ++i) r.x[static_cast<size_t>(i)] = -INFINITY;
  const Partial p = run_blocks(r, {0, 40, 80, 120, 160, 200});
  EXPECT_LE(rel_error(finish(p), reference(r, 0, 200)), kTol);
}

// S splits combined by the all-at-once formula and by pairwise merges vs the unsplit result.
TEST(SplitCombine, MatchesUnsplit) {
  std::mt19937 rng(99);
  for (int trial = 0; trial < 300; ++trial) {
    const int n = std::uniform_int_distribution<int>(1, 2500)(rng);
    Row r = random_row(rng, n, trial % 2 ? 12.0f : 3.0f, trial % 3 == 0 ? 0.3f : 0.0f);
    // A fully masked split in the middle sometimes (a window cutting through the context).
    if (trial % 4 == 1 && n > 20)
      for (int i = n / 3; i < n / 2; ++i) r.x[static_cast<size_t>(i)] = -INFINITY;
    const int splits = std::uniform_int_distribution<int>(1, 40)(rng);
    std::vector<int> bounds = random_cuts(rng, 0, n);  // reuse: split boundaries with empty splits
    bounds.resize(std::min(bounds.size(), static_cast<size_t>(splits + 1)));
    bounds.back() = n;
    std::vector<Partial> parts;
    for (size_t s = 0; s + 1 < bounds.size(); ++s)
      parts.push_back(run_blocks(r, random_cuts(rng, bounds[s], bounds[s + 1])));

    // All at once, as the combine kernel does it.
    float m_max = -INFINITY;
    for (const auto& p : parts) m_max = std::max(m_max, p.st.m);
    std::vector<float> acc(kDim, 0.0f);
    float l = 0.0f;
    for (const auto& p : parts) {
      const float w = combine_weight(p.st.m, m_max);
      l += w * p.st.l;
      for (int d = 0; d < kDim; ++d) acc[static_cast<size_t>(d)] += w * p.o[static_cast<size_t>(d)];
    }
    const float inv = OnlineSoftmax{m_max, l}.inv_sum();
    for (auto& a : acc) a *= inv;

    // Pairwise, left to right.
    Partial merged = parts.front();
    for (size_t s = 1; s < parts.size(); ++s)
      merge_partial(merged.st, merged.o.data(), parts[s].st, parts[s].o.data(), kDim);

    const auto ref = reference(r, 0, n);
    const auto unsplit = finish(run_blocks(r, {0, n}));
    EXPECT_LE(rel_error(acc, ref), kTol) << "trial " << trial;
    EXPECT_LE(rel_error(finish(merged), ref), kTol) << "trial " << trial;
    EXPECT_LE(rel_error(unsplit, ref), kTol) << "trial " << trial;
  }
}

TEST(SplitCombine, AllSplitsEmptyGivesZeros) {
  std::vector<float> o_a(kDim, 0.0f), o_b(kDim, 0.0f);
  OnlineSoftmax a, b;
  merge_partial(a, o_a.data(), b, o_b.data(), kDim);
  EXPECT_EQ(a.m, -INFINITY);
  EXPECT_EQ(a.l, 0.0f);
  for (float o : o_a) EXPECT_EQ(o, 0.0f);
  EXPECT_EQ(combine_weight(-INFINITY, -INFINITY), 0.0f);
  EXPECT_EQ(a.inv_sum(), 0.0f);
}

TEST(SplitPlan, CoversContextExactlyOnceWithoutEmptySplits) {
  std::vector<int64_t> contexts;
  for (int64_t c = 0; c <= 700; ++c) contexts.push_back(c);
  for (int64_t c : {1023, 1024, 1025, 4095, 4096, 8191, 16384, 16397, 32768, 131071, 1000003}) contexts.push_back(c);
  for (int64_t ctx : contexts)
    for (int64_t items : {1, 2, 7, 8, 32, 64})
      for (int64_t target : {1, 100, 264, 528, 100000})
        for (int64_t tile : {16, 32, 64})
          for (int64_t cap : {1, 7, 128})
            for (int64_t min_tiles : {1, 2, 4}) {
              const SplitPlan p = plan_splits(ctx, items, target, tile, cap, min_tiles);
              const int64_t tiles = ctx > 0 ? ceil_div(ctx, tile) : 0;
              SCOPED_TRACE(::testing::Message() << "ctx " << ctx << " items " << items << " target " << target
                                                << " tile " << tile << " cap " << cap << " min_tiles " << min_tiles);
              ASSERT_GE(p.splits, 1);
              ASSERT_LE(p.splits, cap);
              ASSERT_LE(p.splits, std::max<int64_t>(1, tiles));
              ASSERT_LE(p.splits, std::max<int64_t>(1, tiles / min_tiles));
              ASSERT_LE(p.splits, std::max<int64_t>(1, ceil_div(target, items)));
              ASSERT_GT(p.per_split, 0);
              ASSERT_EQ(p.per_split % tile, 0);
              ASSERT_LE(p.splits, max_splits_bound(ctx, tile, cap));
              if (ctx == 0) {
                ASSERT_EQ(p.splits, 1);
                ASSERT_EQ(p.end(0, ctx), 0);
                continue;
              }
              ASSERT_EQ(p.begin(0), 0);
              for (int64_t s = 0; s < p.splits; ++s) {
                ASSERT_LT(p.begin(s), p.end(s, ctx)) << "empty split " << s;  // never empty
                if (s + 1 < p.splits) {
                  ASSERT_EQ(p.end(s, ctx), p.begin(s + 1));  // contiguous
                }
              }
              ASSERT_EQ(p.end(p.splits - 1, ctx), ctx);  // covers to the end
              // Close to what was asked: rounding to whole tiles at most halves the splits.
              const int64_t want =
                  std::min({ceil_div(target, items), cap, tiles, std::max<int64_t>(1, tiles / min_tiles)});
              ASSERT_GE(2 * p.splits, want);
            }
}

TEST(SplitPlan, WorkspaceBoundHoldsForSmallerContextsAndLargerTiles) {
  for (int64_t max_ctx : {1, 31, 32, 33, 4096, 100000})
    for (int64_t ctx = 1; ctx <= max_ctx; ctx += std::max<int64_t>(1, max_ctx / 97))
      for (int64_t tile : {32, 64})
        EXPECT_LE(plan_splits(ctx, 1, 1 << 20, tile, 128, 1).splits, max_splits_bound(max_ctx, 32, 128));
}

// A graph's decode launch sizes its grid with most_splits(capacity): every context up to it must
// plan within that grid, and the bound is reached (it is not a loose over-allocation).
TEST(SplitPlan, MostSplitsBoundsEveryShorterContextAndIsReached) {
  for (int64_t max_ctx : {1, 63, 64, 65, 1000, 8192, 40000})
    for (int64_t items : {1, 3, 8, 32})
      for (int64_t target : {1, 132 * 4, 82 * 4})
        for (int64_t tile : {32, 64})
          for (int64_t min_tiles : {1, 2}) {
            const int64_t bound = most_splits(max_ctx, items, target, tile, 128, min_tiles);
            int64_t reached = 0;
            for (int64_t ctx = 1; ctx <= max_ctx; ctx += std::max<int64_t>(1, max_ctx / 211)) {
              const int64_t splits = plan_splits(ctx, items, target, tile, 128, min_tiles).splits;
              ASSERT_LE(splits, bound) << ctx << " of " << max_ctx << ", items " << items << ", tile " << tile;
              reached = std::max(reached, splits);
            }
            reached = std::max(reached, plan_splits(max_ctx, items, target, tile, 128, min_tiles).splits);
            EXPECT_GE(2 * reached, bound) << max_ctx << ", items " << items << ", tile " << tile;
          }
}

// The 16-byte widening helpers agree bit for bit with convert.h on random and special bits.
TEST(KvLoad, WidenMatchesScalarConversions) {
  std::mt19937 rng(5);
  std::vector<uint16_t> bits(8 * 4000);
  for (auto& b : bits) b = static_cast<uint16_t>(rng());
  const uint16_t specials[] = {0x0000, 0x8000, 0x0001, 0x03ff, 0x0400, 0x7bff, 0x7c00, 0xfc00, 0x7e00, 0x3c00,
                               0x7f80, 0xff80, 0x7fc0, 0x0080, 0x3f80, 0xc000};
  std::copy(std::begin(specials), std::end(specials), bits.begin());
  auto same = [](float a, float b) { return std::isnan(a) ? std::isnan(b) : f32_to_bits(a) == f32_to_bits(b); };
  for (size_t i = 0; i < bits.size(); i += 8) {
    uint32_t w[4];
    std::memcpy(w, &bits[i], sizeof w);  // little-endian: element 2k is the low half of word k
    float bf[8], hf[8];
    widen8_bf16(w, bf);
    widen8_f16(w, hf);
    for (size_t e = 0; e < 8; ++e) {
      EXPECT_TRUE(same(bf[e], bf16_to_f32(bits[i + e]))) << std::hex << bits[i + e];
      EXPECT_TRUE(same(hf[e], f16_to_f32(bits[i + e]))) << std::hex << bits[i + e];
    }
  }
}

}  // namespace
}  // namespace kvinfer::core
