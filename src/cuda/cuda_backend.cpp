#include "cuda/cuda_backend.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string_view>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "cpu/cpu_ops.h"
#include "cuda/cublas_loader.h"
#include "cuda/device_memory.h"
#include "cuda_check.h"
#include "cuda_gemm.h"
#include "cuda_gemv.h"
#include "cuda_moe.h"
#include "cuda_ops.h"
#include "cuda_sample.h"
#include "core/kv_cache_access.h"
#include "kvinfer/error.h"

namespace kvinfer::cuda_backend {

namespace {
bool graphs_wanted() {
  const char* v = std::getenv("KVINFER_CUDA_GRAPHS");
  return v == nullptr || std::string_view(v) != "0";
}

// A captured decode step and the device memory it was captured over.
struct StepGraph {
  std::vector<const void*> key;
  cudaGraphExec_t exec = nullptr;
};
constexpr size_t kMaxGraphs = 8;  // one per live (cache, buffers) pair a session alternates between
std::atomic<int64_t> g_captured{0}, g_launched{0};
}  // namespace

class Context {
 public:
  // Made with `device` current (create_context).
  explicit Context(int device_index)
      : device(device_index),
        blas_workspace(kCublasWorkspaceBytes, "cuBLAS workspace"),
        step(2 * sizeof(int32_t), "decode step (token id, position)") {
    const cuda::CublasApi& api = cuda::cublas();  // loads cuBLAS the first time; throws when missing
    CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&step_host), 2 * sizeof(int32_t)));
    if (cudaEventCreateWithFlags(&step_copied, cudaEventDisableTiming) != cudaSuccess) {
      cudaFreeHost(step_host);
      throw Error(ErrorKind::Device, "CUDA: cudaEventCreateWithFlags failed for the decode step's copy");
    }
    if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
      cudaEventDestroy(step_copied);
      cudaFreeHost(step_host);
      throw Error(ErrorKind::Device, "CUDA: cudaStreamCreateWithFlags failed for a session's stream");
    }
    if (api.create(&blas) != CUBLAS_STATUS_SUCCESS) {
      cudaStreamDestroy(stream);
      cudaEventDestroy(step_copied);
      cudaFreeHost(step_host);
      throw Error(ErrorKind::Device, "cuBLAS: cublasCreate failed");
    }
    // Once for the handle's life (cuda::gemm sets neither): the stream first, since
    // cublasSetStream resets the workspace; alpha and beta are host values.
    if (api.set_stream(blas, stream) != CUBLAS_STATUS_SUCCESS ||
        api.set_workspace(blas, blas_workspace.get(), blas_workspace.bytes()) != CUBLAS_STATUS_SUCCESS ||
        api.set_pointer_mode(blas, CUBLAS_POINTER_MODE_HOST) != CUBLAS_STATUS_SUCCESS) {
      api.destroy(blas);
      cudaStreamDestroy(stream);
      cudaEventDestroy(step_copied);
      cudaFreeHost(step_host);
      throw Error(ErrorKind::Device, "cuBLAS: cannot bind the session's stream, workspace and pointer mode to its handle");
    }
  }
  ~Context() {
    try {
      const DeviceScope on(device);
      for (StepGraph& g : graphs) cudaGraphExecDestroy(g.exec);
      cuda::cublas().destroy(blas);  // loaded: the constructor succeeded
      cudaStreamDestroy(stream);
      cudaEventDestroy(step_copied);
      cudaFreeHost(step_host);
    } catch (...) {  // the device is gone: nothing left to release there
    }
  }
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  // A scratch buffer of at least `bytes`, grown (not preserved) on demand.
  void* scratch(DeviceBuffer& buf, size_t bytes, const char* what) {
    if (buf.bytes() < bytes) {
      CUDA_CHECK(cudaStreamSynchronize(stream));  // in-flight work may still read the old one
      buf = DeviceBuffer(bytes, what);
    }
    return buf.get();
  }

  const int device;             // the CUDA device it lives on
  DeviceBuffer blas_workspace;  // (kCublasWorkspaceBytes) bytes, this handle's alone
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  DeviceBuffer ids;        // (n) int32
  DeviceBuffer x_lowp;     // (n, in) of the weights' dtype (f16 for quantised weights), n > 8
  DeviceBuffer w_tile;     // (tile rows, in) f16: rows of one quantised matrix, dequantised for a GEMM, n > 8
  DeviceBuffer workspace;  // split-K partials of decode attention
  DeviceBuffer moe_order;  // (2, pairs) int32: a prefill's pairs by expert, and each pair's place (moe_experts)
  std::vector<int32_t> moe_host;  // (n, k) routed ids, then the order, on the host
  uint64_t tile_bytes = kDequantTileBytes;  // bound of w_tile

  // Decode steps as graphs (decode_step).
  DeviceBuffer step;                    // (2) int32: the step's token id and position
  int32_t* step_host = nullptr;         // (2) pinned: their host copy, sent by a true async copy
  cudaEvent_t step_copied = nullptr;    // recorded after that copy: it has read step_host
  const int32_t* step_ids = nullptr;    // step's, while a step is enqueued in step mode; else null
  bool use_graphs = graphs_wanted();
  std::vector<StepGraph> graphs;        // most recently used last
  std::vector<const void*> eager_key;   // the key of the last step run eagerly

  // The position the ops read on the device in step mode, else null (they use the host's).
  const int32_t* device_start() const { return step_ids != nullptr ? step_ids + 1 : nullptr; }

  // Device sampling (scan_logits, top_k_candidates): sized once, for the vocabulary or the cap.
  DeviceBuffer sample_out;                  // int32: scan results, or [bad, ids k, values k]
  DeviceBuffer sample_adjusted;             // (vocab) f32: logits after bias and penalties
  DeviceBuffer sample_lists;                // bias entries then penalised tokens, 8 bytes each
  std::vector<int32_t> sample_host;         // what sample_out brings back
  std::vector<cuda::IdValue> sample_lists_host;  // staging of sample_lists (grown, never shrunk)
  std::vector<std::pair<int32_t, float>> sample_candidates;  // top_k_candidates' result
};

std::shared_ptr<Context> create_context(int device) {
  const DeviceScope on(device);
  return std::make_shared<Context>(device);
}

int64_t dequant_tile_rows(int64_t rows, int64_t cols, uint64_t tile_bytes) {
  int64_t r = static_cast<int64_t>(tile_bytes / (static_cast<uint64_t>(cols) * sizeof(uint16_t)));
  if (r >= 64) r -= r % 64;  // whole 64-row GEMM tiles; each tile's y columns start 256-byte aligned
  return std::clamp<int64_t>(r, 1, rows);
}

uint64_t session_scratch_bytes(const ModelWeights& w, uint64_t tile_bytes) {
  uint64_t largest = 0;  // the largest f16 tile; n <= 8 (GEMV) reads the blocks in place
  for_each_tensor(w, [&](const auto& t) {
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(t)>, Matrix>)
      if (is_quantized(t.dtype) && t.rows > 0 && t.cols > 0)
        largest = std::max(largest, static_cast<uint64_t>(dequant_tile_rows(t.rows, t.cols, tile_bytes) * t.cols) *
                                        sizeof(uint16_t));
  });
  return kCublasWorkspaceBytes + largest;
}

void set_dequant_tile_bytes(Context& c, uint64_t bytes) { c.tile_bytes = bytes; }

uint64_t dequant_scratch_bytes(Context& c) { return c.w_tile.bytes(); }

namespace {
struct DeviceStorage {
  std::vector<DeviceBuffer> buffers;
};
}  // namespace

std::unique_ptr<ModelWeights> upload(const ModelWeights& host, const std::function<void(uint64_t, uint64_t)>& progress) {
  auto dev = std::make_unique<ModelWeights>(host);
  auto storage = std::make_shared<DeviceStorage>();
  uint64_t total = 0, done = 0;
  std::set<const void*> seen;
  for_each_tensor(host, [&](const auto& t) {
    if (t.data && seen.insert(t.data).second) total += t.bytes();
  });
  if (progress) progress(0, total);
  std::map<const void*, const void*> copies;  // host pointer → device pointer (tied LM head)
  auto copy = [&](const void* src, size_t bytes, const char* what) -> const void* {
    if (!src || bytes == 0) return src;
    if (auto it = copies.find(src); it != copies.end()) return it->second;
    storage->buffers.emplace_back(bytes, what);
    copy_to_device(storage->buffers.back().get(), src, bytes);
    done += bytes;
    if (progress) progress(done, total);
    return copies[src] = storage->buffers.back().get();
  };
  for_each_tensor(*dev, [&](auto& t) {
    using T = std::remove_reference_t<decltype(t)>;
    if constexpr (std::is_same_v<T, Matrix>)
      t.data = static_cast<const std::byte*>(copy(t.data, t.bytes(), "model weights"));
    else
      t.data = static_cast<const float*>(copy(t.data, t.bytes(), "model weights"));
  });
  dev->storage = storage;
  return dev;
}

void embed(Context& c, const Matrix& table, std::span<const int32_t> ids, float* out, EmbedIds kind) {
  const auto n = static_cast<int64_t>(ids.size());
  const int32_t* d_ids = nullptr;
  if (c.step_ids != nullptr) {  // step mode: the one token id, or its position, is on the device
    d_ids = c.step_ids + (kind == EmbedIds::Positions ? 1 : 0);
  } else {
    auto* buf = static_cast<int32_t*>(c.scratch(c.ids, ids.size_bytes(), "token ids"));
    CUDA_CHECK(cudaMemcpyAsync(buf, ids.data(), ids.size_bytes(), cudaMemcpyHostToDevice, c.stream));
    d_ids = buf;
  }
  if (is_quantized(table.dtype))
    cuda::embed_quantized(table.dtype, table.data, table.rows, table.cols, d_ids, n, out, c.stream);
  else
    cuda::embed(table.dtype, table.data, table.rows, table.cols, d_ids, n, out, c.stream);
}

void rms_norm(Context& c, const float* x, const Vector& weight, int64_t n, int64_t dim, float eps, float* y) {
  cuda::rms_norm(x, weight.data, n, dim, eps, y, c.stream);
}

void layer_norm(Context& c, const float* x, const Vector& weight, const Vector& bias, int64_t n, int64_t dim,
                float eps, float* y) {
  cuda::layer_norm(x, weight.data, bias.data, n, dim, eps, y, c.stream);
}

namespace {

void linear_rows(Context& c, const Linear& layer, const float* x, int64_t n, float* y) {
  const Matrix& w = layer.weight;
  // Decode and small batches: the weights read once, in place, whatever their dtype; bias fused.
  if (n <= cuda::kGemvMaxRows) {
    cuda::gemv(w.dtype, w.data, w.rows, w.cols, x, n, layer.bias.empty() ? nullptr : layer.bias.data, y, c.stream);
    return;
  }
  if (!is_quantized(w.dtype)) {
    void* x_lowp = nullptr;
    if (w.dtype != DType::F32)
      x_lowp = c.scratch(c.x_lowp, static_cast<size_t>(n * w.cols) * dtype_size(w.dtype), "GEMM input");
    cuda::gemm(c.blas, w.dtype, w.data, w.rows, w.cols, x, n, y, x_lowp, c.stream);
  } else {
    // Prefill on quantised weights: a bounded tile of rows at a time is dequantised into f16
    // scratch (bit-exact values, rounded to f16) and multiplied as f16 weights are, into its
    // columns of y. The model itself stays quantised.
    void* x16 = c.scratch(c.x_lowp, static_cast<size_t>(n * w.cols) * sizeof(uint16_t), "GEMM input");
    cuda::convert_from_f32(DType::F16, x, x16, n * w.cols, c.stream);
    const int64_t tile = dequant_tile_rows(w.rows, w.cols, c.tile_bytes);
    void* w16 = c.scratch(c.w_tile, static_cast<size_t>(tile * w.cols) * sizeof(uint16_t), "dequantised weights");
    const uint64_t row_bytes = dtype_row_bytes(w.dtype, w.cols);
    for (int64_t r0 = 0; r0 < w.rows; r0 += tile) {
      const int64_t m = std::min(tile, w.rows - r0);  // (m, cols) of W, columns r0 .. r0+m-1 of y
      cuda::dequantize_f16(w.dtype, w.data + static_cast<uint64_t>(r0) * row_bytes, m, w.cols, w16, c.stream);
      cuda::gemm_into(c.blas, DType::F16, w16, m, w.cols, x16, n, y + r0, w.rows);
    }
  }
  if (!layer.bias.empty()) cuda::add_bias(y, layer.bias.data, n, w.rows, c.stream);
}

}  // namespace

void linear(Context& c, const Linear& layer, const float* x, int64_t n, float* y, std::span<const int64_t> segments) {
  if (segments.size() <= 1) return linear_rows(c, layer, x, n, y);
  const int64_t in = layer.weight.cols, out = layer.weight.rows;
  int64_t small_first = 0, small_rows = 0;  // a run of adjacent short sequences' rows
  const auto flush_small = [&] {
    for (int64_t at = 0; at < small_rows; at += cuda::kGemvMaxRows) {
      const int64_t r = small_first + at;
      linear_rows(c, layer, x + r * in, std::min(cuda::kGemvMaxRows, small_rows - at), y + r * out);
    }
    small_rows = 0;
  };
  int64_t row = 0;
  for (const int64_t rows : segments) {
    if (rows <= cuda::kGemvMaxRows) {
      if (small_rows == 0) small_first = row;
      small_rows += rows;
    } else {
      flush_small();
      linear_rows(c, layer, x + row * in, rows, y + row * out);
    }
    row += rows;
  }
  flush_small();
}

void rope(Context& c, float* x, int64_t n, int64_t heads, int64_t head_dim, int64_t start, const Vector& inv_freq,
          RopeLayout layout, float attention_factor) {
  const auto kernel = layout == RopeLayout::Interleaved ? cuda::RopeLayout::Interleaved : cuda::RopeLayout::HalfSplit;
  cuda::rope(x, n, heads, head_dim, start, inv_freq.data, kernel, c.stream, c.device_start(), 2 * inv_freq.n,
             attention_factor);
}

void silu_mul(Context& c, const float* gate, const float* up, float* out, int64_t n) {
  cuda::silu_mul(gate, up, out, n, c.stream);
}

void gelu_tanh(Context& c, const float* x, float* out, int64_t n) { cuda::gelu_tanh(x, out, n, c.stream); }

void head_rms_norm(Context& c, float* x, const Vector& weight, int64_t rows, int64_t head_dim, float eps) {
  cuda::head_rms_norm(x, weight.data, rows, head_dim, eps, c.stream);
}

void gelu_tanh_mul(Context& c, const float* gate, const float* up, float* out, int64_t n) {
  cuda::gelu_tanh_mul(gate, up, out, n, c.stream);
}

void scale(Context& c, float* x, int64_t n, float factor) { cuda::scale(x, n, factor, c.stream); }

void softcap(Context& c, float* x, int64_t n, float cap) { cuda::softcap(x, n, cap, c.stream); }

void add(Context& c, float* x, const float* y, int64_t n) { cuda::add(x, y, n, c.stream); }

void moe_route(Context& c, const float* logits, int64_t n, int64_t experts, int64_t k, bool normalize, int32_t* ids,
               float* weights) {
  cuda::moe_route(logits, n, experts, k, normalize, ids, weights, c.stream);
}

namespace {
// The device pointers of one kind of expert matrix, which must share a dtype and a shape.
cuda::ExpertMatrices expert_table(const std::vector<Linear>& experts, const char* what) {
  if (experts.empty() || static_cast<int64_t>(experts.size()) > core::kMaxExperts)
    throw Error(ErrorKind::Unsupported, fmt::format("moe_experts: {} experts of kind '{}' (1 to {} are supported)",
                                                    experts.size(), what, core::kMaxExperts));
  cuda::ExpertMatrices t{};
  const Matrix& first = experts[0].weight;
  for (size_t e = 0; e < experts.size(); ++e) {
    const Matrix& m = experts[e].weight;
    if (m.dtype != first.dtype || m.rows != first.rows || m.cols != first.cols || !experts[e].bias.empty())
      throw Error(ErrorKind::Unsupported, fmt::format("moe_experts: expert {}'s {} matrix differs from expert 0's in dtype "
                                                      "or shape, or has a bias; CUDA needs them alike", e, what));
    t.w[e] = m.data;
  }
  return t;
}
}  // namespace

namespace {
// Every (row, chosen expert) pair of n rows as a GEMV whose expert the kernel picks by its routed
// id: no host work depends on the choice (a decode step's graph replays for any), and each pair
// reads only its expert's bytes.
void moe_pairs(Context& c, const MoeWeights& m, const float* x, int64_t n, int64_t hidden, const int32_t* ids,
               const float* weights, int64_t k, const MoeScratch& s, float* out) {
  const int64_t experts = m.experts(), inter = m.gate[0].weight.rows, pairs = n * k;
  // Gate and up from the row's input, down from the pair's own.
  cuda::moe_gemv(m.gate[0].weight.dtype, expert_table(m.gate, "gate"), experts, ids, pairs, inter, hidden, x, k,
                 s.gate, c.stream);  // (pairs, inter)
  cuda::moe_gemv(m.up[0].weight.dtype, expert_table(m.up, "up"), experts, ids, pairs, inter, hidden, x, k, s.up,
                 c.stream);  // (pairs, inter)
  cuda::silu_mul(s.gate, s.up, s.gate, pairs * inter, c.stream);
  cuda::moe_gemv(m.down[0].weight.dtype, expert_table(m.down, "down"), experts, ids, pairs, hidden, inter, s.gate, 1,
                 s.y, c.stream);  // (pairs, hidden)
  cuda::moe_combine(s.y, weights, n, k, hidden, out, c.stream);
}

// A prefill segment's pairs grouped by expert (ids: its routed ids, on the host): each expert's
// matrices multiplied once by all the rows that chose it (linear_rows: GEMV or cuBLAS by the count).
void moe_grouped(Context& c, const MoeWeights& m, const float* x, int64_t n, int64_t hidden, const int32_t* ids,
                 const float* weights, int64_t k, const MoeScratch& s, float* out) {
  const int64_t experts = m.experts(), inter = m.gate[0].weight.rows, pairs = n * k;
  std::vector<int32_t> order(static_cast<size_t>(2 * pairs));  // (pairs) pair of each place, then (pairs) place of each pair
  std::vector<int64_t> first(static_cast<size_t>(experts + 1));  // each expert's first place
  int64_t place = 0;
  for (int64_t e = 0; e < experts; ++e) {
    first[static_cast<size_t>(e)] = place;
    for (int64_t p = 0; p < pairs; ++p)
      if (ids[p] == e) {
        order[static_cast<size_t>(place)] = static_cast<int32_t>(p);
        order[static_cast<size_t>(pairs + p)] = static_cast<int32_t>(place++);
      }
  }
  first[static_cast<size_t>(experts)] = place;
  if (place != pairs) throw Error(ErrorKind::Device, "moe_experts: a routed expert id is out of range");
  auto* d_order = static_cast<int32_t*>(c.scratch(c.moe_order, order.size() * sizeof(int32_t), "MoE pair order"));
  CUDA_CHECK(cudaMemcpyAsync(d_order, order.data(), order.size() * sizeof(int32_t), cudaMemcpyHostToDevice, c.stream));
  cuda::moe_gather(x, d_order, pairs, k, hidden, s.y, c.stream);  // (pairs, hidden) in the experts' order
  const auto each = [&](const std::vector<Linear>& layers, const float* in, int64_t in_dim, float* y, int64_t y_dim) {
    for (int64_t e = 0; e < experts; ++e) {
      const int64_t f = first[static_cast<size_t>(e)], rows = first[static_cast<size_t>(e) + 1] - f;
      if (rows > 0) linear_rows(c, layers[static_cast<size_t>(e)], in + f * in_dim, rows, y + f * y_dim);
    }
  };
  each(m.gate, s.y, hidden, s.gate, inter);
  each(m.up, s.y, hidden, s.up, inter);
  cuda::silu_mul(s.gate, s.up, s.gate, pairs * inter, c.stream);
  each(m.down, s.gate, inter, s.y, hidden);  // over the gathered rows: gate and up have read them all
  cuda::moe_combine(s.y, weights, n, k, hidden, out, c.stream, d_order + pairs);
  // `order` is pageable: the copy has staged it before cudaMemcpyAsync returned.
}
}  // namespace

void moe_experts(Context& c, const MoeWeights& m, const float* x, int64_t n, int64_t hidden, const int32_t* ids,
                 const float* weights, int64_t k, const MoeScratch& s, float* out, std::span<const int64_t> segments) {
  const int64_t one[] = {n};
  if (segments.empty()) segments = one;
  const bool long_segment = std::any_of(segments.begin(), segments.end(), [](int64_t r) { return r > cuda::kGemvMaxRows; });
  // Decode steps and small batches (graph-safe): every pair picked on the device.
  if (!long_segment || c.step_ids != nullptr) return moe_pairs(c, m, x, n, hidden, ids, weights, k, s, out);
  // A prefill: the ids come to the host once; each sequence's rows alone are grouped, so that a
  // row gets the bits its sequence's call alone gives it (batch invariance, as linear()).
  c.moe_host.resize(static_cast<size_t>(n * k));
  CUDA_CHECK(cudaMemcpyAsync(c.moe_host.data(), ids, c.moe_host.size() * sizeof(int32_t), cudaMemcpyDeviceToHost, c.stream));
  CUDA_CHECK(cudaStreamSynchronize(c.stream));
  const int64_t inter = m.gate[0].weight.rows;
  int64_t row = 0;
  for (const int64_t rows : segments) {
    const MoeScratch part{nullptr, s.gate + row * k * inter, s.up + row * k * inter, s.y + row * k * hidden};
    if (rows > cuda::kGemvMaxRows)
      moe_grouped(c, m, x + row * hidden, rows, hidden, c.moe_host.data() + row * k, weights + row * k, k, part,
                  out + row * hidden);
    else
      moe_pairs(c, m, x + row * hidden, rows, hidden, ids + row * k, weights + row * k, k, part, out + row * hidden);
    row += rows;
  }
}

void add_gated(Context& c, float* out, const float* gate, const float* y, int64_t n, int64_t dim) {
  cuda::add_gated(out, gate, y, n, dim, c.stream);
}

void store_kv(Context& c, KvCache& kv, int64_t layer, int64_t start, int64_t n, const float* k, const float* v) {
  // The layer's (kv_heads, layer_rows) blocks, a sliding-window layer's a ring; an 8-bit cache's
  // scales likewise (null for the other types). KvCache bounds the positions by its capacity.
  cuda::store_kv(kv.dtype(), k, v, n, kv.num_kv_heads(), kv.head_dim(), start, kv.layer_rows(layer), kv_k(kv, layer, 0),
                 kv_v(kv, layer, 0), c.stream, c.device_start(), kv_k_scales(kv, layer, 0), kv_v_scales(kv, layer, 0));
}

void attention(Context& c, const KvCache& kv, int64_t layer, const float* q, int64_t n, int64_t start, int64_t heads,
               int64_t window, float* out, const ScoreOptions& scores) {
  cuda::AttentionParams p;
  p.scale = scores.scale;
  p.softcap = scores.softcap;
  p.q = q;
  p.k = kv_k(kv, layer, 0);
  p.v = kv_v(kv, layer, 0);
  p.k_scales = kv_k_scales(kv, layer, 0);  // 8-bit caches: (kv_heads, layer_rows) each; null otherwise
  p.v_scales = kv_v_scales(kv, layer, 0);
  p.out = out;
  p.kv_dtype = kv.dtype();
  p.n = n;
  p.start = start;
  p.heads = heads;
  p.kv_heads = kv.num_kv_heads();
  p.head_dim = kv.head_dim();
  p.capacity = kv.capacity();
  p.rows = kv.layer_rows(layer);
  p.window = window;
  p.start_on_device = c.device_start();
  if (n == 1) {
    const size_t bytes = cuda::attention_decode_workspace_bytes(heads, kv.head_dim(), kv.capacity());
    void* ws = c.scratch(c.workspace, bytes, "decode attention workspace");
    cuda::attention_decode(p, ws, bytes, c.stream);
  } else {
    cuda::attention_prefill(p, c.stream);
  }
}

CUstream_st* stream(Context& c) { return c.stream; }

void to_host(Context& c, const float* device, float* host, int64_t n) {
  CUDA_CHECK(cudaMemcpyAsync(host, device, static_cast<size_t>(n) * sizeof(float), cudaMemcpyDeviceToHost, c.stream));
  CUDA_CHECK(cudaStreamSynchronize(c.stream));
}

int64_t first_nonfinite(Context& c, const float* x, int64_t n, float* value) {
  std::vector<float> host(static_cast<size_t>(n));
  to_host(c, x, host.data(), n);
  const int64_t i = cpu::first_nonfinite(host.data(), n);
  if (i >= 0) *value = host[static_cast<size_t>(i)];
  return i;
}

// ---- device sampling ------------------------------------------------------------------------------

namespace {
int32_t* sample_out(Context& c) {
  constexpr size_t kInts = 1 + 2 * static_cast<size_t>(cuda::kMaxDeviceTopK);
  if (c.sample_host.size() < kInts) {
    c.sample_host.resize(kInts);
    c.sample_candidates.resize(static_cast<size_t>(cuda::kMaxDeviceTopK));
  }
  return static_cast<int32_t*>(c.scratch(c.sample_out, kInts * sizeof(int32_t), "sampling results"));
}
}  // namespace

LogitsScan scan_logits(Context& c, const float* logits, int64_t n) {
  int32_t* out = sample_out(c);
  cuda::scan_logits(logits, n, out, c.stream);
  CUDA_CHECK(cudaMemcpyAsync(c.sample_host.data(), out, cuda::kScanInts * sizeof(int32_t), cudaMemcpyDeviceToHost,
                             c.stream));
  CUDA_CHECK(cudaStreamSynchronize(c.stream));
  LogitsScan r{c.sample_host[0], c.sample_host[1], 0.0f};
  std::memcpy(&r.max_value, &c.sample_host[2], sizeof r.max_value);
  return r;
}

int32_t max_device_top_k() { return cuda::kMaxDeviceTopK; }

std::span<const std::pair<int32_t, float>> top_k_candidates(Context& c, const float* logits, int64_t vocab,
                                                            const LogitAdjustments& adjust, int32_t k) {
  int32_t* out = sample_out(c);
  const float* row = logits;
  if (!adjust.bias.empty() || !adjust.penalised.empty()) {
    const size_t nb = adjust.bias.size(), np = adjust.penalised.size();
    static_assert(sizeof(cuda::IdValue) == 8 && sizeof(cuda::IdCount) == 8);
    if (c.sample_lists_host.size() < nb + np) c.sample_lists_host.resize(nb + np);
    for (size_t i = 0; i < nb; ++i) c.sample_lists_host[i] = {adjust.bias[i].first, adjust.bias[i].second};
    for (size_t i = 0; i < np; ++i) {
      cuda::IdValue& e = c.sample_lists_host[nb + i];  // an IdCount, stored in IdValue's 8 bytes
      e.id = adjust.penalised[i].first;
      std::memcpy(&e.value, &adjust.penalised[i].second, sizeof(int32_t));
    }
    auto* lists = static_cast<cuda::IdValue*>(
        c.scratch(c.sample_lists, std::max<size_t>(nb + np, 64) * sizeof(cuda::IdValue), "sampling lists"));
    CUDA_CHECK(cudaMemcpyAsync(lists, c.sample_lists_host.data(), (nb + np) * sizeof(cuda::IdValue),
                               cudaMemcpyHostToDevice, c.stream));
    auto* adjusted =
        static_cast<float*>(c.scratch(c.sample_adjusted, static_cast<size_t>(vocab) * sizeof(float), "sampling logits"));
    cuda::adjust_logits(logits, vocab, lists, static_cast<int32_t>(nb),
                        reinterpret_cast<const cuda::IdCount*>(lists + nb), static_cast<int32_t>(np),
                        {adjust.repetition, adjust.presence, adjust.frequency}, adjusted, out, c.stream);
    row = adjusted;
  } else {
    CUDA_CHECK(cudaMemsetAsync(out, 0, sizeof(int32_t), c.stream));
  }
  cuda::top_k(row, vocab, k, out + 1, reinterpret_cast<float*>(out + 1 + k), c.stream);
  CUDA_CHECK(cudaMemcpyAsync(c.sample_host.data(), out, (1 + 2 * static_cast<size_t>(k)) * sizeof(int32_t),
                             cudaMemcpyDeviceToHost, c.stream));
  CUDA_CHECK(cudaStreamSynchronize(c.stream));
  if (c.sample_host[0] != 0) return {};
  const auto n = static_cast<size_t>(k);
  for (size_t i = 0; i < n; ++i) {
    float v;
    std::memcpy(&v, &c.sample_host[1 + n + i], sizeof v);
    c.sample_candidates[i] = {c.sample_host[1 + i], v};
  }
  return {c.sample_candidates.data(), n};
}

int32_t sample_row(Context& c, Sampler& sampler, const float* row, int64_t vocab,
                   const std::function<std::span<const float>()>& host_row) {
  const int32_t k = sampler.top_k_size();
  if (k > max_device_top_k()) return sampler.sample(host_row());
  const SamplingParams& p = sampler.params();
  LogitAdjustments adjust;
  adjust.bias = p.logit_bias;
  adjust.penalised = sampler.penalty_counts();
  adjust.repetition = p.repetition_penalty;
  adjust.presence = p.presence_penalty;
  adjust.frequency = p.frequency_penalty;
  const auto top_k = top_k_candidates(c, row, vocab, adjust, k);
  // An adjusted logit went NaN or +inf: the CPU Sampler's errors and rules decide, on a copy.
  if (top_k.empty()) return sampler.sample(host_row());
  return sampler.sample_top_k(top_k);
}

}  // namespace kvinfer::cuda_backend

namespace kvinfer::cuda_backend {

namespace {
// Enqueues body() in step mode: the ops read the token id and position from c.step.
void in_step_mode(Context& c, const std::function<void()>& body) {
  c.step_ids = c.step.as<int32_t>();
  try {
    body();
  } catch (...) {
    c.step_ids = nullptr;
    throw;
  }
  c.step_ids = nullptr;
}

// The caller's key and the one scratch buffer a step reads (the decode attention workspace). The
// prefill-only scratch (ids, narrowed GEMM inputs, dequantised tiles, the MoE order) is not used
// in step mode: a larger prefill that grows it must not force a new capture.
std::vector<const void*> full_key(const Context& c, std::vector<const void*> key) {
  key.push_back(c.workspace.get());
  return key;
}

cudaGraphExec_t capture(Context& c, const std::function<void()>& body) {
  CUDA_CHECK(cudaStreamBeginCapture(c.stream, cudaStreamCaptureModeThreadLocal));
  cudaGraph_t graph = nullptr;
  try {
    in_step_mode(c, body);
  } catch (...) {
    cudaStreamEndCapture(c.stream, &graph);  // ends the capture; what it recorded is dropped
    if (graph != nullptr) cudaGraphDestroy(graph);
    cudaGetLastError();
    throw;
  }
  const cudaError_t ended = cudaStreamEndCapture(c.stream, &graph);
  if (ended != cudaSuccess)
    throw Error(ErrorKind::Device, fmt::format("CUDA graph of a decode step: the capture failed ({}: {}); an op synchronised, "
                            "allocated or copied from the host while enqueued in step mode",
                            cudaGetErrorName(ended), cudaGetErrorString(ended)));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  CUDA_CHECK(made);
  return exec;
}
}  // namespace

void decode_step(Context& c, int32_t token, int64_t start, const std::function<std::vector<const void*>()>& key,
                 const std::function<void()>& body) {
  if (!c.use_graphs) return body();
  // From pinned memory the copy is a true async DMA that reads step_host when it runs: the last
  // step's copy must be done with it before it is rewritten.
  CUDA_CHECK(cudaEventSynchronize(c.step_copied));
  c.step_host[0] = token;
  c.step_host[1] = static_cast<int32_t>(start);
  CUDA_CHECK(cudaMemcpyAsync(c.step.get(), c.step_host, 2 * sizeof(int32_t), cudaMemcpyHostToDevice, c.stream));
  CUDA_CHECK(cudaEventRecord(c.step_copied, c.stream));
  std::vector<const void*> k = full_key(c, key());
  auto it = std::find_if(c.graphs.begin(), c.graphs.end(), [&](const StepGraph& g) { return g.key == k; });
  if (it != c.graphs.end()) {
    std::rotate(it, it + 1, c.graphs.end());  // most recently used last
    CUDA_CHECK(cudaGraphLaunch(c.graphs.back().exec, c.stream));
    ++g_launched;
    return;
  }
  if (k != c.eager_key) {
    in_step_mode(c, body);  // grows any buffer the step needs before a capture freezes them
    c.eager_key = full_key(c, key());
    return;
  }
  if (c.graphs.size() == kMaxGraphs) {
    CUDA_CHECK(cudaGraphExecDestroy(c.graphs.front().exec));
    c.graphs.erase(c.graphs.begin());
  }
  c.graphs.push_back({std::move(k), capture(c, body)});
  ++g_captured;
  CUDA_CHECK(cudaGraphLaunch(c.graphs.back().exec, c.stream));
  ++g_launched;
}

GraphCounts graph_counts() { return {g_captured.load(), g_launched.load()}; }

}  // namespace kvinfer::cuda_backend
