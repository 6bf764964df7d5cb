// The sampling kernels of kernels/cuda_sample.h. Each runs as one block (up to 1024 threads, about
// 16 values a thread): a row of logits is at most a few hundred thousand floats, and the point is
// to bring back a few bytes instead of the row (which stays in L2 between top_k's passes).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

#include "cuda_check.h"
#include "cuda_sample.h"
#include "kvinfer/error.h"
#include "launch.h"

namespace kvinfer::cuda {
namespace {

constexpr int kBlock = 1024;   // scan_logits, top_k: one block of this many threads
constexpr int kWarps = kBlock / 32;
constexpr int kAdjustBlock = 256;
constexpr int kDigitBits = 4;  // top_k: radix select, 16 bins a pass, 8 passes over 32-bit keys
constexpr int kBins = 1 << kDigitBits;
constexpr int64_t kMaxTopKVocab = int64_t{65535} * kBlock;  // top_k's per-thread counts are 16-bit
static_assert(kBlock % kBins == 0 && kWarps == 32);

// Threads of the one block for n values: about 16 values a thread, in whole warps, at most kBlock.
unsigned block_for(int64_t n) {
  const int64_t warps = (n + 16 * 32 - 1) / (16 * 32);
  return static_cast<unsigned>(std::min<int64_t>(warps * 32, kBlock));
}

void require(bool ok, const char* op, const std::string& what) {
  if (!ok) throw Error(ErrorKind::InvalidArgument, std::string("cuda::") + op + ": " + what);
}

// (value, index) a beats b: larger value, or equal value and lower index. NaN never wins.
__device__ __forceinline__ bool beats(float va, int32_t ia, float vb, int32_t ib) {
  return va > vb || (va == vb && ia < ib);
}

__device__ __forceinline__ bool is_finite(float v) { return fabsf(v) <= std::numeric_limits<float>::max(); }

__device__ __forceinline__ uint32_t float_bits(float v) {
  uint32_t b;
  memcpy(&b, &v, sizeof b);
  return b;
}

// An order-preserving key: a > b as floats iff key(a) > key(b) (no NaN). -0.0 is keyed as +0.0,
// because the two compare equal and must tie (then the lower id comes first).
__device__ __forceinline__ uint32_t order_key(float v) {
  const uint32_t b = float_bits(v == 0.0f ? 0.0f : v);
  return (b & 0x80000000u) != 0 ? ~b : b | 0x80000000u;
}

// ---- scan_logits ---------------------------------------------------------------------------------
// n < 2^31 - 1: index n is the "nothing yet" sentinel of both results.
__global__ void __launch_bounds__(kBlock) scan_logits_kernel(const float* logits, int32_t n, int32_t* out) {
  __shared__ float best_v[kWarps];
  __shared__ int32_t best_i[kWarps];
  __shared__ int32_t bad_i[kWarps];
  float v = -INFINITY;
  int32_t idx = n, bad = n;
  for (int32_t j = static_cast<int32_t>(threadIdx.x); j < n; j += static_cast<int32_t>(blockDim.x)) {
    const float x = logits[j];
    if (beats(x, j, v, idx)) v = x, idx = j;
    if (!is_finite(x) && bad == n) bad = j;  // j ascends: a thread's first is its lowest
  }
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, o);
    const int32_t oi = __shfl_xor_sync(0xffffffffu, idx, o);
    const int32_t ob = __shfl_xor_sync(0xffffffffu, bad, o);
    if (beats(ov, oi, v, idx)) v = ov, idx = oi;
    bad = ob < bad ? ob : bad;
  }
  if (lane == 0) best_v[warp] = v, best_i[warp] = idx, bad_i[warp] = bad;
  __syncthreads();
  if (warp != 0) return;
  const int warps = static_cast<int>(blockDim.x) / 32;
  v = lane < warps ? best_v[lane] : -INFINITY;
  idx = lane < warps ? best_i[lane] : n;
  bad = lane < warps ? bad_i[lane] : n;
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, o);
    const int32_t oi = __shfl_xor_sync(0xffffffffu, idx, o);
    const int32_t ob = __shfl_xor_sync(0xffffffffu, bad, o);
    if (beats(ov, oi, v, idx)) v = ov, idx = oi;
    bad = ob < bad ? ob : bad;
  }
  if (lane == 0) {
    const int32_t best = idx == n ? 0 : idx;  // every value NaN: 0, as std::max_element
    out[0] = best;
    out[1] = bad == n ? -1 : bad;
    out[2] = static_cast<int32_t>(float_bits(logits[best]));
  }
}

// ---- adjust_logits -------------------------------------------------------------------------------
// One block. The bias entries go in order on one thread (two entries for one id add up in that
// order); the penalised ids are distinct, so one thread each. __f*_rn: no contraction into FMAs,
// as the CPU Sampler (built with -ffp-contract=off) computes.
__global__ void __launch_bounds__(kAdjustBlock)
    adjust_logits_kernel(float* adjusted, const IdValue* bias, int32_t n_bias, const IdCount* penalised,
                         int32_t n_penalised, Penalties p, int32_t* bad_out) {
  __shared__ int32_t warp_bad[kAdjustBlock / 32];
  if (threadIdx.x == 0)
    for (int32_t i = 0; i < n_bias; ++i) adjusted[bias[i].id] = __fadd_rn(adjusted[bias[i].id], bias[i].value);
  __syncthreads();
  int32_t bad = 0;
  for (int32_t i = static_cast<int32_t>(threadIdx.x); i < n_penalised; i += kAdjustBlock) {
    float l = adjusted[penalised[i].id];
    l = l > 0.0f ? __fdiv_rn(l, p.repetition) : __fmul_rn(l, p.repetition);
    l = __fsub_rn(l, __fadd_rn(__fmul_rn(static_cast<float>(penalised[i].count), p.frequency), p.presence));
    adjusted[penalised[i].id] = l;
  }
  __syncthreads();
  // Every touched logit, after both steps: NaN or +inf is the CPU Sampler's to judge.
  for (int32_t i = static_cast<int32_t>(threadIdx.x); i < n_bias; i += kAdjustBlock) {
    const float l = adjusted[bias[i].id];
    bad |= !(l < INFINITY);
  }
  for (int32_t i = static_cast<int32_t>(threadIdx.x); i < n_penalised; i += kAdjustBlock) {
    const float l = adjusted[penalised[i].id];
    bad |= !(l < INFINITY);
  }
  for (int o = 16; o > 0; o >>= 1) bad |= __shfl_xor_sync(0xffffffffu, bad, o);
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  if (lane == 0) warp_bad[warp] = bad;
  __syncthreads();
  if (threadIdx.x == 0) {
    int32_t any = 0;
    for (int w = 0; w < kAdjustBlock / 32; ++w) any |= warp_bad[w];
    *bad_out = any;
  }
}

// ---- top_k ---------------------------------------------------------------------------------------
// Exclusive prefix sum over the block of one int per thread (in thread order); also the total.
__device__ int32_t block_exclusive_sum(int32_t value, int32_t* total, int32_t* per_thread, int32_t* per_warp) {
  const int t = static_cast<int>(threadIdx.x), warp = t / 32, lane = t % 32;
  per_thread[t] = value;
  __syncthreads();
  if (lane == 0) {
    int32_t s = 0;
    for (int i = 0; i < 32; ++i) s += per_thread[warp * 32 + i];
    per_warp[warp] = s;
  }
  __syncthreads();
  int32_t before = 0, all = 0;
  for (int w = 0; w < static_cast<int>(blockDim.x) / 32; ++w) {
    before += w < warp ? per_warp[w] : 0;
    all += per_warp[w];
  }
  for (int i = 0; i < lane; ++i) before += per_thread[warp * 32 + i];
  __syncthreads();  // per_thread and per_warp are reused by the next call
  *total = all;
  return before;
}

// Radix select of the k-th largest key, 4 bits a pass from the top: `prefix` holds the key's
// digits found so far and `need` how many of the wanted tokens have keys with that prefix. After
// the last pass the threshold key T = prefix; the set is every key > T (k - need of them) and the
// `need` tokens of key T with the lowest ids. The gather gives each thread a contiguous range of
// ids, so that thread order is id order for the ties and for the output.
__global__ void __launch_bounds__(kBlock)
    top_k_kernel(const float* logits, int32_t vocab, int32_t k, int32_t* out_ids, float* out_values) {
  // Each thread's counts of one pass, then summed: 64 threads a bin, 16 counts each, then 16 threads.
  __shared__ uint16_t thread_counts[kBins][kBlock];  // 32 KiB; a thread counts <= 65535 tokens
  __shared__ int32_t partial[kBlock];
  __shared__ int32_t bins[kBins];
  __shared__ uint32_t s_prefix;
  __shared__ int32_t s_need;
  __shared__ int32_t scan_thread[kBlock];
  __shared__ int32_t scan_warp[kWarps];
  const int t = static_cast<int>(threadIdx.x);
  if (t == 0) s_prefix = 0, s_need = k;
  __syncthreads();

  const int threads = static_cast<int>(blockDim.x);  // a multiple of 32
  const int summers = threads / kBins;               // threads summing one bin, 16 counts each
  for (int shift = 32 - kDigitBits; shift >= 0; shift -= kDigitBits) {
    const uint32_t prefix = s_prefix;
    // The bits above this digit must equal prefix's (none on the first pass).
    const uint32_t high_mask = shift + kDigitBits >= 32 ? 0u : ~0u << (shift + kDigitBits);
    int32_t count[kBins];
#pragma unroll
    for (int d = 0; d < kBins; ++d) count[d] = 0;
    for (int32_t j = t; j < vocab; j += threads) {
      const uint32_t key = order_key(logits[j]);
      if ((key & high_mask) != prefix) continue;
      const uint32_t digit = (key >> shift) & (kBins - 1);
#pragma unroll
      for (int d = 0; d < kBins; ++d) count[d] += digit == static_cast<uint32_t>(d) ? 1 : 0;
    }
#pragma unroll
    for (int d = 0; d < kBins; ++d) thread_counts[d][t] = static_cast<uint16_t>(count[d]);
    __syncthreads();
    {
      const int bin = t / summers, first = (t % summers) * kBins;
      int32_t sum = 0;
      for (int i = 0; i < kBins; ++i) sum += thread_counts[bin][first + i];
      partial[t] = sum;
    }
    __syncthreads();
    if (t < kBins) {
      int32_t sum = 0;
      for (int i = 0; i < summers; ++i) sum += partial[t * summers + i];
      bins[t] = sum;
    }
    __syncthreads();
    if (t == 0) {
      // The highest digit whose tokens, with those of the higher digits, reach `need`.
      int32_t need = s_need;
      int d = kBins - 1;
      for (; d > 0 && bins[d] < need; --d) need -= bins[d];
      s_prefix = prefix | static_cast<uint32_t>(d) << shift;
      s_need = need;
    }
    __syncthreads();
  }
  const uint32_t threshold = s_prefix;
  const int32_t need = s_need;  // tokens of key == threshold to take, lowest ids first

  const int32_t chunk = (vocab + threads - 1) / threads;
  const int32_t begin = t * chunk < vocab ? t * chunk : vocab;
  const int32_t end = begin + chunk < vocab ? begin + chunk : vocab;
  int32_t above = 0, equal = 0;
  for (int32_t j = begin; j < end; ++j) {
    const uint32_t key = order_key(logits[j]);
    above += key > threshold ? 1 : 0;
    equal += key == threshold ? 1 : 0;
  }
  int32_t total = 0;
  const int32_t equal_before = block_exclusive_sum(equal, &total, scan_thread, scan_warp);
  int32_t take_equal = need - equal_before;
  take_equal = take_equal < 0 ? 0 : take_equal > equal ? equal : take_equal;
  const int32_t at = block_exclusive_sum(above + take_equal, &total, scan_thread, scan_warp);
  int32_t o = at;
  for (int32_t j = begin; j < end; ++j) {
    const float v = logits[j];
    const uint32_t key = order_key(v);
    bool take = key > threshold;
    if (key == threshold && take_equal > 0) take = true, --take_equal;
    if (take) out_ids[o] = j, out_values[o] = v, ++o;
  }
}

}  // namespace

void scan_logits(const float* logits, int64_t n, int32_t* out, cudaStream_t stream) {
  require(logits != nullptr && out != nullptr, "scan_logits", "null pointer");
  require(n > 0 && n < std::numeric_limits<int32_t>::max(), "scan_logits",
          "n = " + std::to_string(n) + " outside [1, 2^31 - 1)");
  launch("scan_logits", scan_logits_kernel, 1, block_for(n), 0, stream, logits, static_cast<int32_t>(n), out);
}

void adjust_logits(const float* logits, int64_t vocab, const IdValue* bias, int32_t n_bias, const IdCount* penalised,
                   int32_t n_penalised, Penalties p, float* adjusted, int32_t* bad, cudaStream_t stream) {
  require(logits != nullptr && adjusted != nullptr && bad != nullptr, "adjust_logits", "null pointer");
  require(vocab > 0 && vocab < std::numeric_limits<int32_t>::max(), "adjust_logits",
          "vocab = " + std::to_string(vocab) + " outside [1, 2^31 - 1)");
  require(n_bias >= 0 && n_penalised >= 0 && (n_bias == 0 || bias != nullptr) &&
              (n_penalised == 0 || penalised != nullptr),
          "adjust_logits", "bad bias or penalty list");
  CUDA_CHECK(cudaMemcpyAsync(adjusted, logits, static_cast<size_t>(vocab) * sizeof(float), cudaMemcpyDeviceToDevice,
                             stream));
  launch("adjust_logits", adjust_logits_kernel, 1, kAdjustBlock, 0, stream, adjusted, bias, n_bias, penalised,
         n_penalised, p, bad);
}

void top_k(const float* logits, int64_t vocab, int32_t k, int32_t* out_ids, float* out_values, cudaStream_t stream) {
  require(logits != nullptr && out_ids != nullptr && out_values != nullptr, "top_k", "null pointer");
  require(vocab > 0 && vocab <= kMaxTopKVocab, "top_k",
          "vocab = " + std::to_string(vocab) + " outside [1, " + std::to_string(kMaxTopKVocab) + "]");
  require(k >= 1 && k <= vocab && k <= kMaxDeviceTopK, "top_k",
          "k = " + std::to_string(k) + " outside [1, min(vocab, " + std::to_string(kMaxDeviceTopK) + ")]");
  launch("top_k", top_k_kernel, 1, block_for(vocab), 0, stream, logits, static_cast<int32_t>(vocab), k, out_ids,
         out_values);
}

}  // namespace kvinfer::cuda
