// Prefill's 8-bit activation products on AVX-512 VNNI (linear_int8_avx512.h): weight blocks
// unpacked once, then tiles of input rows against them. Compiled for AVX-512 VNNI function by
// function (avx512_target.h), like the other AVX-512 files.
#include "cpu/linear_int8_avx512.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/quant.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "cpu/avx512_target.h"

KVINFER_AVX512_VNNI_BEGIN

namespace kvinfer::cpu::avx512 {

namespace {

// Input rows a tile takes: Q4 tiles hold 5 registers a row (4 groups' partial sums and 16 rows'
// offset sums), Q8_0 tiles 4 (a half's 4 pairs).
constexpr int kQ4Tile = 3, kQ8Tile = 4;

// The f16 at p.
inline uint16_t half_bits(const std::byte* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof h);
  return h;
}

// GCC 12's AVX-512 cast, insert and broadcast intrinsics start from an undefined register they
// then warn about.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

// Lanes 4g + i / 4 of v: group g's 4 rows, each spread over its 128-bit lane.
inline __m512 spread4(__m512 v, int g) {
  const __m512i lane = _mm512_srli_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), 2);
  return _mm512_permutexvar_ps(_mm512_add_epi32(lane, _mm512_set1_epi32(4 * g)), v);
}

// Lanes 2p + i / 8 of v: pair p's 2 rows, each spread over its 256-bit half.
inline __m512 spread8(__m512 v, int p) {
  const __m512i lane = _mm512_srli_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), 3);
  return _mm512_permutexvar_ps(_mm512_add_epi32(lane, _mm512_set1_epi32(2 * p)), v);
}

// 16 f16 values to f32 (exact).
inline __m512 halves(const uint16_t h[16]) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h)));
}

template <DType T>
void prepare_q4(const std::byte* w, int64_t rows, int64_t in, Q4Prepared* out) {
  using B = typename core::BlockOf<T>::type;
  const size_t row_bytes = dtype_row_bytes(T, in);
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  for (int64_t b = 0; b < in / 32; ++b) {
    Q4Prepared& o = out[b];
    const std::byte* first = w + static_cast<size_t>(b) * sizeof(B);
    __m128i codes[16];  // each row's 16 code bytes (zeros past the last row)
    for (int64_t r = 0; r < 16; ++r) {
      const std::byte* qs = first + static_cast<size_t>(r) * row_bytes + offsetof(B, qs);
      codes[r] = r < rows ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)) : _mm_setzero_si128();
    }
    for (int g = 0; g < 4; ++g) {
      __m512i qs = _mm512_castsi128_si512(codes[4 * g]);
      qs = _mm512_inserti32x4(qs, codes[4 * g + 1], 1);
      qs = _mm512_inserti32x4(qs, codes[4 * g + 2], 2);
      qs = _mm512_inserti32x4(qs, codes[4 * g + 3], 3);
      _mm512_store_si512(o.lo[g], _mm512_and_si512(qs, low4));
      _mm512_store_si512(o.hi[g], _mm512_and_si512(_mm512_srli_epi32(qs, 4), low4));
    }
    uint16_t dh[16] = {}, fh[16] = {};  // the rows' d_w and offset factors, f16
    for (int64_t r = 0; r < rows; ++r) {
      const std::byte* block = first + static_cast<size_t>(r) * row_bytes;
      dh[r] = half_bits(block + offsetof(B, d));
      if constexpr (T == DType::Q4_1) {
        fh[r] = half_bits(block + offsetof(core::BlockQ4_1, m));
      } else {
        fh[r] = dh[r];
      }
    }
    const __m512 d = halves(dh);
    for (int g = 0; g < 4; ++g) _mm512_store_ps(o.d[g], spread4(d, g));
    _mm512_store_ps(o.f, halves(fh));
  }
}

// Rows 8h .. 8h + 7 of the 16 (those of them below `rows`), into half h's blocks.
void prepare_q8_0(const std::byte* w, int64_t rows, int64_t in, int h, Q8Prepared* out) {
  using B = core::BlockQ8_0;
  const size_t row_bytes = dtype_row_bytes(DType::Q8_0, in);
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));  // 128 as an unsigned byte
  for (int64_t b = 0; b < in / 32; ++b) {
    Q8Prepared& o = out[b];
    const std::byte* first = w + static_cast<size_t>(b) * sizeof(B);
    __m256i codes[2];  // rows r and r + 1's 32 codes each (zeros past the last row)
    uint16_t dh[16] = {};
    for (int p = 0; p < 4; ++p) {
      const int64_t r = 8 * h + 2 * p;
      for (int64_t i = 0; i < 2; ++i)
        codes[i] = r + i < rows ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(
                                      first + static_cast<size_t>(r + i) * row_bytes + offsetof(B, qs)))
                                : _mm256_setzero_si256();
      const __m512i wq = _mm512_inserti64x4(_mm512_castsi256_si512(codes[0]), codes[1], 1);
      _mm512_store_si512(o.w[p], wq);
      const __m512i sums = _mm512_dpbusd_epi32(_mm512_setzero_si512(), bias, wq);  // 128 · Σ of each 4 codes
      _mm512_store_si512(o.negc[p], _mm512_sub_epi32(_mm512_setzero_si512(), sums));
      for (int64_t i = 0; i < 2; ++i)
        if (r + i < rows) dh[2 * p + i] = half_bits(first + static_cast<size_t>(r + i) * row_bytes + offsetof(B, d));
    }
    const __m512 d = halves(dh);
    for (int p = 0; p < 4; ++p) _mm512_store_ps(o.d[p], spread8(d, p));
  }
}

// One input row's quantised blocks and codes.
struct InputRow {
  const Int8Block* blocks;  // (in / 32)
  const int8_t* q;          // (in)
};

// R input rows × 16 Q4 weight rows: the arithmetic of linear_int8.h, block by block, 4 partial
// sums of 4 rows a register; y[r · ldy + c] for c < rows.
template <DType T, int R>
void q4_tile(const Q4Prepared* wb, int64_t nb, const InputRow* x, int64_t rows, float* y, int64_t ldy) {
  __m512 acc[R][4], off[R];  // acc[r][g], lane 4i + m: acc_m of weight row 4g + i; off[r], lane c: row c's
  for (int r = 0; r < R; ++r) {
    for (auto& a : acc[r]) a = _mm512_setzero_ps();
    off[r] = _mm512_setzero_ps();
  }
  for (int64_t b = 0; b < nb; ++b) {
    const Q4Prepared& o = wb[b];
    __m512i x_lo[R], x_hi[R];  // the row's codes 0..15 and 16..31, in every 128-bit lane
    for (int r = 0; r < R; ++r) {
      x_lo[r] = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x[r].q + 32 * b)));
      x_hi[r] = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x[r].q + 32 * b + 16)));
    }
    for (int g = 0; g < 4; ++g) {
      const __m512i lo = _mm512_load_si512(o.lo[g]), hi = _mm512_load_si512(o.hi[g]);
      const __m512 d = _mm512_load_ps(o.d[g]);
      for (int r = 0; r < R; ++r) {
        const __m512i low_half = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, x_lo[r]);
        const __m512i partials = _mm512_dpbusd_epi32(low_half, hi, x_hi[r]);  // I_m: both halves' values
        const __m512 p = _mm512_mul_ps(d, _mm512_set1_ps(x[r].blocks[b].d));
        acc[r][g] = _mm512_add_ps(acc[r][g], _mm512_mul_ps(p, _mm512_cvtepi32_ps(partials)));
      }
    }
    const __m512 f = _mm512_load_ps(o.f);
    for (int r = 0; r < R; ++r) off[r] = _mm512_add_ps(off[r], _mm512_mul_ps(f, _mm512_set1_ps(x[r].blocks[b].ds)));
  }
  for (int r = 0; r < R; ++r) {
    alignas(64) float lanes[4][16], offsets[16];
    for (int g = 0; g < 4; ++g) _mm512_store_ps(lanes[g], acc[r][g]);
    _mm512_store_ps(offsets, off[r]);
    for (int64_t c = 0; c < rows; ++c) {
      const float* a = lanes[c / 4] + 4 * (c % 4);
      const float tree = (a[0] + a[2]) + (a[1] + a[3]);
      y[r * ldy + c] = T == DType::Q4_1 ? tree + offsets[c] : tree - 8.0f * offsets[c];
    }
  }
}

// R input rows × the 8 Q8_0 weight rows of one half: 8 partial sums of 2 rows a register;
// y[r · ldy + c] for c < rows.
template <int R>
void q8_0_tile(const Q8Prepared* wb, int64_t nb, const InputRow* x, int64_t rows, float* y, int64_t ldy) {
  __m512 acc[R][4];  // acc[r][p], lane 8h + l: acc_l of weight row 2p + h
  for (auto& row : acc)
    for (auto& a : row) a = _mm512_setzero_ps();
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int64_t b = 0; b < nb; ++b) {
    const Q8Prepared& o = wb[b];
    __m512i xq[R];  // the row's 32 codes + 128, as unsigned bytes, in both halves
    for (int r = 0; r < R; ++r)
      xq[r] = _mm512_xor_si512(
          _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[r].q + 32 * b))), bias);
    for (int p = 0; p < 4; ++p) {
      const __m512i wq = _mm512_load_si512(o.w[p]), negc = _mm512_load_si512(o.negc[p]);
      const __m512 d = _mm512_load_ps(o.d[p]);
      for (int r = 0; r < R; ++r) {
        const __m512i partials = _mm512_dpbusd_epi32(negc, xq[r], wq);  // Σ (q + 128) · w − 128 · Σ w
        const __m512 s = _mm512_mul_ps(d, _mm512_set1_ps(x[r].blocks[b].d));
        acc[r][p] = _mm512_add_ps(acc[r][p], _mm512_mul_ps(s, _mm512_cvtepi32_ps(partials)));
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    alignas(64) float lanes[4][16];
    for (int p = 0; p < 4; ++p) _mm512_store_ps(lanes[p], acc[r][p]);
    for (int64_t c = 0; c < rows; ++c) {
      const float* a = lanes[c / 2] + 8 * (c % 2);
      y[r * ldy + c] = ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]));
    }
  }
}

// Input rows t .. t + count − 1 (count = min(most, n − t)) into x; returns count.
int input_rows(const Int8Block* blocks, const int8_t* q, int64_t t, int64_t n, int64_t in, int most, InputRow* x) {
  const int count = static_cast<int>(std::min<int64_t>(most, n - t));
  for (int r = 0; r < count; ++r) x[r] = {blocks + (t + r) * (in / 32), q + (t + r) * in};
  return count;
}

template <DType T>
void q4_products(const Q4Prepared* wb, int64_t rows, int64_t in, const Int8Block* blocks, const int8_t* q, int64_t n,
                 float* y, int64_t ldy) {
  for (int64_t t = 0; t < n; t += kQ4Tile) {
    InputRow x[kQ4Tile];
    float* yt = y + t * ldy;
    switch (input_rows(blocks, q, t, n, in, kQ4Tile, x)) {
      case 1: q4_tile<T, 1>(wb, in / 32, x, rows, yt, ldy); break;
      case 2: q4_tile<T, 2>(wb, in / 32, x, rows, yt, ldy); break;
      default: q4_tile<T, kQ4Tile>(wb, in / 32, x, rows, yt, ldy); break;
    }
  }
}

// Half h's rows (8h .. 8h + 7, those below `rows`).
void q8_0_products(const Q8Prepared* wb, int64_t rows, int64_t in, const Int8Block* blocks, const int8_t* q, int64_t n,
                   float* y, int64_t ldy) {
  for (int64_t t = 0; t < n; t += kQ8Tile) {
    InputRow x[kQ8Tile];
    float* yt = y + t * ldy;
    switch (input_rows(blocks, q, t, n, in, kQ8Tile, x)) {
      case 1: q8_0_tile<1>(wb, in / 32, x, rows, yt, ldy); break;
      case 2: q8_0_tile<2>(wb, in / 32, x, rows, yt, ldy); break;
      case 3: q8_0_tile<3>(wb, in / 32, x, rows, yt, ldy); break;
      default: q8_0_tile<kQ8Tile>(wb, in / 32, x, rows, yt, ldy); break;
    }
  }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace

void int8_prepare(DType t, const std::byte* w, int64_t rows, int64_t in, std::byte* prep) {
  switch (t) {
    case DType::Q8_0: {
      auto* out = reinterpret_cast<Q8Prepared*>(prep);
      for (int h = 0; h < 2; ++h) prepare_q8_0(w, rows, in, h, out + h * (in / 32));
      return;
    }
    case DType::Q4_0: return prepare_q4<DType::Q4_0>(w, rows, in, reinterpret_cast<Q4Prepared*>(prep));
    default: return prepare_q4<DType::Q4_1>(w, rows, in, reinterpret_cast<Q4Prepared*>(prep));
  }
}

void int8_prepared_products(DType t, const std::byte* prep, int64_t rows, int64_t in, const Int8Block* blocks,
                            const int8_t* q, int64_t n, float* y, int64_t ldy) {
  switch (t) {
    case DType::Q8_0: {
      const auto* wb = reinterpret_cast<const Q8Prepared*>(prep);
      for (int64_t h = 0; h < 2 && 8 * h < rows; ++h)
        q8_0_products(wb + h * (in / 32), std::min<int64_t>(8, rows - 8 * h), in, blocks, q, n, y + 8 * h, ldy);
      return;
    }
    case DType::Q4_0:
      return q4_products<DType::Q4_0>(reinterpret_cast<const Q4Prepared*>(prep), rows, in, blocks, q, n, y, ldy);
    default: return q4_products<DType::Q4_1>(reinterpret_cast<const Q4Prepared*>(prep), rows, in, blocks, q, n, y, ldy);
  }
}

}  // namespace kvinfer::cpu::avx512

KVINFER_AVX512_VNNI_END

#else  // not x86: cpu_has_avx512_vnni() is false, so these are never called

#include <cstdlib>

namespace kvinfer::cpu::avx512 {
void int8_prepare(DType, const std::byte*, int64_t, int64_t, std::byte*) { std::abort(); }
void int8_prepared_products(DType, const std::byte*, int64_t, int64_t, const Int8Block*, const int8_t*, int64_t, float*,
                            int64_t) {
  std::abort();
}
}  // namespace kvinfer::cpu::avx512

#endif
