// The AVX-512 weighted sums of V rows (attention_avx512.h). Compiled for AVX-512 function by
// function (avx512_target.h), like linear_avx512.cpp.
#include "cpu/attention_avx512.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "cpu/avx512_target.h"

KVINFER_AVX512_BEGIN

#include "cpu/values_tiles_inline.h"

namespace kvinfer::cpu::avx512 {

namespace {

// 16-lane registers for values_tiles_inline.h: tiles of 6 queries × 64 columns, 24 registers of
// sums and 4 for a V row's 64 values.
struct Zmm {
  using Reg = __m512;
  static constexpr int kLanes = 16, kWide = 4, kQueries = 6;
  static Reg zero() { return _mm512_setzero_ps(); }
  static Reg load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, Reg r) { _mm512_storeu_ps(p, r); }
  static Reg set1(float f) { return _mm512_set1_ps(f); }
  static Reg add(Reg a, Reg b) { return _mm512_add_ps(a, b); }
  static Reg mul(Reg a, Reg b) { return _mm512_mul_ps(a, b); }
};

}  // namespace

void values_tiles(const float* const* p, float* const* o, int64_t nq, const float* v, int64_t count,
                  int64_t hd, bool first) {
  values_tiles_all<Zmm>(p, o, nq, v, count, hd, first);
}

}  // namespace kvinfer::cpu::avx512

KVINFER_AVX512_END

#else  // not x86: cpu_has_avx512() is false, so this is never called

#include <cstdlib>

namespace kvinfer::cpu::avx512 {
void values_tiles(const float* const*, float* const*, int64_t, const float*, int64_t, int64_t, bool) {
  std::abort();
}
}  // namespace kvinfer::cpu::avx512

#endif
