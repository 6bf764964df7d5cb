// bf16 decode products on AVX-512 (dot_bf16_avx512.h). Compiled for AVX-512 function by function
// (avx512_target.h), like dot_quant_avx512.cpp.
//
// A decode step streams every weight once, and the AVX2 kernel spends a shift, a mask and two
// fused multiply-adds on each row's 16 values. Here a 512-bit register holds rows 2p and 2p + 1
// side by side, as the prefill tiles and the quantised decode kernels do: one of each instruction
// for both rows, against x's values broadcast to both halves. Each row's 8 lanes take the same
// products in the same order as its AVX2 accumulator, and finish8's tree is dot()'s: the bits of
// linear_avx2.cpp. Fewer instructions a byte let more of the stream be in flight: the
// gpt2-medium bf16 decode step 4-5 % faster. (The same pairing for f16, one conversion for both
// rows' 8 values, did not change the f16 step, so f16 keeps the AVX2 kernel.)
// Row-major rows go 8 a pass; a packed block (packed_rows.h) 16, each pair's chunk one 64-byte
// line; prefill widens packed blocks with the same shift and mask (widen_bf16_packed).
#include "cpu/dot_bf16_avx512.h"

#include <cstdint>

#include "cpu/linear_avx2.h"
#include "cpu/packed_rows.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "cpu/avx512_target.h"

KVINFER_AVX512_BEGIN

#include "cpu/avx512_inline.h"

namespace kvinfer::cpu::avx512 {

namespace {

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

// The 32 bytes at a and at b: a's in the low half of a register, b's in the high half.
inline __m512i pair32(const uint16_t* a, const uint16_t* b) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a))),
                            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b)), 1);
}

// Rows 0..R-1 (R = 8 or 16) of w against xs in the pair order, n a multiple of 16: chunk j
// (values 16j .. 16j + 15) of row r at w + r · row_step + j · chunk_step, so that one kernel
// reads row-major rows (row_step n, chunk_step 16) and packed blocks (packed_rows.h: row_step 16,
// chunk_step 256). Per chunk, each pair of rows' 32 bytes read as 32-bit lanes give the values at
// even places (shifted up by 16 bits) and at odd places (masked), each exactly its f32, as in
// avx2's dot_bf16_block. In a packed block a pair's two chunks are one 64-byte line, read with one
// load instead of two halves and an insert: fewer instructions a byte, more of the stream in
// flight (gpt2-medium's products read 3-5 % faster).
template <int R, bool kPacked>
void bf16_rows(const float* xs, const uint16_t* w, size_t row_step, size_t chunk_step, int64_t n, float* y,
               Prefetcher& pf_out) {
  Prefetcher pf = pf_out;  // a local copy: its counters in registers (prefetch.h)
  __m512 acc[R / 2];  // rows 2p (low half) and 2p + 1 (high half)
  for (auto& a : acc) a = _mm512_setzero_ps();
  const __m512i high = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
  const uint16_t* chunk = w;
  for (int64_t k = 0; k < n; k += 16, chunk += chunk_step) {
    pf.advance(32 * R);
    const __m512 even = broadcast8(xs + k), odd = broadcast8(xs + k + 8);
    for (int p = 0; p < R / 2; ++p) {
      const uint16_t* a = chunk + 2 * p * row_step;
      const __m512i v = kPacked ? _mm512_loadu_si512(a) : pair32(a, a + row_step);
      acc[p] = _mm512_fmadd_ps(even, _mm512_castsi512_ps(_mm512_slli_epi32(v, 16)), acc[p]);
      acc[p] = _mm512_fmadd_ps(odd, _mm512_castsi512_ps(_mm512_and_si512(v, high)), acc[p]);
    }
  }
  finish_pairs<R>(acc, y);
  pf_out = pf;
}

// A packed block's 16 rows (packed_rows.h), n values each, widened into dst (16, n) in the pair
// order (split_pairs): prefill's widening of a block. Each 64 bytes are a chunk of rows 2p and
// 2p + 1: the shift and the mask give both rows' values at even and at odd places, which go to
// each row's 8 + 8 places of the chunk, exactly as widen_bf16_pairs writes them.
void widen_packed(const uint16_t* w, int64_t n, float* dst) {
  const __m512i high = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
  for (int p = 0; p < kPackedRows / 2; ++p) {  // rows 2p and 2p + 1, chunk by chunk
    float* a = dst + 2 * p * n;
    float* b = a + n;
    const uint16_t* chunk = w + 32 * p;
    for (int64_t k = 0; k < n; k += 16, chunk += 16 * kPackedRows) {
      const __m512i v = _mm512_loadu_si512(chunk);
      const __m512 even = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
      const __m512 odd = _mm512_castsi512_ps(_mm512_and_si512(v, high));
      _mm256_storeu_ps(a + k, low8(even));
      _mm256_storeu_ps(a + k + 8, low8(odd));
      _mm256_storeu_ps(b + k, high8(even));
      _mm256_storeu_ps(b + k + 8, high8(odd));
    }
  }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace

void dot_bf16_rows(const float* xs, const uint16_t* w, int64_t rows, int64_t n, float* y, Prefetcher& pf) {
  const int64_t whole = n % 16 == 0 ? rows / 8 * 8 : 0;
  for (int64_t r = 0; r < whole; r += 8) bf16_rows<8, false>(xs, w + r * n, static_cast<size_t>(n), 16, n, y + r, pf);
  if (whole < rows) avx2::dot_bf16_rows(xs, w + whole * n, rows - whole, n, y + whole, pf);
}

void dot_bf16_packed(const float* xs, const uint16_t* w, int64_t n, float* y, Prefetcher& pf) {
  static_assert(kPackedRows == 16);
  bf16_rows<16, true>(xs, w, 16, 16 * 16, n, y, pf);
}

void widen_bf16_packed(const uint16_t* w, int64_t n, float* dst) { widen_packed(w, n, dst); }

}  // namespace kvinfer::cpu::avx512

KVINFER_AVX512_END

#else  // not x86: cpu_has_avx512() is false, so these are never called

#include <cstdlib>

namespace kvinfer::cpu::avx512 {
void dot_bf16_rows(const float*, const uint16_t*, int64_t, int64_t, float*, Prefetcher&) { std::abort(); }
void dot_bf16_packed(const float*, const uint16_t*, int64_t, float*, Prefetcher&) { std::abort(); }
void widen_bf16_packed(const uint16_t*, int64_t, float*) { std::abort(); }
}  // namespace kvinfer::cpu::avx512

#endif
