// 8-bit activation products (linear_int8.h): the quantiser, the portable products and the
// dispatch to the AVX-512 VNNI and AVX2 kernels (linear_int8_avx512.cpp, linear_int8_avx2.cpp),
// which give the same bits. The 15-bit ones of linear_int15.h too: the same products with two
// passes, and their quantiser.
#include "cpu/linear_int8.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/quant.h"
#include "cpu/cpu_features.h"
#include "cpu/int8_blocks.h"
#include "cpu/linear_avx2.h"
#include "cpu/linear_int15.h"
#include "cpu/linear_int8_avx512.h"

namespace kvinfer::cpu {

namespace {

// The 32 codes of weight block b: Q8_0's signed bytes, Q4's nibbles (0..15).
template <DType T>
void weight_codes(const std::byte* block, int32_t out[32]) {
  using B = typename core::BlockOf<T>::type;
  if constexpr (T == DType::Q8_0) {
    for (int j = 0; j < 32; ++j) out[j] = static_cast<int8_t>(core::q_byte(block, offsetof(B, qs) + j));
  } else {
    for (int j = 0; j < 16; ++j) {
      const uint8_t byte = core::q_byte(block, offsetof(B, qs) + j);
      out[j] = byte & 0x0F;
      out[j + 16] = byte >> 4;
    }
  }
}

// Value j of a block is in partial sum (j mod 16) / 4: each of the 4 partials sums values
// 4m..4m + 3 and 16 + 4m..16 + 4m + 3. With 15-bit activations (l not null) q holds the high
// codes and a partial is 128 · Σ w · h + Σ w · l (linear_int15.h).
template <DType T>
float row_product(const Int8Block* blocks, const int8_t* q, const int8_t* l, const std::byte* w, int64_t n) {
  using B = typename core::BlockOf<T>::type;
  float acc[4] = {}, off = 0.0f;
  for (int64_t b = 0; b < n / 32; ++b) {
    const std::byte* block = w + b * static_cast<int64_t>(sizeof(B));
    int32_t codes[32];
    weight_codes<T>(block, codes);
    const float d = core::q_half(block, offsetof(B, d));
    const float p = d * blocks[b].d;
    int32_t partial[4] = {}, low[4] = {};
    for (int j = 0; j < 32; ++j) partial[(j % 16) / 4] += codes[j] * q[32 * b + j];
    if (l) {
      for (int j = 0; j < 32; ++j) low[(j % 16) / 4] += codes[j] * l[32 * b + j];
      for (int m = 0; m < 4; ++m) partial[m] = 128 * partial[m] + low[m];
    }
    for (int m = 0; m < 4; ++m) {
      const float term = p * static_cast<float>(partial[m]);
      acc[m] = acc[m] + term;
    }
    if constexpr (T != DType::Q8_0) {
      float factor = d;  // Q4_0: d_w (its offset is −8 · d_w); Q4_1: m_w
      if constexpr (T == DType::Q4_1) factor = core::q_half(block, offsetof(core::BlockQ4_1, m));
      const float term = factor * blocks[b].ds;
      off = off + term;
    }
  }
  const float tree = (acc[0] + acc[2]) + (acc[1] + acc[3]);
  if constexpr (T == DType::Q8_0) return tree;
  if constexpr (T == DType::Q4_1) return tree + off;
  return tree - 8.0f * off;
}

float tree8(const float* v) { return ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7])); }

// Q5_0, Q5_1 (linear_int8.h): the blocks as int8_blocks.h reads them, 8 position partials, fused
// multiply-adds, the fixed trees.
template <DType T>
float block_type_product(const Int8Block* blocks, const int8_t* q, const std::byte* w, int64_t n) {
  float acc[8] = {}, off[8] = {};
  Int8WeightBlock wb;
  for (int64_t b = 0; b < n / 32; ++b) {
    int8_weight_block<T>(w, b, wb);
    const float p = wb.s * blocks[b].d;
    for (int l = 0; l < 8; ++l) {
      int32_t partial = 0;
      for (int j = 4 * l; j < 4 * l + 4; ++j) partial += wb.u[j] * q[32 * b + j];
      acc[l] = std::fma(p, static_cast<float>(partial), acc[l]);
    }
    off[b % 8] = std::fma(wb.f, blocks[b].ds, off[b % 8]);
  }
  return T == DType::Q5_0 ? tree8(acc) - 16.0f * tree8(off) : tree8(acc) + tree8(off);
}

// Q4_K, Q5_K, Q6_K (linear_int8.h): super-blocks as int8_blocks.h reads them, integers within
// one (Q6_K: within each half), then fused multiply-adds.
template <DType T>
float super_product(const Int8Super* supers, const int8_t* q, const std::byte* w, int64_t n) {
  constexpr int kChunks = T == DType::Q6_K ? 4 : 8;  // 32-value chunks summed in integers
  float acc[8] = {}, moff[8] = {};
  KSuper ks;
  for (int64_t s = 0; s < n / 256; ++s) {
    k_super<T>(w, s, ks);
    const float p = ks.d * supers[s].d, pm = ks.dmin * supers[s].d;
    const int8_t* qs = q + 256 * s;
    for (int k0 = 0; k0 < 8; k0 += kChunks) {
      int32_t lanes[8] = {};
      for (int k = k0; k < k0 + kChunks; ++k)
        for (int l = 0; l < 8; ++l) {
          int32_t dot = 0;
          for (int j = 4 * l; j < 4 * l + 4; ++j) dot += ks.u[32 * k + j] * qs[32 * k + j];
          lanes[l] += ks.m[k][l / 4] * dot;
        }
      for (int l = 0; l < 8; ++l) acc[l] = std::fma(p, static_cast<float>(lanes[l]), acc[l]);
    }
    for (int l = 0; l < 8; ++l) {
      const int32_t m = ks.n[2 * l] * supers[s].sums[2 * l] + ks.n[2 * l + 1] * supers[s].sums[2 * l + 1];
      moff[l] = std::fma(pm, static_cast<float>(m), moff[l]);
    }
  }
  return T == DType::Q6_K ? tree8(acc) - 32.0f * tree8(moff) : tree8(acc) - tree8(moff);
}

// Quantises 256 values at a time: Int8Block's arithmetic with one scale for the 256.
void quantize_super_portable(const float* x, int64_t n, Int8Super* supers, int8_t* q) {
  for (int64_t s = 0; s < n / 256; ++s) {
    const float* xs = x + 256 * s;
    int8_t* qs = q + 256 * s;
    float amax = 0.0f;
    bool finite = true;
    for (int j = 0; j < 256; ++j) {
      finite = finite && std::isfinite(xs[j]);
      amax = std::max(amax, std::fabs(xs[j]));
    }
    Int8Super& out = supers[s];
    if (!finite) {
      out.d = std::numeric_limits<float>::quiet_NaN();
      std::memset(qs, 0, 256);
      std::memset(out.sums, 0, sizeof out.sums);
      continue;
    }
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < 256; ++j) qs[j] = static_cast<int8_t>(std::clamp(std::nearbyint(xs[j] * id), -127.0f, 127.0f));
    out.d = d;
    for (int i = 0; i < 16; ++i) {
      int sum = 0;
      for (int j = 16 * i; j < 16 * i + 16; ++j) sum += qs[j];
      out.sums[i] = static_cast<int16_t>(sum);
    }
  }
}

template <DType T>
void rows_portable(const Int8Block* blocks, const int8_t* q, const std::byte* w, int64_t rows, int64_t n, float* y) {
  const size_t row_bytes = dtype_row_bytes(T, n);
  for (int64_t c = 0; c < rows; ++c) {
    const std::byte* row = w + static_cast<size_t>(c) * row_bytes;
    if constexpr (int8_block_type(T))
      y[c] = block_type_product<T>(blocks, q, row, n);
    else
      y[c] = row_product<T>(blocks, q, nullptr, row, n);
  }
}

template <DType T>
void super_rows_portable(const Int8Super* supers, const int8_t* q, const std::byte* w, int64_t rows, int64_t n,
                         float* y) {
  const size_t row_bytes = dtype_row_bytes(T, n);
  for (int64_t c = 0; c < rows; ++c) y[c] = super_product<T>(supers, q, w + static_cast<size_t>(c) * row_bytes, n);
}

// max|x| over a 32-value block, or NaN when the block holds a NaN or an infinity.
float block_amax(const float* xb) {
  float amax = 0.0f;
  bool finite = true;
  for (int j = 0; j < 32; ++j) {
    finite = finite && std::isfinite(xb[j]);
    amax = std::max(amax, std::fabs(xb[j]));
  }
  return finite ? amax : std::numeric_limits<float>::quiet_NaN();
}

template <DType T>
void int15_rows_portable(const Int8Block* blocks, const int8_t* h, const int8_t* l, const std::byte* w, int64_t rows,
                         int64_t n, float* y) {
  const size_t row_bytes = dtype_row_bytes(T, n);
  for (int64_t c = 0; c < rows; ++c) y[c] = row_product<T>(blocks, h, l, w + static_cast<size_t>(c) * row_bytes, n);
}

}  // namespace

void quantize_int8(const float* x, int64_t n, Int8Block* blocks, int8_t* q) {
  if (cpu_has_avx2_fma_f16c()) return avx2::quantize_int8(x, n, blocks, q);
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* xb = x + 32 * b;
    int8_t* qb = q + 32 * b;
    const float amax = block_amax(xb);
    if (std::isnan(amax)) {
      blocks[b] = {amax, amax};
      std::memset(qb, 0, 32);
      continue;
    }
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    int32_t sum = 0;
    for (int j = 0; j < 32; ++j) {
      const float v = std::clamp(std::nearbyint(xb[j] * id), -127.0f, 127.0f);
      qb[j] = static_cast<int8_t>(v);
      sum += qb[j];
    }
    blocks[b] = {d, d * static_cast<float>(sum)};
  }
}

void int8_rows_product(DType t, const Int8Block* blocks, const int8_t* q, const std::byte* w, int64_t rows, int64_t n,
                       float* y, Prefetcher& pf) {
  // Q5_0/Q5_1 have AVX2 kernels only: AVX-512 machines run those too, so that every machine gives
  // the same bits.
  if (cpu_has_avx512_vnni() && !int8_block_type(t)) return avx512::int8_rows_product(t, blocks, q, w, rows, n, y, pf);
  if (cpu_has_avx2_fma_f16c()) return avx2::int8_rows_product(t, blocks, q, w, rows, n, y, pf);
  switch (t) {
    case DType::Q8_0: return rows_portable<DType::Q8_0>(blocks, q, w, rows, n, y);
    case DType::Q4_0: return rows_portable<DType::Q4_0>(blocks, q, w, rows, n, y);
    case DType::Q4_1: return rows_portable<DType::Q4_1>(blocks, q, w, rows, n, y);
    case DType::Q5_1: return rows_portable<DType::Q5_1>(blocks, q, w, rows, n, y);
    default: return rows_portable<DType::Q5_0>(blocks, q, w, rows, n, y);
  }
}

void quantize_int8_super(const float* x, int64_t n, Int8Super* supers, int8_t* q) {
  if (cpu_has_avx2_fma_f16c()) return avx2::quantize_int8_super(x, n, supers, q);
  quantize_super_portable(x, n, supers, q);
}

void int8_super_rows_product(DType t, const Int8Super* supers, const int8_t* q, const std::byte* w, int64_t rows,
                             int64_t n, float* y, Prefetcher& pf) {
  if (cpu_has_avx2_fma_f16c()) return avx2::int8_super_rows_product(t, supers, q, w, rows, n, y, pf);
  switch (t) {
    case DType::Q4_K: return super_rows_portable<DType::Q4_K>(supers, q, w, rows, n, y);
    case DType::Q5_K: return super_rows_portable<DType::Q5_K>(supers, q, w, rows, n, y);
    default: return super_rows_portable<DType::Q6_K>(supers, q, w, rows, n, y);
  }
}

void quantize_int15(const float* x, int64_t n, Int8Block* blocks, int8_t* h, int8_t* l) {
  constexpr float kMaxCode = 16256.0f;  // 127 · 128: h stays within int8 after rounding
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* xb = x + 32 * b;
    int8_t *hb = h + 32 * b, *lb = l + 32 * b;
    const float amax = block_amax(xb);
    if (std::isnan(amax)) {
      blocks[b] = {amax, amax};
      std::memset(hb, 0, 32);
      std::memset(lb, 0, 32);
      continue;
    }
    const float d = amax / kMaxCode;
    int32_t sum = 0;
    for (int j = 0; j < 32; ++j) {
      // x / d can round above 16,256 (d rounded down); a / 128 is exact, its rounding to even ≤ 127.
      const float a = d != 0.0f ? std::clamp(std::nearbyint(xb[j] / d), -kMaxCode, kMaxCode) : 0.0f;
      const float high = std::nearbyint(a / 128.0f);
      hb[j] = static_cast<int8_t>(high);
      lb[j] = static_cast<int8_t>(a - 128.0f * high);
      sum += static_cast<int32_t>(a);
    }
    blocks[b] = {d, d * static_cast<float>(sum)};
  }
}

void int15_rows_product(DType t, const Int8Block* blocks, const int8_t* h, const int8_t* l, const std::byte* w,
                        int64_t rows, int64_t n, float* y, Prefetcher& pf) {
  // AVX-512 machines take the AVX2 kernels too: every machine gives the same bits.
  if (cpu_has_avx2_fma_f16c()) return avx2::int15_rows_product(t, blocks, h, l, w, rows, n, y, pf);
  switch (t) {
    case DType::Q8_0: return int15_rows_portable<DType::Q8_0>(blocks, h, l, w, rows, n, y);
    case DType::Q4_0: return int15_rows_portable<DType::Q4_0>(blocks, h, l, w, rows, n, y);
    default: return int15_rows_portable<DType::Q4_1>(blocks, h, l, w, rows, n, y);
  }
}

}  // namespace kvinfer::cpu
