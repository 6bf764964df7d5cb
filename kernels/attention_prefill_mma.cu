// Tiled causal attention for n >= 1 query rows on tensor cores, for f16 and bf16 KV caches
// (FlashAttention-2's work split; f32 caches take attention_prefill.cu's CUDA-core kernel).
//
// Why this shape: a warp owns 16 (query, head) rows, so that S = Q Kᵀ and O += P V are chains of
// mma.m16n8k16 (kernels/mma.h) whose operands need no exchange between warps: S's accumulator
// fragment is, register for register, the A fragment of P for P V, and the softmax statistics of
// a row live in the 4 lanes holding it (two xor-shuffles reduce them). K and V tiles are copied
// once per block in the cache's own 16-bit type with cp.async (two stages where the device's
// shared memory allows) and serve the block's 4 warps. Q · scale is rounded to the cache's type
// once, into shared memory, and a warp re-reads its A fragments from there every tile: registers
// go to O (at HDP 256 register-resident Q fragments would add 64 to O's 128). The fragments are
// plain 32-bit (V: two 16-bit) shared loads, as the simulation runs them; ldmatrix(.trans) would
// gather them in fewer instructions on a GPU. The rows of a KV head's group are its (query t,
// head h) pairs, t-major (r = t · group + h, as attention_prefill.cu), so every K/V tile serves
// the whole group (GQA). Grid (row tile of kRows, kv_head); block kWarps warps.
//
// Precision: q · scale and the weights P are rounded to the cache's 16-bit type (the operands of
// the tensor cores); the scores, the softmax statistics (l sums the f32 weights) and O accumulate
// in f32. Tests hold it to FlashAttention's rule: at most twice the error of a naive kernel at the
// same precision (tests/test_cuda_attention.cpp).
//
// head_dim is any multiple of 8 from 8 to 256, at run time; HDP (64, 128 or 256) is a capacity.
// QK's k-dimension runs in chunks of 16 dims; when head_dim % 16 == 8 the last chunk's upper half
// (A's a2, a3 and B's b1: dims head_dim .. head_dim+7) is zeros in registers, never read from
// shared memory. PV's n-dimension is head_dim in tiles of 8 dims: exact.
//
// Position p is cache row p mod rows (a sliding-window ring; kernels/core/kv_ring.h): a tile's
// copies step from the tile's first row, so a tile may straddle the ring's wrap; only addresses
// change, so a ring gives the bits of a full cache.
#include <cuda_pipeline.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "attention_prefill_mma.h"
#include "core/kv_ring.h"
#include "core/online_softmax.h"
#include "cuda_check.h"
#include "launch.h"
#include "mma.h"

namespace kvinfer::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kRows = 16 * kWarps;  // (query, head) rows per block
constexpr int kCols = 64;           // key positions per tile
constexpr int kSTiles = kCols / 8;  // S's n-tiles of 8 keys, per warp: s[kSTiles][4]

template <int HDP, int STAGES>
struct Shape {
  static constexpr int kPitch = HDP + 8;  // 16-bit elements per shared row; +16 B: the 8 rows a fragment
                                          // load touches start 4 banks apart
  static constexpr int kQBytes = kRows * kPitch * 2;
  static constexpr int kTileBytes = kCols * kPitch * 2;         // one K or V tile
  static constexpr int kStageBytes = 2 * kTileBytes;            // K tile, then V tile
  static constexpr int kSmemBytes = kQBytes + STAGES * kStageBytes;
  static_assert(HDP % 64 == 0 && HDP <= 256 && (STAGES == 1 || STAGES == 2));
};

// Max and sum over the 4 lanes (t = lane % 4) that hold one row of a fragment.
__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

__device__ __forceinline__ uint32_t ld32(const uint16_t* p) { return *reinterpret_cast<const uint32_t*>(p); }

template <int HDP, DType KV, int STAGES>
__global__ void __launch_bounds__(kThreads) prefill_mma_kernel(const PrefillArgs a) {
  using S = Shape<HDP, STAGES>;
  constexpr int P = S::kPitch;
  constexpr int kOTiles = HDP / 8;  // O's n-tiles of 8 dims, per warp: o[kOTiles][4]
  unsigned char* smem = dynamic_shared<unsigned char>();
  uint16_t* q_s = reinterpret_cast<uint16_t*>(smem);  // (kRows, P) q · scale in the cache's type
  unsigned char* stages = smem + S::kQBytes;          // STAGES × [K tile (kCols, P), V tile (kCols, P)]
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int gq = lane >> 2, tq = lane % 4;  // the fragments' groupID and threadID_in_group
  const int kvh = blockIdx.y, group = a.group, hd = a.head_dim;
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * kRows;
  const int64_t r_last = (a.rows_total < r0 + kRows ? a.rows_total : r0 + kRows) - 1;
  // Keys any row of this block may attend: [k_begin, k_end).
  const int64_t first_pos = a.start + r0 / group, last_pos = a.start + r_last / group;
  const int64_t lo = a.window > 0 ? first_pos - a.window + 1 : 0;
  const int64_t k_begin = lo > 0 ? lo : 0, k_end = last_pos + 1;
  const int tiles = static_cast<int>((k_end - k_begin + kCols - 1) / kCols);
  const int row_bytes = hd * 2, copies = row_bytes / 16;  // a cache row; its 16-byte copies
  // KV head kvh's (rows, hd) block; keys k_begin .. k_end-1 (at most rows of them: the launcher's
  // check) from row_begin on, wrapping once.
  const unsigned char* k_rows = a.k + static_cast<size_t>(kvh) * a.rows * row_bytes;
  const unsigned char* v_rows = a.v + static_cast<size_t>(kvh) * a.rows * row_bytes;
  const int64_t row_begin = core::ring_row(k_begin, a.rows);

  // Tile `tile` into its stage: rows past k_end are zeros (masked; V's must be finite, as P is 0).
  auto load_tile = [&](int tile) {
    unsigned char* dk = stages + (tile % STAGES) * S::kStageBytes;
    unsigned char* dv = dk + S::kTileBytes;
    const int64_t t0 = static_cast<int64_t>(tile) * kCols;
    const int64_t row0 = core::ring_step(row_begin, t0, a.rows);  // the tile's first row (t0 < keys <= rows)
    for (int idx = tid; idx < kCols * copies; idx += kThreads) {
      const int c = idx / copies, col = (idx % copies) * 16;
      if (k_begin + t0 + c < k_end) {
        const size_t src = static_cast<size_t>(core::ring_step(row0, c, a.rows)) * row_bytes + col;
        __pipeline_memcpy_async(dk + c * P * 2 + col, k_rows + src, 16);
        __pipeline_memcpy_async(dv + c * P * 2 + col, v_rows + src, 16);
      } else {
        *reinterpret_cast<uint4*>(dk + c * P * 2 + col) = make_uint4(0, 0, 0, 0);
        *reinterpret_cast<uint4*>(dv + c * P * 2 + col) = make_uint4(0, 0, 0, 0);
      }
    }
  };
  if (STAGES == 2) {
    if (tiles > 0) load_tile(0);
    __pipeline_commit();
  }

  // Q: rows past rows_total are zeros (their keys are all masked); dims >= hd are never read.
  for (int idx = tid; idx < kRows * (hd / 2); idx += kThreads) {
    const int i = idx / (hd / 2), d = 2 * (idx % (hd / 2));
    const int64_t r = r0 + i;
    float x0 = 0.0f, x1 = 0.0f;
    if (r < a.rows_total) {
      const int64_t t = r / group, h = r % group;
      const float* src = a.q + ((t * a.heads) + static_cast<int64_t>(kvh) * group + h) * hd + d;
      x0 = src[0] * a.q_scale, x1 = src[1] * a.q_scale;
    }
    *reinterpret_cast<uint32_t*>(q_s + i * P + d) = pack2<KV>(x0, x1);
  }

  // This lane's two rows: warp · 16 + gq (fragment registers 0, 1) and + 8 (registers 2, 3).
  // They attend keys [first, pos]; pos = -1 for a padding row past rows_total.
  int64_t pos[2], first[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int64_t r = r0 + warp * 16 + gq + 8 * i;
    pos[i] = r < a.rows_total ? a.start + r / group : -1;
    first[i] = a.window > 0 ? pos[i] - a.window + 1 : 0;
  }
  // The warp's rows attend keys [w_lo, w_hi] at most (warp-uniform); w_hi < w_lo: no row.
  const int64_t wr0 = r0 + warp * 16, wr1 = (wr0 + 15 < r_last ? wr0 + 15 : r_last);
  const int64_t w_hi = wr0 <= r_last ? a.start + wr1 / group : -1;
  const int64_t w_lo = a.window > 0 ? a.start + wr0 / group - a.window + 1 : 0;

  core::OnlineSoftmax st[2];
  float o[kOTiles][4];  // O (16 rows, HDP dims): n-tile j holds dims 8j .. 8j+7
#pragma unroll
  for (int j = 0; j < kOTiles; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
  const int chunks = (hd + 15) / 16;  // QK's k-chunks of 16 dims
  const uint16_t* q_w = q_s + (warp * 16 + gq) * P + 2 * tq;  // this lane's A elements, chunk 0

  for (int tile = 0; tile < tiles; ++tile) {
    if (STAGES == 2) {
      if (tile + 1 < tiles) load_tile(tile + 1);
      __pipeline_commit();
      __pipeline_wait_prior(1);  // this tile's copies have landed; the next tile's may be pending
    } else {
      load_tile(tile);
      __pipeline_commit();
      __pipeline_wait_prior(0);
    }
    __syncthreads();
    const int64_t k0 = k_begin + static_cast<int64_t>(tile) * kCols;
    // A warp none of whose rows attends a key of this tile skips it: for such rows the online
    // softmax step would change nothing. Warp-uniform, so whole warps meet every mma.sync.
    if (k0 <= w_hi && k0 + kCols - 1 >= w_lo) {
      const uint16_t* k_t = reinterpret_cast<const uint16_t*>(stages + (tile % STAGES) * S::kStageBytes);
      const uint16_t* v_t = k_t + kCols * P;

      // S (16 rows, kCols keys) = Q Kᵀ: n-tile j holds keys k0 + 8j .. +7. B[k][n] = K[key n][dim k].
      float s[kSTiles][4];
#pragma unroll
      for (int j = 0; j < kSTiles; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#pragma unroll 1
      for (int c = 0; c < chunks; ++c) {
        const bool upper = 16 * c + 8 < hd;  // dims 16c+8 .. 16c+15 exist (hd % 16 == 8: not in the last)
        const uint16_t* qa = q_w + 16 * c;
        const uint32_t af[4] = {ld32(qa), ld32(qa + 8 * P), upper ? ld32(qa + 8) : 0u,
                                upper ? ld32(qa + 8 * P + 8) : 0u};
#pragma unroll
        for (int j = 0; j < kSTiles; ++j) {
          const uint16_t* kb = k_t + (8 * j + gq) * P + 16 * c + 2 * tq;
          const uint32_t bf[2] = {ld32(kb), upper ? ld32(kb + 8) : 0u};
          mma_m16n8k16<KV>(s[j], af, bf, s[j]);
        }
      }

      // Mask, then the online-softmax step of each of the lane's two rows (xor 1, 2: the 4 lanes
      // of a row).
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        float mx = -INFINITY;
#pragma unroll
        for (int j = 0; j < kSTiles; ++j)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int64_t key = k0 + 8 * j + 2 * tq + e;
            float& x = s[j][2 * i + e];
            if (a.cap > 0.0f) x = a.cap * tanhf(x / a.cap);  // Gemma 2's soft-cap, before the mask
            if (key > pos[i] || key < first[i]) x = -INFINITY;  // past k_end: past every pos too
            mx = fmaxf(mx, x);
          }
        const float alpha = st[i].rescale(quad_max(mx));
#pragma unroll
        for (int j = 0; j < kOTiles; ++j) o[j][2 * i] *= alpha, o[j][2 * i + 1] *= alpha;
        float sum = 0.0f;
#pragma unroll
        for (int j = 0; j < kSTiles; ++j)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            float& x = s[j][2 * i + e];
            x = st[i].weight(x);
            sum += x;
          }
        st[i].add(quad_sum(sum));
      }

      // O += P V. P's A fragment for keys 16kk .. +15 is S's n-tiles 2kk, 2kk+1, rounded to the
      // cache type. B[k][n] = V[key k][dim n]: two keys of one dim per register.
#pragma unroll
      for (int kk = 0; kk < kCols / 16; ++kk) {
        const uint32_t af[4] = {pack2<KV>(s[2 * kk][0], s[2 * kk][1]), pack2<KV>(s[2 * kk][2], s[2 * kk][3]),
                                pack2<KV>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                pack2<KV>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
        const uint16_t* vb = v_t + (16 * kk + 2 * tq) * P + gq;
#pragma unroll
        for (int j = 0; j < kOTiles; ++j) {
          if (8 * j >= hd) break;  // warp-uniform
          const uint16_t* v = vb + 8 * j;
          const uint32_t bf[2] = {v[0] | static_cast<uint32_t>(v[P]) << 16,
                                  v[8 * P] | static_cast<uint32_t>(v[9 * P]) << 16};
          mma_m16n8k16<KV>(o[j], af, bf, o[j]);
        }
      }
    }
    __syncthreads();  // the stage is rewritten by a later tile's copies
  }

#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int64_t r = r0 + warp * 16 + gq + 8 * i;
    if (r >= a.rows_total) continue;
    const int64_t t = r / group, h = r % group;
    float* dst = a.out + ((t * a.heads) + static_cast<int64_t>(kvh) * group + h) * hd + 2 * tq;
    const float inv = st[i].inv_sum();
#pragma unroll
    for (int j = 0; j < kOTiles; ++j) {
      if (8 * j >= hd) break;
      dst[8 * j] = o[j][2 * i] * inv;  // scalar stores: out need not be 8-byte aligned
      dst[8 * j + 1] = o[j][2 * i + 1] * inv;
    }
  }
}


template <int HDP, DType KV, int STAGES>
void run(const AttentionParams& p, cudaStream_t stream) {
  using S = Shape<HDP, STAGES>;
  auto* kernel = prefill_mma_kernel<HDP, KV, STAGES>;
  allow_max_shared(kernel);  // per device: a second GPU needs its own
  int64_t row_tiles = 0;
  const PrefillArgs a = prefill_args(p, kRows, row_tiles);
  launch("attention_prefill (mma)", kernel,
         dim3(static_cast<unsigned>(row_tiles), static_cast<unsigned>(p.kv_heads)), dim3(kThreads),
         static_cast<size_t>(S::kSmemBytes), stream, a);
}

// Two stages where the device's shared memory holds them: 46,080 B at HDP 64 and 87,040 B at
// 128 fit every sm_80+ device; at 256 (168,960 B) sm_90 only, and sm_80/86 take one stage
// (101,376 B: exactly sm_86's 99 KiB).
template <int HDP, DType KV>
void run_stages(const AttentionParams& p, cudaStream_t stream) {
  const int limit = max_shared_bytes_optin();
  if (Shape<HDP, 2>::kSmemBytes <= limit) return run<HDP, KV, 2>(p, stream);
  if constexpr (HDP == 256)
    if (Shape<HDP, 1>::kSmemBytes <= limit) return run<HDP, KV, 1>(p, stream);
  throw Error(ErrorKind::Unsupported, "attention_prefill: head_dim " + std::to_string(p.head_dim) + " needs " +
              std::to_string(Shape<HDP, 1>::kSmemBytes) + " bytes of shared memory per block (" +
              std::to_string(kRows) + " rows × " + std::to_string(kCols) + " keys); the device allows " +
              std::to_string(limit));
}

template <int HDP>
void run_dtype(const AttentionParams& p, cudaStream_t stream) {
  if (p.kv_dtype == DType::F16) return run_stages<HDP, DType::F16>(p, stream);
  return run_stages<HDP, DType::BF16>(p, stream);
}

}  // namespace

void attention_prefill_mma(const AttentionParams& p, cudaStream_t stream) {
  if (p.kv_dtype != DType::F16 && p.kv_dtype != DType::BF16)
    throw Error(ErrorKind::Unsupported, "attention_prefill (mma): f16 or bf16 KV caches only");
  if (p.head_dim <= 64) return run_dtype<64>(p, stream);
  if (p.head_dim <= 128) return run_dtype<128>(p, stream);
  return run_dtype<256>(p, stream);
}

}  // namespace kvinfer::cuda
