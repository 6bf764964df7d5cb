// AVX2 products with 8-bit super-block activations for Q4_K, Q5_K and Q6_K weights (linear_int8.h
// gives the arithmetic, int8_blocks.h how a super-block reads, llama.cpp's q4_K·q8_K its shape): a
// 32-value chunk is vpmaddubsw then vpmaddwd by the chunk's scale, summed in integers over the
// super-block (Q6_K: each half), then one conversion and one fused multiply-add; the mins (Q6_K's
// −32) once a super-block from the input's 16-value sums. Decode decodes each super-block in
// registers, read once; prefill unpacks 16 rows once (Int8SuperPrepared) for every input row.
#include "cpu/linear_avx2.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

#include "core/quant.h"
#include "cpu/int8_blocks.h"
#include "cpu/int8_prepared.h"

#include "cpu/avx2_target.h"

KVINFER_AVX2_BEGIN

#include "cpu/avx2_inline.h"

namespace kvinfer::cpu::avx2 {

namespace {

inline __m256i load32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// Σ_{j = 4l}^{4l+3} m · u_j · q_j by lanes l, m the 16-bit multipliers vpmaddwd takes.
inline __m256i chunk(__m256i u, __m256i x, __m256i m) { return _mm256_madd_epi16(_mm256_maddubs_epi16(u, x), m); }

// The multipliers of a super-block's chunks and its offset multipliers, in registers.
template <DType T>
struct SuperScales {
  __m256i table_lo, table_hi;  // int16 scales to shuffle chunk multipliers from (both lanes alike)
  __m256i n;                   // the offset multipliers n_0 .. n_15
  float d, dmin;

  void load(const std::byte* blk) {
    if constexpr (T == DType::Q6_K) {
      const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + offsetof(core::BlockQ6_K, scales)));
      n = _mm256_cvtepi8_epi16(sc);
      table_lo = _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(sc));
      table_hi = _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(_mm_srli_si128(sc, 8)));
      d = dmin = half_at(blk + offsetof(core::BlockQ6_K, d));
    } else {
      using B = typename core::BlockOf<T>::type;
      alignas(16) uint8_t sm[16];
      k_scales_mins(blk + offsetof(B, scales), sm);
      const __m128i bytes = _mm_load_si128(reinterpret_cast<const __m128i*>(sm));
      table_lo = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(bytes));
      // mins 0..7, each twice (n_{2g} = n_{2g+1} = mn_g)
      n = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(bytes, _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15)));
      d = half_at(blk + offsetof(B, d));
      dmin = half_at(blk + offsetof(B, dmin));
    }
  }
  // Chunk k's multipliers: m_{k,0} in lanes 0..7, m_{k,1} in 8..15.
  __m256i multipliers(int k) const {
    // The vpshufb control that repeats 16-bit lane i of a 128-bit lane.
    const auto lane16 = [](int i) { return _mm_set1_epi16(static_cast<int16_t>((2 * i) | ((2 * i + 1) << 8))); };
    if constexpr (T == DType::Q6_K) {  // scales 2k and 2k + 1: 16-bit lanes (2k) mod 8 and the next of a table
      const __m256i idx = _mm256_set_m128i(lane16((2 * k + 1) % 8), lane16((2 * k) % 8));
      return _mm256_shuffle_epi8(k < 4 ? table_lo : table_hi, idx);
    } else {
      return _mm256_shuffle_epi8(table_lo, _mm256_broadcastsi128_si256(lane16(k)));
    }
  }
};

// The 8 chunks' codes of a super-block, two at a time: chunk 2k and 2k + 1 (Q4_K/Q5_K groups 2k
// and 2k + 1; Q6_K parts of a half). `hi` carries Q5_K's fifth bits from pair to pair.
template <DType T>
inline void chunk_pair(const std::byte* blk, int k, __m256i& hi, __m256i& u0, __m256i& u1) {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  if constexpr (T == DType::Q6_K) {  // pair k: parts 2(k%2), 2(k%2)+1 of half k/2
    const int half = k / 2, p = 2 * (k % 2);
    const __m256i qh = load32(blk + offsetof(core::BlockQ6_K, qh) + 32 * half);
    const __m256i bits45 = _mm256_set1_epi8(0x30);
    const std::byte* ql = blk + offsetof(core::BlockQ6_K, ql) + 64 * half;
    const __m256i ql0 = load32(ql), ql1 = load32(ql + 32);
    if (p == 0) {  // parts 0 and 1: low nibbles of ql[0..31] and ql[32..63], qh bits 0-1 and 2-3
      u0 = _mm256_or_si256(_mm256_and_si256(ql0, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), bits45));
      u1 = _mm256_or_si256(_mm256_and_si256(ql1, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), bits45));
    } else {  // parts 2 and 3: high nibbles, qh bits 4-5 and 6-7
      u0 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4), _mm256_and_si256(qh, bits45));
      u1 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4),
                           _mm256_and_si256(_mm256_srli_epi16(qh, 2), bits45));
    }
  } else {
    using B = typename core::BlockOf<T>::type;
    const __m256i qs = load32(blk + offsetof(B, qs) + 32 * k);
    u0 = _mm256_and_si256(qs, low4);
    u1 = _mm256_and_si256(_mm256_srli_epi16(qs, 4), low4);
    if constexpr (T == DType::Q5_K) {
      const __m256i one = _mm256_set1_epi8(1);
      if (k == 0) hi = load32(blk + offsetof(B, qh));
      u0 = _mm256_or_si256(u0, _mm256_slli_epi16(_mm256_and_si256(hi, one), 4));
      u1 = _mm256_or_si256(u1, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hi, 1), one), 4));
      hi = _mm256_srli_epi16(hi, 2);  // the next pair's bits in bits 0 and 1
    }
  }
}

template <DType T>
inline float finish(__m256 acc, __m256 moff) {
  return T == DType::Q6_K ? lanes_sum(acc) - 32.0f * lanes_sum(moff) : lanes_sum(acc) - lanes_sum(moff);
}

// Decode: `Rows` (1 or 2) weight rows against one input row.
template <DType T, int Rows>
void super_rows(const Int8Super* supers, const int8_t* q, const std::byte* const* row, int64_t n, float* y,
                Prefetcher& pf) {
  using B = typename core::BlockOf<T>::type;
  __m256 acc[Rows], moff[Rows];
  for (int r = 0; r < Rows; ++r) acc[r] = moff[r] = _mm256_setzero_ps();
  for (int64_t s = 0; s < n / 256; ++s) {
    pf.advance(Rows * sizeof(B));
    const int8_t* xs = q + 256 * s;
    const float dx = supers[s].d;
    const __m256i sums = load32(supers[s].sums);
    SuperScales<T> sc[Rows];
    const std::byte* blk[Rows];
    __m256i i32[Rows], hi[Rows];
    for (int r = 0; r < Rows; ++r) {
      blk[r] = row[r] + static_cast<size_t>(s) * sizeof(B);
      sc[r].load(blk[r]);
      i32[r] = hi[r] = _mm256_setzero_si256();
    }
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const __m256i x0 = load32(xs + 64 * k), x1 = load32(xs + 64 * k + 32);
#pragma GCC unroll 2
      for (int r = 0; r < Rows; ++r) {
        __m256i u0, u1;
        chunk_pair<T>(blk[r], k, hi[r], u0, u1);
        i32[r] = _mm256_add_epi32(i32[r], _mm256_add_epi32(chunk(u0, x0, sc[r].multipliers(2 * k)),
                                                           chunk(u1, x1, sc[r].multipliers(2 * k + 1))));
      }
      if (T == DType::Q6_K ? k % 2 == 1 : k == 3) {  // flush: Q6_K each half, the others once
        for (int r = 0; r < Rows; ++r) {
          acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(sc[r].d * dx), _mm256_cvtepi32_ps(i32[r]), acc[r]);
          i32[r] = _mm256_setzero_si256();
        }
      }
    }
    for (int r = 0; r < Rows; ++r)
      moff[r] = _mm256_fmadd_ps(_mm256_set1_ps(sc[r].dmin * dx), _mm256_cvtepi32_ps(_mm256_madd_epi16(sums, sc[r].n)),
                                moff[r]);
  }
  for (int r = 0; r < Rows; ++r) y[r] = finish<T>(acc[r], moff[r]);
}

template <DType T>
void rows_of(const Int8Super* supers, const int8_t* q, const std::byte* w, int64_t count, int64_t n, float* y,
             Prefetcher& pf) {
  const size_t row_bytes = dtype_row_bytes(T, n);
  const auto at = [&](int64_t c) { return w + static_cast<size_t>(c) * row_bytes; };
  int64_t c = 0;
  for (; c + 2 <= count; c += 2) {
    const std::byte* row[2] = {at(c), at(c + 1)};
    super_rows<T, 2>(supers, q, row, n, y + c, pf);
  }
  if (c < count) {
    const std::byte* row[1] = {at(c)};
    super_rows<T, 1>(supers, q, row, n, y + c, pf);
  }
}

// ---- prefill: 16 rows unpacked once --------------------------------------------------------

template <DType T>
void prepare(const std::byte* w, int64_t rows, int64_t in, Int8SuperPrepared* out) {
  using B = typename core::BlockOf<T>::type;
  const size_t row_bytes = dtype_row_bytes(T, in);
  for (int64_t s = 0; s < in / 256; ++s) {
    Int8SuperPrepared& o = out[s];
    for (int64_t r = 0; r < kInt8PreparedRows; ++r) {
      if (r >= rows) {  // rows past the last: zeros, never stored
        std::memset(o.u[r], 0, sizeof o.u[r]);
        std::memset(o.m[r], 0, sizeof o.m[r]);
        std::memset(o.n[r], 0, sizeof o.n[r]);
        o.d[r] = o.dmin[r] = 0.0f;
        continue;
      }
      const std::byte* blk = w + static_cast<size_t>(r) * row_bytes + static_cast<size_t>(s) * sizeof(B);
      SuperScales<T> sc;
      sc.load(blk);
      __m256i hi = _mm256_setzero_si256();
      for (int k = 0; k < 4; ++k) {
        __m256i u0, u1;
        chunk_pair<T>(blk, k, hi, u0, u1);
        _mm256_store_si256(reinterpret_cast<__m256i*>(o.u[r] + 64 * k), u0);
        _mm256_store_si256(reinterpret_cast<__m256i*>(o.u[r] + 64 * k + 32), u1);
      }
      for (int k = 0; k < 8; ++k) _mm256_store_si256(reinterpret_cast<__m256i*>(o.m[r][k]), sc.multipliers(k));
      _mm256_store_si256(reinterpret_cast<__m256i*>(o.n[r]), sc.n);
      o.d[r] = sc.d;
      o.dmin[r] = sc.dmin;
    }
  }
}

// Input rows t .. t + Tokens − 1 against prepared rows c .. c + RowsT − 1, every super-block.
template <DType T, int Tokens, int RowsT>
void tile(const Int8SuperPrepared* prep, int64_t in, const Int8Super* supers, const int8_t* q, int64_t t, int64_t c,
          float* y, int64_t ldy) {
  const int64_t ns = in / 256;
  __m256 acc[Tokens][RowsT], moff[Tokens][RowsT];
  for (int k = 0; k < Tokens; ++k)
    for (int r = 0; r < RowsT; ++r) acc[k][r] = moff[k][r] = _mm256_setzero_ps();
  for (int64_t s = 0; s < ns; ++s) {
    const Int8SuperPrepared& p = prep[s];
    __m256i i32[Tokens][RowsT];
    for (auto& a : i32)
      for (auto& v : a) v = _mm256_setzero_si256();
    for (int ch = 0; ch < 8; ++ch) {
      __m256i u[RowsT];
      for (int r = 0; r < RowsT; ++r) u[r] = _mm256_load_si256(reinterpret_cast<const __m256i*>(p.u[c + r] + 32 * ch));
#pragma GCC unroll 4
      for (int k = 0; k < Tokens; ++k) {
        const __m256i x = load32(q + (t + k) * in + 256 * s + 32 * ch);
#pragma GCC unroll 4
        for (int r = 0; r < RowsT; ++r)
          i32[k][r] = _mm256_add_epi32(
              i32[k][r], chunk(u[r], x, _mm256_load_si256(reinterpret_cast<const __m256i*>(p.m[c + r][ch]))));
      }
      if (T == DType::Q6_K ? ch % 4 == 3 : ch == 7) {
        for (int k = 0; k < Tokens; ++k)
          for (int r = 0; r < RowsT; ++r) {
            acc[k][r] = _mm256_fmadd_ps(_mm256_set1_ps(p.d[c + r] * supers[(t + k) * ns + s].d),
                                        _mm256_cvtepi32_ps(i32[k][r]), acc[k][r]);
            i32[k][r] = _mm256_setzero_si256();
          }
      }
    }
    for (int k = 0; k < Tokens; ++k) {
      const Int8Super& xs = supers[(t + k) * ns + s];
      const __m256i sums = load32(xs.sums);
      for (int r = 0; r < RowsT; ++r)
        moff[k][r] = _mm256_fmadd_ps(
            _mm256_set1_ps(p.dmin[c + r] * xs.d),
            _mm256_cvtepi32_ps(_mm256_madd_epi16(sums, _mm256_load_si256(reinterpret_cast<const __m256i*>(p.n[c + r])))),
            moff[k][r]);
    }
  }
  for (int k = 0; k < Tokens; ++k)
    for (int r = 0; r < RowsT; ++r) y[(t + k) * ldy + c + r] = finish<T>(acc[k][r], moff[k][r]);
}

template <DType T>
void prepared_products(const Int8SuperPrepared* prep, int64_t rows, int64_t in, const Int8Super* supers,
                       const int8_t* q, int64_t n, float* y, int64_t ldy) {
  // 2 input rows × 2 weight rows: 4 integer sums and 8 float accumulators in registers.
  int64_t t = 0;
  for (; t + 2 <= n; t += 2) {
    int64_t c = 0;
    for (; c + 2 <= rows; c += 2) tile<T, 2, 2>(prep, in, supers, q, t, c, y, ldy);
    for (; c < rows; ++c) tile<T, 2, 1>(prep, in, supers, q, t, c, y, ldy);
  }
  for (; t < n; ++t) {
    int64_t c = 0;
    for (; c + 2 <= rows; c += 2) tile<T, 1, 2>(prep, in, supers, q, t, c, y, ldy);
    for (; c < rows; ++c) tile<T, 1, 1>(prep, in, supers, q, t, c, y, ldy);
  }
}

}  // namespace

void quantize_int8_super(const float* x, int64_t n, Int8Super* supers, int8_t* q) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t s = 0; s < n / 256; ++s) {
    const float* xs = x + 256 * s;
    int8_t* qs = q + 256 * s;
    __m256 amax = _mm256_setzero_ps(), nonfinite = _mm256_setzero_ps();
    for (int i = 0; i < 32; ++i) {
      const __m256 v = _mm256_loadu_ps(xs + 8 * i);
      amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v));
      nonfinite = _mm256_or_ps(nonfinite, _mm256_cmp_ps(_mm256_sub_ps(v, v), _mm256_setzero_ps(), _CMP_NEQ_UQ));
    }
    Int8Super& out = supers[s];
    if (!_mm256_testz_ps(nonfinite, nonfinite)) {
      out.d = std::numeric_limits<float>::quiet_NaN();
      std::memset(qs, 0, 256);
      std::memset(out.sums, 0, sizeof out.sums);
      continue;
    }
    // The scalar arithmetic of the portable quantiser: d = max|x| / 127, codes = round(x · (1 / d)).
    const float d = lanes_max(amax) / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const __m256 scale = _mm256_set1_ps(id), lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
    for (int c = 0; c < 8; ++c) {  // 32 codes at a time, and their two 16-value sums
      __m256i codes[4];
      for (int i = 0; i < 4; ++i) {
        const __m256 r = _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(xs + 32 * c + 8 * i), scale),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        codes[i] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(r, lo), hi));
      }
      const __m256i packed =
          _mm256_packs_epi16(_mm256_packs_epi32(codes[0], codes[1]), _mm256_packs_epi32(codes[2], codes[3]));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs + 32 * c),
                          _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
      for (int h = 0; h < 2; ++h) {
        const __m256i v = _mm256_add_epi32(codes[2 * h], codes[2 * h + 1]);
        const __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
        const __m128i s2 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(1, 0, 3, 2)));
        out.sums[2 * c + h] =
            static_cast<int16_t>(_mm_cvtsi128_si32(_mm_add_epi32(s2, _mm_shuffle_epi32(s2, _MM_SHUFFLE(2, 3, 0, 1)))));
      }
    }
    out.d = d;
  }
}

void int8_super_rows_product(DType t, const Int8Super* supers, const int8_t* q, const std::byte* w, int64_t rows,
                             int64_t n, float* y, Prefetcher& pf) {
  switch (t) {
    case DType::Q4_K: return rows_of<DType::Q4_K>(supers, q, w, rows, n, y, pf);
    case DType::Q5_K: return rows_of<DType::Q5_K>(supers, q, w, rows, n, y, pf);
    default: return rows_of<DType::Q6_K>(supers, q, w, rows, n, y, pf);
  }
}

void int8_super_prepare(DType t, const std::byte* w, int64_t rows, int64_t in, std::byte* prep) {
  auto* out = reinterpret_cast<Int8SuperPrepared*>(prep);
  switch (t) {
    case DType::Q4_K: return prepare<DType::Q4_K>(w, rows, in, out);
    case DType::Q5_K: return prepare<DType::Q5_K>(w, rows, in, out);
    default: return prepare<DType::Q6_K>(w, rows, in, out);
  }
}

void int8_super_prepared_products(DType t, const std::byte* prep, int64_t rows, int64_t in, const Int8Super* supers,
                                  const int8_t* q, int64_t n, float* y, int64_t ldy) {
  const auto* p = reinterpret_cast<const Int8SuperPrepared*>(prep);
  switch (t) {
    case DType::Q4_K: return prepared_products<DType::Q4_K>(p, rows, in, supers, q, n, y, ldy);
    case DType::Q5_K: return prepared_products<DType::Q5_K>(p, rows, in, supers, q, n, y, ldy);
    default: return prepared_products<DType::Q6_K>(p, rows, in, supers, q, n, y, ldy);
  }
}

}  // namespace kvinfer::cpu::avx2

KVINFER_AVX2_END

#else  // not x86: cpu_has_avx2_fma_f16c() is false, so these are never called

#include <cstdlib>

namespace kvinfer::cpu::avx2 {
void int8_super_rows_product(DType, const Int8Super*, const int8_t*, const std::byte*, int64_t, int64_t, float*,
                             Prefetcher&) {
  std::abort();
}
void int8_super_prepare(DType, const std::byte*, int64_t, int64_t, std::byte*) { std::abort(); }
void int8_super_prepared_products(DType, const std::byte*, int64_t, int64_t, const Int8Super*, const int8_t*, int64_t,
                                  float*, int64_t) {
  std::abort();
}
void quantize_int8_super(const float*, int64_t, Int8Super*, int8_t*) { std::abort(); }
}  // namespace kvinfer::cpu::avx2

#endif
