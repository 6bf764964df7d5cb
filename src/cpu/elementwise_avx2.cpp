// AVX2/FMA element-wise kernels (elementwise_avx2.h): a vectorised exp and exp2, silu_mul,
// gelu_tanh and attention's softmax weights.
// Compiled for AVX2 function by function (the pragma below), not with file-wide flags, like
// linear_avx2.cpp; headers come first, outside the pragma.
//
// exp(x), 8 lanes at a time:
//   1. clamp x to [-105, 89] (keeping NaN): below -103.98 the result rounds to 0, above 88.73
//      it overflows to +inf, and the clamped values still do, so 2^n below stays in reach;
//   2. n = round(x·log2 e), r = x − n·ln2 with ln2 = hi + lo in two floats: the first fused
//      multiply-add is exact (n ≠ 0 needs |x| > 0.34, so x and n·hi are multiples of 2^-25 and
//      their difference, below 0.35, fits in 24 bits), the second rounds once, so r is within
//      half an ulp of x − n·ln2, |r| ≤ ln2/2 + a little;
//   3. e^r by its Taylor polynomial to degree 7 in Horner form (fused multiply-adds): the
//      truncation error is below r^8/8! ≤ 5.4e-9 relative at |r| = 0.347, a tenth of an ulp;
//   4. e^x = e^r · 2^n1 · 2^n2 with n1 = ⌊n/2⌋, n2 = n − n1, each a normal float made from
//      exponent bits: the first product is exact, the second rounds once, so subnormal results
//      are rounded correctly from e^r and 2^128 (e^88.7 needs n = 128) overflows only when the
//      value does.
#include "cpu/elementwise_avx2.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "cpu/avx2_target.h"

KVINFER_AVX2_BEGIN

namespace kvinfer::cpu::avx2 {

namespace {

constexpr double kLn2 = 0.693147180559945309417232121458176568;
constexpr float kLn2Hi = static_cast<float>(kLn2);                             // 0x3f317218
constexpr float kLn2Lo = static_cast<float>(kLn2 - static_cast<double>(kLn2Hi));  // ≈ -1.9e-9
constexpr float kLog2e = 1.44269504088896340736f;
// −2u = x·(−K − Kc·x²), K = 2·sqrt(2/π), Kc = K·0.044715, in double.
constexpr double kK = 1.595769121605730711759;  // 2·sqrt(2/π)
constexpr double kKc = kK * 0.044715;

inline __m256 pow2i(__m256i k) {  // 2^k for k in [-126, 127]
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k, _mm256_set1_epi32(127)), 23));
}

// e^r for |r| ≤ ln2/2 + a little: the Taylor polynomial to degree 7, in Horner form.
inline __m256 exp_taylor7(__m256 r) {
  __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  return _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
}

// p · 2^n for integral n in [-152, 129]: n1 = ⌊n/2⌋ and n2 = n − n1, in [-76, 65], each a normal
// float made from exponent bits; the first product is exact, the second rounds once.
inline __m256 scale_by_pow2(__m256 p, __m256 n) {
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i n1 = _mm256_srai_epi32(ni, 1);
  const __m256i n2 = _mm256_sub_epi32(ni, n1);
  return _mm256_mul_ps(_mm256_mul_ps(p, pow2i(n1)), pow2i(n2));
}

// e^(x + lo) where lo is a correction far below an ulp of x (WithLo), or e^x.
template <bool WithLo>
inline __m256 exp8(__m256 x, __m256 lo) {
  // _mm256_min_ps / _mm256_max_ps return their second operand when either is NaN.
  x = _mm256_max_ps(_mm256_set1_ps(-105.0f), _mm256_min_ps(_mm256_set1_ps(89.0f), x));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Hi), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Lo), r);
  if constexpr (WithLo) r = _mm256_add_ps(r, lo);
  // n is in [-151, 128] (NaN: garbage, but r is NaN and so is the result).
  return scale_by_pow2(exp_taylor7(r), n);
}

// 2^x for x = n + f, n = round(x), f in [-1/2, 1/2] exact: e^(f · ln2) by the same polynomial
// (f · ln2 rounds once, within a quarter of an ulp of the result), times 2^n as in exp8. x is
// clamped to [-152, 129] (keeping NaN): the result is 0 below -150 and +inf from 128 on.
inline __m256 exp2_8(__m256 x) {
  x = _mm256_max_ps(_mm256_set1_ps(-152.0f), _mm256_min_ps(_mm256_set1_ps(129.0f), x));
  const __m256 n = _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 t = _mm256_mul_ps(_mm256_sub_ps(x, n), _mm256_set1_ps(static_cast<float>(kLn2)));
  return scale_by_pow2(exp_taylor7(t), n);
}

inline __m256 silu_mul8(__m256 g, __m256 u) {
  const __m256 e = exp8<false>(_mm256_xor_ps(g, _mm256_set1_ps(-0.0f)), _mm256_setzero_ps());
  return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), u);
}

// −2u for 4 lanes in double, clamped to [-200, 200] (keeping NaN): e^-200 is 0 and e^200 is +inf
// in float, and the clamp keeps ±inf (x = ±inf) and huge values out of the hi/lo split.
inline __m256d minus_2u(__m256d x) {
  const __m256d t = _mm256_mul_pd(x, _mm256_fmadd_pd(_mm256_mul_pd(x, x), _mm256_set1_pd(-kKc), _mm256_set1_pd(-kK)));
  return _mm256_max_pd(_mm256_set1_pd(-200.0), _mm256_min_pd(_mm256_set1_pd(200.0), t));
}

// x / (1 + e^-2u). The result is e^2u·x for x ≪ 0, so an absolute error in 2u is a relative
// error of the result: −2u, up to 200 in size, needs ~30 bits, hence double and the hi + lo pair.
inline __m256 gelu8(__m256 x) {
  const __m256d t0 = minus_2u(_mm256_cvtps_pd(_mm256_castps256_ps128(x)));
  const __m256d t1 = minus_2u(_mm256_cvtps_pd(_mm256_extractf128_ps(x, 1)));
  const __m128 hi0 = _mm256_cvtpd_ps(t0), hi1 = _mm256_cvtpd_ps(t1);
  const __m128 lo0 = _mm256_cvtpd_ps(_mm256_sub_pd(t0, _mm256_cvtps_pd(hi0)));
  const __m128 lo1 = _mm256_cvtpd_ps(_mm256_sub_pd(t1, _mm256_cvtps_pd(hi1)));
  const __m256 e = exp8<true>(_mm256_set_m128(hi1, hi0), _mm256_set_m128(lo1, lo0));
  return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

// Lanes [0, m) set, m in [1, 7].
inline __m256i lanes_below(int64_t m) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(m)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

inline __m256 exp8_of(__m256 x) { return exp8<false>(x, _mm256_setzero_ps()); }

// out[i] = F(x[i]) 8 lanes at a time, the last n % 8 through the same routine (masked).
template <__m256 (*F)(__m256)>
void map8(const float* x, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, F(_mm256_loadu_ps(x + i)));
  if (i < n) {
    const __m256i m = lanes_below(n - i);
    _mm256_maskstore_ps(out + i, m, F(_mm256_maskload_ps(x + i, m)));
  }
}

}  // namespace

void exp_f32(const float* x, float* out, int64_t n) { map8<exp8_of>(x, out, n); }

void exp2_f32(const float* x, float* out, int64_t n) { map8<exp2_8>(x, out, n); }

float softmax_weights(float* s, int64_t n, float ref) {
  const __m256 r = _mm256_set1_ps(ref);
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 w = exp2_8(_mm256_sub_ps(_mm256_loadu_ps(s + i), r));
    _mm256_storeu_ps(s + i, w);
    acc = _mm256_add_ps(acc, w);
  }
  if (i < n) {
    const __m256i m = lanes_below(n - i);
    const __m256 w = exp2_8(_mm256_sub_ps(_mm256_maskload_ps(s + i, m), r));
    _mm256_maskstore_ps(s + i, m, w);
    acc = _mm256_add_ps(acc, _mm256_and_ps(w, _mm256_castsi256_ps(m)));
  }
  alignas(32) float l[8];
  _mm256_store_ps(l, acc);
  return ((l[0] + l[4]) + (l[1] + l[5])) + ((l[2] + l[6]) + (l[3] + l[7]));
}

float max_of(const float* s, int64_t n) {
  __m256 acc = _mm256_set1_ps(-INFINITY);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) acc = _mm256_max_ps(_mm256_loadu_ps(s + i), acc);  // a NaN in s gives acc back
  alignas(32) float l[8];
  _mm256_store_ps(l, acc);
  float m = l[0];
  for (int k = 1; k < 8; ++k) m = std::max(m, l[k]);
  for (; i < n; ++i) m = std::max(m, s[i]);
  return m;
}

void scale(float* s, int64_t n, float f) {
  const __m256 v = _mm256_set1_ps(f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(s + i, _mm256_mul_ps(_mm256_loadu_ps(s + i), v));
  for (; i < n; ++i) s[i] *= f;
}

void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, silu_mul8(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
  if (i < n) {
    const __m256i m = lanes_below(n - i);
    _mm256_maskstore_ps(out + i, m, silu_mul8(_mm256_maskload_ps(gate + i, m), _mm256_maskload_ps(up + i, m)));
  }
}

void gelu_tanh(const float* x, float* out, int64_t n) { map8<gelu8>(x, out, n); }

}  // namespace kvinfer::cpu::avx2

KVINFER_AVX2_END

#else  // not x86: cpu_has_avx2_fma_f16c() is false, so these are never called

#include <cstdlib>

namespace kvinfer::cpu::avx2 {
void exp_f32(const float*, float*, int64_t) { std::abort(); }
void exp2_f32(const float*, float*, int64_t) { std::abort(); }
float softmax_weights(float*, int64_t, float) { std::abort(); }
float max_of(const float*, int64_t) { std::abort(); }
void scale(float*, int64_t, float) { std::abort(); }
void silu_mul(const float*, const float*, float*, int64_t) { std::abort(); }
void gelu_tanh(const float*, float*, int64_t) { std::abort(); }
}  // namespace kvinfer::cpu::avx2

#endif
