// Decode products with ggml-quantised weights (linear_avx2.h: dot_quant_rows): each 32-value
// group of a weight row is decoded in registers and multiplied straight into the row's 8-lane
// accumulator, so a decode step reads each weight once, in its stored bytes, and writes nothing
// back (the prefill path widens 16 rows to f32 first, then reuses them for every input row).
//
// Exactness. core/quant.h's dequantisers compute every value as one exact product followed by at
// most one rounded addition: (f32)q · d (Q8_0, Q4_0, Q5_0), (f32)q · d + m (Q4_1, Q5_1),
// (d·sc) · q − dmin·mn (Q4_K, Q5_K; d·sc and dmin·mn exact in scalar f32), (d·sc) · (q − 32)
// (Q6_K). A fused multiply-add rounds once, after the exact product, so fma(q, d, m) is that very
// value; every weight here therefore has the bits cpu::to_f32 gives it. The products then follow
// dot()'s order exactly (lane l takes k ≡ l mod 8 in increasing k; rows are whole blocks, so there
// is no tail; the fixed ((0+4)+(1+5))+((2+6)+(3+7)) at the end): the same bits as widening the
// row and calling dot(), which is what batch invariance needs.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/quant.h"
#include "cpu/linear_avx2.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "cpu/avx2_target.h"

KVINFER_AVX2_BEGIN

#include "cpu/avx2_inline.h"

namespace kvinfer::cpu::avx2 {

namespace {

// The 4 × 8 values of a group as floats, from 32 codes held one per byte (values 0..15 in the
// low 128 bits, 16..31 in the high ones), signed or not.
template <bool Signed>
inline void codes_to_f32(__m256i q, __m256 v[4]) {
  const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
  const __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
  for (int i = 0; i < 4; ++i)
    v[i] = _mm256_cvtepi32_ps(Signed ? _mm256_cvtepi8_epi32(parts[i]) : _mm256_cvtepu8_epi32(parts[i]));
}

// The vpshufb control that puts byte First + i of each 16-byte half into 32-bit lane i, zeros
// in the lane's other bytes.
template <int First>
inline __m256i byte_lanes() {
  constexpr auto c = [](int i) { return static_cast<int>(0x80808000u | static_cast<unsigned>(First + i)); };
  return _mm256_setr_epi32(c(0), c(1), c(2), c(3), c(4), c(5), c(6), c(7));
}

// A Q4_K or Q5_K superblock's 8 group scales d·sc and minima −dmin·mn (each one f32 product, as
// core::dequantize_group computes them), decoded once for its 8 groups.
struct KScales {
  float d1[8], neg_m1[8];
};

template <DType T>
inline KScales k_scales(const std::byte* b) {
  using B = typename core::BlockOf<T>::type;
  KScales k;
  const float d = half_at(b + offsetof(B, d)), dmin = half_at(b + offsetof(B, dmin));
  for (int g = 0; g < 8; ++g) {
    int sc, mn;
    core::k_scale_min(b + offsetof(B, scales), g, sc, mn);
    k.d1[g] = d * static_cast<float>(sc);
    k.neg_m1[g] = -(dmin * static_cast<float>(mn));
  }
  return k;
}

// Values 32g .. 32g + 31 of the block at b, as core::dequantize_group<T> computes them (the
// K-quants' scales from `ks`, their superblock's k_scales).
template <DType T>
inline void group_values(const std::byte* b, int g, [[maybe_unused]] const KScales& ks, __m256 v[4]) {
  using B = typename core::BlockOf<T>::type;
  if constexpr (T == DType::Q8_0) {
    const __m256 d = _mm256_set1_ps(half_at(b + offsetof(B, d)));
    for (int i = 0; i < 4; ++i) {
      const __m128i q8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b + offsetof(B, qs) + 8 * i));
      v[i] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q8)), d);
    }
  } else if constexpr (T == DType::Q4_0 || T == DType::Q4_1 || T == DType::Q5_0 || T == DType::Q5_1) {
    constexpr bool kHasMin = T == DType::Q4_1 || T == DType::Q5_1;
    constexpr bool kFive = T == DType::Q5_0 || T == DType::Q5_1;
    constexpr char kOffset = kHasMin ? 0 : (kFive ? 16 : 8);
    // The f16 scale (and Q4_1/Q5_1's minimum after it) converted in one instruction.
    __m256 d, m;
    if constexpr (kHasMin) {
      static_assert(offsetof(B, m) == offsetof(B, d) + 2);
      int32_t dm_bits;
      std::memcpy(&dm_bits, b + offsetof(B, d), sizeof dm_bits);
      const __m128 dm = _mm_cvtph_ps(_mm_cvtsi32_si128(dm_bits));
      d = _mm256_broadcastss_ps(dm);
      m = _mm256_broadcastss_ps(_mm_movehdup_ps(dm));
    } else {
      d = _mm256_set1_ps(half_at(b + offsetof(B, d)));
    }
    if constexpr (kFive) {
      const __m128i qs = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + offsetof(B, qs)));
      __m256i q = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(qs, 4), qs), _mm256_set1_epi8(0x0F));
      uint32_t qh;
      std::memcpy(&qh, b + offsetof(B, qh), sizeof qh);
      q = _mm256_or_si256(q, bit4_from_bits32(qh));
      q = _mm256_sub_epi8(q, _mm256_set1_epi8(kOffset));
      codes_to_f32<kOffset != 0>(q, v);
    } else {
      // Q4: bytes 0..7 (8..15) of qs each into a 32-bit lane with one shuffle (both halves of the
      // register hold all 16 bytes); a lane's low nibble is value j, its high nibble value j + 16.
      const __m256i qs =
          _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + offsetof(B, qs))));
      const __m256i bytes[2] = {_mm256_shuffle_epi8(qs, byte_lanes<0>()), _mm256_shuffle_epi8(qs, byte_lanes<8>())};
      const __m256i low4 = _mm256_set1_epi32(0x0F);
      __m256i q[4] = {_mm256_and_si256(bytes[0], low4), _mm256_and_si256(bytes[1], low4),
                      _mm256_srli_epi32(bytes[0], 4), _mm256_srli_epi32(bytes[1], 4)};
      for (int i = 0; i < 4; ++i) {
        if constexpr (kOffset != 0) q[i] = _mm256_sub_epi32(q[i], _mm256_set1_epi32(kOffset));
        v[i] = _mm256_cvtepi32_ps(q[i]);
      }
    }
    if constexpr (kHasMin) {
      for (int i = 0; i < 4; ++i) v[i] = _mm256_fmadd_ps(v[i], d, m);  // q·d exact: one rounding, as q·d + m
    } else {
      for (int i = 0; i < 4; ++i) v[i] = _mm256_mul_ps(v[i], d);
    }
  } else if constexpr (T == DType::Q4_K || T == DType::Q5_K) {
    const __m256 d1 = _mm256_set1_ps(ks.d1[g]), neg_m1 = _mm256_set1_ps(ks.neg_m1[g]);
    const __m256i qs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + offsetof(B, qs) + 32 * (g / 2)));
    __m256i q = _mm256_and_si256(g % 2 ? _mm256_srli_epi16(qs, 4) : qs, _mm256_set1_epi8(0x0F));
    if constexpr (T == DType::Q5_K) {
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + offsetof(B, qh)));
      const __m256i bit = _mm256_set1_epi8(static_cast<char>(1 << g));
      q = _mm256_or_si256(q, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bit), bit), _mm256_set1_epi8(0x10)));
    }
    codes_to_f32<false>(q, v);
    for (int i = 0; i < 4; ++i) v[i] = _mm256_fmadd_ps(d1, v[i], neg_m1);  // d1·q exact: as d1·q − m1
  } else {
    static_assert(T == DType::Q6_K, "not a quantised type");
    const int h = g / 4, k = g % 4;
    const __m256i ql = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + offsetof(B, ql) + 64 * h + 32 * (k % 2)));
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + offsetof(B, qh) + 32 * h));
    const __m256i lo = _mm256_and_si256(k / 2 ? _mm256_srli_epi16(ql, 4) : ql, _mm256_set1_epi8(0x0F));
    const __m256i hi = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * k)), _mm256_set1_epi8(0x03));
    const __m256i q = _mm256_sub_epi8(_mm256_or_si256(lo, _mm256_slli_epi16(hi, 4)), _mm256_set1_epi8(32));
    codes_to_f32<true>(q, v);
    const float d = half_at(b + offsetof(B, d));
    const auto* scales = reinterpret_cast<const int8_t*>(b + offsetof(B, scales)) + 8 * h + 2 * k;
    const __m256 ds0 = _mm256_set1_ps(d * static_cast<float>(scales[0]));  // values 0..15
    const __m256 ds1 = _mm256_set1_ps(d * static_cast<float>(scales[1]));  // values 16..31
    for (int i = 0; i < 4; ++i) v[i] = _mm256_mul_ps(i < 2 ? ds0 : ds1, v[i]);
  }
}

// y[r] = dot(x, row r) for R consecutive rows of n values: R accumulators, one per row, share
// each group's 4 input vectors.
template <DType T, int R>
void rows_product(const float* x, const std::byte* w, size_t row_bytes, int64_t n, float* y, Prefetcher& pf) {
  constexpr int64_t kElems = dtype_block(T).elements, kBytes = dtype_block(T).bytes;
  constexpr int kGroups = static_cast<int>(kElems) / core::kQuantGroup;
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  constexpr bool kScales = T == DType::Q4_K || T == DType::Q5_K;
  for (int64_t blk = 0; blk < n / kElems; ++blk) {
    KScales scales[kScales ? R : 1];  // each row's superblock scales
    if constexpr (kScales)
      for (int r = 0; r < R; ++r)
        scales[r] = k_scales<T>(w + static_cast<size_t>(r) * row_bytes + static_cast<size_t>(blk * kBytes));
    for (int g = 0; g < kGroups; ++g) {
      pf.advance(R * kBytes / kGroups);
      const float* xg = x + blk * kElems + core::kQuantGroup * g;
      const __m256 xv[4] = {_mm256_loadu_ps(xg), _mm256_loadu_ps(xg + 8), _mm256_loadu_ps(xg + 16),
                            _mm256_loadu_ps(xg + 24)};
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {  // unrolled: the accumulators stay in registers
        __m256 v[4];
        group_values<T>(w + static_cast<size_t>(r) * row_bytes + static_cast<size_t>(blk * kBytes), g,
                        scales[kScales ? r : 0], v);
        for (int i = 0; i < 4; ++i) acc[r] = _mm256_fmadd_ps(xv[i], v[i], acc[r]);
      }
    }
  }
  for (int r = 0; r < R; ++r) y[r] = lanes_sum(acc[r]);
}

template <DType T>
void rows_of(const float* x, const std::byte* w, int64_t rows, int64_t n, float* y, Prefetcher& pf) {
  const size_t row_bytes = dtype_row_bytes(T, n);
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) rows_product<T, 4>(x, w + static_cast<size_t>(r) * row_bytes, row_bytes, n, y + r, pf);
  for (; r < rows; ++r) rows_product<T, 1>(x, w + static_cast<size_t>(r) * row_bytes, row_bytes, n, y + r, pf);
}

}  // namespace

bool dot_quant_rows(DType t, const float* x, const std::byte* w, int64_t rows, int64_t n, float* y, Prefetcher& pf) {
  switch (t) {
    case DType::Q8_0: rows_of<DType::Q8_0>(x, w, rows, n, y, pf); return true;
    case DType::Q4_0: rows_of<DType::Q4_0>(x, w, rows, n, y, pf); return true;
    case DType::Q4_1: rows_of<DType::Q4_1>(x, w, rows, n, y, pf); return true;
    case DType::Q5_0: rows_of<DType::Q5_0>(x, w, rows, n, y, pf); return true;
    case DType::Q5_1: rows_of<DType::Q5_1>(x, w, rows, n, y, pf); return true;
    case DType::Q4_K: rows_of<DType::Q4_K>(x, w, rows, n, y, pf); return true;
    case DType::Q5_K: rows_of<DType::Q5_K>(x, w, rows, n, y, pf); return true;
    case DType::Q6_K: rows_of<DType::Q6_K>(x, w, rows, n, y, pf); return true;
    default: return false;
  }
}

}  // namespace kvinfer::cpu::avx2

KVINFER_AVX2_END

#else  // not x86: cpu_has_avx2_fma_f16c() is false, so this is never called

namespace kvinfer::cpu::avx2 {
bool dot_quant_rows(DType, const float*, const std::byte*, int64_t, int64_t, float*, Prefetcher&) { return false; }
}  // namespace kvinfer::cpu::avx2

#endif
