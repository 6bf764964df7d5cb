#pragma once
// The argument check both attention launchers (attention_decode.cu, attention_prefill.cu) make of
// the cache pointers: 16-byte aligned rows for f32, f16 and bf16 (16-byte loads and copies); 8-byte
// aligned codes for the 8-bit types (the code blocks follow the cache's scales, which keep them
// 8-byte aligned only), with their scales non-null and 4-byte aligned.
#include <cstdint>
#include <string>

#include "cuda_ops.h"
#include "kvinfer/error.h"

namespace kvinfer::cuda {

inline void check_kv_pointers(const AttentionParams& p, const char* op) {
  const auto fail = [&](const std::string& what) { throw Error(ErrorKind::InvalidArgument, std::string(op) + ": " + what); };
  const auto aligned = [](const void* x, uintptr_t n) { return reinterpret_cast<uintptr_t>(x) % n == 0; };
  if (!is_scaled_kv(p.kv_dtype)) {
    if (!aligned(p.k, 16) || !aligned(p.v, 16)) fail("k and v must be 16-byte aligned");
    return;
  }
  if (!aligned(p.k, 8) || !aligned(p.v, 8)) fail("k and v must be 8-byte aligned (an 8-bit cache's codes)");
  if (p.k_scales == nullptr || p.v_scales == nullptr || !aligned(p.k_scales, 4) || !aligned(p.v_scales, 4))
    fail(std::string("an ") + std::string(dtype_name(p.kv_dtype)) +
         " cache needs k_scales and v_scales: non-null, 4-byte aligned device pointers");
}

}  // namespace kvinfer::cuda
