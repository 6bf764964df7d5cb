// Prefill's 8-bit (and 15-bit) activation products on AVX2 (linear_avx2.h): each block of weight
// rows unpacked once (int8_prepared.h), then every input row against it, with the arithmetic (and the bits) of
// linear_int8_avx2.cpp's one-row kernels, less their unpacking: a Q4 pair of rows takes 8
// instructions a block instead of 13.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/quant.h"
#include "cpu/int8_prepared.h"
#include "cpu/linear_avx2.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "cpu/avx2_target.h"

KVINFER_AVX2_BEGIN

#include "cpu/avx2_inline.h"

namespace kvinfer::cpu::avx2 {

namespace {

// Q8_0's record or Q4's.
template <DType T>
using Prepared = std::conditional_t<T == DType::Q8_0, Q8Prepared, Q4Prepared>;

// Q8_0's negc is left unwritten: these tiles take the codes' signs instead (vpsignb).
template <DType T>
void prepare(const std::byte* w, int64_t rows, int64_t in, Prepared<T>* out) {
  using B = typename core::BlockOf<T>::type;
  const size_t row_bytes = dtype_row_bytes(T, in);
  const __m128i low4 = _mm_set1_epi8(0x0F);
  for (int64_t b = 0; b < in / 32; ++b) {
    Prepared<T>& o = out[b];
    const std::byte* first = w + static_cast<size_t>(b) * sizeof(B);
    alignas(32) uint16_t dh[16] = {}, fh[16] = {};  // the rows' d_w and offset factors, f16
    for (int64_t r = 0; r < 16; ++r) {
      const std::byte* block = first + static_cast<size_t>(r) * row_bytes;
      __m128i qs = _mm_setzero_si128(), qs_hi = _mm_setzero_si128();  // Q8_0: codes 0..15, 16..31
      if (r < rows) {
        qs = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + offsetof(B, qs)));
        if constexpr (T == DType::Q8_0)
          qs_hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + offsetof(B, qs) + 16));
        std::memcpy(&dh[r], block + offsetof(B, d), sizeof dh[r]);
        if constexpr (T == DType::Q4_1) {
          std::memcpy(&fh[r], block + offsetof(core::BlockQ4_1, m), sizeof fh[r]);
        } else {
          fh[r] = dh[r];
        }
      }
      if constexpr (T == DType::Q8_0) {
        _mm_store_si128(reinterpret_cast<__m128i*>(o.lo[r / 4] + 16 * (r % 4)), qs);
        _mm_store_si128(reinterpret_cast<__m128i*>(o.hi[r / 4] + 16 * (r % 4)), qs_hi);
      } else {
        _mm_store_si128(reinterpret_cast<__m128i*>(o.lo[r / 4] + 16 * (r % 4)), _mm_and_si128(qs, low4));
        _mm_store_si128(reinterpret_cast<__m128i*>(o.hi[r / 4] + 16 * (r % 4)),
                        _mm_and_si128(_mm_srli_epi16(qs, 4), low4));
      }
    }
    for (int h = 0; h < 2; ++h) {
      const __m256 d = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(dh + 8 * h)));
      if constexpr (T != DType::Q8_0)
        _mm256_store_ps(o.f + 8 * h, _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(fh + 8 * h))));
      alignas(32) float ds[8];
      _mm256_store_ps(ds, d);
      for (int i = 0; i < 8; ++i) _mm_store_ps(o.d[2 * h + i / 4] + 4 * (i % 4), _mm_set1_ps(ds[i]));
    }
  }
}

// One input row × the 8 weight rows 8h .. 8h + 7 (those below `rows`): 4 pairs of rows, each
// pair's 4 partial sums a 128-bit lane, as linear_int8_avx2.cpp's pair_rows computes them. Fine:
// 15-bit activations (linear_int15.h), q the high codes and l the low ones; else l is unused.
template <DType T, bool Fine>
void half(const Prepared<T>* wb, int64_t nb, int h, const Int8Block* blocks, const int8_t* q, const int8_t* l,
          int64_t rows, float* y) {
  __m256 acc[4];  // acc[j], lane 4i + m: acc_m of weight row 8h + 2j + i
  for (auto& a : acc) a = _mm256_setzero_ps();
  __m256 off = _mm256_setzero_ps();  // lane i: row 8h + i's offset sum
  const __m256i ones = _mm256_set1_epi16(1), k128 = _mm256_set1_epi16(128);
  for (int64_t b = 0; b < nb; ++b) {
    const Prepared<T>& o = wb[b];
    const __m256i x_lo = both_lanes(q + 32 * b), x_hi = both_lanes(q + 32 * b + 16);
    __m256i l_lo = _mm256_setzero_si256(), l_hi = _mm256_setzero_si256();
    if constexpr (Fine) {
      l_lo = both_lanes(l + 32 * b);
      l_hi = both_lanes(l + 32 * b + 16);
    }
    const __m256 dx = _mm256_set1_ps(blocks[b].d);
    for (int j = 0; j < 4; ++j) {
      const int g = 2 * h + j / 2, at = 32 * (j % 2);
      const __m256i lo = _mm256_load_si256(reinterpret_cast<const __m256i*>(o.lo[g] + at));
      const __m256i hi = _mm256_load_si256(reinterpret_cast<const __m256i*>(o.hi[g] + at));
      __m256i sums;
      if constexpr (T == DType::Q8_0) {  // each half apart: two pairs of products would not fit 16 bits
        sums = _mm256_add_epi32(signed_dot4(lo, x_lo), signed_dot4(hi, x_hi));
        if constexpr (Fine)  // 128 · (the high codes' partials) + the low codes'
          sums = _mm256_add_epi32(_mm256_slli_epi32(sums, 7),
                                  _mm256_add_epi32(signed_dot4(lo, l_lo), signed_dot4(hi, l_hi)));
      } else {  // |pairs| ≤ 2 · 2 · 15 · 127 < 2¹⁵: exact in 16 bits
        const __m256i pairs = _mm256_add_epi16(_mm256_maddubs_epi16(lo, x_lo), _mm256_maddubs_epi16(hi, x_hi));
        if constexpr (Fine) {
          const __m256i low = _mm256_add_epi16(_mm256_maddubs_epi16(lo, l_lo), _mm256_maddubs_epi16(hi, l_hi));
          sums = _mm256_add_epi32(_mm256_madd_epi16(pairs, k128), _mm256_madd_epi16(low, ones));
        } else {
          sums = _mm256_madd_epi16(pairs, ones);
        }
      }
      const __m256 partials = _mm256_cvtepi32_ps(sums);
      const __m256 p = _mm256_mul_ps(_mm256_load_ps(o.d[g] + at / 4), dx);
      acc[j] = _mm256_add_ps(acc[j], _mm256_mul_ps(p, partials));
    }
    if constexpr (T != DType::Q8_0)
      off = _mm256_add_ps(off, _mm256_mul_ps(_mm256_load_ps(o.f + 8 * h), _mm256_set1_ps(blocks[b].ds)));
  }
  alignas(32) float lanes[4][8], offsets[8];
  for (int j = 0; j < 4; ++j) _mm256_store_ps(lanes[j], acc[j]);
  _mm256_store_ps(offsets, off);
  for (int64_t c = 0; c < rows; ++c) {
    const float* a = lanes[c / 2] + 4 * (c % 2);
    const float tree = (a[0] + a[2]) + (a[1] + a[3]);
    y[c] = T == DType::Q8_0 ? tree : T == DType::Q4_1 ? tree + offsets[c] : tree - 8.0f * offsets[c];
  }
}

template <DType T, bool Fine = false>
void products(const Prepared<T>* wb, int64_t rows, int64_t in, const Int8Block* blocks, const int8_t* q,
              const int8_t* l, int64_t n, float* y, int64_t ldy) {
  const int64_t nb = in / 32;
  for (int h = 0; h < 2 && 8 * h < rows; ++h)  // each half's records stay in L1 for every input row
    for (int64_t t = 0; t < n; ++t)
      half<T, Fine>(wb, nb, h, blocks + t * nb, q + t * in, Fine ? l + t * in : nullptr,
                    std::min<int64_t>(8, rows - 8 * h), y + t * ldy + 8 * h);
}

}  // namespace

void int8_prepare(DType t, const std::byte* w, int64_t rows, int64_t in, std::byte* prep) {
  switch (t) {
    case DType::Q8_0: return prepare<DType::Q8_0>(w, rows, in, reinterpret_cast<Q8Prepared*>(prep));
    case DType::Q4_0: return prepare<DType::Q4_0>(w, rows, in, reinterpret_cast<Q4Prepared*>(prep));
    case DType::Q4_1: return prepare<DType::Q4_1>(w, rows, in, reinterpret_cast<Q4Prepared*>(prep));
    default: return int8_block_prepare(t, w, rows, in, prep);
  }
}

void int8_prepared_products(DType t, const std::byte* prep, int64_t rows, int64_t in, const Int8Block* blocks,
                            const int8_t* q, int64_t n, float* y, int64_t ldy) {
  switch (t) {
    case DType::Q8_0:
      return products<DType::Q8_0>(reinterpret_cast<const Q8Prepared*>(prep), rows, in, blocks, q, nullptr, n, y, ldy);
    case DType::Q4_0:
      return products<DType::Q4_0>(reinterpret_cast<const Q4Prepared*>(prep), rows, in, blocks, q, nullptr, n, y, ldy);
    case DType::Q4_1:
      return products<DType::Q4_1>(reinterpret_cast<const Q4Prepared*>(prep), rows, in, blocks, q, nullptr, n, y, ldy);
    default: return int8_block_prepared_products(t, prep, rows, in, blocks, q, n, y, ldy);
  }
}

void int15_prepared_products(DType t, const std::byte* prep, int64_t rows, int64_t in, const Int8Block* blocks,
                             const int8_t* h, const int8_t* l, int64_t n, float* y, int64_t ldy) {
  switch (t) {
    case DType::Q8_0:
      return products<DType::Q8_0, true>(reinterpret_cast<const Q8Prepared*>(prep), rows, in, blocks, h, l, n, y, ldy);
    case DType::Q4_0:
      return products<DType::Q4_0, true>(reinterpret_cast<const Q4Prepared*>(prep), rows, in, blocks, h, l, n, y, ldy);
    default:
      return products<DType::Q4_1, true>(reinterpret_cast<const Q4Prepared*>(prep), rows, in, blocks, h, l, n, y, ldy);
  }
}

}  // namespace kvinfer::cpu::avx2

KVINFER_AVX2_END

#else  // not x86: cpu_has_avx2_fma_f16c() is false, so these are never called

#include <cstdlib>

namespace kvinfer::cpu::avx2 {
void int8_prepare(DType, const std::byte*, int64_t, int64_t, std::byte*) { std::abort(); }
void int8_prepared_products(DType, const std::byte*, int64_t, int64_t, const Int8Block*, const int8_t*, int64_t, float*,
                            int64_t) {
  std::abort();
}
void int15_prepared_products(DType, const std::byte*, int64_t, int64_t, const Int8Block*, const int8_t*, const int8_t*,
                             int64_t, float*, int64_t) {
  std::abort();
}
}  // namespace kvinfer::cpu::avx2

#endif
