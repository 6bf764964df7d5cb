// cuda_backend::decode_step: what a step sends and what its graph is keyed by. Then kernels
// launched from a CUDA graph read the decode position from device memory
// (start_on_device, kernels/cuda_ops.h): one graph, captured once, replayed at many positions,
// must give the bits of a plain launch at each of them. Decode attention plans its splits on the
// device then; the positions here cross its split-count changes. Skips without a CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/quantize.h"
#include "cuda/cuda_backend.h"
#include "cuda_check.h"
#include "cuda_test_buffer.h"
#include "cuda_ops.h"
#include "kvinfer/device.h"
#include "kvinfer/dtype.h"
#include "models/weights.h"

namespace kvinfer {
namespace {

using kvinfer_test::DeviceBuffer;

#define SKIP_WITHOUT_DEVICE()                                                               \
  do {                                                                                      \
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: graph replays not run"; \
  } while (0)

// A non-blocking stream (as a session's) and a graph captured on it.
class Stream {
 public:
  Stream() { CUDA_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
  ~Stream() {
    if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
    cudaStreamDestroy(s_);
  }
  cudaStream_t get() const { return s_; }
  template <typename F>
  void capture(F&& enqueue) {
    CUDA_CHECK(cudaStreamBeginCapture(s_, cudaStreamCaptureModeThreadLocal));
    enqueue();
    cudaGraph_t g = nullptr;
    CUDA_CHECK(cudaStreamEndCapture(s_, &g));
    CUDA_CHECK(cudaGraphInstantiate(&exec_, g, 0));
    CUDA_CHECK(cudaGraphDestroy(g));
  }
  // Sets the device position (stream-ordered, as a session's step copy), replays, waits.
  void replay_at(int32_t* d_pos, int32_t pos) {
    CUDA_CHECK(cudaMemcpyAsync(d_pos, &pos, sizeof pos, cudaMemcpyHostToDevice, s_));
    CUDA_CHECK(cudaGraphLaunch(exec_, s_));
    CUDA_CHECK(cudaStreamSynchronize(s_));
  }

 private:
  cudaStream_t s_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

template <typename T>
std::vector<T> random_values(size_t n, uint32_t seed, float a) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-a, a);
  std::vector<T> v(n);
  for (auto& e : v) {
    if constexpr (std::is_same_v<T, uint16_t>)
      e = static_cast<uint16_t>(rng() & 0x3bff);  // f16 bits of magnitude below 1: finite, never zero-filled
    else
      e = u(rng);
  }
  return v;
}

// Equal bits, and finite (an output the kernels never wrote would be equal poison on both sides).
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  for (float x : a)
    if (!std::isfinite(x)) return false;
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// One graph per window, replayed at positions on both sides of each split-count change of the
// plan (one split up to a few tiles, then more, up to the capacity) against plain launches.
// A table of 16 rows of 4 floats, row t all t: embed's output names the token id a step used.
struct StepTable {
  std::vector<float> host = [] {
    std::vector<float> v(64);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i / 4);
    return v;
  }();
  DeviceBuffer dev{host};
  Matrix matrix() const { return {.dtype = DType::F32, .data = dev.as<std::byte>(), .rows = 16, .cols = 4}; }
};

// decode_step with a body that gathers the step's token row into `out` (step mode: the id is
// read from the device, where the step's 8-byte copy put it).
void embed_step(cuda_backend::Context& c, const StepTable& table, int32_t token, int64_t start, float* out) {
  const int32_t ids[1] = {0};  // not read in step mode
  const Matrix m = table.matrix();
  cuda_backend::decode_step(c, token, start, [out] { return std::vector<const void*>{out}; },
                            [&] { cuda_backend::embed(c, m, ids, out, EmbedIds::Tokens); });
}

// The token id and position go from pinned memory: a true asynchronous copy that reads its
// source when the stream gets to it. Two steps enqueued without a wait between them must each
// send their own token (the second waits until the first's copy has read the buffer).
TEST(CudaDecodeStep, EachStepSendsItsOwnTokenFromPinnedMemory) {
  SKIP_WITHOUT_DEVICE();
  auto ctx = cuda_backend::create_context();
  StepTable table;
  DeviceBuffer a(4 * sizeof(float)), b(4 * sizeof(float));
#if defined(KVINFER_CUDA_SIM)
  const uint64_t pageable = kvi_sim::pageable_copies();
#endif
  embed_step(*ctx, table, 5, 0, a.as<float>());
  embed_step(*ctx, table, 9, 1, b.as<float>());
  CUDA_CHECK(cudaStreamSynchronize(cuda_backend::stream(*ctx)));
  EXPECT_EQ(a.to_host<float>(), std::vector<float>(4, 5.0f));
  EXPECT_EQ(b.to_host<float>(), std::vector<float>(4, 9.0f));
#if defined(KVINFER_CUDA_SIM)
  EXPECT_EQ(kvi_sim::pageable_copies(), pageable) << "a step's copy was staged from pageable memory";
#endif
}

// A decode graph is keyed by what a step touches: prefill-only scratch (token ids, narrowed GEMM
// inputs, dequantised weight tiles) that a later, larger prefill grows must not force a capture.
TEST(CudaDecodeStep, APrefillThatGrowsItsScratchKeepsTheDecodeGraph) {
  SKIP_WITHOUT_DEVICE();
  auto ctx = cuda_backend::create_context();
  StepTable table;
  DeviceBuffer out(4 * sizeof(float));
  for (int32_t t = 1; t <= 3; ++t) embed_step(*ctx, table, t, t, out.as<float>());  // eager, captured, replayed
  const cuda_backend::GraphCounts before = cuda_backend::graph_counts();
  // A prefill's work outside step mode: 40 token ids, a Q8_0 product of 40 rows (GEMM input and
  // dequantised tile), each growing its scratch buffer.
  constexpr int64_t kN = 40, kIn = 64, kOut = 32;
  std::vector<float> w(static_cast<size_t>(kIn * kOut));
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::sin(static_cast<float>(i));
  std::vector<std::byte> q(static_cast<size_t>(kOut) * dtype_row_bytes(DType::Q8_0, kIn));
  for (int64_t r = 0; r < kOut; ++r)
    quantize_row(DType::Q8_0, w.data() + r * kIn, q.data() + r * dtype_row_bytes(DType::Q8_0, kIn), kIn);
  DeviceBuffer dq(q), x(std::vector<float>(static_cast<size_t>(kN * kIn), 0.5f)), y(kN * kOut * sizeof(float));
  DeviceBuffer rows(kN * 4 * sizeof(float));
  const Linear layer{.weight = {.dtype = DType::Q8_0, .data = dq.as<std::byte>(), .rows = kOut, .cols = kIn}, .bias = {}};
  cuda_backend::linear(*ctx, layer, x.as<float>(), kN, y.as<float>());
  const std::vector<int32_t> ids(kN, 3);
  cuda_backend::embed(*ctx, table.matrix(), ids, rows.as<float>(), EmbedIds::Tokens);
  embed_step(*ctx, table, 7, 4, out.as<float>());
  CUDA_CHECK(cudaStreamSynchronize(cuda_backend::stream(*ctx)));
  EXPECT_EQ(out.to_host<float>(), std::vector<float>(4, 7.0f));
  const cuda_backend::GraphCounts after = cuda_backend::graph_counts();
  EXPECT_EQ(after.captured, before.captured) << "the prefill's scratch forced a new capture";
  EXPECT_EQ(after.launched, before.launched + 1);
}

TEST(CudaGraphs, DecodeAttentionAtADevicePositionIsThePlainLaunchBitForBit) {
  SKIP_WITHOUT_DEVICE();
  const int64_t kv_heads = 2, group = 4, hd = 64, capacity = 3000, heads = kv_heads * group;
  const auto kv_elems = static_cast<size_t>(kv_heads * capacity * hd);
  // (kv_heads, capacity, hd) f16
  const DeviceBuffer k(random_values<uint16_t>(kv_elems, 1, 0)), v(random_values<uint16_t>(kv_elems, 2, 0));
  const auto q_elems = static_cast<size_t>(heads * hd);
  const DeviceBuffer q(random_values<float>(q_elems, 3, 4.0f));  // (heads, hd)
  const DeviceBuffer out_graph(q_elems * sizeof(float)), out_plain(q_elems * sizeof(float));
  const DeviceBuffer pos(sizeof(int32_t));
  const size_t ws_bytes = cuda::attention_decode_workspace_bytes(heads, hd, capacity);
  const DeviceBuffer ws_graph(ws_bytes), ws_plain(ws_bytes);
  for (int64_t window : {0, 700}) {
    cuda::AttentionParams p;
    p.q = q.as<float>();
    p.k = k.ptr;
    p.v = v.ptr;
    p.kv_dtype = DType::F16;
    p.n = 1;
    p.heads = heads;
    p.kv_heads = kv_heads;
    p.head_dim = hd;
    p.capacity = capacity;
    p.rows = capacity;
    p.window = window;
    Stream s;
    cuda::AttentionParams g = p;
    g.out = out_graph.as<float>();
    g.start = capacity - 1;  // the host checks' position; the kernels read pos
    g.start_on_device = pos.as<int32_t>();
    s.capture([&] { cuda::attention_decode(g, ws_graph.ptr, ws_bytes, s.get()); });
    for (int32_t at : {0, 1, 63, 64, 127, 128, 129, 300, 699, 700, 1024, 2047, 2999}) {
      s.replay_at(pos.as<int32_t>(), at);
      p.out = out_plain.as<float>();
      p.start = at;
      cuda::attention_decode(p, ws_plain.ptr, ws_bytes, s.get());
      CUDA_CHECK(cudaStreamSynchronize(s.get()));
      const auto got = out_graph.to_host<float>(), want = out_plain.to_host<float>();
      EXPECT_TRUE(same_bits(got, want)) << "position " << at << ", window " << window;
    }
  }
}

// rope and store_kv: replayed at several positions, the rotated rows and the cache rows written
// are those of plain launches at those positions.
TEST(CudaGraphs, RopeAndStoreKvAtADevicePositionAreThePlainLaunchesBitForBit) {
  SKIP_WITHOUT_DEVICE();
  const int64_t heads = 3, hd = 32, capacity = 50;
  const auto x0 = random_values<float>(heads * hd, 4, 2.0f);
  std::vector<float> inv_freq(hd / 2);
  for (int64_t i = 0; i < hd / 2; ++i)
    inv_freq[static_cast<size_t>(i)] = std::pow(10000.0f, -2.0f * static_cast<float>(i) / static_cast<float>(hd));
  const DeviceBuffer x(x0.size() * sizeof(float)), x_pristine(x0), freq(inv_freq);
  const DeviceBuffer kv_k(static_cast<size_t>(heads * capacity * hd) * sizeof(float)), kv_v(kv_k.bytes);
  const DeviceBuffer pos(sizeof(int32_t));
  for (auto layout : {cuda::RopeLayout::HalfSplit, cuda::RopeLayout::Interleaved}) {
    Stream s;
    s.capture([&] {
      CUDA_CHECK(cudaMemcpyAsync(x.ptr, x_pristine.ptr, x.bytes, cudaMemcpyDeviceToDevice, s.get()));
      cuda::rope(x.as<float>(), 1, heads, hd, 0, freq.as<float>(), layout, s.get(), pos.as<int32_t>());
      cuda::store_kv(DType::F32, x.as<float>(), x_pristine.as<float>(), 1, heads, hd, capacity - 1, capacity,
                     kv_k.ptr, kv_v.ptr, s.get(), pos.as<int32_t>());
    });
    for (int32_t at : {0, 7, 49}) {
      s.replay_at(pos.as<int32_t>(), at);
      const auto rotated = x.to_host<float>();
      const auto cache_k = kv_k.to_host<float>();
      CUDA_CHECK(cudaMemcpy(x.ptr, x0.data(), x.bytes, cudaMemcpyHostToDevice));
      cuda::rope(x.as<float>(), 1, heads, hd, at, freq.as<float>(), layout, nullptr);
      CUDA_CHECK(cudaDeviceSynchronize());
      const auto want = x.to_host<float>();
      EXPECT_TRUE(same_bits(rotated, want)) << "rope at position " << at;
      if (at > 0) {
        EXPECT_NE(rotated, x0) << "nothing was rotated at position " << at;
      }
      for (int64_t h = 0; h < heads; ++h)
        EXPECT_EQ(0, std::memcmp(cache_k.data() + (h * capacity + at) * hd, want.data() + h * hd, hd * sizeof(float)))
            << "K row of head " << h << " at position " << at;
    }
  }
}

}  // namespace
}  // namespace kvinfer
