// AVX2 products with 8-bit activations (linear_int8.h gives the arithmetic, which the portable
// code in linear_int8.cpp spells out): two weight rows a vector, a weight block times an input
// block vpmaddubsw and vpmaddwd, exact in integers, then one scale.
#include "cpu/linear_avx2.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

#include "core/quant.h"

#include "cpu/avx2_target.h"

KVINFER_AVX2_BEGIN

#include "cpu/avx2_inline.h"

namespace kvinfer::cpu::avx2 {

namespace {

template <typename V>
inline V load_as(const std::byte* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Every type takes two weight rows a vector. Q4_0 and Q4_1: their 16 bytes of codes side by side,
// masked, are values 0..15 of each row; shifted by 4 and masked, values 16..31. Against the input
// codes 0..15 and 16..31, each in both halves, two vpmaddubsw and a sum (|pairs| ≤ 2 · 2 · 15 · 127
// < 2¹⁵) and one vpmaddwd give lane 4h + m = I_m of row h: the 4 partial sums of linear_int8.h.
// Q8_0: codes 0..15 of both rows side by side, then 16..31, each signed_dot4 apart (a pair of Q8_0
// products reaches 2 · 128 · 127, two of them would not fit 16 bits), then summed.
// 16 bytes from a and from b, a's in the low half.
inline __m256i both_rows(const std::byte* a, const std::byte* b) {
  return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a))),
                                 _mm_loadu_si128(reinterpret_cast<const __m128i*>(b)), 1);
}

// A block's input codes, each 16-value half in both 128-bit lanes: the 8-bit codes q, or with
// 15-bit activations (linear_int15.h) the high codes h and the low codes l.
struct BlockInput {
  __m256i lo, hi;      // q (or h) 0..15, 16..31
  __m256i lo_l, hi_l;  // l 0..15, 16..31 (15-bit only)
};

template <bool Fine>
inline BlockInput block_input(const int8_t* q, const int8_t* l, int64_t b) {
  BlockInput in{both_lanes(q + 32 * b), both_lanes(q + 32 * b + 16), {}, {}};
  if constexpr (Fine) {
    in.lo_l = both_lanes(l + 32 * b);
    in.hi_l = both_lanes(l + 32 * b + 16);
  }
  return in;
}

// The 4 partial sums of two rows' blocks against 8-bit codes x_lo, x_hi.
template <DType T>
inline __m256i pair_partials(const std::byte* row0_block, const std::byte* row1_block, __m256i x_lo, __m256i x_hi) {
  using B = typename core::BlockOf<T>::type;
  const std::byte *qs0 = row0_block + offsetof(B, qs), *qs1 = row1_block + offsetof(B, qs);
  if constexpr (T == DType::Q8_0) {
    return _mm256_add_epi32(signed_dot4(both_rows(qs0, qs1), x_lo), signed_dot4(both_rows(qs0 + 16, qs1 + 16), x_hi));
  } else {
    const __m256i qs = both_rows(qs0, qs1);
    const __m256i nibble = _mm256_set1_epi8(0x0F);
    const __m256i lo = _mm256_and_si256(qs, nibble), hi = _mm256_and_si256(_mm256_srli_epi16(qs, 4), nibble);
    const __m256i pairs = _mm256_add_epi16(_mm256_maddubs_epi16(lo, x_lo), _mm256_maddubs_epi16(hi, x_hi));
    return _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
  }
}

// The same against 15-bit codes: 128 · (partials of h) + (partials of l), exact in 32 bits. Q4's
// nibbles are unpacked once for both passes.
template <DType T>
inline __m256i pair_partials_fine(const std::byte* row0_block, const std::byte* row1_block, const BlockInput& x) {
  using B = typename core::BlockOf<T>::type;
  const std::byte *qs0 = row0_block + offsetof(B, qs), *qs1 = row1_block + offsetof(B, qs);
  if constexpr (T == DType::Q8_0) {
    const __m256i w_lo = both_rows(qs0, qs1), w_hi = both_rows(qs0 + 16, qs1 + 16);
    const __m256i h = _mm256_add_epi32(signed_dot4(w_lo, x.lo), signed_dot4(w_hi, x.hi));
    const __m256i l = _mm256_add_epi32(signed_dot4(w_lo, x.lo_l), signed_dot4(w_hi, x.hi_l));
    return _mm256_add_epi32(_mm256_slli_epi32(h, 7), l);
  } else {
    const __m256i qs = both_rows(qs0, qs1);
    const __m256i nibble = _mm256_set1_epi8(0x0F);
    const __m256i lo = _mm256_and_si256(qs, nibble), hi = _mm256_and_si256(_mm256_srli_epi16(qs, 4), nibble);
    // |pairs| ≤ 2 · 2 · 15 · 127 < 2¹⁵ for h, less for l.
    const __m256i h = _mm256_add_epi16(_mm256_maddubs_epi16(lo, x.lo), _mm256_maddubs_epi16(hi, x.hi));
    const __m256i l = _mm256_add_epi16(_mm256_maddubs_epi16(lo, x.lo_l), _mm256_maddubs_epi16(hi, x.hi_l));
    return _mm256_add_epi32(_mm256_madd_epi16(h, _mm256_set1_epi16(128)), _mm256_madd_epi16(l, _mm256_set1_epi16(1)));
  }
}

// The blocks' scales and offset factors as f16 pairs, lane r (of 4; unused lanes 0) for block r:
// Q4_1's (d, m); Q4_0's (d, d), its offset −8 · d applied once at the end (linear_int8.h); Q8_0's
// (d, d), the second unused.
template <DType T, int Blocks>
inline __m128i scale_pairs(const std::byte* const* block) {
  static_assert(offsetof(core::BlockQ4_0, d) == 0 && offsetof(core::BlockQ4_1, d) == 0 &&
                offsetof(core::BlockQ4_1, m) == 2 && offsetof(core::BlockQ8_0, d) == 0);
  if constexpr (T == DType::Q4_1) {
    int32_t dm[4] = {};
    for (int r = 0; r < Blocks; ++r) dm[r] = load_as<int32_t>(block[r]);
    return _mm_setr_epi32(dm[0], dm[1], dm[2], dm[3]);
  } else {
    __m128i d = _mm_cvtsi32_si128(load_as<uint16_t>(block[0]));
    d = _mm_insert_epi16(d, load_as<uint16_t>(block[1]), 1);
    if constexpr (Blocks == 4) {
      d = _mm_insert_epi16(d, load_as<uint16_t>(block[2]), 2);
      d = _mm_insert_epi16(d, load_as<uint16_t>(block[3]), 3);
    }
    return _mm_unpacklo_epi16(d, d);
  }
}

// `Pairs` (1 or 2) pairs of rows, row[2i] and row[2i + 1] (a pointer may repeat: a lone row is
// paired with itself). Lane 2r of `scales` is row r's p = d_w · d_x and lane 2r + 1 its Q4 offset
// term (m_w or d_w) · ds_x, four rows' f16 pairs converted and multiplied in one vector; each p is
// spread over its row's half by a permutation. Fine: 15-bit activations, q the high codes and l the
// low ones (linear_int15.h); else l is unused.
template <DType T, int Pairs, bool Fine>
void pair_rows(const Int8Block* blocks, const int8_t* q, const int8_t* l, const std::byte* const* row, int64_t n,
               float* y, int count, Prefetcher& pf) {
  using B = typename core::BlockOf<T>::type;
  __m256 acc[Pairs];  // lane 4h + m: acc_m of row 2i + h
  for (auto& a : acc) a = _mm256_setzero_ps();
  __m256 off = _mm256_setzero_ps();  // lane 2r + 1: row r's offset sum
  const __m256i spread[2] = {_mm256_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2), _mm256_setr_epi32(4, 4, 4, 4, 6, 6, 6, 6)};
  for (int64_t b = 0; b < n / 32; ++b) {
    pf.advance(static_cast<size_t>(count) * sizeof(B));
    const BlockInput x = block_input<Fine>(q, l, b);
    const std::byte* block[2 * Pairs];
    for (int r = 0; r < 2 * Pairs; ++r) block[r] = row[r] + static_cast<size_t>(b) * sizeof(B);
    const __m128i dms = scale_pairs<T, 2 * Pairs>(block);
    const __m256 x_scales = _mm256_castpd_ps(_mm256_broadcast_sd(reinterpret_cast<const double*>(blocks + b)));
    const __m256 scales = _mm256_mul_ps(_mm256_cvtph_ps(dms), x_scales);
    if constexpr (T != DType::Q8_0) off = _mm256_add_ps(off, scales);  // even lanes unused
#pragma GCC unroll 2
    for (int i = 0; i < Pairs; ++i) {
      __m256i sums;
      if constexpr (Fine)
        sums = pair_partials_fine<T>(block[2 * i], block[2 * i + 1], x);
      else
        sums = pair_partials<T>(block[2 * i], block[2 * i + 1], x.lo, x.hi);
      const __m256 partials = _mm256_cvtepi32_ps(sums);
      const __m256 p = _mm256_permutevar8x32_ps(scales, spread[i]);
      acc[i] = _mm256_add_ps(acc[i], _mm256_mul_ps(p, partials));
    }
  }
  alignas(32) float lanes[8], offsets[8];
  _mm256_store_ps(offsets, off);
  for (int i = 0; i < Pairs; ++i) {
    _mm256_store_ps(lanes, acc[i]);
    for (int h = 0; h < 2 && 2 * i + h < count; ++h) {
      const float* a = lanes + 4 * h;
      const float tree = (a[0] + a[2]) + (a[1] + a[3]), o = offsets[2 * (2 * i + h) + 1];
      y[2 * i + h] = T == DType::Q8_0 ? tree : T == DType::Q4_1 ? tree + o : tree - 8.0f * o;
    }
  }
}

template <DType T, bool Fine>
void rows_of(const Int8Block* blocks, const int8_t* q, const int8_t* l, const std::byte* w, int64_t count, int64_t n,
             float* y, Prefetcher& pf) {
  const size_t row_bytes = dtype_row_bytes(T, n);
  const auto at = [&](int64_t c) { return w + static_cast<size_t>(c) * row_bytes; };
  int64_t c = 0;
  for (; c + 4 <= count; c += 4) {
    const std::byte* row[4] = {at(c), at(c + 1), at(c + 2), at(c + 3)};
    pair_rows<T, 2, Fine>(blocks, q, l, row, n, y + c, 4, pf);
  }
  for (; c < count; c += 2) {
    const int left = static_cast<int>(std::min<int64_t>(2, count - c));
    const std::byte* row[2] = {at(c), at(c + left - 1)};
    pair_rows<T, 1, Fine>(blocks, q, l, row, n, y + c, left, pf);
  }
}

}  // namespace

void quantize_int8(const float* x, int64_t n, Int8Block* blocks, int8_t* q) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* xb = x + 32 * b;
    __m256 v[4], amax = _mm256_setzero_ps(), nonfinite = _mm256_setzero_ps();
    for (int i = 0; i < 4; ++i) {
      v[i] = _mm256_loadu_ps(xb + 8 * i);
      amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v[i]));
      // x − x is 0 for a finite x, NaN for an infinity or a NaN.
      nonfinite = _mm256_or_ps(nonfinite, _mm256_cmp_ps(_mm256_sub_ps(v[i], v[i]), _mm256_setzero_ps(), _CMP_NEQ_UQ));
    }
    if (!_mm256_testz_ps(nonfinite, nonfinite)) {
      blocks[b] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::quiet_NaN()};
      std::memset(q + 32 * b, 0, 32);
      continue;
    }
    // The scalar arithmetic of the portable quantiser: d = max|x| / 127, codes = round(x · (1 / d)).
    const float d = lanes_max(amax) / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const __m256 scale = _mm256_set1_ps(id), lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
    __m256i codes[4];
    for (int i = 0; i < 4; ++i) {
      const __m256 r = _mm256_round_ps(_mm256_mul_ps(v[i], scale), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      codes[i] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(r, lo), hi));
    }
    // Packing interleaves 128-bit lanes; the permutation puts the 32 codes back in order.
    const __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(codes[0], codes[1]), _mm256_packs_epi32(codes[2], codes[3]));
    const __m256i ordered = _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + 32 * b), ordered);
    const __m256i sums = _mm256_add_epi32(_mm256_add_epi32(codes[0], codes[1]), _mm256_add_epi32(codes[2], codes[3]));
    const __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sums), _mm256_extracti128_si256(sums, 1));
    const __m128i s2 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(1, 0, 3, 2)));
    const int32_t sum = _mm_cvtsi128_si32(_mm_add_epi32(s2, _mm_shuffle_epi32(s2, _MM_SHUFFLE(2, 3, 0, 1))));
    blocks[b] = {d, d * static_cast<float>(sum)};
  }
}

void int8_rows_product(DType t, const Int8Block* blocks, const int8_t* q, const std::byte* w, int64_t rows, int64_t n,
                       float* y, Prefetcher& pf) {
  switch (t) {
    case DType::Q8_0: return rows_of<DType::Q8_0, false>(blocks, q, nullptr, w, rows, n, y, pf);
    case DType::Q4_0: return rows_of<DType::Q4_0, false>(blocks, q, nullptr, w, rows, n, y, pf);
    case DType::Q4_1: return rows_of<DType::Q4_1, false>(blocks, q, nullptr, w, rows, n, y, pf);
    default: return int8_block_rows_product(t, blocks, q, w, rows, n, y, pf);
  }
}

void int15_rows_product(DType t, const Int8Block* blocks, const int8_t* h, const int8_t* l, const std::byte* w,
                        int64_t rows, int64_t n, float* y, Prefetcher& pf) {
  switch (t) {
    case DType::Q8_0: return rows_of<DType::Q8_0, true>(blocks, h, l, w, rows, n, y, pf);
    case DType::Q4_0: return rows_of<DType::Q4_0, true>(blocks, h, l, w, rows, n, y, pf);
    default: return rows_of<DType::Q4_1, true>(blocks, h, l, w, rows, n, y, pf);
  }
}

}  // namespace kvinfer::cpu::avx2

KVINFER_AVX2_END

#else  // not x86: cpu_has_avx2_fma_f16c() is false, so this is never called

#include <cstdlib>

namespace kvinfer::cpu::avx2 {
void int8_rows_product(DType, const Int8Block*, const int8_t*, const std::byte*, int64_t, int64_t, float*, Prefetcher&) {
  std::abort();
}
void quantize_int8(const float*, int64_t, Int8Block*, int8_t*) { std::abort(); }
void int15_rows_product(DType, const Int8Block*, const int8_t*, const int8_t*, const std::byte*, int64_t, int64_t,
                        float*, Prefetcher&) {
  std::abort();
}
}  // namespace kvinfer::cpu::avx2

#endif
