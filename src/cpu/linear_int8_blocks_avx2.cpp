// AVX2 products with 8-bit activations for Q5_0 and Q5_1 weights (linear_int8.h gives the
// arithmetic, int8_blocks.h how a block reads): decode decodes each weight block in registers, read
// once; prefill unpacks 16 rows once (Int8BlockPrepared) and multiplies every input row against
// them. A block is 32 codes times 32 input codes: vpmaddubsw, vpmaddwd, one conversion and one
// fused multiply-add into the row's 8 lanes.
#include "cpu/linear_avx2.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/quant.h"
#include "cpu/int8_blocks.h"
#include "cpu/int8_prepared.h"

#include "cpu/avx2_target.h"

KVINFER_AVX2_BEGIN

#include "cpu/avx2_inline.h"

namespace kvinfer::cpu::avx2 {

namespace {

inline __m256i load32(const std::byte* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// J_l = Σ_{j = 4l}^{4l+3} u_j · q_j: codes 0..63 times input codes, exact (a pair reaches 2 · 63 · 127).
inline __m256i partials(__m256i u, __m256i x) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, x), _mm256_set1_epi16(1));
}

// Block b's 32 unsigned codes of one weight row (int8_blocks.h), decoded in registers.
template <DType T>
inline __m256i block_codes(const std::byte* row, int64_t b) {
  using B = typename core::BlockOf<T>::type;
  const std::byte* blk = row + static_cast<size_t>(b) * sizeof(B);
  const __m128i qs = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + offsetof(B, qs)));
  const __m256i nibbles = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(qs, 4), qs), _mm256_set1_epi8(0x0F));
  uint32_t qh;
  std::memcpy(&qh, blk + offsetof(B, qh), 4);
  return _mm256_or_si256(nibbles, bit4_from_bits32(qh));
}

// The scales and offset factors of blocks b0 .. b0 + count − 1 of one row, lane i for block
// b0 + i (0 past).
template <DType T>
struct ChunkScales {
  __m256 s, f;
};

template <DType T>
inline ChunkScales<T> chunk_scales(const std::byte* row, int64_t b0, int count) {
  using B = typename core::BlockOf<T>::type;
  alignas(16) uint16_t d[8] = {}, m[8] = {};
  for (int i = 0; i < count; ++i) {
    const std::byte* blk = row + static_cast<size_t>(b0 + i) * sizeof(B);
    std::memcpy(&d[i], blk + offsetof(B, d), 2);
    if constexpr (T == DType::Q5_1) std::memcpy(&m[i], blk + offsetof(core::BlockQ5_1, m), 2);
  }
  ChunkScales<T> c;
  c.s = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(d)));
  c.f = T == DType::Q5_1 ? _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(m))) : c.s;
  return c;
}

// The input's scales d_x and ds_x of blocks b0 .. b0 + count − 1, lane i for block b0 + i (0 past).
inline void input_scales(const Int8Block* blocks, int64_t b0, int count, __m256& dx, __m256& ds) {
  if (count == 8) {  // the pairs (d, ds) of 8 blocks, de-interleaved
    const __m256 v0 = _mm256_loadu_ps(&blocks[b0].d), v1 = _mm256_loadu_ps(&blocks[b0 + 4].d);
    const __m256 d = _mm256_shuffle_ps(v0, v1, _MM_SHUFFLE(2, 0, 2, 0));   // d0 d1 d4 d5 | d2 d3 d6 d7
    const __m256 s = _mm256_shuffle_ps(v0, v1, _MM_SHUFFLE(3, 1, 3, 1));
    dx = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(d), _MM_SHUFFLE(3, 1, 2, 0)));
    ds = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(s), _MM_SHUFFLE(3, 1, 2, 0)));
    return;
  }
  alignas(32) float d[8] = {}, s[8] = {};
  for (int i = 0; i < count; ++i) d[i] = blocks[b0 + i].d, s[i] = blocks[b0 + i].ds;
  dx = _mm256_load_ps(d);
  ds = _mm256_load_ps(s);
}

// Lane i of v in every lane.
inline __m256 lane(__m256 v, int i) { return _mm256_permutevar8x32_ps(v, _mm256_set1_epi32(i)); }

// The row's result from its lanes and offsets (linear_int8.h).
template <DType T>
inline float finish(__m256 acc, __m256 off) {
  return T == DType::Q5_0 ? lanes_sum(acc) - 16.0f * lanes_sum(off) : lanes_sum(acc) + lanes_sum(off);
}

// Decode: `Rows` (1 or 2) weight rows against one input row, 8 blocks' scales at a time.
template <DType T, int Rows>
void block_rows(const Int8Block* blocks, const int8_t* q, const std::byte* const* row, int64_t n, float* y,
                Prefetcher& pf) {
  const int64_t nb = n / 32;
  __m256 acc[Rows], off[Rows];
  for (int r = 0; r < Rows; ++r) acc[r] = off[r] = _mm256_setzero_ps();
  for (int64_t b0 = 0; b0 < nb; b0 += 8) {
    pf.advance(Rows * 8 * sizeof(typename core::BlockOf<T>::type));
    const int count = static_cast<int>(std::min<int64_t>(8, nb - b0));
    __m256 dx, ds;
    input_scales(blocks, b0, count, dx, ds);
    __m256 p[Rows];
    for (int r = 0; r < Rows; ++r) {
      const ChunkScales<T> c = chunk_scales<T>(row[r], b0, count);
      p[r] = _mm256_mul_ps(c.s, dx);
      const __m256 sum = _mm256_fmadd_ps(c.f, ds, off[r]);  // only the chunk's blocks' lanes
      off[r] = count == 8 ? sum
                          : _mm256_blendv_ps(off[r], sum, _mm256_castsi256_ps(_mm256_cmpgt_epi32(
                                                              _mm256_set1_epi32(count),
                                                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7))));
    }
    for (int i = 0; i < count; ++i) {
      const int64_t b = b0 + i;
      const __m256i x = load32(reinterpret_cast<const std::byte*>(q + 32 * b));
#pragma GCC unroll 2
      for (int r = 0; r < Rows; ++r)
        acc[r] = _mm256_fmadd_ps(lane(p[r], i), _mm256_cvtepi32_ps(partials(block_codes<T>(row[r], b), x)), acc[r]);
    }
  }
  for (int r = 0; r < Rows; ++r) y[r] = finish<T>(acc[r], off[r]);
}

template <DType T>
void rows_of(const Int8Block* blocks, const int8_t* q, const std::byte* w, int64_t count, int64_t n, float* y,
             Prefetcher& pf) {
  const size_t row_bytes = dtype_row_bytes(T, n);
  const auto at = [&](int64_t c) { return w + static_cast<size_t>(c) * row_bytes; };
  int64_t c = 0;
  for (; c + 2 <= count; c += 2) {
    const std::byte* row[2] = {at(c), at(c + 1)};
    block_rows<T, 2>(blocks, q, row, n, y + c, pf);
  }
  if (c < count) {
    const std::byte* row[1] = {at(c)};
    block_rows<T, 1>(blocks, q, row, n, y + c, pf);
  }
}

// ---- prefill: 16 rows unpacked once --------------------------------------------------------

template <DType T>
void prepare(const std::byte* w, int64_t rows, int64_t in, Int8BlockPrepared* out) {
  const size_t row_bytes = dtype_row_bytes(T, in);
  const int64_t nb = in / 32;
  for (int64_t r = 0; r < kInt8PreparedRows; ++r) {
    const std::byte* row = w + static_cast<size_t>(r) * row_bytes;
    for (int64_t b0 = 0; b0 < nb; b0 += 8) {
      const int count = static_cast<int>(std::min<int64_t>(8, nb - b0));
      alignas(32) float sc[8] = {}, f[8] = {};
      if (r < rows) {
        const ChunkScales<T> c = chunk_scales<T>(row, b0, count);
        _mm256_store_ps(sc, c.s);
        _mm256_store_ps(f, c.f);
      }
      for (int i = 0; i < count; ++i) {
        Int8BlockPrepared& o = out[b0 + i];
        const __m256i u = r < rows ? block_codes<T>(row, b0 + i) : _mm256_setzero_si256();  // rows past: zeros
        _mm256_store_si256(reinterpret_cast<__m256i*>(o.u[r]), u);
        o.s[r] = sc[i];
        o.f[r] = f[i];
      }
    }
  }
}

// Input rows t .. t + Tokens − 1 against prepared rows c .. c + RowsT − 1, every block.
template <DType T, int Tokens, int RowsT>
void tile(const Int8BlockPrepared* prep, int64_t in, const Int8Block* blocks, const int8_t* q, int64_t t, int64_t c,
          float* y, int64_t ldy) {
  const int64_t nb = in / 32;
  __m256 acc[Tokens][RowsT];
  float off[Tokens][RowsT][8] = {};
  for (auto& a : acc)
    for (auto& v : a) v = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const Int8BlockPrepared& p = prep[b];
    const int i = static_cast<int>(b % 8);
    __m256i u[RowsT];
    for (int r = 0; r < RowsT; ++r) u[r] = _mm256_load_si256(reinterpret_cast<const __m256i*>(p.u[c + r]));
#pragma GCC unroll 4
    for (int k = 0; k < Tokens; ++k) {
      const Int8Block& xb = blocks[(t + k) * nb + b];
      const __m256i x = load32(reinterpret_cast<const std::byte*>(q + (t + k) * in + 32 * b));
#pragma GCC unroll 4
      for (int r = 0; r < RowsT; ++r) {
        acc[k][r] = _mm256_fmadd_ps(_mm256_set1_ps(p.s[c + r] * xb.d), _mm256_cvtepi32_ps(partials(u[r], x)), acc[k][r]);
        off[k][r][i] = std::fma(p.f[c + r], xb.ds, off[k][r][i]);
      }
    }
  }
  for (int k = 0; k < Tokens; ++k)
    for (int r = 0; r < RowsT; ++r) y[(t + k) * ldy + c + r] = finish<T>(acc[k][r], _mm256_loadu_ps(off[k][r]));
}

template <DType T>
void prepared_products(const Int8BlockPrepared* prep, int64_t rows, int64_t in, const Int8Block* blocks,
                       const int8_t* q, int64_t n, float* y, int64_t ldy) {
  // 3 input rows × 2 weight rows: 6 accumulators, the pair's codes and scales in registers.
  int64_t t = 0;
  for (; t + 3 <= n; t += 3) {
    int64_t c = 0;
    for (; c + 2 <= rows; c += 2) tile<T, 3, 2>(prep, in, blocks, q, t, c, y, ldy);
    for (; c < rows; ++c) tile<T, 3, 1>(prep, in, blocks, q, t, c, y, ldy);
  }
  for (; t < n; ++t) {
    int64_t c = 0;
    for (; c + 2 <= rows; c += 2) tile<T, 1, 2>(prep, in, blocks, q, t, c, y, ldy);
    for (; c < rows; ++c) tile<T, 1, 1>(prep, in, blocks, q, t, c, y, ldy);
  }
}

}  // namespace

void int8_block_rows_product(DType t, const Int8Block* blocks, const int8_t* q, const std::byte* w, int64_t rows,
                             int64_t n, float* y, Prefetcher& pf) {
  if (t == DType::Q5_1) return rows_of<DType::Q5_1>(blocks, q, w, rows, n, y, pf);
  rows_of<DType::Q5_0>(blocks, q, w, rows, n, y, pf);
}

void int8_block_prepare(DType t, const std::byte* w, int64_t rows, int64_t in, std::byte* prep) {
  auto* out = reinterpret_cast<Int8BlockPrepared*>(prep);
  if (t == DType::Q5_1) return prepare<DType::Q5_1>(w, rows, in, out);
  prepare<DType::Q5_0>(w, rows, in, out);
}

void int8_block_prepared_products(DType t, const std::byte* prep, int64_t rows, int64_t in, const Int8Block* blocks,
                                  const int8_t* q, int64_t n, float* y, int64_t ldy) {
  const auto* p = reinterpret_cast<const Int8BlockPrepared*>(prep);
  if (t == DType::Q5_1) return prepared_products<DType::Q5_1>(p, rows, in, blocks, q, n, y, ldy);
  prepared_products<DType::Q5_0>(p, rows, in, blocks, q, n, y, ldy);
}

}  // namespace kvinfer::cpu::avx2

KVINFER_AVX2_END

#else  // not x86: cpu_has_avx2_fma_f16c() is false, so these are never called

#include <cstdlib>

namespace kvinfer::cpu::avx2 {
void int8_block_rows_product(DType, const Int8Block*, const int8_t*, const std::byte*, int64_t, int64_t, float*,
                             Prefetcher&) {
  std::abort();
}
void int8_block_prepare(DType, const std::byte*, int64_t, int64_t, std::byte*) { std::abort(); }
void int8_block_prepared_products(DType, const std::byte*, int64_t, int64_t, const Int8Block*, const int8_t*, int64_t,
                                  float*, int64_t) {
  std::abort();
}
}  // namespace kvinfer::cpu::avx2

#endif
