// 8-bit activation products on AVX-512 VNNI (linear_int8_avx512.h): prefill's weight blocks
// unpacked once, then tiles of input rows against them; decode's unpacked in registers. Compiled
// for AVX-512 VNNI function by function (avx512_target.h), like the other AVX-512 files.
#include "cpu/linear_int8_avx512.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "core/quant.h"
#include "cpu/linear_avx2.h"
#include "cpu/packed_rows.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "cpu/avx512_target.h"

KVINFER_AVX512_VNNI_BEGIN

namespace kvinfer::cpu::avx512 {

namespace {

// Input rows a tile takes: 5 registers of sums a row (4 groups' partial sums and, for Q4, 16
// rows' offset sums) and 2 of its codes.
constexpr int kTile = 3;

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

// 16 f16 values to f32 (exact).
inline __m512 halves(const uint16_t h[16]) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h)));
}

// y[c] for c < rows (at most 16): row c's tree (acc_0 + acc_2) + (acc_1 + acc_3) from lanes
// 4i .. 4i + 3 of acc[g] (c = 4g + i), then Q4_1's + off or Q4_0's − 8 · off (lane c of off), as
// linear_int8.h spells them out, 16 rows in a few instructions.
template <DType T>
inline void finish_rows(const __m512 acc[4], __m512 off, int64_t rows, float* y) {
  __m512 tree[4];  // lane 4i: row 4g + i's tree
  for (int g = 0; g < 4; ++g) {
    const __m512 s = _mm512_add_ps(acc[g], _mm512_permute_ps(acc[g], _MM_SHUFFLE(1, 0, 3, 2)));  // a0+a2, a1+a3, ..
    tree[g] = _mm512_add_ps(s, _mm512_permute_ps(s, _MM_SHUFFLE(2, 3, 0, 1)));
  }
  const __m512i firsts = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28);
  const __m512 rows01 = _mm512_permutex2var_ps(tree[0], firsts, tree[1]);  // lanes 0..7: rows 0..7
  const __m512 rows23 = _mm512_permutex2var_ps(tree[2], firsts, tree[3]);  // lanes 0..7: rows 8..15
  __m512 out = _mm512_shuffle_f32x4(rows01, rows23, _MM_SHUFFLE(1, 0, 1, 0));
  if constexpr (T == DType::Q4_1) out = _mm512_add_ps(out, off);
  if constexpr (T == DType::Q4_0) out = _mm512_sub_ps(out, _mm512_mul_ps(_mm512_set1_ps(8.0f), off));
  _mm512_mask_storeu_ps(y, static_cast<__mmask16>((1u << rows) - 1), out);
}

// Q8_0's record or Q4's.
template <DType T>
using Prepared = std::conditional_t<T == DType::Q8_0, Q8Prepared, Q4Prepared>;

// 16 code bytes from byte `at` of rows 4g .. 4g + 3's blocks (the first at `first`, rows
// row_step apart), one row to a 128-bit lane; zeros for rows from `rows` on.
template <DType T>
inline __m512i group_codes(const std::byte* first, size_t row_step, int64_t rows, int g, size_t at) {
  using B = typename core::BlockOf<T>::type;
  __m128i codes[4];
  for (int i = 0; i < 4; ++i) {
    const int64_t r = 4 * g + i;
    const std::byte* qs = first + static_cast<size_t>(r) * row_step + offsetof(B, qs) + at;
    codes[i] = r < rows ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)) : _mm_setzero_si128();
  }
  __m512i v = _mm512_castsi128_si512(codes[0]);
  v = _mm512_inserti32x4(v, codes[1], 1);
  v = _mm512_inserti32x4(v, codes[2], 2);
  return _mm512_inserti32x4(v, codes[3], 3);
}

// int8_prepare from row-major rows row_bytes apart, or (kPacked, 16 rows) a packed block
// (packed_rows.h), whose codes are already in the records' order and whose scales lie side by
// side.
template <DType T, bool kPacked>
void prepare(const std::byte* w, int64_t rows, int64_t in, Prepared<T>* out) {
  using B = typename core::BlockOf<T>::type;
  const size_t row_bytes = dtype_row_bytes(T, in);
  const __m512i low4 = _mm512_set1_epi8(0x0F), bias = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int64_t b = 0; b < in / 32; ++b) {
    Prepared<T>& o = out[b];
    // Row-major: row 0's block b; packed: column b.
    const std::byte* first = w + static_cast<size_t>(b) * sizeof(B) * (kPacked ? kPackedRows : 1);
    auto codes = [&](int g, size_t at) {  // rows 4g .. 4g + 3's code bytes from `at`
      if constexpr (kPacked)
        return _mm512_loadu_si512(first + (at ? packed_high_codes(4 * g) : packed_codes(T, 4 * g)));
      else
        return group_codes<T>(first, row_bytes, rows, g, at);
    };
    for (int g = 0; g < 4; ++g) {
      if constexpr (T == DType::Q8_0) {
        const __m512i lo = codes(g, 0), hi = codes(g, 16);
        _mm512_store_si512(o.lo[g], lo);
        _mm512_store_si512(o.hi[g], hi);
        // 128 · the codes' sum in each partial
        const __m512i sums = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), bias, lo), bias, hi);
        _mm512_store_si512(o.negc[g], _mm512_sub_epi32(_mm512_setzero_si512(), sums));
      } else {
        const __m512i qs = codes(g, 0);
        _mm512_store_si512(o.lo[g], _mm512_and_si512(qs, low4));
        _mm512_store_si512(o.hi[g], _mm512_and_si512(_mm512_srli_epi32(qs, 4), low4));
      }
    }
    uint16_t dh[16] = {}, fh[16] = {};  // the rows' d_w and Q4 offset factors, f16
    if constexpr (kPacked) {
      std::memcpy(dh, first + packed_d(0), sizeof dh);
      std::memcpy(fh, first + (T == DType::Q4_1 ? packed_m(0) : packed_d(0)), sizeof fh);
    } else {
      for (int64_t r = 0; r < rows; ++r) {
        const std::byte* block = first + static_cast<size_t>(r) * row_bytes;
        dh[r] = half_bits(block + offsetof(B, d));
        if constexpr (T == DType::Q4_1) {
          fh[r] = half_bits(block + offsetof(core::BlockQ4_1, m));
        } else {
          fh[r] = dh[r];
        }
      }
    }
    const __m512 d = halves(dh);
    for (int g = 0; g < 4; ++g) _mm512_store_ps(o.d[g], spread4(d, g));
    if constexpr (T != DType::Q8_0) _mm512_store_ps(o.f, halves(fh));
  }
}

// One input row's quantised blocks and codes.
struct InputRow {
  const Int8Block* blocks;  // (in / 32)
  const int8_t* q;          // (in)
};

// R input rows × 16 weight rows: the arithmetic of linear_int8.h, block by block, 4 partial sums
// of 4 rows a register; y[r · ldy + c] for c < rows. Q4: the nibbles (unsigned) against the
// input's codes; Q8_0: the input's codes + 128 (unsigned) against the weights' codes, from negc.
template <DType T, int R>
void tile(const Prepared<T>* wb, int64_t nb, const InputRow* x, int64_t rows, float* y, int64_t ldy) {
  constexpr bool kQ8 = T == DType::Q8_0;
  __m512 acc[R][4], off[R];  // acc[r][g], lane 4i + m: acc_m of weight row 4g + i; off[r], lane c: row c's (Q4)
  for (int r = 0; r < R; ++r) {
    for (auto& a : acc[r]) a = _mm512_setzero_ps();
    off[r] = _mm512_setzero_ps();
  }
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int64_t b = 0; b < nb; ++b) {
    const Prepared<T>& o = wb[b];
    __m512i x_lo[R], x_hi[R];  // the row's codes 0..15 and 16..31 (Q8_0: + 128), in every 128-bit lane
    for (int r = 0; r < R; ++r) {
      x_lo[r] = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x[r].q + 32 * b)));
      x_hi[r] = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x[r].q + 32 * b + 16)));
      if constexpr (kQ8) {
        x_lo[r] = _mm512_xor_si512(x_lo[r], bias);
        x_hi[r] = _mm512_xor_si512(x_hi[r], bias);
      }
    }
    for (int g = 0; g < 4; ++g) {
      const __m512i lo = _mm512_load_si512(o.lo[g]), hi = _mm512_load_si512(o.hi[g]);
      const __m512 d = _mm512_load_ps(o.d[g]);
      for (int r = 0; r < R; ++r) {
        __m512i partials;  // I_m: both halves' values
        if constexpr (kQ8) {
          const __m512i low_half = _mm512_dpbusd_epi32(_mm512_load_si512(o.negc[g]), x_lo[r], lo);
          partials = _mm512_dpbusd_epi32(low_half, x_hi[r], hi);
        } else {
          const __m512i low_half = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, x_lo[r]);
          partials = _mm512_dpbusd_epi32(low_half, hi, x_hi[r]);
        }
        const __m512 p = _mm512_mul_ps(d, _mm512_set1_ps(x[r].blocks[b].d));
        acc[r][g] = _mm512_add_ps(acc[r][g], _mm512_mul_ps(p, _mm512_cvtepi32_ps(partials)));
      }
    }
    if constexpr (!kQ8) {
      const __m512 f = _mm512_load_ps(o.f);
      for (int r = 0; r < R; ++r) off[r] = _mm512_add_ps(off[r], _mm512_mul_ps(f, _mm512_set1_ps(x[r].blocks[b].ds)));
    }
  }
  for (int r = 0; r < R; ++r) finish_rows<T>(acc[r], off[r], rows, y + r * ldy);
}

// Input rows t .. t + count − 1 (count = min(most, n − t)) into x; returns count.
int input_rows(const Int8Block* blocks, const int8_t* q, int64_t t, int64_t n, int64_t in, int most, InputRow* x) {
  const int count = static_cast<int>(std::min<int64_t>(most, n - t));
  for (int r = 0; r < count; ++r) x[r] = {blocks + (t + r) * (in / 32), q + (t + r) * in};
  return count;
}

template <DType T>
void products(const Prepared<T>* wb, int64_t rows, int64_t in, const Int8Block* blocks, const int8_t* q, int64_t n,
              float* y, int64_t ldy) {
  for (int64_t t = 0; t < n; t += kTile) {
    InputRow x[kTile];
    float* yt = y + t * ldy;
    switch (input_rows(blocks, q, t, n, in, kTile, x)) {
      case 1: tile<T, 1>(wb, in / 32, x, rows, yt, ldy); break;
      case 2: tile<T, 2>(wb, in / 32, x, rows, yt, ldy); break;
      default: tile<T, kTile>(wb, in / 32, x, rows, yt, ldy); break;
    }
  }
}

// Decode: up to 16 weight rows against one input row, each block unpacked in registers as it
// is read (no records: a decode reads each weight once), with the tiles' arithmetic. Row-major
// rows row_bytes apart: the rows' scales come in by one gather a block, each group's codes by 4
// loads; or (kPacked, 16 rows) a packed block (packed_rows.h): the scales by one load, each
// group's codes by one. Q8_0 takes the weights' codes + 128 as the unsigned operand and starts
// from −128 · the input's codes' sums, computed once a block for all rows.
template <DType T, bool kPacked>
void rows16(const Int8Block* blocks, const int8_t* q, const std::byte* w, size_t row_bytes, int64_t rows, int64_t n,
            float* y, Prefetcher& pf_out) {
  Prefetcher pf = pf_out;  // a local copy: its counters in registers (prefetch.h)
  using B = typename core::BlockOf<T>::type;
  constexpr bool kQ8 = T == DType::Q8_0;
  static_assert(offsetof(B, d) == 0 && (T != DType::Q4_1 || offsetof(core::BlockQ4_1, m) == 2));
  static_assert(!kPacked || kPackedRows == 16);
  __m512 acc[4], off = _mm512_setzero_ps();  // acc[g], lane 4i + m: acc_m of row 4g + i; off, lane c: row c's (Q4)
  for (auto& a : acc) a = _mm512_setzero_ps();
  const int groups = static_cast<int>((rows + 3) / 4);
  const __mmask16 live = static_cast<__mmask16>((1u << rows) - 1);
  // Each row's first 4 bytes of a block (its f16 d, then m or codes), rows row_bytes apart.
  const __m512i at = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                        _mm512_set1_epi32(static_cast<int>(row_bytes)));
  const __m512i low4 = _mm512_set1_epi8(0x0F), bias = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int64_t b = 0; b < n / 32; ++b) {
    pf.advance(static_cast<size_t>(rows) * sizeof(B));
    // Row-major: row 0's block b; packed: column b.
    const std::byte* first = w + static_cast<size_t>(b) * sizeof(B) * (kPacked ? kPackedRows : 1);
    __m512 d, f;  // lane c: row c's d_w, and its offset factor (Q4_1's m_w, Q4_0's d_w)
    if constexpr (kPacked) {
      d = halves(reinterpret_cast<const uint16_t*>(first + packed_d(0)));
      f = T == DType::Q4_1 ? halves(reinterpret_cast<const uint16_t*>(first + packed_m(0))) : d;
    } else {
      const __m512i heads = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, at, first, 1);
      d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(heads));
      f = T == DType::Q4_1 ? _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(heads, 16))) : d;
    }
    const __m512 p = _mm512_mul_ps(d, _mm512_set1_ps(blocks[b].d));
    const __m512i x_lo = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 32 * b)));
    const __m512i x_hi = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 32 * b + 16)));
    __m512i start = _mm512_setzero_si512();  // Q8_0: −128 · the input's codes' sum in each partial
    if constexpr (kQ8)
      start = _mm512_sub_epi32(start, _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(start, bias, x_lo), bias, x_hi));
    // Rows 4g .. 4g + 3's code bytes from `at` (Q8_0: 16 for codes 16..31), one to a 128-bit lane.
    auto codes = [&](int g, size_t at_byte) {
      if constexpr (kPacked)
        return _mm512_loadu_si512(first + (at_byte ? packed_high_codes(4 * g) : packed_codes(T, 4 * g)));
      else
        return group_codes<T>(first, row_bytes, rows, g, at_byte);
    };
    for (int g = 0; g < groups; ++g) {
      __m512i partials;
      if constexpr (kQ8) {
        const __m512i lo = _mm512_xor_si512(codes(g, 0), bias), hi = _mm512_xor_si512(codes(g, 16), bias);
        partials = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(start, lo, x_lo), hi, x_hi);
      } else {
        const __m512i qs = codes(g, 0);
        const __m512i lo = _mm512_and_si512(qs, low4), hi = _mm512_and_si512(_mm512_srli_epi32(qs, 4), low4);
        partials = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, x_lo), hi, x_hi);
      }
      acc[g] = _mm512_add_ps(acc[g], _mm512_mul_ps(spread4(p, g), _mm512_cvtepi32_ps(partials)));
    }
    if constexpr (!kQ8) off = _mm512_add_ps(off, _mm512_mul_ps(f, _mm512_set1_ps(blocks[b].ds)));
  }
  finish_rows<T>(acc, off, rows, y);
  pf_out = pf;
}

template <DType T>
void rows_of(const Int8Block* blocks, const int8_t* q, const std::byte* w, int64_t rows, int64_t n, float* y,
             Prefetcher& pf) {
  const size_t row_bytes = dtype_row_bytes(T, n);
  for (int64_t c = 0; c < rows; c += 16)
    rows16<T, false>(blocks, q, w + static_cast<size_t>(c) * row_bytes, row_bytes, std::min<int64_t>(16, rows - c), n,
                     y + c, pf);
}

template <DType T>
void packed_of(const Int8Block* blocks, const int8_t* q, const std::byte* w, int64_t n, float* y, Prefetcher& pf) {
  rows16<T, true>(blocks, q, w, dtype_row_bytes(T, n), kPackedRows, n, y, pf);
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace

void int8_prepare(DType t, const std::byte* w, int64_t rows, int64_t in, std::byte* prep) {
  switch (t) {
    case DType::Q8_0: return prepare<DType::Q8_0, false>(w, rows, in, reinterpret_cast<Q8Prepared*>(prep));
    case DType::Q4_0: return prepare<DType::Q4_0, false>(w, rows, in, reinterpret_cast<Q4Prepared*>(prep));
    default: return prepare<DType::Q4_1, false>(w, rows, in, reinterpret_cast<Q4Prepared*>(prep));
  }
}

void int8_prepare_packed(DType t, const std::byte* w, int64_t in, std::byte* prep) {
  switch (t) {
    case DType::Q8_0: return prepare<DType::Q8_0, true>(w, kPackedRows, in, reinterpret_cast<Q8Prepared*>(prep));
    case DType::Q4_0: return prepare<DType::Q4_0, true>(w, kPackedRows, in, reinterpret_cast<Q4Prepared*>(prep));
    default: return prepare<DType::Q4_1, true>(w, kPackedRows, in, reinterpret_cast<Q4Prepared*>(prep));
  }
}

void int8_prepared_products(DType t, const std::byte* prep, int64_t rows, int64_t in, const Int8Block* blocks,
                            const int8_t* q, int64_t n, float* y, int64_t ldy) {
  switch (t) {
    case DType::Q8_0:
      return products<DType::Q8_0>(reinterpret_cast<const Q8Prepared*>(prep), rows, in, blocks, q, n, y, ldy);
    case DType::Q4_0:
      return products<DType::Q4_0>(reinterpret_cast<const Q4Prepared*>(prep), rows, in, blocks, q, n, y, ldy);
    default: return products<DType::Q4_1>(reinterpret_cast<const Q4Prepared*>(prep), rows, in, blocks, q, n, y, ldy);
  }
}

void int8_rows_product(DType t, const Int8Block* blocks, const int8_t* q, const std::byte* w, int64_t rows, int64_t n,
                       float* y, Prefetcher& pf) {
  // The gather's offsets, 15 rows apart at most, are 32-bit.
  if (dtype_row_bytes(t, n) > static_cast<size_t>(std::numeric_limits<int32_t>::max() / 16))
    return avx2::int8_rows_product(t, blocks, q, w, rows, n, y, pf);
  switch (t) {
    case DType::Q8_0: return rows_of<DType::Q8_0>(blocks, q, w, rows, n, y, pf);
    case DType::Q4_0: return rows_of<DType::Q4_0>(blocks, q, w, rows, n, y, pf);
    default: return rows_of<DType::Q4_1>(blocks, q, w, rows, n, y, pf);
  }
}

void int8_packed_product(DType t, const Int8Block* blocks, const int8_t* q, const std::byte* w, int64_t n, float* y,
                         Prefetcher& pf) {
  switch (t) {
    case DType::Q8_0: return packed_of<DType::Q8_0>(blocks, q, w, n, y, pf);
    case DType::Q4_0: return packed_of<DType::Q4_0>(blocks, q, w, n, y, pf);
    default: return packed_of<DType::Q4_1>(blocks, q, w, n, y, pf);
  }
}

}  // namespace kvinfer::cpu::avx512

KVINFER_AVX512_VNNI_END

#else  // not x86: cpu_has_avx512_vnni() is false, so these are never called

#include <cstdlib>

namespace kvinfer::cpu::avx512 {
void int8_prepare(DType, const std::byte*, int64_t, int64_t, std::byte*) { std::abort(); }
void int8_prepare_packed(DType, const std::byte*, int64_t, std::byte*) { std::abort(); }
void int8_prepared_products(DType, const std::byte*, int64_t, int64_t, const Int8Block*, const int8_t*, int64_t, float*,
                            int64_t) {
  std::abort();
}
void int8_rows_product(DType, const Int8Block*, const int8_t*, const std::byte*, int64_t, int64_t, float*,
                       Prefetcher&) {
  std::abort();
}
void int8_packed_product(DType, const Int8Block*, const int8_t*, const std::byte*, int64_t, float*, Prefetcher&) {
  std::abort();
}
}  // namespace kvinfer::cpu::avx512

#endif
