#pragma once
// Every C++ header of kvinfer includes this one: a consumer built as C++17 or older gets one
// clear line instead of a page of std::span errors. (The C API, kvinfer_c.h, is plain C.)
// The missing include after the #error stops the compiler there (it would go on to the errors).
#if defined(_MSVC_LANG) && _MSVC_LANG < 202002L
#error "kvinfer needs C++20: compile with /std:c++20 or later"
#include "kvinfer: stopped here (C++20 needed)"
#elif !defined(_MSVC_LANG) && __cplusplus < 202002L
#error "kvinfer needs C++20: compile with -std=c++20 or later (pkg-config --cflags kvinfer and CMake's kvinfer::kvinfer say so)"
#include "kvinfer: stopped here (C++20 needed)"
#endif

// What libkvinfer exports. The library builds with hidden visibility; every public header puts
// its declarations between KVINFER_PUBLIC_BEGIN and KVINFER_PUBLIC_END (after its #includes), and
// KVINFER_API marks a single declaration. For a consumer they change nothing.
#if defined(__GNUC__) || defined(__clang__)
#define KVINFER_API __attribute__((visibility("default")))
#define KVINFER_PUBLIC_BEGIN _Pragma("GCC visibility push(default)")
#define KVINFER_PUBLIC_END _Pragma("GCC visibility pop")
#else
#define KVINFER_API
#define KVINFER_PUBLIC_BEGIN
#define KVINFER_PUBLIC_END
#endif
