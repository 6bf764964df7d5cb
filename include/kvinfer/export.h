#pragma once
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
