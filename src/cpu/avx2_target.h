#pragma once
// Compiles the functions between KVINFER_AVX2_BEGIN and KVINFER_AVX2_END for AVX2, FMA and
// F16C, and nothing else in the file: GCC's target pragma, clang's attribute push (clang has no
// `#pragma GCC target`). Include <immintrin.h> and every other header before the BEGIN.
#if defined(__clang__)
#define KVINFER_AVX2_BEGIN \
  _Pragma("clang attribute push (__attribute__((target(\"avx2,fma,f16c\"))), apply_to = function)")
#define KVINFER_AVX2_END _Pragma("clang attribute pop")
#else
#define KVINFER_AVX2_BEGIN _Pragma("GCC push_options") _Pragma("GCC target(\"avx2,fma,f16c\")")
#define KVINFER_AVX2_END _Pragma("GCC pop_options")
#endif
