#pragma once
// The AVX2/FMA element-wise kernels of the CPU backend (elementwise_avx2.cpp), called only when
// the CPU has AVX2, FMA and F16C (cpu/cpu_features.h).
//
// Each output element is a pure function of its input element(s): the last n % 8 values go
// through the same 8-lane routine as the others (masked loads and stores), so a value gives the
// same bits wherever it sits in the array and whatever n is (batch invariance: prefill and
// decode rows agree exactly).
#include <cstdint>

namespace kvinfer::cpu::avx2 {

// out[i] = e^x[i] within 2 ulp of the exact value over the whole float range (subnormal results
// included); overflow gives +inf, underflow 0, NaN stays NaN. The vector exp behind the two
// kernels below, exposed for the tests.
void exp_f32(const float* x, float* out, int64_t n);

// out[i] = 2^x[i] within 2 ulp over the whole float range, the same way (overflow +inf, underflow
// 0, NaN stays NaN).
void exp2_f32(const float* x, float* out, int64_t n);

// Attention's softmax weights in place: s[i] = 2^(s[i] − ref) (exp2_f32's bits), and returns their
// sum in a fixed order: lane l of 8 adds the weights i ≡ l (mod 8) in increasing i, then
// ((0 + 4) + (1 + 5)) + ((2 + 6) + (3 + 7)).
float softmax_weights(float* s, int64_t n, float ref);

// The largest of s[0 .. n) that is not a NaN, or -inf: what m = std::max(m, s[i]) over i from
// m = -inf gives (a max is exact in any order; only the sign of a zero max may differ, which no
// softmax weight sees: s − (+0) and s − (−0) are equal, or ±0 whose exp2 is 1 either way).
float max_of(const float* s, int64_t n);

// s[i] = s[i] · f for i < n (attention's scores and probabilities).
void scale(float* s, int64_t n, float f);

// out[i] = gate[i] / (1 + e^-gate[i]) · up[i] (out may alias gate or up).
void silu_mul(const float* gate, const float* up, float* out, int64_t n);

// out[i] = x / (1 + e^-2u), u = sqrt(2/π)·(x + 0.044715·x³): HF's gelu_new, 0.5·x·(1 + tanh(u)),
// in a form that does not cancel for x < 0. −2u is computed in double, then split into two
// floats (hi + lo) that the exp takes together, so its rounding does not reach the result
// (out may alias x).
void gelu_tanh(const float* x, float* out, int64_t n);

}  // namespace kvinfer::cpu::avx2
