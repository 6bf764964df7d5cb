// f32 → Q8_0 / Q4_0 / Q4_1 / Q4_K / Q5_K / Q6_K, as ggml's quantize_row_*_ref (see quantize.h). Every
// line below is one float32 operation of the C reference, in its order; the library is built with
// -ffp-contract=off, so `x * id + 8.5f` is two roundings here as in gguf-py's numpy.
#include "core/quantize.h"

#include <cfloat>
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include <fmt/format.h>

#include "core/convert.h"
#include "core/quant.h"
#include "kvinfer/error.h"

namespace kvinfer {

namespace {

constexpr int kBlock = core::kQuantGroup;  // 32 values per block of Q8_0, Q4_0 and Q4_1

void put_half(std::byte* p, float v) {
  const uint16_t h = core::f32_to_f16(v);
  p[0] = static_cast<std::byte>(h & 0xFFu);
  p[1] = static_cast<std::byte>(h >> 8);
}

// C's float → integer conversion (truncation toward zero) where the value is in [lo, hi]; out
// of range it is clamped (C: undefined) and a NaN gives 0. Finite blocks never leave the range.
int to_code(float v, int lo, int hi) {
  if (std::isnan(v)) return 0;
  if (v <= static_cast<float>(lo)) return lo;
  if (v >= static_cast<float>(hi)) return hi;
  return static_cast<int>(v);
}

float inverse(float d) { return d != 0.0f ? 1.0f / d : 0.0f; }  // ggml: d ? 1.0f/d : 0.0f

void quantize_q8_0(const float* x, std::byte* b) {
  float amax = 0.0f;
  for (int j = 0; j < kBlock; ++j) {
    const float a = std::fabs(x[j]);
    amax = amax > a ? amax : a;  // ggml's MAX(amax, fabsf(v))
  }
  const float d = amax / 127.0f;
  const float id = inverse(d);
  put_half(b + offsetof(core::BlockQ8_0, d), d);
  for (int j = 0; j < kBlock; ++j) {
    const int q = to_code(std::round(x[j] * id), -128, 127);  // roundf: half away from zero
    b[offsetof(core::BlockQ8_0, qs) + static_cast<size_t>(j)] = static_cast<std::byte>(static_cast<uint8_t>(q));
  }
}

// Codes 0..15 of Q4_0/Q4_1: value j in the low nibble of byte j, value j + 16 in the high one.
void pack_nibbles(const int* q, std::byte* qs) {
  for (int j = 0; j < kBlock / 2; ++j)
    qs[j] = static_cast<std::byte>(static_cast<unsigned>(q[j]) | (static_cast<unsigned>(q[j + kBlock / 2]) << 4));
}

void quantize_q4_0(const float* x, std::byte* b) {
  float amax = 0.0f, max = 0.0f;  // the value of largest magnitude, with its sign (the first one)
  for (int j = 0; j < kBlock; ++j) {
    const float v = x[j];
    if (amax < std::fabs(v)) {
      amax = std::fabs(v);
      max = v;
    }
  }
  const float d = max / -8.0f;
  const float id = inverse(d);
  put_half(b + offsetof(core::BlockQ4_0, d), d);
  int q[kBlock];
  for (int j = 0; j < kBlock; ++j) q[j] = to_code(x[j] * id + 8.5f, 0, 15);  // MIN(15, (int8_t)(x0 + 8.5f))
  pack_nibbles(q, b + offsetof(core::BlockQ4_0, qs));
}

void quantize_q4_1(const float* x, std::byte* b) {
  float min = FLT_MAX, max = -FLT_MAX;
  for (int j = 0; j < kBlock; ++j) {
    const float v = x[j];
    if (v < min) min = v;
    if (v > max) max = v;
  }
  const float d = (max - min) / 15.0f;
  const float id = inverse(d);
  put_half(b + offsetof(core::BlockQ4_1, d), d);
  put_half(b + offsetof(core::BlockQ4_1, m), min);
  int q[kBlock];
  for (int j = 0; j < kBlock; ++j) q[j] = to_code((x[j] - min) * id + 0.5f, 0, 15);
  pack_nibbles(q, b + offsetof(core::BlockQ4_1, qs));
}

// ---- K-quants (Q4_K, Q5_K): 256-value super-blocks of eight 32-value sub-blocks ----

// ggml's nearest_int: adding 1.5·2^23 rounds v to an integer, to nearest, ties to even, and the
// low mantissa bits hold it, for |v| <= 2^22 - 1, where ggml asserts. Out of that range
// (non-finite input only) v is clamped, and a NaN gives 0.
int nearest_int(float v) {
  if (std::isnan(v)) return 0;
  constexpr float kLimit = 4194303.0f;
  const float val = std::clamp(v, -kLimit, kLimit) + 12582912.0f;
  int32_t i = 0;
  std::memcpy(&i, &val, sizeof i);
  return (i & 0x007fffff) - 0x00400000;
}

constexpr int kSub = 32;  // values per sub-block

// ggml's make_qkx2_quants for one sub-block, squared error (use_mad false): codes L in 0..nmax
// and a scale and minimum such that x ≈ scale · L - the_min, the best of the min/max fit and
// nstep + 1 least-squares fits at iscale = (rmin + rdelta·is + nmax) / (max - min). Returns the
// scale; *the_min >= 0.
float make_qkx2_quants(int nmax, const float* x, const float* weights, uint8_t* L, float* the_min, uint8_t* Laux,
                       float rmin, float rdelta, int nstep) {
  float min = x[0];
  float max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < kSub; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    std::fill(L, L + kSub, uint8_t{0});
    *the_min = -min;
    return 0.0f;
  }
  const auto fnmax = static_cast<float>(nmax);
  float iscale = fnmax / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < kSub; ++i) {
    const int l = nearest_int(iscale * (x[i] - min));
    L[i] = static_cast<uint8_t>(std::max(0, std::min(nmax, l)));
    float diff = scale * static_cast<float>(L[i]) + min - x[i];
    diff = diff * diff;
    best_error += weights[i] * diff;
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * static_cast<float>(is) + fnmax) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < kSub; ++i) {
      const int l = std::max(0, std::min(nmax, nearest_int(iscale * (x[i] - min))));
      Laux[i] = static_cast<uint8_t>(l);
      const float w = weights[i], fl = static_cast<float>(l);
      sum_l += w * fl;
      sum_l2 += w * fl * fl;
      sum_xl += w * fl * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < kSub; ++i) {
        float diff = this_scale * static_cast<float>(Laux[i]) + this_min - x[i];
        diff = diff * diff;
        cur_error += weights[i] * diff;
      }
      if (cur_error < best_error) {
        std::copy(Laux, Laux + kSub, L);
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

// One Q4_K or Q5_K super-block: ggml's quantize_row_q4_K_ref / quantize_row_q5_K_ref.
template <DType T>
void quantize_k(const float* x, std::byte* b) {
  using B = typename core::BlockOf<T>::type;
  constexpr bool kFive = T == DType::Q5_K;
  constexpr int kMax = kFive ? 31 : 15;
  constexpr int kSubs = core::kQK / kSub;
  uint8_t L[core::kQK], Laux[kSub];
  float weights[kSub], mins[kSubs], scales[kSubs];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < kSubs; ++j) {
    const float* xj = x + kSub * j;
    float sum_x2 = 0;
    for (int l = 0; l < kSub; ++l) sum_x2 += xj[l] * xj[l];
    const float av_x = std::sqrt(sum_x2 / kSub);
    for (int l = 0; l < kSub; ++l) weights[l] = av_x + std::fabs(xj[l]);
    scales[j] = kFive ? make_qkx2_quants(kMax, xj, weights, L + kSub * j, &mins[j], Laux, -0.5f, 0.1f, 15)
                      : make_qkx2_quants(kMax, xj, weights, L + kSub * j, &mins[j], Laux, -1.0f, 0.1f, 20);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  // The 6-bit scales and mins, packed as core::k_scale_min reads them.
  std::byte* sc = b + offsetof(B, scales);
  std::fill(sc, sc + 12, std::byte{0});
  const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
  for (int j = 0; j < kSubs; ++j) {
    // ggml: uint8_t ls = nearest_int(...) (modulo 256), then MIN(63, ls).
    const auto ls = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_scale * scales[j])));
    const auto lm = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_min * mins[j])));
    if (j < 4) {
      sc[j] = static_cast<std::byte>(ls);
      sc[j + 4] = static_cast<std::byte>(lm);
    } else {
      sc[j + 4] = static_cast<std::byte>((ls & 0xF) | ((lm & 0xF) << 4));
      sc[j - 4] |= static_cast<std::byte>((ls >> 4) << 6);
      sc[j] |= static_cast<std::byte>((lm >> 4) << 6);
    }
  }
  put_half(b + offsetof(B, d), max_scale / 63.0f);
  put_half(b + offsetof(B, dmin), max_min / 63.0f);
  // Every value coded again against the scales as stored.
  const float d_all = core::q_half(b, offsetof(B, d)), dmin_all = core::q_half(b, offsetof(B, dmin));
  for (int j = 0; j < kSubs; ++j) {
    int s = 0, m = 0;
    core::k_scale_min(sc, j, s, m);
    const float d = d_all * static_cast<float>(s);
    if (d == 0.0f) continue;  // ggml: if (!d) continue; the first pass's codes stay
    const float dm = dmin_all * static_cast<float>(m);
    for (int ii = 0; ii < kSub; ++ii) {
      const int l = nearest_int((x[kSub * j + ii] + dm) / d);
      L[kSub * j + ii] = static_cast<uint8_t>(std::max(0, std::min(kMax, l)));
    }
  }
  // Codes: sub-blocks 2i and 2i+1 share qs[32i .. 32i+31], low and high nibbles; Q5_K's bit 4
  // of sub-block g is bit g of qh[l].
  std::byte* qs = b + offsetof(B, qs);
  if constexpr (kFive) std::fill(b + offsetof(B, qh), b + offsetof(B, qh) + 32, std::byte{0});
  for (int i = 0; i < kSubs / 2; ++i)
    for (int l = 0; l < kSub; ++l) {
      int lo = L[64 * i + l], hi = L[64 * i + kSub + l];
      if constexpr (kFive) {
        std::byte& qh = b[offsetof(B, qh) + static_cast<size_t>(l)];
        if (lo > 15) {
          lo -= 16;
          qh |= static_cast<std::byte>(1u << (2 * i));
        }
        if (hi > 15) {
          hi -= 16;
          qh |= static_cast<std::byte>(1u << (2 * i + 1));
        }
      }
      qs[kSub * i + l] = static_cast<std::byte>(lo | (hi << 4));
    }
}

// ---- Q6_K: 256-value super-blocks of sixteen 16-value sub-blocks, signed 6-bit codes ----

constexpr float kGroupMaxEps = 1e-15f;  // ggml's GROUP_MAX_EPS: a sub-block under it is zeros

// ggml's make_qx_quants(16, 32, x, L, rmse_type 1, no weights): weights x², codes l in -32..31
// stored as l + 32, the best of the max-based scale and 18 more (iscale = -(32 + 0.1·is) / max,
// is = ±1..±9) by the weighted least-squares criterion. Returns the scale (negative where the
// value of largest magnitude is positive: codes run from -32).
float make_qx_quants_q6(const float* x, int8_t* L) {
  constexpr int n = 16, nmax = 32;
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    std::fill(L, L + n, int8_t{0});
    return 0.0f;
  }
  const auto code = [](float v) { return std::max(-nmax, std::min(nmax - 1, nearest_int(v))); };
  float iscale = static_cast<float>(-nmax) / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = code(iscale * x[i]);
    L[i] = static_cast<int8_t>(l + nmax);
    const float w = x[i] * x[i], fl = static_cast<float>(l);
    sumlx += w * x[i] * fl;
    suml2 += w * fl * fl;
  }
  float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is)) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i], fl = static_cast<float>(code(iscale * x[i]));
      sumlx += w * x[i] * fl;
      suml2 += w * fl * fl;
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(nmax + code(iscale * x[i]));
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// One Q6_K super-block: ggml's quantize_row_q6_K_ref. 8-bit sub-block scales against
// d = -max_scale / 128 (f16), every value coded again against d · scale as stored.
void quantize_q6_k(const float* x, std::byte* b) {
  using B = core::BlockQ6_K;
  constexpr int kSubs = core::kQK / 16;
  int8_t L[core::kQK];
  float scales[kSubs];
  float max_scale = 0, max_abs_scale = 0;
  for (int ib = 0; ib < kSubs; ++ib) {
    scales[ib] = make_qx_quants_q6(x + 16 * ib, L + 16 * ib);
    const float abs_scale = std::fabs(scales[ib]);
    if (abs_scale > max_abs_scale) {
      max_abs_scale = abs_scale;
      max_scale = scales[ib];
    }
  }
  std::fill(b, b + sizeof(B), std::byte{0});
  if (max_abs_scale < kGroupMaxEps) return;  // ggml: the block zeroed, d = +0
  const float iscale = -128.0f / max_scale;
  put_half(b + offsetof(B, d), 1 / iscale);
  std::byte* sc = b + offsetof(B, scales);
  for (int ib = 0; ib < kSubs; ++ib)
    sc[ib] = static_cast<std::byte>(static_cast<uint8_t>(std::min(127, nearest_int(iscale * scales[ib]))));
  const float d_all = core::q_half(b, offsetof(B, d));
  for (int j = 0; j < kSubs; ++j) {
    const float d = d_all * static_cast<float>(static_cast<int8_t>(sc[j]));
    if (d == 0.0f) continue;  // ggml: if (!d) continue; the first pass's codes stay
    for (int ii = 0; ii < 16; ++ii) {
      const int l = std::max(-32, std::min(31, nearest_int(x[16 * j + ii] / d)));
      L[16 * j + ii] = static_cast<int8_t>(l + 32);
    }
  }
  // Half h (values 128h ..): value 128h + 32k + l has its low 4 bits in ql[64h + 32(k % 2) + l]
  // (low nibble for k < 2, high after) and its high 2 bits at bit 2k of qh[32h + l].
  std::byte* ql = b + offsetof(B, ql);
  std::byte* qh = b + offsetof(B, qh);
  for (int h = 0; h < 2; ++h)
    for (int l = 0; l < 32; ++l) {
      const auto q = [&](int k) { return static_cast<unsigned>(static_cast<uint8_t>(L[128 * h + 32 * k + l])); };
      ql[64 * h + l] = static_cast<std::byte>((q(0) & 0xF) | ((q(2) & 0xF) << 4));
      ql[64 * h + 32 + l] = static_cast<std::byte>((q(1) & 0xF) | ((q(3) & 0xF) << 4));
      qh[32 * h + l] =
          static_cast<std::byte>((q(0) >> 4) | ((q(1) >> 4) << 2) | ((q(2) >> 4) << 4) | ((q(3) >> 4) << 6));
    }
}

template <void (*Quantize)(const float*, std::byte*)>
void quantize_blocks(DType t, const float* src, std::byte* dst, int64_t n) {
  const auto bytes = static_cast<size_t>(dtype_block(t).bytes);
  const int64_t values = dtype_block(t).elements;
  for (int64_t i = 0; i < n / values; ++i) Quantize(src + i * values, dst + static_cast<size_t>(i) * bytes);
}

}  // namespace

void quantize_row(DType t, const float* src, std::byte* dst, int64_t n) {
  if (!can_quantize(t))
    throw Error(ErrorKind::InvalidArgument, fmt::format(
        "quantize_row: cannot quantise to {} (only q8_0, q4_0, q4_1, q4_k, q5_k and q6_k are written)", dtype_name(t)));
  const int64_t values = dtype_block(t).elements;
  if (n < 0 || n % values != 0)
    throw Error(ErrorKind::InvalidArgument, fmt::format("quantize_row: {} values of {} are not a whole number of {}-value blocks", n, dtype_name(t),
                            values));
  switch (t) {
    case DType::Q8_0: return quantize_blocks<quantize_q8_0>(t, src, dst, n);
    case DType::Q4_0: return quantize_blocks<quantize_q4_0>(t, src, dst, n);
    case DType::Q4_1: return quantize_blocks<quantize_q4_1>(t, src, dst, n);
    case DType::Q4_K: return quantize_blocks<quantize_k<DType::Q4_K>>(t, src, dst, n);
    case DType::Q5_K: return quantize_blocks<quantize_k<DType::Q5_K>>(t, src, dst, n);
    case DType::Q6_K: return quantize_blocks<quantize_q6_k>(t, src, dst, n);
    default: break;
  }
}

}  // namespace kvinfer
