#pragma once
// Exact KV-cache memory planning, without loading any weights:
//   bytes = Σ over layers of 2 (K and V) × kv_heads × rows(layer) × (head_dim × bytes_per_element + scale_bytes)
// scale_bytes: 4 (an f32 per row) for the 8-bit types int8 and fp8, 0 for f32, f16 and bf16.
// rows(layer): the cache's positions, or for a sliding-window layer (window W) a ring of
// min(positions, W + min(W, 512) − 1) rows (kv_layer_rows).
#include <cstdint>
#include <string>

#include "kvinfer/config.h"
#include "kvinfer/dtype.h"
#include "kvinfer/export.h"

KVINFER_PUBLIC_BEGIN
namespace kvinfer {

// Bytes one token's K and V rows occupy across all layers (what a decode step writes).
uint64_t kv_bytes_per_token(const ModelConfig& cfg, DType dtype);
// Bytes one token's K and V rows occupy in one layer.
uint64_t kv_layer_bytes_per_token(const ModelConfig& cfg, DType dtype);

// A sliding-window layer keeps only the positions its queries can still read, in a ring: row
// p mod rows holds position p. A call's positions are written and attended to in pieces of at
// most kv_ring_piece(W) = min(W, 512) positions, so a ring of W + piece − 1 rows still holds the
// W − 1 positions before a piece's first query when the piece's last row is written (llama.cpp's
// sliding-window cache likewise keeps the window plus one micro-batch).
int64_t kv_ring_piece(int64_t window);
// Rows layer `layer` of a cache of `capacity` positions holds: capacity, or for a layer with a
// sliding window W, min(capacity, W + kv_ring_piece(W) − 1).
int64_t kv_layer_rows(const ModelConfig& cfg, int64_t layer, int64_t capacity);
// Bytes of a cache of `tokens` positions, rings included; what KvCache::bytes() reports for that
// capacity. Throws kvinfer::Error on a negative count or on overflow of 64 bits.
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
