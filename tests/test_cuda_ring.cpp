// The CUDA K/V kernels on a sliding-window ring (KvCache::layer_rows < capacity: position p in row
// p mod rows) against the same calls on a full cache (every position in its own row). Each call
// reads only positions the ring still holds, and the kernels change only addresses, so the ring
// must give the full cache's bits: attention outputs of decode (n = 1, with the position on the
// host and on the device, one split or several) and of prefill (the tiled kernel for f32, int8
// and fp8; the tensor-core kernel for f16 and bf16), and store_kv's rows, codes and scales. The
// positions wrap the ring several times, in decode steps and in prefill pieces of at most
// rows - window + 1 positions (src/ops/self_attention.h's for_each_piece). Through the backend,
// also against the CPU backend on a ring of its own. Skips without a device.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <iterator>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/kv_cache_access.h"
#include "cpu/cpu_ops.h"
#include "cuda/cuda_backend.h"
#include "cuda_check.h"
#include "cuda_ops.h"
#include "cuda_test_buffer.h"
#include "kvinfer/kvinfer.h"

namespace kvinfer {
namespace {

using kvinfer_test::DeviceBuffer;

#define SKIP_WITHOUT_DEVICE()                                                              \
  do {                                                                                     \
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: ring kernels not run"; \
  } while (0)

constexpr DType kKvTypes[] = {DType::F32, DType::F16, DType::BF16, DType::I8, DType::FP8};
constexpr int64_t kKvHeads = 2, kGroup = 3, kHeads = kKvHeads * kGroup;  // GQA: 3 query heads a KV head

std::vector<float> random_floats(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(n);
  for (float& e : x) e = u(rng);
  return x;
}

std::vector<std::byte> to_host(const void* device, size_t bytes) {
  std::vector<std::byte> h(bytes);
  CUDA_CHECK(cudaMemcpy(h.data(), device, bytes, cudaMemcpyDeviceToHost));
  return h;
}

// Outputs are equal bit for bit, and finite (poisoned buffers hold NaN: every value was written).
void expect_same_output(const std::vector<float>& ring, const std::vector<float>& full, const std::string& what) {
  ASSERT_EQ(ring.size(), full.size());
  ASSERT_TRUE(std::all_of(full.begin(), full.end(), [](float x) { return std::isfinite(x); })) << what;
  EXPECT_EQ(std::memcmp(ring.data(), full.data(), ring.size() * sizeof(float)), 0) << what;
}

// One layer's K and V blocks (kv_heads, rows, hd) of dtype dt on the device, and (kv_heads, rows)
// f32 scales each for an 8-bit type: a ring when rows < the positions written. Poisoned (0xFF).
struct LayerBlocks {
  DType dt;
  int64_t rows, hd;
  DeviceBuffer k, v, ks, vs;
  LayerBlocks(DType type, int64_t r, int64_t head_dim)
      : dt(type), rows(r), hd(head_dim),
        k(static_cast<size_t>(kKvHeads * r * head_dim) * dtype_size(type)), v(k.bytes),
        ks(static_cast<size_t>(kKvHeads * r) * sizeof(float)), vs(ks.bytes) {}
  bool scaled() const { return is_scaled_kv(dt); }
  size_t row_bytes() const { return static_cast<size_t>(hd) * dtype_size(dt); }

  void store(const DeviceBuffer& kd, const DeviceBuffer& vd, int64_t start, int64_t n, const int32_t* dev_start) {
    cuda::store_kv(dt, kd.as<float>(), vd.as<float>(), n, kKvHeads, hd, start, rows, k.ptr, v.ptr, nullptr, dev_start,
                   scaled() ? ks.as<float>() : nullptr, scaled() ? vs.as<float>() : nullptr);
  }
  cuda::AttentionParams params(const DeviceBuffer& q, DeviceBuffer& out, int64_t start, int64_t n, int64_t capacity,
                               int64_t window) const {
    cuda::AttentionParams p;
    p.q = q.as<float>(), p.k = k.ptr, p.v = v.ptr, p.out = out.as<float>(), p.kv_dtype = dt;
    if (scaled()) p.k_scales = ks.as<float>(), p.v_scales = vs.as<float>();
    p.n = n, p.start = start, p.heads = kHeads, p.kv_heads = kKvHeads, p.head_dim = hd;
    p.capacity = capacity, p.rows = rows, p.window = window;
    return p;
  }
};

// The ring's rows of positions [end - ring rows, end) hold the full blocks' rows of them: K and V
// codes (or values), and an 8-bit type's scales.
void expect_ring_rows(const LayerBlocks& ring, const LayerBlocks& full, int64_t end, const std::string& what) {
  const size_t rb = ring.row_bytes();
  const auto rk = to_host(ring.k.ptr, ring.k.bytes), rv = to_host(ring.v.ptr, ring.v.bytes);
  const auto fk = to_host(full.k.ptr, full.k.bytes), fv = to_host(full.v.ptr, full.v.bytes);
  const auto rks = to_host(ring.ks.ptr, ring.ks.bytes), rvs = to_host(ring.vs.ptr, ring.vs.bytes);
  const auto fks = to_host(full.ks.ptr, full.ks.bytes), fvs = to_host(full.vs.ptr, full.vs.bytes);
  for (int64_t g = 0; g < kKvHeads; ++g)
    for (int64_t p = std::max<int64_t>(0, end - ring.rows); p < end; ++p) {
      const size_t r = static_cast<size_t>(g * ring.rows + p % ring.rows), f = static_cast<size_t>(g * full.rows + p);
      const std::string at = what + " head " + std::to_string(g) + " position " + std::to_string(p);
      ASSERT_EQ(std::memcmp(rk.data() + r * rb, fk.data() + f * rb, rb), 0) << at << " K";
      ASSERT_EQ(std::memcmp(rv.data() + r * rb, fv.data() + f * rb, rb), 0) << at << " V";
      if (!ring.scaled()) continue;
      ASSERT_EQ(std::memcmp(rks.data() + r * 4, fks.data() + f * 4, 4), 0) << at << " K scale";
      ASSERT_EQ(std::memcmp(rvs.data() + r * 4, fvs.data() + f * 4, 4), 0) << at << " V scale";
    }
}

std::vector<float> run_attention(const cuda::AttentionParams& p) {
  if (p.n == 1) {
    DeviceBuffer ws(std::max<size_t>(cuda::attention_decode_workspace_bytes(p.heads, p.head_dim, p.capacity), 1));
    cuda::attention_decode(p, ws.ptr, ws.bytes, nullptr);
  } else {
    cuda::attention_prefill(p, nullptr);
  }
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> out(static_cast<size_t>(p.n * p.heads * p.head_dim));
  CUDA_CHECK(cudaMemcpy(out.data(), p.out, out.size() * sizeof(float), cudaMemcpyDeviceToHost));
  return out;
}

// Through the backend (src/cuda/cuda_backend.cpp), as the forward pass calls it: a cache whose
// layers all have a window of 5 (capacity 64, so 9 rows a layer) against one without, both
// attending with window 5, filled in calls of 1 to 5 positions (decode steps and prefill pieces),
// 64 positions: seven turns of the ring. And against the CPU's store_kv and attention on a ring
// of its own: the same rows bit for bit (as for a full cache, tests/test_cuda_ops.cpp), outputs
// within tests/test_cuda_attention.cpp's bounds (summation orders differ; the tensor-core
// kernel's q and weights are rounded to the cache type).
TEST(CudaRing, BackendRingCacheEqualsFullCacheAndTheCpusRing) {
  SKIP_WITHOUT_DEVICE();
  constexpr int64_t kWindow = 5, kCapacity = 64, kLayer = 1;
  constexpr int64_t kPieces[] = {1, 5, 1, 1, 3, 5, 2, 1, 4, 5, 1, 2};
  for (DType dt : kKvTypes)
    for (int64_t hd : {64, 40}) {
      ModelConfig full_cfg;
      full_cfg.num_layers = 2, full_cfg.num_heads = kHeads, full_cfg.num_kv_heads = kKvHeads, full_cfg.head_dim = hd;
      ModelConfig ring_cfg = full_cfg;
      ring_cfg.sliding_window = kWindow;
      KvCache full(full_cfg, kCapacity, dt, Device::CUDA), ring(ring_cfg, kCapacity, dt, Device::CUDA);
      KvCache cpu_ring(ring_cfg, kCapacity, dt, Device::CPU);
      ASSERT_EQ(ring.layer_rows(kLayer), 9);
      ASSERT_EQ(cpu_ring.layer_rows(kLayer), 9);
      ASSERT_EQ(full.layer_rows(kLayer), kCapacity);
      auto ctx = cuda_backend::create_context();
      std::mt19937 rng(static_cast<uint32_t>(hd * 10 + static_cast<int>(dt)));
      const size_t rb = static_cast<size_t>(hd) * dtype_size(dt);
      size_t piece = 0;
      for (int64_t start = 0; start < kCapacity;) {
        const int64_t n = std::min(kPieces[piece++ % std::size(kPieces)], kCapacity - start);
        const std::string what = std::string(dtype_name(dt)) + " head_dim " + std::to_string(hd) + " positions " +
                                 std::to_string(start) + " .. " + std::to_string(start + n - 1);
        const auto k_host = random_floats(static_cast<size_t>(n * kKvHeads * hd), rng);
        const auto v_host = random_floats(k_host.size(), rng);
        const auto q_host = random_floats(static_cast<size_t>(n * kHeads * hd), rng);
        const DeviceBuffer k(k_host), v(v_host), q(q_host);
        DeviceBuffer out_full(static_cast<size_t>(n * kHeads * hd) * sizeof(float)), out_ring(out_full.bytes);
        std::vector<float> got_full(static_cast<size_t>(n * kHeads * hd)), got_ring(got_full.size());
        for (auto [kv, out, got] : {std::tuple{&full, &out_full, &got_full}, std::tuple{&ring, &out_ring, &got_ring}}) {
          cuda_backend::store_kv(*ctx, *kv, kLayer, start, n, k.as<float>(), v.as<float>());
          cuda_backend::attention(*ctx, *kv, kLayer, q.as<float>(), n, start, kHeads, kWindow, out->as<float>());
          cuda_backend::to_host(*ctx, out->as<float>(), got->data(), n * kHeads * hd);
        }
        expect_same_output(got_ring, got_full, what);
        std::vector<float> want(got_ring.size());
        cpu::store_kv(cpu_ring, kLayer, start, n, k_host.data(), v_host.data());
        cpu::attention(cpu_ring, kLayer, q_host.data(), n, start, kHeads, kWindow, want.data());
        double err = 0, scale = 0;
        for (size_t i = 0; i < want.size(); ++i)
          err = std::max(err, std::fabs(double{got_ring[i]} - want[i])), scale = std::max(scale, std::fabs(double{want[i]}));
        const bool mma = n > 1 && (dt == DType::F16 || dt == DType::BF16);
        EXPECT_LE(err, (mma ? 4 * (dt == DType::BF16 ? 0x1p-8 : 0x1p-11) : 1e-4) * scale) << what << " against the CPU";
        start += n;
        // The ring's rows hold the full cache's rows of its last 9 positions, and the CPU ring's.
        for (int64_t g = 0; g < kKvHeads; ++g) {
          const auto rk = to_host(kv_k(ring, kLayer, g), 9 * rb), fk = to_host(kv_k(full, kLayer, g), kCapacity * rb);
          const auto rv = to_host(kv_v(ring, kLayer, g), 9 * rb), fv = to_host(kv_v(full, kLayer, g), kCapacity * rb);
          for (int64_t p = std::max<int64_t>(0, start - 9); p < start; ++p) {
            const size_t r = static_cast<size_t>(p % 9), f = static_cast<size_t>(p);
            ASSERT_EQ(std::memcmp(rk.data() + r * rb, fk.data() + f * rb, rb), 0) << what << " K of " << p;
            ASSERT_EQ(std::memcmp(rv.data() + r * rb, fv.data() + f * rb, rb), 0) << what << " V of " << p;
            ASSERT_EQ(std::memcmp(rk.data() + r * rb, kv_k(cpu_ring, kLayer, g) + r * rb, rb), 0) << what << " CPU K of " << p;
            ASSERT_EQ(std::memcmp(rv.data() + r * rb, kv_v(cpu_ring, kLayer, g) + r * rb, rb), 0) << what << " CPU V of " << p;
            if (!is_scaled_kv(dt)) continue;
            float rs[2], fs[2];
            CUDA_CHECK(cudaMemcpy(&rs[0], kv_k_scales(ring, kLayer, g) + r, 4, cudaMemcpyDeviceToHost));
            CUDA_CHECK(cudaMemcpy(&rs[1], kv_v_scales(ring, kLayer, g) + r, 4, cudaMemcpyDeviceToHost));
            CUDA_CHECK(cudaMemcpy(&fs[0], kv_k_scales(full, kLayer, g) + f, 4, cudaMemcpyDeviceToHost));
            CUDA_CHECK(cudaMemcpy(&fs[1], kv_v_scales(full, kLayer, g) + f, 4, cudaMemcpyDeviceToHost));
            ASSERT_EQ(std::memcmp(rs, fs, sizeof rs), 0) << what << " scales of " << p;
            const float cs[2] = {kv_k_scales(cpu_ring, kLayer, g)[r], kv_v_scales(cpu_ring, kLayer, g)[r]};
            ASSERT_EQ(std::memcmp(rs, cs, sizeof rs), 0) << what << " CPU scales of " << p;
          }
        }
      }
    }
}

// The launchers directly, with a window of 300 in a ring of 349 rows (window + piece - 1 for
// pieces of 50, as for_each_piece cuts them) and a cache of 1200 positions: three turns and more
// of the ring. Decode's context of 300 positions is cut into splits (2 at tiles of 64, 5 at 32:
// f32 at head_dim 96), and the ring's wrap falls inside a split and inside a tile; prefill pieces
// of 50 rows, before the first wrap and across the others. Decode steps store their row and
// read the cache at a device position too (a CUDA graph's step, whose grid covers the most
// splits of any position), which must give the host position's bits.
TEST(CudaRing, LongWindowSplitsAndDevicePositionsAcrossTheWrap) {
  SKIP_WITHOUT_DEVICE();
  constexpr int64_t kWindow = 300, kPiece = 50, kRows = kWindow + kPiece - 1, kCapacity = 1200;
  struct Piece {
    int64_t start, n;
    bool attend;
  };
  // Store-only pieces of up to kPiece positions, and attention right after the pieces that
  // attend, while the ring holds their window.
  std::vector<Piece> pieces;
  int64_t at = 0;
  const auto fill_to = [&](int64_t end) {
    for (; at < end; at += std::min(kPiece, end - at)) pieces.push_back({at, std::min(kPiece, end - at), false});
  };
  const auto attend = [&](int64_t n) { pieces.push_back({at, n, true}), at += n; };
  fill_to(250), attend(50);                         // prefill of keys 0 .. 299: no wrap yet
  fill_to(500), attend(1), attend(50);              // keys 201 .. 500, 202 .. 550: the wrap at 349
  fill_to(1050), attend(1), attend(50), attend(1);  // keys 751 .. 1050, 752 .. 1100: the wrap at 1047
  attend(1), fill_to(1198), attend(1), attend(1);   // keys 900 .. 1199
  ASSERT_EQ(at, kCapacity);
  for (DType dt : kKvTypes)
    for (int64_t hd : {64, 96}) {
      LayerBlocks full(dt, kCapacity, hd), ring(dt, kRows, hd), ring_dev(dt, kRows, hd);  // ring_dev: device positions
      std::mt19937 rng(static_cast<uint32_t>(hd + static_cast<int>(dt)));
      DeviceBuffer pos(sizeof(int32_t));
      for (const Piece& s : pieces) {
        const std::string what = std::string(dtype_name(dt)) + " head_dim " + std::to_string(hd) + " positions " +
                                 std::to_string(s.start) + " .. " + std::to_string(s.start + s.n - 1);
        const DeviceBuffer k(random_floats(static_cast<size_t>(s.n * kKvHeads * hd), rng));
        const DeviceBuffer v(random_floats(static_cast<size_t>(s.n * kKvHeads * hd), rng));
        pos.upload(std::vector<int32_t>{static_cast<int32_t>(s.start)});
        full.store(k, v, s.start, s.n, nullptr);
        ring.store(k, v, s.start, s.n, nullptr);
        // The host's start is another valid position (0): the kernel must read the device's.
        ring_dev.store(k, v, 0, s.n, pos.as<int32_t>());
        CUDA_CHECK(cudaDeviceSynchronize());
        expect_ring_rows(ring, full, s.start + s.n, what);
        expect_ring_rows(ring_dev, full, s.start + s.n, what + " (stored at a device position)");
        if (!s.attend) continue;
        const DeviceBuffer q(random_floats(static_cast<size_t>(s.n * kHeads * hd), rng));
        DeviceBuffer out(static_cast<size_t>(s.n * kHeads * hd) * sizeof(float));
        const auto want = run_attention(full.params(q, out, s.start, s.n, kCapacity, kWindow));
        expect_same_output(run_attention(ring.params(q, out, s.start, s.n, kCapacity, kWindow)), want, what);
        if (s.n > 1) continue;
        cuda::AttentionParams p = ring_dev.params(q, out, 0, 1, kCapacity, kWindow);
        p.start_on_device = pos.as<int32_t>();
        expect_same_output(run_attention(p), want, what + " (device position)");
      }
    }
}

}  // namespace
}  // namespace kvinfer
