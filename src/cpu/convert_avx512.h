#pragma once
// The AVX-512 widening kernels behind cpu::to_f32 (convert_avx512.cpp), for the formats whose
// AVX2 kernels (convert_avx2.h) are held back by their instruction count: f16 and the 32-value
// ggml blocks. Prefill widens every block of weight rows it multiplies, so their speed shows in
// its products. Every value written equals to_f32_scalar's bit for bit (NaN payloads included).
#include <cstddef>
#include <cstdint>

#include "kvinfer/dtype.h"

namespace kvinfer::cpu {

// Widens n values of t with AVX-512 and returns true, or returns false (writing nothing) for a
// dtype it leaves to the AVX2 kernels or on a build without the x86 kernels. Quantised n must be
// a whole number of blocks (to_f32 checks). Call only when cpu_has_avx512() is true.
bool to_f32_avx512(DType t, const std::byte* src, float* dst, int64_t n);

}  // namespace kvinfer::cpu
