#pragma once
// Exact KV-cache memory planning, without loading any weights:
//   bytes = 2 (K and V) × layers × kv_heads × tokens × (head_dim × bytes_per_element + scale_bytes)
// scale_bytes: 4 (an f32 per row) for the 8-bit types int8 and fp8, 0 for f32, f16 and bf16.
#include <cstdint>
#include <string>

#include "kvinfer/config.h"
#include "kvinfer/dtype.h"
#include "kvinfer/export.h"

KVINFER_PUBLIC_BEGIN
namespace kvinfer {

// Bytes one token occupies in the cache across all layers (K and V).
uint64_t kv_bytes_per_token(const ModelConfig& cfg, DType dtype);
// Bytes of a cache holding `tokens` positions; what KvCache::bytes() reports for that capacity.
// Throws kvinfer::Error on a negative count or on overflow of 64 bits.
uint64_t plan_kv_bytes(const ModelConfig& cfg, int64_t tokens, DType dtype);

// The cache dtype KvCache picks when none is given: the weights' dtype (as vLLM's "auto"), f16
// for quantised weights (llama.cpp's default cache).
constexpr DType default_kv_dtype(DType weight_dtype) { return is_quantized(weight_dtype) ? DType::F16 : weight_dtype; }

// A byte count for people, in binary units: "512 B", "1.5 KiB", "2.0 MiB", "1.00 GiB".
std::string format_bytes(uint64_t bytes);
// A count for people, in groups of three digits: 250004 -> "250,004", -1 -> "-1".
std::string format_count(int64_t n);

}  // namespace kvinfer
KVINFER_PUBLIC_END
