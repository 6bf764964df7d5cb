#pragma once
// The AVX2/F16C widening kernels behind cpu::to_f32, and the portable scalar code that defines
// their results. to_f32 (src/cpu/convert.cpp) calls to_f32_avx2 only when
// cpu_has_avx2_fma_f16c() is true; every value it writes equals to_f32_scalar's bit for bit
// (NaN payloads included).
#include <cstddef>
#include <cstdint>

#include "kvinfer/dtype.h"

namespace kvinfer::cpu {

// The portable reference: what to_f32 does without SIMD (same checks, same errors).
void to_f32_scalar(DType t, const std::byte* src, float* dst, int64_t n);

// Widens n values of t with AVX2/F16C and returns true, or returns false (writing nothing) for a
// dtype it does not handle or on a build without the x86 kernels. Quantised n must be a whole
// number of blocks (to_f32 checks). Call only when cpu_has_avx2_fma_f16c() is true.
bool to_f32_avx2(DType t, const std::byte* src, float* dst, int64_t n);

}  // namespace kvinfer::cpu
