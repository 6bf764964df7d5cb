#pragma once
// Element types of weights and KV caches. F32/F16/BF16 are plain element types (weights and
// caches); Q8_0 .. Q6_K are ggml's block-quantised weight formats, read from GGUF files and used in
// place: `block_elements` consecutive values of a row share one block of `block_bytes` bytes.
// I8 and FP8 are KV cache types only: one byte a value, and one f32 scale per row of head_dim
// values (per position and KV head), kept beside the rows; key rows are stored rotated by a
// Walsh–Hadamard transform (docs/kv-cache.md, "8-bit caches").
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kvinfer/export.h"

KVINFER_PUBLIC_BEGIN
namespace kvinfer {

enum class DType : uint8_t {
  F32, F16, BF16,
  Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K,
  I8,   // KV cache only: symmetric int8 codes −127..127, value = code × the row's scale
  FP8,  // KV cache only: OCP FP8 E4M3 codes (±448 at most, no infinities), value = code × the row's scale
};

struct DTypeBlock {
  int64_t elements;  // values per block (1 for plain types)
  int64_t bytes;     // bytes per block
};

constexpr DTypeBlock dtype_block(DType t) {
  switch (t) {
    case DType::F32: return {1, 4};
    case DType::F16: return {1, 2};
    case DType::BF16: return {1, 2};
    case DType::Q8_0: return {32, 34};   // f16 d, 32 × int8
    case DType::Q4_0: return {32, 18};   // f16 d, 16 bytes of nibbles
    case DType::Q4_1: return {32, 20};   // f16 d, f16 m, 16 bytes of nibbles
    case DType::Q5_0: return {32, 22};   // f16 d, 4 bytes of high bits, 16 bytes of nibbles
    case DType::Q5_1: return {32, 24};   // f16 d, f16 m, 4 bytes of high bits, 16 bytes of nibbles
    case DType::Q4_K: return {256, 144};
    case DType::Q5_K: return {256, 176};
    case DType::Q6_K: return {256, 210};
    case DType::I8: return {1, 1};   // plus the row's scale (kv_scale_bytes)
    case DType::FP8: return {1, 1};  // plus the row's scale
  }
  return {1, 1};
}

constexpr bool is_quantized(DType t) { return dtype_block(t).elements > 1; }

// The 8-bit KV cache types, whose rows carry a scale each; never a weight type.
constexpr bool is_scaled_kv(DType t) { return t == DType::I8 || t == DType::FP8; }

// Bytes of one element of a plain or 8-bit KV type (a scaled row's scale not included).
// Quantised types have no per-element size: use dtype_row_bytes.
constexpr size_t dtype_size(DType t) { return t == DType::F32 ? 4 : is_scaled_kv(t) ? 1 : 2; }

// Bytes of the scale a row of an 8-bit KV type carries (an f32); 0 for the others.
constexpr size_t kv_scale_bytes(DType t) { return is_scaled_kv(t) ? 4 : 0; }

// Bytes of `n` consecutive values (n a multiple of the block size for quantised types).
constexpr uint64_t dtype_row_bytes(DType t, int64_t n) {
  const DTypeBlock b = dtype_block(t);
  return static_cast<uint64_t>(n / b.elements) * static_cast<uint64_t>(b.bytes);
}

// How the CPU multiplies quantised weights by a product's input (LoadOptions::activations).
enum class ActivationMode : uint8_t {
  Exact,  // every product exact in f32: HF's results on the dequantised weights
  Int15,  // 15-bit activation codes per 32 values, integer products (Q8_0, Q4_0, Q4_1 weights)
  Int8,   // 8-bit activation codes, integer products, as llama.cpp (every ggml type)
};

constexpr std::string_view activation_mode_name(ActivationMode a) {
  switch (a) {
    case ActivationMode::Exact: return "exact";
    case ActivationMode::Int15: return "int15";
    case ActivationMode::Int8: return "int8";
  }
  return "?";
}

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::Q8_0: return "q8_0";
    case DType::Q4_0: return "q4_0";
    case DType::Q4_1: return "q4_1";
    case DType::Q5_0: return "q5_0";
    case DType::Q5_1: return "q5_1";
    case DType::Q4_K: return "q4_k";
    case DType::Q5_K: return "q5_k";
    case DType::Q6_K: return "q6_k";
    case DType::I8: return "int8";
    case DType::FP8: return "fp8";
  }
  return "?";
}

// Parses "f32"/"float32", "f16"/"float16"/"half", "bf16"/"bfloat16", "int8"/"i8" and
// "fp8"/"fp8_e4m3"/"e4m3" (the types a KV cache can hold); throws kvinfer::Error otherwise.
DType parse_dtype(std::string_view name);

}  // namespace kvinfer
KVINFER_PUBLIC_END
