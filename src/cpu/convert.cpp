#include <vector>

#include <fmt/format.h>

#include "core/convert.h"
#include "core/kv_quant.h"
#include "core/quant.h"
#include "cpu/convert_avx2.h"
#include "cpu/convert_avx512.h"
#include "cpu/cpu_features.h"
#include "cpu/cpu_ops.h"
#include "kvinfer/error.h"

namespace kvinfer::cpu {

namespace {

// One dispatch per call, then block after block straight into dst.
template <DType T>
void dequantize_row(const std::byte* src, float* dst, int64_t n) {
  constexpr int64_t kElems = dtype_block(T).elements, kBytes = dtype_block(T).bytes;
  for (int64_t b = 0; b < n / kElems; ++b) core::dequantize_block<T>(src + b * kBytes, dst + b * kElems);
}

void check_whole_blocks(DType t, int64_t n) {
  if (is_quantized(t) && n % dtype_block(t).elements != 0)
    throw Error(ErrorKind::InvalidArgument, fmt::format("to_f32: {} values of {} are not a whole number of {}-value blocks", n, dtype_name(t),
                            dtype_block(t).elements));
}

}  // namespace

// Run-time dispatch: the AVX-512 kernels (src/cpu/convert_avx512.cpp) for the formats they take,
// else the AVX2/F16C kernels (src/cpu/convert_avx2.cpp), where the CPU has them; all bit-identical
// to the scalar code below, which stays the portable fallback and the definition.
void to_f32(DType t, const std::byte* src, float* dst, int64_t n) {
  check_whole_blocks(t, n);
  if (cpu_has_avx512() && to_f32_avx512(t, src, dst, n)) return;
  if (cpu_has_avx2_fma_f16c() && to_f32_avx2(t, src, dst, n)) return;
  to_f32_scalar(t, src, dst, n);
}

void to_f32_scalar(DType t, const std::byte* src, float* dst, int64_t n) {
  check_whole_blocks(t, n);
  switch (t) {
    case DType::F32: {
      const auto* s = reinterpret_cast<const float*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = s[i];
      return;
    }
    case DType::F16: {
      const auto* s = reinterpret_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = core::f16_to_f32(s[i]);
      return;
    }
    case DType::BF16: {
      const auto* s = reinterpret_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = core::bf16_to_f32(s[i]);
      return;
    }
    case DType::Q8_0: return dequantize_row<DType::Q8_0>(src, dst, n);
    case DType::Q4_0: return dequantize_row<DType::Q4_0>(src, dst, n);
    case DType::Q4_1: return dequantize_row<DType::Q4_1>(src, dst, n);
    case DType::Q5_0: return dequantize_row<DType::Q5_0>(src, dst, n);
    case DType::Q5_1: return dequantize_row<DType::Q5_1>(src, dst, n);
    case DType::Q4_K: return dequantize_row<DType::Q4_K>(src, dst, n);
    case DType::Q5_K: return dequantize_row<DType::Q5_K>(src, dst, n);
    case DType::Q6_K: return dequantize_row<DType::Q6_K>(src, dst, n);
    case DType::I8:
    case DType::FP8:
      for (int64_t i = 0; i < n; ++i) dst[i] = core::kv_code_value(static_cast<uint8_t>(src[i]), t == DType::FP8);
      return;
  }
  throw Error(ErrorKind::InvalidArgument, fmt::format("to_f32: unknown dtype {}", static_cast<int>(t)));
}

void from_f32(DType t, const float* src, std::byte* dst, int64_t n) {
  switch (t) {
    case DType::F32: {
      auto* d = reinterpret_cast<float*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = src[i];
      return;
    }
    case DType::F16: {
      auto* d = reinterpret_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = core::f32_to_f16(src[i]);
      return;
    }
    case DType::BF16: {
      auto* d = reinterpret_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = core::f32_to_bf16(src[i]);
      return;
    }
    default: break;
  }
  // Nothing is ever quantised here: quantised weights come from GGUF files as they are, and the
  // 8-bit KV rows need their scale (quantize_kv_row).
  throw Error(ErrorKind::InvalidArgument, fmt::format("from_f32: cannot narrow to {} (only f32, f16 and bf16 are written)", dtype_name(t)));
}

void quantize_kv_row(DType t, KvRow row, const float* x, int64_t n, std::byte* codes, float* scale) {
  if (!is_scaled_kv(t))
    throw Error(ErrorKind::InvalidArgument, fmt::format("quantize_kv_row: {} is not an 8-bit KV cache type", dtype_name(t)));
  const bool fp8 = t == DType::FP8;
  auto* c = reinterpret_cast<uint8_t*>(codes);
  if (row == KvRow::Value) return core::quantize_kv_row(x, static_cast<int>(n), fp8, c, scale);
  float small[256];  // the rotated key
  std::vector<float> large(n > 256 ? static_cast<size_t>(n) : 0);
  core::quantize_kv_key_row(x, static_cast<int>(n), fp8, c, scale, n > 256 ? large.data() : small);
}

}  // namespace kvinfer::cpu
