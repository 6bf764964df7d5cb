#include <algorithm>
#include <cmath>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "core/kv_cache_access.h"
#include "core/kv_quant.h"
#include "core/online_softmax.h"
#include "cpu/aligned.h"
#include "cpu/attention_avx2.h"
#include "cpu/attention_avx512.h"
#include "cpu/cpu_features.h"
#include "cpu/cpu_ops.h"
#include "cpu/elementwise_avx2.h"
#include "cpu/linear_avx2.h"
#include "cpu/linear_avx512.h"
#include "cpu/prefetch.h"

namespace kvinfer::cpu {

namespace {

// The row scales of an 8-bit cache (null for the others) of KV head g: s[j]'s row's scale is
// k[(j + offset) mod rows] (offset: the position of s[0]; rows: the layer's, KvCache::layer_rows).
struct RowScales {
  const float* k = nullptr;
  const float* v = nullptr;
  int64_t offset = 0, rows = 1;
};
RowScales row_scales(const KvCache& kv, int64_t layer, int64_t g, int64_t offset = 0) {
  if (!is_scaled_kv(kv.dtype())) return {};
  return {kv_k_scales(kv, layer, g), kv_v_scales(kv, layer, g), offset, kv.layer_rows(layer)};
}

// s[j] *= scales[row of j] for j in first .. last (nothing without scales).
void times_scales(float* s, const float* scales, const RowScales& rs, int64_t first, int64_t last) {
  if (scales == nullptr) return;
  for_each_run(first + rs.offset, last + rs.offset, rs.rows, [&](int64_t j0, int64_t j1, int64_t r0) {
    for (int64_t j = j0; j <= j1; ++j) s[j - rs.offset] *= scales[r0 + j - j0];
  });
}

// One query's scores s[first .. pos] become its probabilities, in place: their max, the base-2
// weights and their sum (8 lanes and a fixed tree on AVX2, in order otherwise), then each weight
// times the sum's inverse. An 8-bit cache's scores were made from K codes: each is first times
// its K row's scale; and its V codes are weighted by each probability times the V row's scale,
// which the probabilities then hold (rs: the rows' scales, indexed like s).
// A soft-cap (cap > 0, in the base-2 domain: c · log2(e)) makes each score cap · tanh(s / cap) first.
void probabilities(float* s, int64_t first, int64_t pos, bool simd, RowScales rs = {}, float cap = 0) {
  times_scales(s, rs.k, rs, first, pos);
  if (cap > 0)
    for (int64_t j = first; j <= pos; ++j) s[j] = cap * std::tanh(s[j] / cap);
  float block_max = -INFINITY;
  if (simd)
    block_max = avx2::max_of(s + first, pos - first + 1);
  else
    for (int64_t j = first; j <= pos; ++j) block_max = std::max(block_max, s[j]);
  core::OnlineSoftmax softmax;
  softmax.rescale(block_max);
  float sum = 0.0f;
  if (simd) {
    sum = avx2::softmax_weights(s + first, pos - first + 1, core::softmax_ref(softmax.m));
  } else {
    for (int64_t j = first; j <= pos; ++j) {
      const float w = softmax.weight(s[j]);
      s[j] = w;
      sum += w;
    }
  }
  softmax.add(sum);
  const float inv_sum = softmax.inv_sum();
  if (simd)
    avx2::scale(s + first, pos - first + 1, inv_sum);
  else
    for (int64_t j = first; j <= pos; ++j) s[j] *= inv_sum;
  times_scales(s, rs.v, rs, first, pos);
}

// A prefill without a sliding window on AVX2 and AVX-512 machines. Computed one (row, head)
// pair at a time, it read every K and V row once per pair, from L2 or L3: at 1000 positions the
// default model's attention ran at a quarter of its products' FLOP rate. Here a unit takes the
// queries of up to 48 (query row, head) pairs at once, the query heads of one KV head for
// consecutive rows, and reads each K and V row once for all of them:
// - the scores of the positions every query of the unit attends to, in whole 16s, are the f32
//   products' tiles (linear_avx512.h; avx2::dot_tile's 3 × 4 without AVX-512), queries as input
//   rows and K rows as weight rows: dot()'s bits, then times the scale; each query's last few
//   positions go to the AVX2 loop, as before;
// - each query's softmax is the per-pair code's (probabilities above);
// - the weighted sums of V rows are register tiles of 6 queries × 64 columns (attention_avx512.h;
//   4 × 16 on AVX2, values_tiles_inline.h), over the shared positions, then each query's own
//   last positions, in position order.
// So every output has the bits the per-pair code gives it, whatever n, start or the thread count.
// f16 and bf16 K and V rows are widened 64 at a time (exactly, as the AVX2 loop's loads widen).
constexpr int64_t kUnitQueries = 48;
constexpr int64_t kChunk = 64;             // K or V rows a unit widens at a time
constexpr int64_t kUnitScores = 1 << 20;   // at most this many scores a unit (4 MiB; long contexts take fewer rows)

void attention_units(const KvCache& kv, int64_t layer, const float* q, int64_t n, int64_t start, int64_t heads,
                     float scale, float cap, float* out, bool wide, [[maybe_unused]] bool parallel) {
  const int64_t hd = kv.head_dim(), kvh = kv.num_kv_heads(), group = heads / kvh, ctx = start + n;
  const DType dtype = kv.dtype();
  const size_t row_bytes = static_cast<size_t>(hd) * dtype_size(dtype);
  const int64_t unit_rows = std::max<int64_t>(1, std::min(kUnitQueries, kUnitScores / ctx) / group);
  const int64_t blocks = (n + unit_rows - 1) / unit_rows, units = blocks * kvh, most = unit_rows * group;
#pragma omp parallel if (parallel)
  {
    AlignedVector<float> s(static_cast<size_t>(most * ctx));  // (queries, positions) scores, then probabilities
    AlignedVector<float> x(static_cast<size_t>(most * hd));   // (queries, hd) the unit's queries
    AlignedVector<float> xi(wide ? static_cast<size_t>(avx512::interleaved_size(most, hd)) : 0);  // x in pairs
    AlignedVector<float> acc(wide ? static_cast<size_t>(avx512::block_scratch_size(16)) : 0);  // the tiles' sums
    AlignedVector<float> widened(dtype == DType::F32 ? 0 : static_cast<size_t>(kChunk * hd));  // (kChunk, hd)
    std::vector<const float*> p(static_cast<size_t>(most));  // query i's probabilities, from position j0 on
    std::vector<float*> o(static_cast<size_t>(most));        // query i's output row
    // Rows [j0, j1) of K or V (base: the KV head's rows) as f32: in place, or widened.
    auto f32_rows = [&](const std::byte* base, int64_t j0, int64_t j1) {
      const std::byte* src = base + static_cast<size_t>(j0) * row_bytes;
      if (dtype == DType::F32) return reinterpret_cast<const float*>(src);
      to_f32(dtype, src, widened.data(), (j1 - j0) * hd);
      return static_cast<const float*>(widened.data());
    };
    const auto values_tiles = wide ? avx512::values_tiles : avx2::values_tiles;
#pragma omp for schedule(dynamic, 1)
    for (int64_t u = 0; u < units; ++u) {
      const int64_t b = blocks - 1 - u / kvh, g = u % kvh;  // the longest rows first
      const int64_t t0 = b * unit_rows, nq = (std::min(n, t0 + unit_rows) - t0) * group;
      // Query i: row t0 + i / group, head g · group + i % group; it attends to positions 0 .. pos(i).
      auto pos = [&](int64_t i) { return start + t0 + i / group; };
      for (int64_t i = 0; i < nq; ++i) {
        const int64_t row = (t0 + i / group) * heads + g * group + i % group;
        std::copy_n(q + row * hd, hd, x.data() + i * hd);
        o[static_cast<size_t>(i)] = out + row * hd;
      }
      if (wide) avx512::interleave_rows(x.data(), nq, hd, xi.data());
      const std::byte* kh = kv_k(kv, layer, g);
      const std::byte* vh = kv_v(kv, layer, g);
      const int64_t shared = pos(0) + 1;       // positions every query attends to
      const int64_t tiled = shared / 16 * 16;  // those the score tiles take
      for (int64_t j0 = 0; j0 < tiled; j0 += kChunk) {
        const int64_t j1 = std::min(tiled, j0 + kChunk);
        const float* k_rows = f32_rows(kh, j0, j1);  // (j1 − j0, hd)
        for (int64_t j = j0; j < j1; j += wide ? 16 : 4) {
          const float* k_j = k_rows + (j - j0) * hd;
          if (wide) {
            avx512::block_products(xi.data(), x.data(), nq, k_j, 16, hd, s.data() + j, ctx, acc.data());
          } else {
            for (int64_t i = 0; i < nq; i += 3)
              avx2::dot_tile(x.data() + i * hd, std::min<int64_t>(3, nq - i), k_j, hd, s.data() + i * ctx + j, ctx);
          }
        }
      }
      for (int64_t i = 0; i < nq; ++i) {
        float* si = s.data() + i * ctx;
        avx2::scale(si, tiled, scale);
        avx2::attention_scores(dtype, x.data() + i * hd, kh + static_cast<size_t>(tiled) * row_bytes, tiled, pos(i), hd,
                               scale, si);
        probabilities(si, 0, pos(i), true, row_scales(kv, layer, g), cap);
      }
      for (int64_t j0 = 0; j0 < shared; j0 += kChunk) {  // the shared positions, all the queries
        const int64_t j1 = std::min(shared, j0 + kChunk);
        for (int64_t i = 0; i < nq; ++i) p[static_cast<size_t>(i)] = s.data() + i * ctx + j0;
        values_tiles(p.data(), o.data(), nq, f32_rows(vh, j0, j1), j1 - j0, hd, j0 == 0);
      }
      if (pos(nq - 1) >= shared) {  // then each query's own last positions (fewer than unit_rows)
        const float* v_rows = f32_rows(vh, shared, pos(nq - 1) + 1);
        for (int64_t i = 0; i < nq; ++i) {
          const float* pi = s.data() + i * ctx + shared;
          values_tiles(&pi, &o[static_cast<size_t>(i)], 1, v_rows, pos(i) + 1 - shared, hd, false);
        }
      }
    }
  }
}

// A decode step on AVX-512 machines. The query heads of one KV head attend to the same
// positions, so they share each K and V row, widened in registers once for all of them. Per KV
// head:
// - the scores (avx512::decode_scores: tiles of up to 3 query heads × 16 K rows; the last rows
//   mod 16 go to the per-pair kernel);
// - each query head's probabilities (probabilities above);
// - the weighted sums (avx512::decode_values: up to 64 columns a pass over the V rows).
// Every score, weight and sum keeps the per-pair code's bits; only which loads are shared, and
// which thread computes what, change.
// The rows come from memory (a step's weights pass between two reads of a layer's). Each thread
// takes whole KV heads, as many as the others, and runs their three steps in turn with no wait
// between them; its reads go K rows, V rows, the next head's K rows, and each read fetches the
// bytes 16 KiB further on along that chain (a ChainedPrefetcher), so that memory stays busy
// across the seams and while the probabilities are made. The heads left over (3 KV heads on 2
// threads: the third) go in three passes over the team, positions to the threads in chunks of
// 64, each chunk fetching the next one's K rows and its own V rows, and columns in blocks of 32.
// gpt2-medium bf16 at 1000 positions: 215 → 195 µs a layer; the default model 41 → 37 µs
// (docs/benchmarks-history.md).
// A sliding-window ring's window may wrap past its last row: the scores and sums then go over
// the two runs of rows in turn (the sums of the second adding to the first's), with the same
// bits, and without the prefetch chains (which follow one run of rows).
constexpr int64_t kDecodeColumns = 32;
constexpr size_t kKvLead = 16 << 10;

void attention_decode(const KvCache& kv, int64_t layer, const float* q, int64_t start, int64_t heads, int64_t window,
                      float scale, float cap, float* out, [[maybe_unused]] bool parallel) {
  const int64_t hd = kv.head_dim(), kvh = kv.num_kv_heads(), group = heads / kvh;
  const DType dtype = kv.dtype();
  const size_t row_bytes = static_cast<size_t>(hd) * dtype_size(dtype);
  const int64_t first = window > 0 ? std::max<int64_t>(0, start - window + 1) : 0;  // positions first .. start
  const int64_t count = start + 1 - first;
  const int64_t ring = kv.layer_rows(layer);  // position p in row p mod ring
  const size_t skip = static_cast<size_t>(first % ring) * row_bytes;  // the K and V bytes before the first row
  const bool wraps = first % ring + count > ring;
  // Positions first + a .. first + b − 1 in runs of consecutive rows: f(a', b', their first row).
  auto runs = [&](int64_t a, int64_t b, auto&& f) {
    for_each_run(first + a, first + b - 1, ring,
                 [&](int64_t j0, int64_t j1, int64_t r0) { f(j0 - first, j1 + 1 - first, r0); });
  };
  auto row_at = [&](const std::byte* base, int64_t r) { return base + static_cast<size_t>(r) * row_bytes; };
  AlignedVector<float> s(static_cast<size_t>(heads * count));  // (heads, count) scores, then probabilities
  std::vector<const float*> p(static_cast<size_t>(heads));     // head h's probabilities
  std::vector<float*> o(static_cast<size_t>(heads));           // head h's output row
  // A wrapped window's second run starts `wrap` positions in: head h's probabilities from there.
  const int64_t wrap = wraps ? ring - first % ring : 0;
  std::vector<const float*> p_wrap(wraps ? static_cast<size_t>(heads) : 0);
  for (int64_t h = 0; h < heads; ++h) {
    p[static_cast<size_t>(h)] = s.data() + h * count;
    o[static_cast<size_t>(h)] = out + h * hd;
    if (wraps) p_wrap[static_cast<size_t>(h)] = s.data() + h * count + wrap;
  }
  const int64_t chunks = (count + kChunk - 1) / kChunk, blocks = (hd + kDecodeColumns - 1) / kDecodeColumns;
  const int64_t units = chunks * kvh;  // score units, KV head by KV head: u = g · chunks + chunk
  // Positions [j0, j0 + 64) of KV head g's rows (K or V), to the ring's end.
  auto rows_at = [&](const std::byte* base, int64_t j0) { return row_at(base, (first + j0) % ring); };
  auto chunk_bytes = [&](int64_t j0) {
    return static_cast<size_t>(std::min({kChunk, count - j0, ring - (first + j0) % ring})) * row_bytes;
  };
  // The scores of KV head g's queries at positions [a, b): tiles of 16 rows, the rest per pair.
  auto score_rows = [&](int64_t g, int64_t a, int64_t b, ChainedPrefetcher* pf) {
    const float* qg = q + g * group * hd;  // (group, hd) the KV head's queries
    float* sg = s.data() + g * group * count;
    runs(a, b, [&](int64_t a1, int64_t b1, int64_t r0) {
      const std::byte* kh = row_at(kv_k(kv, layer, g), r0);  // position a1's row
      avx512::decode_scores(dtype, qg, group, hd, kh, b1 - a1, scale, sg + a1, count, pf);
      const int64_t rest = a1 + (b1 - a1) / 16 * 16;  // the run's last rows mod 16
      for (int64_t i = 0; rest < b1 && i < group; ++i)
        avx2::attention_scores(dtype, qg + i * hd, kh + static_cast<size_t>(rest - a1) * row_bytes, rest, b1 - 1, hd,
                               scale, sg + i * count);
    });
  };
  // KV head g's query heads' sums over every position, columns [d0, d1).
  auto value_rows = [&](int64_t g, int64_t d0, int64_t d1, ChainedPrefetcher* pf) {
    runs(0, count, [&](int64_t a1, int64_t b1, int64_t r0) {
      const float* const* pg = (a1 > 0 ? p_wrap.data() : p.data()) + g * group;  // from position a1 on
      avx512::decode_values(dtype, pg, o.data() + g * group, group, row_at(kv_v(kv, layer, g), r0), b1 - a1, hd, d0,
                            d1, pf, a1 > 0);
    });
  };
  // Score unit u; it fetches its V rows and the next unit's K rows.
  auto scores = [&](int64_t u) {
    const int64_t g = u / chunks, j0 = u % chunks * kChunk, j1 = std::min(count, j0 + kChunk);
    prefetch_lines(rows_at(kv_v(kv, layer, g), j0), chunk_bytes(j0));
    if (u + 1 < units) {
      const int64_t k0 = (u + 1) % chunks * kChunk;
      prefetch_lines(rows_at(kv_k(kv, layer, (u + 1) / chunks), k0), chunk_bytes(k0));
    }
    score_rows(g, j0, j1, nullptr);
  };
  auto weights = [&](int64_t h) {
    probabilities(s.data() + h * count, 0, count - 1, true, row_scales(kv, layer, h / group, first), cap);
  };
  auto sums = [&](int64_t g, int64_t d0, int64_t d1) { value_rows(g, d0, d1, nullptr); };
  const size_t head_bytes = static_cast<size_t>(count) * row_bytes;  // a head's K (or V) rows
  auto k_of = [&](int64_t g) { return kv_k(kv, layer, g) + skip; };
  auto v_of = [&](int64_t g) { return kv_v(kv, layer, g) + skip; };
  // KV head g whole, on one thread: scores, probabilities, weighted sums. `more`: the thread
  // goes on to head g + 1, whose K rows the V rows' reads fetch.
  auto whole_head = [&](int64_t g, bool more) {
    ChainedPrefetcher then_v(k_of(g), head_bytes, v_of(g), head_bytes, kKvLead);
    score_rows(g, 0, count, wraps ? nullptr : &then_v);
    for (int64_t h = g * group; h < (g + 1) * group; ++h) weights(h);
    ChainedPrefetcher then_k(v_of(g), head_bytes, more ? k_of(g + 1) : nullptr, more ? head_bytes : 0, kKvLead);
    value_rows(g, 0, hd, wraps ? nullptr : &then_k);
  };
  if (!parallel) {  // every head in turn, no team (a batch's sequences run on the threads side by side)
    if (!wraps) prefetch_lines(k_of(0), std::min(kKvLead, head_bytes));
    for (int64_t g = 0; g < kvh; ++g) whole_head(g, g + 1 < kvh);
    return;
  }
#pragma omp parallel
  {
    [[maybe_unused]] int64_t threads = 1;  // the team's size
#if defined(_OPENMP)
    threads = omp_get_num_threads();
#endif
    // Whole KV heads, an equal number each: thread t takes heads [t · per, (t + 1) · per).
    const int64_t per = kvh / threads, whole = per * threads;
#pragma omp for schedule(static) nowait
    for (int64_t g = 0; g < whole; ++g) {
      if (g % per == 0 && !wraps) prefetch_lines(k_of(g), std::min(kKvLead, head_bytes));
      whole_head(g, (g + 1) % per != 0);
    }
    if (whole < kvh) {  // the heads left over (all of them when kvh < threads): three passes
#pragma omp for schedule(static)
      for (int64_t u = whole * chunks; u < units; ++u) scores(u);
#pragma omp for schedule(static)
      for (int64_t h = whole * group; h < heads; ++h) weights(h);
#pragma omp for schedule(static) nowait
      for (int64_t u = whole * blocks; u < kvh * blocks; ++u) {
        const int64_t d0 = u % blocks * kDecodeColumns;
        sums(u / blocks, d0, std::min(hd, d0 + kDecodeColumns));
      }
    }
  }
}

}  // namespace

void store_kv(KvCache& kv, int64_t layer, int64_t start, int64_t n, const float* k, const float* v) {
  const int64_t hd = kv.head_dim(), kvh = kv.num_kv_heads();
  const DType dtype = kv.dtype();
  const size_t esz = dtype_size(dtype);
  const int64_t ring = kv.layer_rows(layer);  // position p in row p mod ring
  if (n > ring)
    throw Error(ErrorKind::InvalidArgument,
                fmt::format("store_kv: {} positions at once into layer {}'s ring of {} rows", n, layer, ring));
  // Row t of KV head g: narrowed, or for an 8-bit cache quantised with its scale, a key rotated
  // first (on its own either way: a row's bytes never depend on the others written with it).
  auto put = [&](KvRow which, const float* x, std::byte* rows, float* scales, int64_t t) {
    const int64_t row = (start + t) % ring;
    std::byte* dst = rows + static_cast<size_t>(row * hd) * esz;
    if (scales != nullptr)
      quantize_kv_row(dtype, which, x, hd, dst, scales + row);
    else
      from_f32(dtype, x, dst, hd);
  };
  // A decode step's rows, one per KV head in K and in V, lie in lines memory has not seen for a
  // step: all of them asked for first, the stores then wait for one round trip, not one each.
  // On gpt2-medium (32 rows a layer) that took store_kv from about 12 to 6 µs a layer.
  if (n == 1)
    for (int64_t g = 0; g < kvh; ++g) {
      const size_t dst = static_cast<size_t>(start % ring * hd) * esz, row_bytes = static_cast<size_t>(hd) * esz;
      prefetch_lines_for_write(kv_k(kv, layer, g) + dst, row_bytes);
      prefetch_lines_for_write(kv_v(kv, layer, g) + dst, row_bytes);
    }
  // A prefill's rows are narrowed on the team (each value on its own either way).
#pragma omp parallel for schedule(static) if (n > 1 && n * kvh * hd >= (1 << 15))
  for (int64_t t = 0; t < n; ++t)
    for (int64_t g = 0; g < kvh; ++g) {
      put(KvRow::Key, k + (t * kvh + g) * hd, kv_k(kv, layer, g), kv_k_scales(kv, layer, g), t);
      put(KvRow::Value, v + (t * kvh + g) * hd, kv_v(kv, layer, g), kv_v_scales(kv, layer, g), t);
    }
}

void attention(const KvCache& kv, int64_t layer, const float* q, int64_t n, int64_t start, int64_t heads,
               int64_t window, float* out, bool one_thread, const ScoreOptions& opts) {
  const int64_t hd = kv.head_dim();
  // An 8-bit cache holds its keys rotated (kernels/core/kv_quant.h): the queries are rotated to
  // match, once per head, and every kernel below then reads the codes as it reads any row.
  std::vector<float> rotated;  // (n, heads, head_dim) the queries rotated, for an 8-bit cache
  if (is_scaled_kv(kv.dtype())) {
    rotated.assign(q, q + n * heads * hd);
#pragma omp parallel for schedule(static) if (!one_thread && n * heads >= 256)
    for (int64_t i = 0; i < n * heads; ++i) core::rotate_query(rotated.data() + i * hd, static_cast<int>(hd));
    q = rotated.data();
  }
  const int64_t group = heads / kv.num_kv_heads();
  const size_t row_bytes = static_cast<size_t>(hd) * dtype_size(kv.dtype());
  // Scores in the base-2 domain (kernels/core/online_softmax.h, shared with the CUDA kernels):
  // exp(q·k / sqrt(hd) - max) = exp2(s - max) with s = q·k · scale.
  // ScoreOptions: Gemma's query_pre_attn_scalar^-0.5 and soft-cap, the cap in the same domain.
  const float scale = opts.scale > 0 ? opts.scale * core::kLog2e : core::kLog2e / std::sqrt(static_cast<float>(hd));
  const float cap = opts.softcap * core::kLog2e;
  const bool f32 = kv.dtype() == DType::F32;
  const bool simd = cpu_has_avx2_fma_f16c();
  // Every (row, head) pair is computed on its own, in the same order whatever n or the thread
  // count is. Without AVX-512 (attention_decode above), a decode's heads are shared out in
  // contiguous runs (a KV head's query heads together). A prefill's pairs go to the threads in
  // turn: a causal prefill's later rows attend to more positions, so contiguous shares would
  // leave the first thread idle, and in turn each thread keeps to the same heads of every row.
  // One 512-row layer, 16 heads, 2 threads, the schedules alternated in one process: 28 ms in
  // contiguous shares against 14 ms in turn; in a slower minute, 31 ms with whole rows in turn
  // against 27 ms. Small calls stay on one thread (a team costs more).
  const int64_t pairs = n * heads;
  const double macs = static_cast<double>(pairs) * static_cast<double>(start + n) * static_cast<double>(hd);
  // A decode step reads its K and V rows from memory: two threads' reads overlap even for a few
  // positions (8k multiply-adds: 8 positions of gpt2-medium's 16 heads).
  const double least = n == 1 ? 1 << 13 : 1 << 16;
  [[maybe_unused]] const bool parallel = !one_thread && macs >= least;  // read by the OpenMP pragmas only
  if (n > 1 && window <= 0 && simd)  // a prefill in units of queries (attention_units above)
    return attention_units(kv, layer, q, n, start, heads, scale, cap, out, cpu_has_avx512(), parallel);
  const int64_t ring = kv.layer_rows(layer);  // position p in row p mod ring
  if (n == 1 && hd % 8 == 0 && cpu_has_avx512())  // a decode step, K and V rows shared by a KV head's query heads
    return attention_decode(kv, layer, q, start, heads, window, scale, cap, out, parallel);
#pragma omp parallel if (parallel)
  {
    std::vector<float> scores(static_cast<size_t>(start + n));  // (positions) scores, then probabilities
    std::vector<float> row(f32 || simd ? 0 : static_cast<size_t>(hd));  // (head_dim) one widened K or V row
    // Position j's row of K or V for KV head g, as f32: in place for an f32 cache, widened otherwise.
    auto kv_row = [&](const std::byte* base, int64_t j) {
      const std::byte* src = base + static_cast<size_t>(j % ring) * row_bytes;
      if (f32) return reinterpret_cast<const float*>(src);
      to_f32(kv.dtype(), src, row.data(), hd);
      return static_cast<const float*>(row.data());
    };
    auto one_pair = [&](int64_t i) {
      const int64_t t = i / heads, h = i % heads, g = h / group;
      const int64_t pos = start + t;
      const int64_t first = window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0;
      const float* qh = q + (t * heads + h) * hd;
      float* oh = out + (t * heads + h) * hd;
      const std::byte* kh = kv_k(kv, layer, g);
      const std::byte* vh = kv_v(kv, layer, g);
      // One block of all positions, in position order: scores and their max, the weights and
      // their sum, then the weighted sum of V rows. Nothing depends on n.
      // Positions first .. pos lie in one run of rows, or two where a sliding-window ring wraps.
      auto rows_of = [&](const std::byte* base, int64_t r0) { return base + static_cast<size_t>(r0) * row_bytes; };
      if (simd)  // K rows widened in registers: the same bits as dot() on the widened row
        for_each_run(first, pos, ring, [&](int64_t j0, int64_t j1, int64_t r0) {
          avx2::attention_scores(kv.dtype(), qh, rows_of(kh, r0), j0, j1, hd, scale, scores.data());
        });
      else
        for (int64_t j = first; j <= pos; ++j) scores[static_cast<size_t>(j)] = dot(qh, kv_row(kh, j), hd) * scale;
      probabilities(scores.data(), first, pos, simd, row_scales(kv, layer, g), cap);
      if (simd) {
        for_each_run(first, pos, ring, [&](int64_t j0, int64_t j1, int64_t r0) {
          avx2::attention_values(kv.dtype(), scores.data(), rows_of(vh, r0), j0, j1, hd, oh, j0 != first);
        });
      } else {
        std::fill(oh, oh + hd, 0.0f);
        for (int64_t j = first; j <= pos; ++j) {
          const float p = scores[static_cast<size_t>(j)];
          const float* vr = kv_row(vh, j);
          for (int64_t d = 0; d < hd; ++d) oh[d] += p * vr[d];
        }
      }
    };
    if (n > 1) {
#pragma omp for schedule(static, 1)
      for (int64_t i = 0; i < pairs; ++i) one_pair(i);
    } else {
#pragma omp for schedule(static)
      for (int64_t i = 0; i < pairs; ++i) one_pair(i);
    }
  }
}

void self_attention(std::span<const SequenceRows> seqs, const SelfAttention& a, float* q, float* k, const float* v,
                    float* att) {
  const int64_t hd = a.head_dim;
  auto one = [&](const SequenceRows& s, bool one_thread) {
    float* sq = q + s.row * a.heads * hd;
    float* sk = k + s.row * a.kv_heads * hd;
    if (a.inv_freq)
      rope_qk(sq, a.heads, sk, a.kv_heads, s.n, hd, s.start, a.inv_freq->data, a.layout, 2 * a.inv_freq->n,
              a.rope_attention_factor);
    for_each_piece(s, a.layer, a.window, [&](int64_t t, int64_t m) {
      store_kv(*s.kv, a.layer, s.start + t, m, sk + t * a.kv_heads * hd, v + (s.row + t) * a.kv_heads * hd);
      attention(*s.kv, a.layer, sq + t * a.heads * hd, m, s.start + t, a.heads, a.window,
                att + (s.row + t) * a.heads * hd, one_thread, a.scores);
    });
  };
  // A decode row's work is a few µs: one team for all of them, not one each (and the rope and
  // store of each, one-threaded, then run beside the others'). Dynamic: their histories differ.
  const auto decodes = std::count_if(seqs.begin(), seqs.end(), [](const SequenceRows& s) { return s.n == 1; });
  const bool together = decodes >= 2;
  if (together) {
#pragma omp parallel for schedule(dynamic, 1)
    for (size_t i = 0; i < seqs.size(); ++i)
      if (seqs[i].n == 1) one(seqs[i], true);
  }
  for (const SequenceRows& s : seqs)
    if (!together || s.n != 1) one(s, false);
}

}  // namespace kvinfer::cpu
