#pragma once
// Run-time CPU feature detection for the CPU backend's SIMD paths.
//
// Kernels that use instructions beyond the build's baseline (x86-64: SSE2) live in their own
// translation units with per-function target attributes, never file-wide -m flags, and are only
// called after a check here; the portable scalar code stays the fallback. Conversions
// (convert_avx2.cpp), attention's weighted sums (attention_avx2.cpp) and the 8-bit activation
// products (linear_int8_avx2.cpp) are bit-identical to it; the dot products (linear_avx2.cpp,
// dot_quant_avx2.cpp, attention's scores) use fused multiply-adds, and SiLU/GELU and attention's
// softmax weights their own exp and exp2 (elementwise_avx2.cpp), so those results differ from
// the portable ones in the last bits, but each follows one fixed order in every kernel (batch
// invariance holds on either path).

namespace kvinfer::cpu {

// True when the CPU has AVX2, FMA and F16C (detected once, with __builtin_cpu_supports) and the
// environment does not forbid their use. Setting KVINFER_NO_AVX2=1 (any non-empty value other
// than "0") before the first call forces the portable scalar paths, e.g. to compare figures or
// to rule the SIMD code out. Always false on non-x86 builds.
bool cpu_has_avx2_fma_f16c();

// True when cpu_has_avx2_fma_f16c() is and the CPU also has AVX-512F and AVX-512DQ with the OS
// saving the ZMM registers, and KVINFER_NO_AVX512 (read like KVINFER_NO_AVX2) is unset. The
// AVX-512 kernels (prefill's f32 tiles, linear_avx512.h; quantised decode products,
// dot_quant_avx512.h; attention's, attention_avx512.h) give the bits the AVX2 ones give: it
// changes speed, never results.
bool cpu_has_avx512();

// True when cpu_has_avx512() is and the CPU also has AVX-512 VNNI (vpdpbusd). Prefill's 8-bit
// activation products use it (linear_int8_avx512.h), with the bits of the other paths.
bool cpu_has_avx512_vnni();

}  // namespace kvinfer::cpu
