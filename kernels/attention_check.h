#pragma once
// The argument checks both attention launchers (attention_decode.cu, attention_prefill.cu) make of
// the cache: pointers with 16-byte aligned rows for f32, f16 and bf16 (16-byte loads and copies);
// 8-byte aligned codes for the 8-bit types (the code blocks follow the cache's scales, which keep
// them 8-byte aligned only), with their scales non-null and 4-byte aligned; and rows that hold
// every position the call reads at once (kernels/core/kv_ring.h's one wrap per run).
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

// p.start and p.n already checked against p.capacity. device_start: the kernel reads the
// position on the device (a graph's decode step), which may be any position below the capacity.
inline void check_kv_rows(const AttentionParams& p, const char* op, bool device_start) {
  const auto fail = [&](const std::string& what) { throw Error(ErrorKind::InvalidArgument, std::string(op) + ": " + what); };
  if (p.rows < 1 || p.rows > p.capacity)
    fail("rows " + std::to_string(p.rows) + " must be from 1 to the capacity " + std::to_string(p.capacity));
  const int64_t last = device_start ? p.capacity - 1 : p.start + p.n - 1;
  const int64_t from = device_start ? last : p.start;  // the first query's position
  const int64_t first = p.window > 0 && from - p.window + 1 > 0 ? from - p.window + 1 : 0;
  if (last - first + 1 > p.rows)
    fail("positions " + std::to_string(first) + " .. " + std::to_string(last) + " read at once are more than the " +
         std::to_string(p.rows) + " rows of the cache (a sliding-window ring holds window + piece - 1)");
}

}  // namespace kvinfer::cuda
