// AVX2 products with 8-bit activations (linear_int8.h gives the arithmetic, which the portable
// code in linear_int8.cpp spells out): a weight block times an input block is one vpmaddubsw and
// one vpmaddwd, exact in integers (no pair sum exceeds 2 · 128 · 127 < 2¹⁵), then one scale.
#include "cpu/linear_avx2.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

#include "core/quant.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

#include "cpu/avx2_inline.h"

namespace kvinfer::cpu::avx2 {

namespace {

// The 8 partial sums I_l of a weight block times the input codes xq.
template <DType T>
inline __m256i block_partials(const std::byte* block, __m256i xq) {
  using B = typename core::BlockOf<T>::type;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i prod;
  if constexpr (T == DType::Q8_0) {
    const __m256i wq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + offsetof(B, qs)));
    prod = _mm256_maddubs_epi16(_mm256_abs_epi8(wq), _mm256_sign_epi8(xq, wq));  // |w| · (±x) = w · x
  } else {
    const __m128i qs = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + offsetof(B, qs)));
    // Values 0..15: low nibbles of qs[0..15]; 16..31: high nibbles (bytes in value order).
    __m256i wq = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(qs, 4), qs), _mm256_set1_epi8(0x0F));
    if constexpr (T == DType::Q4_0) {
      wq = _mm256_sub_epi8(wq, _mm256_set1_epi8(8));
      prod = _mm256_maddubs_epi16(_mm256_abs_epi8(wq), _mm256_sign_epi8(xq, wq));
    } else {
      prod = _mm256_maddubs_epi16(wq, xq);  // unsigned 0..15 times signed codes
    }
  }
  return _mm256_madd_epi16(prod, ones);
}

template <DType T, int R>
void rows(const Int8Block* blocks, const int8_t* q, const std::byte* w, size_t row_bytes, int64_t n, float* y,
          Prefetcher& pf) {
  using B = typename core::BlockOf<T>::type;
  __m256 acc[R];
  float off[R];
  for (int r = 0; r < R; ++r) {
    acc[r] = _mm256_setzero_ps();
    off[r] = 0.0f;
  }
  for (int64_t b = 0; b < n / 32; ++b) {
    pf.advance(R * sizeof(B));
    const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32 * b));
    const float dx = blocks[b].d;
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {  // unrolled: the accumulators stay in registers
      const std::byte* block = w + static_cast<size_t>(r) * row_bytes + static_cast<size_t>(b) * sizeof(B);
      const __m256 partials = _mm256_cvtepi32_ps(block_partials<T>(block, xq));
      const __m256 p = _mm256_set1_ps(half_at(block + offsetof(B, d)) * dx);
      acc[r] = _mm256_add_ps(acc[r], _mm256_mul_ps(p, partials));
      if constexpr (T == DType::Q4_1) {
        const float term = half_at(block + offsetof(B, m)) * blocks[b].ds;
        off[r] = off[r] + term;
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    y[r] = lanes_sum(acc[r]) + off[r];
  }
}

template <DType T>
void rows_of(const Int8Block* blocks, const int8_t* q, const std::byte* w, int64_t count, int64_t n, float* y,
             Prefetcher& pf) {
  const size_t row_bytes = dtype_row_bytes(T, n);
  int64_t c = 0;
  for (; c + 4 <= count; c += 4) rows<T, 4>(blocks, q, w + static_cast<size_t>(c) * row_bytes, row_bytes, n, y + c, pf);
  for (; c < count; ++c) rows<T, 1>(blocks, q, w + static_cast<size_t>(c) * row_bytes, row_bytes, n, y + c, pf);
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
    case DType::Q8_0: return rows_of<DType::Q8_0>(blocks, q, w, rows, n, y, pf);
    case DType::Q4_0: return rows_of<DType::Q4_0>(blocks, q, w, rows, n, y, pf);
    default: return rows_of<DType::Q4_1>(blocks, q, w, rows, n, y, pf);
  }
}

}  // namespace kvinfer::cpu::avx2

#pragma GCC pop_options

#else  // not x86: cpu_has_avx2_fma_f16c() is false, so this is never called

#include <cstdlib>

namespace kvinfer::cpu::avx2 {
void int8_rows_product(DType, const Int8Block*, const int8_t*, const std::byte*, int64_t, int64_t, float*, Prefetcher&) {
  std::abort();
}
void quantize_int8(const float*, int64_t, Int8Block*, int8_t*) { std::abort(); }
}  // namespace kvinfer::cpu::avx2

#endif
