// The f32 products of prefill on AVX-512 (linear_avx512.h). Compiled for AVX-512 function by
// function (avx512_target.h), like the AVX2 files; everything inside is intrinsics and plain loops.
#include "cpu/linear_avx512.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "cpu/avx512_target.h"
#include "cpu/cpu_ops.h"
#include "cpu/dot_quant_avx512.h"
#include "cpu/linear_avx2.h"

KVINFER_AVX512_BEGIN

#include "cpu/avx2_inline.h"
#include "cpu/avx512_inline.h"

namespace kvinfer::cpu::avx512 {

namespace {

constexpr int64_t kTileRows = 6;      // input rows of a tile: 3 interleaved pairs
constexpr int64_t kRun = 576;         // the most values of a run (linear_avx512.h)
constexpr int64_t kGroup = 48;        // input rows that reuse one run of weight rows
static_assert(kWideningRows == kGroup, "a small batch is one group: each run widened once");
constexpr int64_t kTileFloats = 384;  // one tile's accumulators in scratch: (3 pairs, 8 weight rows, 16 lanes)

// The end of one product whose 8 lanes `l` took the values before `body`: the tail's fused
// multiply-adds into lanes 0, 1, ..., then the fixed tree.
inline float finish(float* l, const float* a, const float* b, int64_t body, int64_t n) {
  for (int64_t k = body, i = 0; k < n; ++k, ++i) l[i] = std::fma(a[k], b[k], l[i]);
  return avx2::lanes_tree(l);
}

// GCC 12's shuffle intrinsics start from an undefined register they then warn about.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// hadd of two registers per 128-bit chunk: [u0 + u1, u2 + u3, v0 + v1, v2 + v3].
inline __m512 hadd_chunks(__m512 u, __m512 v) {
  return _mm512_add_ps(_mm512_shuffle_ps(u, v, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_ps(u, v, _MM_SHUFFLE(3, 1, 3, 1)));
}

// finish8 of both halves of 8 registers at once: acc[c] holds weight row c's 8-lane accumulators
// for input row a (low half) and b (high half); ya[0 .. 8) and yb[0 .. 8) (yb null: no row b) get
// finish8's bits, by its additions in its order, done on 512-bit registers: per 128-bit chunk,
// lanes j + (j + 4) of rows c and c + 4 (s[c]), then hadd's pairs twice. finish8 on the halves
// took a tile of 72 steps about 15 % more time; this takes a third of its shuffles.
inline void finish16(const __m512 acc[8], float* ya, float* yb) {
  __m512 s[4];  // chunks: a's lanes j + (j + 4) for row c, b's for row c, a's for c + 4, b's for c + 4
  for (int c = 0; c < 4; ++c)
    s[c] = _mm512_add_ps(_mm512_shuffle_f32x4(acc[c], acc[c + 4], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(acc[c], acc[c + 4], _MM_SHUFFLE(3, 1, 3, 1)));
  // Chunks: a's rows 0..3, b's rows 0..3, a's rows 4..7, b's rows 4..7; then a's 8 and b's 8.
  const __m512 v = hadd_chunks(hadd_chunks(s[0], s[1]), hadd_chunks(s[2], s[3]));
  const __m512 r = _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(3, 1, 2, 0));
  _mm256_storeu_ps(ya, low8(r));
  if (yb) _mm256_storeu_ps(yb, high8(r));
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// Where a tile's last run writes: y[t · ldy + c] for its first `rows` input rows; x (rows, in)
// and w (8, in): those input rows and the weight rows, whole (for the tail, when in is not a
// multiple of 8).
struct TileOut {
  float* y;
  int64_t ldy, rows;
  const float* x;
  const float* w;
};

// P interleaved pairs of input rows × 8 weight rows over the values [k0, k1) (multiples of 8); w
// holds the weight rows' values from k0 on, ldw apart. 8·P registers of two 8-lane accumulators
// each, zeros when `first`, else loaded from acc. Per 8 values, P loads of a pair, 8 broadcasts
// of a weight row's 8 values and 8·P fused multiply-adds, and a prefetch into L2 of the byte at
// `fetch`, which then moves on `pace` bytes. Then the accumulators go back to acc, or, after the
// last run (out set), become the products.
template <int P>
void tile(const float* xi, int64_t stride, const float* w, int64_t ldw, int64_t in, int64_t k0, int64_t k1,
          float* acc_mem, bool first, const TileOut* out, const char* fetch, size_t pace) {
  constexpr int C = 8;
  __m512 acc[P][C];
  for (int p = 0; p < P; ++p)
    for (int c = 0; c < C; ++c) acc[p][c] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(acc_mem + (p * C + c) * 16);
  for (int64_t k = k0; k < k1; k += 8) {
    _mm_prefetch(fetch, _MM_HINT_T1);
    fetch += pace;
    __m512 xv[P];
    for (int p = 0; p < P; ++p) xv[p] = _mm512_loadu_ps(xi + p * stride + 2 * k);
    for (int c = 0; c < C; ++c) {
      const __m512 wv = broadcast8(w + c * ldw + (k - k0));
      for (int p = 0; p < P; ++p) acc[p][c] = _mm512_fmadd_ps(xv[p], wv, acc[p][c]);
    }
  }
  const int64_t body = in / 8 * 8;
  if (out && body == in) {  // no tail: the trees in registers, row 2p from the low halves
    for (int p = 0; p < P; ++p)
      finish16(acc[p], out->y + 2 * p * out->ldy, 2 * p + 1 < out->rows ? out->y + (2 * p + 1) * out->ldy : nullptr);
    return;
  }
  for (int p = 0; p < P; ++p)
    for (int c = 0; c < C; ++c) _mm512_storeu_ps(acc_mem + (p * C + c) * 16, acc[p][c]);
  if (!out) return;
  for (int64_t t = 0; t < out->rows; ++t)  // the tail, one product at a time
    for (int64_t c = 0; c < C; ++c)
      out->y[t * out->ldy + c] =
          finish(acc_mem + (t / 2 * C + c) * 16 + t % 2 * 8, out->x + t * in, out->w + c * in, body, in);
}

}  // namespace

int64_t interleaved_size(int64_t n, int64_t in) { return (n + 1) / 2 * 2 * (in / 8 * 8); }

void interleave_rows(const float* x, int64_t n, int64_t in, float* xi) {
  const int64_t body = in / 8 * 8;
  for (int64_t t = 0; t < n; t += 2) {
    const float* a = x + t * in;
    const float* b = t + 1 < n ? a + in : nullptr;
    float* dst = xi + t * body;
    for (int64_t k = 0; k < body; k += 8, dst += 16) {
      _mm256_storeu_ps(dst, _mm256_loadu_ps(a + k));
      _mm256_storeu_ps(dst + 8, b ? _mm256_loadu_ps(b + k) : _mm256_setzero_ps());
    }
  }
}

int64_t block_scratch_size(int64_t rows) { return kGroup / kTileRows * (rows / 8) * kTileFloats; }

namespace {

// block_products' loops: groups of input rows, runs of values [k0, k0 + run), 8-row parts s of
// the weight rows, tiles of input rows. weights(s, k0, k1) gives part s's rows from value k0 on
// (its pointer and row stride) and full(s) the rows whole (for the tail), or null.
template <class Weights, class Full>
void tiles_over_runs(const float* xi, const float* x, int64_t n, int64_t rows, int64_t in, int64_t run, float* y,
                     int64_t ldy, float* scratch, Prefetcher* next, Weights&& weights, Full&& full) {
  const int64_t body = in / 8 * 8, stride = 2 * body;  // stride: the floats of one interleaved pair
  const int64_t subs = rows / 8;                        // the 8-row parts of the weight rows
  // The steps of 8 values the tiles take in all, and the bytes of `next` to fetch per step: the
  // tiles fetch up to a line a step in their loops, any more (few input rows, so few steps) in a
  // burst after each. Tiles with nothing to fetch prefetch their own accumulators, in L1.
  int64_t tiles = 0;  // the tiles of one run of one 8-row part, over all the groups
  for (int64_t g = 0; g < n; g += kGroup) tiles += (std::min(kGroup, n - g) + kTileRows - 1) / kTileRows;
  const auto steps = static_cast<size_t>(tiles * subs * (body / 8));
  const size_t per_step = next && steps > 0 ? (next->bytes() + steps - 1) / steps : 0;
  const size_t pace = std::min<size_t>(per_step, 64), burst = per_step - pace;
  for (int64_t g = 0; g < n; g += kGroup) {
    const int64_t group_end = std::min(n, g + kGroup);
    for (int64_t k0 = 0;; k0 += run) {
      const int64_t k1 = std::min(body, k0 + run);
      for (int64_t s = 0; s < subs; ++s) {
        const auto [wr, ldw] = weights(s, k0, k1);
        for (int64_t t = g; t < group_end; t += kTileRows) {
          const TileOut out{y + t * ldy + 8 * s, ldy, std::min(kTileRows, n - t), x + t * in, full(s)};
          float* acc = scratch + ((t - g) / kTileRows * subs + s) * kTileFloats;
          const float* pairs = xi + t / 2 * stride;
          const TileOut* last = k1 == body ? &out : nullptr;
          const auto tile_steps = static_cast<size_t>((k1 - k0) / 8);
          const char* fetch = pace ? next->take(pace * tile_steps) : reinterpret_cast<const char*>(acc);
          switch ((out.rows + 1) / 2) {
            case 1: tile<1>(pairs, stride, wr, ldw, in, k0, k1, acc, k0 == 0, last, fetch, pace); break;
            case 2: tile<2>(pairs, stride, wr, ldw, in, k0, k1, acc, k0 == 0, last, fetch, pace); break;
            default: tile<3>(pairs, stride, wr, ldw, in, k0, k1, acc, k0 == 0, last, fetch, pace); break;
          }
          if (burst) next->advance(burst * tile_steps);
        }
      }
      if (k1 == body) break;
    }
  }
}

// Rows [r0, r0 + 8) of a stored block, values [k0, k1), widened into dst (8, k1 - k0): each value
// as the whole block's widening gives it (bf16 in the pair order).
void widen_part(const StoredBlock& w, int64_t r0, int64_t k0, int64_t k1, float* dst) {
  const int64_t len = k1 - k0;
  if (w.packed) {
    widen_quant_packed_part(w.dtype, w.data, r0, k0, k1, dst);
    return;
  }
  const auto b = dtype_block(w.dtype);
  const size_t from = static_cast<size_t>(k0 / b.elements) * b.bytes;
  for (int64_t r = 0; r < 8; ++r) {
    const std::byte* row = w.data + static_cast<size_t>(r0 + r) * w.row_bytes + from;
    if (w.dtype == DType::BF16)
      avx2::widen_bf16_pairs(reinterpret_cast<const uint16_t*>(row), dst + r * len, len);
    else
      to_f32(w.dtype, row, dst + r * len, len);
  }
}

}  // namespace

void block_products(const float* xi, const float* x, int64_t n, const float* w, int64_t rows, int64_t in, float* y,
                    int64_t ldy, float* scratch, Prefetcher* next) {
  // Runs of equal length (whole 8s, at most kRun): each run costs its tiles a store and a load
  // of their accumulators, so 576 values go in one run, not 512 and 64.
  const int64_t body = in / 8 * 8;
  const int64_t runs = std::max<int64_t>(1, (body + kRun - 1) / kRun);
  const int64_t run = (body / 8 + runs - 1) / runs * 8;
  tiles_over_runs(
      xi, x, n, rows, in, run, y, ldy, scratch, next,
      [&](int64_t s, int64_t k0, int64_t) { return std::pair<const float*, int64_t>(w + 8 * s * in + k0, in); },
      [&](int64_t s) { return w + 8 * s * in; });
}

int64_t widening_align(DType t) { return std::max<int64_t>(16, dtype_block(t).elements); }

void block_products_widening(const float* xi, const float* x, int64_t n, const StoredBlock& w, int64_t rows,
                             int64_t in, float* y, int64_t ldy, float* scratch, float* wbuf, Prefetcher* next) {
  // Runs of whole blocks of the stored type, as equal as they can be, at most about kRun values.
  const int64_t align = widening_align(w.dtype), units = in / align;
  const int64_t runs = std::max<int64_t>(1, (in + kRun - 1) / kRun);
  const int64_t run = (units + runs - 1) / runs * align;
  tiles_over_runs(
      xi, x, n, rows, in, run, y, ldy, scratch, next,
      [&](int64_t s, int64_t k0, int64_t k1) {
        widen_part(w, 8 * s, k0, k1, wbuf);
        return std::pair<const float*, int64_t>(wbuf, k1 - k0);
      },
      [](int64_t) { return static_cast<const float*>(nullptr); });
}

}  // namespace kvinfer::cpu::avx512

KVINFER_AVX512_END

#else  // not x86: cpu_has_avx512() is false, so these are never called

#include <cstdlib>

namespace kvinfer::cpu::avx512 {
int64_t interleaved_size(int64_t, int64_t) { std::abort(); }
void interleave_rows(const float*, int64_t, int64_t, float*) { std::abort(); }
int64_t block_scratch_size(int64_t) { std::abort(); }
void block_products(const float*, const float*, int64_t, const float*, int64_t, int64_t, float*, int64_t, float*,
                    Prefetcher*) {
  std::abort();
}
int64_t widening_align(DType) { std::abort(); }
void block_products_widening(const float*, const float*, int64_t, const StoredBlock&, int64_t, int64_t, float*, int64_t,
                             float*, float*, Prefetcher*) {
  std::abort();
}
}  // namespace kvinfer::cpu::avx512

#endif
