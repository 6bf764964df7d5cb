#include "kvinfer/kv_plan.h"

#include <algorithm>

#include <fmt/format.h>

#include "kvinfer/error.h"

namespace kvinfer {

namespace {
uint64_t checked_mul(uint64_t a, uint64_t b, const char* what) {
  uint64_t r;
  if (__builtin_mul_overflow(a, b, &r)) throw Error(ErrorKind::InvalidArgument, fmt::format("KV plan: {} overflows 64 bits", what));
  return r;
}
}  // namespace

uint64_t kv_layer_bytes_per_token(const ModelConfig& cfg, DType dtype) {
  if (is_quantized(dtype))
    throw Error(ErrorKind::InvalidArgument,
                fmt::format("KV plan: {} is a quantised weight format; a KV cache holds f32, f16, bf16, int8 or fp8",
                            dtype_name(dtype)));
  if (cfg.num_layers <= 0 || cfg.num_kv_heads <= 0 || cfg.head_dim <= 0)
    throw Error(ErrorKind::InvalidArgument, fmt::format("KV plan: invalid config (layers {}, kv heads {}, head_dim {})", cfg.num_layers,
                            cfg.num_kv_heads, cfg.head_dim));
  const uint64_t b = checked_mul(2, static_cast<uint64_t>(cfg.num_kv_heads), "bytes per token");
  // A row: head_dim values, and its scale for the 8-bit types.
  const uint64_t row = checked_mul(static_cast<uint64_t>(cfg.head_dim), dtype_size(dtype), "bytes per token") +
                       kv_scale_bytes(dtype);
  return checked_mul(b, row, "bytes per token");
}

uint64_t kv_bytes_per_token(const ModelConfig& cfg, DType dtype) {
  return checked_mul(kv_layer_bytes_per_token(cfg, dtype), static_cast<uint64_t>(cfg.num_layers), "bytes per token");
}

int64_t kv_ring_piece(int64_t window) { return std::min<int64_t>(window, 512); }

int64_t kv_layer_rows(const ModelConfig& cfg, int64_t layer, int64_t capacity) {
  const int64_t window = cfg.layer_window(layer);
  if (window <= 0) return capacity;
  return std::min(capacity, window + kv_ring_piece(window) - 1);
}

uint64_t plan_kv_bytes(const ModelConfig& cfg, int64_t tokens, DType dtype) {
  if (tokens < 0) throw Error(ErrorKind::InvalidArgument, fmt::format("KV plan: token count {} is negative", tokens));
  const uint64_t per_row = kv_layer_bytes_per_token(cfg, dtype);
  uint64_t total = 0;
  for (int64_t l = 0; l < cfg.num_layers; ++l)
    if (__builtin_add_overflow(total, checked_mul(per_row, static_cast<uint64_t>(kv_layer_rows(cfg, l, tokens)), "cache size"),
                               &total))
      throw Error(ErrorKind::InvalidArgument, "KV plan: cache size overflows 64 bits");
  return total;
}

std::string format_bytes(uint64_t bytes) {
  const auto b = static_cast<double>(bytes);
  if (bytes < 1024) return fmt::format("{} B", bytes);
  if (bytes < (1u << 20)) return fmt::format("{:.1f} KiB", b / 1024.0);
  if (bytes < (1u << 30)) return fmt::format("{:.1f} MiB", b / 1048576.0);
  return fmt::format("{:.2f} GiB", b / 1073741824.0);
}

std::string format_count(int64_t n) {
  const std::string digits = n < 0 ? std::to_string(n).substr(1) : std::to_string(n);
  std::string out = n < 0 ? "-" : "";
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

}  // namespace kvinfer
