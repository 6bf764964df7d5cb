#pragma once
// Compiles the functions between KVINFER_AVX512_BEGIN and KVINFER_AVX512_END for AVX-512F and
// AVX-512DQ (with AVX2, FMA and F16C), and nothing else in the file, as avx2_target.h does for
// AVX2. Include <immintrin.h> and every other header before the BEGIN.
#if defined(__clang__)
// (one string: _Pragma takes no concatenation)
#define KVINFER_AVX512_BEGIN \
  _Pragma("clang attribute push (__attribute__((target(\"avx512f,avx512dq,avx2,fma,f16c\"))), apply_to = function)")
#define KVINFER_AVX512_END _Pragma("clang attribute pop")
#else
#define KVINFER_AVX512_BEGIN _Pragma("GCC push_options") _Pragma("GCC target(\"avx512f,avx512dq,avx2,fma,f16c\")")
#define KVINFER_AVX512_END _Pragma("GCC pop_options")
#endif

// The same for AVX-512 VNNI (vpdpbusd) on top of AVX-512F and AVX-512DQ, for the functions of
// linear_int8_avx512.cpp (called only when cpu_has_avx512_vnni()).
#define KVINFER_AVX512_PRAGMA(x) _Pragma(#x)
#if defined(__clang__)
#define KVINFER_AVX512_VNNI_BEGIN                                                                  \
  KVINFER_AVX512_PRAGMA(clang attribute push(                                                     \
      __attribute__((target("avx512f,avx512dq,avx512vnni,avx2,fma,f16c"))), apply_to = function))
#define KVINFER_AVX512_VNNI_END _Pragma("clang attribute pop")
#else
#define KVINFER_AVX512_VNNI_BEGIN \
  _Pragma("GCC push_options") KVINFER_AVX512_PRAGMA(GCC target("avx512f,avx512dq,avx512vnni,avx2,fma,f16c"))
#define KVINFER_AVX512_VNNI_END _Pragma("GCC pop_options")
#endif
