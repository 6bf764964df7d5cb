// AVX2/F16C widening kernels for cpu::to_f32, bit-identical to the scalar code
// (src/cpu/convert.cpp, kernels/core/convert.h, kernels/core/quant.h).
//
// Not built with file-wide -mavx2: every function that uses AVX2/F16C carries the target
// attribute KVI_AVX2 and has internal linkage (or is to_f32_avx2 itself), so no inline function
// or template from a header is ever instantiated here with AVX2 code that the linker could pick
// for a CPU without it. Headers come first, before any target attribute.
//
// Exactness: each value goes through the same f32 operations, in the same order, as the scalar
// code: (f32)q × d (Q8_0, Q4_0, Q5_0), then a separate + m (Q4_1, Q5_1); (d·sc) × q − dmin·mn
// (Q4_K, Q5_K: a multiply then a separate subtract, never an FMA; the target list leaves out
// "fma" so the compiler cannot emit one, on top of the library's -ffp-contract=off); (d·scale) ×
// (q − 32) (Q6_K). Per-group scales are computed in scalar f32, as the scalar code does.
// Scales are widened with F16C, which quiets a signalling-NaN scale; every scale then goes
// through an f32 multiply, which quiets the scalar code's NaN the same way, so the values match.
#include "cpu/convert_avx2.h"

#include <cstring>

#include "core/convert.h"
#include "core/kv_quant.h"
#include "core/quant.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define KVINFER_X86_KERNELS 1

#include "cpu/avx2_target.h"

// The 8-bit KV codes' widening, shared with the attention loops (internal linkage).
KVINFER_AVX2_BEGIN
#include "cpu/kv_value_inline.h"
KVINFER_AVX2_END
#endif

namespace kvinfer::cpu {

#if defined(KVINFER_X86_KERNELS)

#define KVI_AVX2 __attribute__((target("avx2,f16c")))

namespace {

uint16_t load_u16(const std::byte* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

KVI_AVX2 float half_scale(const std::byte* p) { return _cvtsh_ss(load_u16(p)); }

// How the 8 integer codes of a chunk become floats, each exactly as the scalar code writes it.
enum class Op {
  kMul,     // (f32)q * d                 Q8_0, Q4_0, Q5_0
  kMulAdd,  // (f32)q * d + m             Q4_1, Q5_1
  kScaleSub,  // d * (f32)q - m            Q4_K, Q5_K
  kScale,   // d * (f32)q                 Q6_K
};

// Values from the low 8 (signed) bytes of q8 into out[0..7].
template <Op O>
KVI_AVX2 inline void emit8(__m128i q8, __m256 d, __m256 m, float* out) {
  const __m256 q = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q8));
  __m256 v;
  if constexpr (O == Op::kMul) {
    v = _mm256_mul_ps(q, d);
  } else if constexpr (O == Op::kMulAdd) {
    v = _mm256_add_ps(_mm256_mul_ps(q, d), m);
  } else if constexpr (O == Op::kScaleSub) {
    v = _mm256_sub_ps(_mm256_mul_ps(d, q), m);
  } else {
    v = _mm256_mul_ps(d, q);
  }
  _mm256_storeu_ps(out, v);
}

// 32 signed byte codes into out[0..31]; values 0..15 use (d0, m), 16..31 (d1, m).
template <Op O>
KVI_AVX2 inline void emit32(__m256i q, __m256 d0, __m256 d1, __m256 m, float* out) {
  const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
  emit8<O>(lo, d0, m, out);
  emit8<O>(_mm_srli_si128(lo, 8), d0, m, out + 8);
  emit8<O>(hi, d1, m, out + 16);
  emit8<O>(_mm_srli_si128(hi, 8), d1, m, out + 24);
}

KVI_AVX2 inline __m256i nibbles_low(__m256i v) { return _mm256_and_si256(v, _mm256_set1_epi8(0x0F)); }
KVI_AVX2 inline __m256i nibbles_high(__m256i v) {
  return _mm256_and_si256(_mm256_srli_epi16(v, 4), _mm256_set1_epi8(0x0F));
}

// Byte j (0..31) = 0x10 where bit j of bits is set, else 0.
KVI_AVX2 inline __m256i bit4_from_bits32(uint32_t bits) {
  __m256i t = _mm256_set1_epi32(static_cast<int>(bits));
  t = _mm256_shuffle_epi8(t, _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
  t = _mm256_or_si256(t, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));  // all bits but bit j % 8
  t = _mm256_cmpeq_epi8(t, _mm256_set1_epi8(-1));
  return _mm256_and_si256(t, _mm256_set1_epi8(0x10));
}

// ---- f16 / bf16 -------------------------------------------------------------------------------

// 8 halves → 8 floats. vcvtph2ps is exact IEEE widening but quiets a signalling NaN (sets bit 22);
// core::f16_to_f32 keeps the payload as it is, so that bit is cleared again where the half was an
// sNaN (exponent all ones, mantissa non-zero, quiet bit 9 clear).
KVI_AVX2 inline __m256 f16x8_to_f32(__m128i h) {
  const __m256 f = _mm256_cvtph_ps(h);
  const __m128i a = _mm_and_si128(h, _mm_set1_epi16(0x7fff));
  const __m128i snan =
      _mm_and_si128(_mm_cmpgt_epi16(a, _mm_set1_epi16(0x7c00)), _mm_cmplt_epi16(a, _mm_set1_epi16(0x7e00)));
  if (_mm_testz_si128(snan, snan)) return f;
  const __m256i clear = _mm256_and_si256(_mm256_cvtepi16_epi32(snan), _mm256_set1_epi32(0x00400000));
  return _mm256_castsi256_ps(_mm256_andnot_si256(clear, _mm256_castps_si256(f)));
}

KVI_AVX2 void f16_row(const std::byte* src, float* dst, int64_t n) {
  const auto* s = reinterpret_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m128i h0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    const __m128i h1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 8));
    _mm256_storeu_ps(dst + i, f16x8_to_f32(h0));
    _mm256_storeu_ps(dst + i + 8, f16x8_to_f32(h1));
  }
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, f16x8_to_f32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i))));
  for (; i < n; ++i) dst[i] = core::f16_to_f32(s[i]);
}

KVI_AVX2 inline __m256 bf16x8_to_f32(__m128i h) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

KVI_AVX2 void bf16_row(const std::byte* src, float* dst, int64_t n) {
  const auto* s = reinterpret_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m128i h0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    const __m128i h1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 8));
    _mm256_storeu_ps(dst + i, bf16x8_to_f32(h0));
    _mm256_storeu_ps(dst + i + 8, bf16x8_to_f32(h1));
  }
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, bf16x8_to_f32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i))));
  for (; i < n; ++i) dst[i] = core::bf16_to_f32(s[i]);
}

// ---- 32-value blocks --------------------------------------------------------------------------

KVI_AVX2 void q8_0_row(const std::byte* src, float* dst, int64_t blocks) {
  using B = core::BlockQ8_0;
  for (int64_t b = 0; b < blocks; ++b, src += sizeof(B), dst += 32) {
    const __m256 d = _mm256_set1_ps(half_scale(src + offsetof(B, d)));
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + offsetof(B, qs)));
    emit32<Op::kMul>(q, d, d, d, dst);
  }
}

// Q4_0, Q4_1, Q5_0, Q5_1 (core::dequantize_small).
template <DType T>
KVI_AVX2 void small_row(const std::byte* src, float* dst, int64_t blocks) {
  using B = typename core::BlockOf<T>::type;
  constexpr bool kHasMin = T == DType::Q4_1 || T == DType::Q5_1;
  constexpr bool kFive = T == DType::Q5_0 || T == DType::Q5_1;
  constexpr char kOffset = kHasMin ? 0 : (kFive ? 16 : 8);
  for (int64_t b = 0; b < blocks; ++b, src += sizeof(B), dst += 32) {
    const __m256 d = _mm256_set1_ps(half_scale(src + offsetof(B, d)));
    __m256 m = _mm256_setzero_ps();
    if constexpr (kHasMin) m = _mm256_set1_ps(half_scale(src + offsetof(B, m)));
    const __m128i qs = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + offsetof(B, qs)));
    // Values 0..15: low nibbles of qs[0..15]; 16..31: high nibbles.
    __m256i q = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(qs, 4), qs), _mm256_set1_epi8(0x0F));
    if constexpr (kFive) {
      uint32_t qh;
      std::memcpy(&qh, src + offsetof(B, qh), sizeof qh);  // little endian, as the scalar code reads it
      q = _mm256_or_si256(q, bit4_from_bits32(qh));
    }
    if constexpr (kOffset != 0) q = _mm256_sub_epi8(q, _mm256_set1_epi8(kOffset));
    emit32<kHasMin ? Op::kMulAdd : Op::kMul>(q, d, d, m, dst);
  }
}

// ---- K-quants ---------------------------------------------------------------------------------

// Q4_K, Q5_K (core::dequantize_k4_group, all eight groups of each super-block).
template <DType T>
KVI_AVX2 void k4_row(const std::byte* src, float* dst, int64_t blocks) {
  using B = typename core::BlockOf<T>::type;
  for (int64_t b = 0; b < blocks; ++b, src += sizeof(B), dst += core::kQK) {
    const float d = half_scale(src + offsetof(B, d));
    const float dmin = half_scale(src + offsetof(B, dmin));
    [[maybe_unused]] __m256i qh;
    if constexpr (T == DType::Q5_K) qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + offsetof(B, qh)));
    for (int pair = 0; pair < 4; ++pair) {
      const __m256i qs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + offsetof(B, qs) + 32 * pair));
      for (int half = 0; half < 2; ++half) {
        const int g = 2 * pair + half;
        int sc, mn;
        core::k_scale_min(src + offsetof(B, scales), g, sc, mn);
        const __m256 d1 = _mm256_set1_ps(d * static_cast<float>(sc));     // ggml's d1
        const __m256 m1 = _mm256_set1_ps(dmin * static_cast<float>(mn));  // ggml's m1
        __m256i q = half ? nibbles_high(qs) : nibbles_low(qs);
        if constexpr (T == DType::Q5_K) {
          const __m256i bit = _mm256_set1_epi8(static_cast<char>(1 << g));
          const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(qh, bit), bit);
          q = _mm256_or_si256(q, _mm256_and_si256(set, _mm256_set1_epi8(0x10)));
        }
        emit32<Op::kScaleSub>(q, d1, d1, m1, dst + 32 * g);
      }
    }
  }
}

// Q6_K (core::dequantize_q6_k_group, all eight groups of each super-block).
KVI_AVX2 void q6_k_row(const std::byte* src, float* dst, int64_t blocks) {
  using B = core::BlockQ6_K;
  const __m256i low4 = _mm256_set1_epi8(0x0F), low2 = _mm256_set1_epi8(0x03), k32 = _mm256_set1_epi8(32);
  for (int64_t b = 0; b < blocks; ++b, src += sizeof(B), dst += core::kQK) {
    const float d = half_scale(src + offsetof(B, d));
    const auto* scales = reinterpret_cast<const int8_t*>(src + offsetof(B, scales));
    for (int h = 0; h < 2; ++h) {
      const std::byte* ql = src + offsetof(B, ql) + 64 * h;
      const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql));
      const __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 32));
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + offsetof(B, qh) + 32 * h));
      const __m256i lo[4] = {_mm256_and_si256(ql0, low4), _mm256_and_si256(ql1, low4),
                             _mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4),
                             _mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4)};
      const __m256i hi[4] = {_mm256_and_si256(qh, low2), _mm256_and_si256(_mm256_srli_epi16(qh, 2), low2),
                             _mm256_and_si256(_mm256_srli_epi16(qh, 4), low2),
                             _mm256_and_si256(_mm256_srli_epi16(qh, 6), low2)};
      for (int k = 0; k < 4; ++k) {
        const __m256i q = _mm256_sub_epi8(_mm256_or_si256(lo[k], _mm256_slli_epi16(hi[k], 4)), k32);
        const __m256 ds0 = _mm256_set1_ps(d * static_cast<float>(scales[8 * h + 2 * k]));
        const __m256 ds1 = _mm256_set1_ps(d * static_cast<float>(scales[8 * h + 2 * k + 1]));
        emit32<Op::kScale>(q, ds0, ds1, ds0, dst + 32 * (4 * h + k));
      }
    }
  }
}

// The codes of an 8-bit KV row (int8, E4M3) as the values they stand for before the row's
// scale: 8 at a time, then one at a time.
template <DType T>
KVI_AVX2 void code_row(const std::byte* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, T == DType::I8 ? widen8_i8(src + i) : widen8_e4m3(src + i));
  for (; i < n; ++i) dst[i] = core::kv_code_value(static_cast<uint8_t>(src[i]), T == DType::FP8);
}

}  // namespace

bool to_f32_avx2(DType t, const std::byte* src, float* dst, int64_t n) {
  const int64_t blocks = n / dtype_block(t).elements;
  switch (t) {
    case DType::F16: f16_row(src, dst, n); return true;
    case DType::BF16: bf16_row(src, dst, n); return true;
    case DType::Q8_0: q8_0_row(src, dst, blocks); return true;
    case DType::Q4_0: small_row<DType::Q4_0>(src, dst, blocks); return true;
    case DType::Q4_1: small_row<DType::Q4_1>(src, dst, blocks); return true;
    case DType::Q5_0: small_row<DType::Q5_0>(src, dst, blocks); return true;
    case DType::Q5_1: small_row<DType::Q5_1>(src, dst, blocks); return true;
    case DType::Q4_K: k4_row<DType::Q4_K>(src, dst, blocks); return true;
    case DType::Q5_K: k4_row<DType::Q5_K>(src, dst, blocks); return true;
    case DType::Q6_K: q6_k_row(src, dst, blocks); return true;
    case DType::I8: code_row<DType::I8>(src, dst, n); return true;
    case DType::FP8: code_row<DType::FP8>(src, dst, n); return true;
    default: return false;  // f32: the scalar copy
  }
}

#undef KVI_AVX2

#else  // no x86 kernels in this build: cpu_has_avx2_fma_f16c() is false and this is never called

bool to_f32_avx2(DType, const std::byte*, float*, int64_t) { return false; }

#endif

}  // namespace kvinfer::cpu
