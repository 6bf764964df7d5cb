#include "cuda/cuda_backend.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "cpu/cpu_ops.h"
#include "cuda/device_memory.h"
#include "cuda_check.h"
#include "cuda_gemm.h"
#include "cuda_ops.h"
#include "cuda_sample.h"
#include "kvinfer/error.h"

namespace kvinfer::cuda_backend {

class Context {
 public:
  Context() : blas_workspace(kCublasWorkspaceBytes, "cuBLAS workspace") {
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    if (cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS) {
      cudaStreamDestroy(stream);
      throw Error("cuBLAS: cublasCreate failed");
    }
    if (cublasSetStream(blas, stream) != CUBLAS_STATUS_SUCCESS ||
        cublasSetWorkspace(blas, blas_workspace.get(), blas_workspace.bytes()) != CUBLAS_STATUS_SUCCESS) {
      cublasDestroy(blas);
      cudaStreamDestroy(stream);
      throw Error("cuBLAS: cannot bind the session's stream and workspace to its handle");
    }
  }
  ~Context() {
    cublasDestroy(blas);
    cudaStreamDestroy(stream);
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

  DeviceBuffer blas_workspace;  // (kCublasWorkspaceBytes) bytes, this handle's alone
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  DeviceBuffer ids;        // (n) int32
  DeviceBuffer x_lowp;     // (n, in) of the weights' dtype (f16 for quantised weights)
  DeviceBuffer w_f16;      // (out, in) f16: one quantised matrix, dequantised for its GEMM
  DeviceBuffer workspace;  // split-K partials of decode attention
  // Device sampling (scan_logits, top_k_candidates): sized once, for the vocabulary or the cap.
  DeviceBuffer sample_out;                  // int32: scan results, or [bad, ids k, values k]
  DeviceBuffer sample_adjusted;             // (vocab) f32: logits after bias and penalties
  DeviceBuffer sample_lists;                // bias entries then penalised tokens, 8 bytes each
  std::vector<int32_t> sample_host;         // what sample_out brings back
  std::vector<cuda::IdValue> sample_lists_host;  // staging of sample_lists (grown, never shrunk)
  std::vector<std::pair<int32_t, float>> sample_candidates;  // top_k_candidates' result
};

std::shared_ptr<Context> create_context() { return std::make_shared<Context>(); }

uint64_t session_scratch_bytes(const ModelWeights& w) {
  uint64_t largest = 0;
  for_each_tensor(w, [&](const auto& t) {
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(t)>, Matrix>)
      if (is_quantized(t.dtype)) largest = std::max(largest, static_cast<uint64_t>(t.rows * t.cols) * 2);
  });
  return kCublasWorkspaceBytes + largest;
}

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

void embed(Context& c, const Matrix& table, std::span<const int32_t> ids, float* out) {
  const auto n = static_cast<int64_t>(ids.size());
  auto* d_ids = static_cast<int32_t*>(c.scratch(c.ids, ids.size_bytes(), "token ids"));
  CUDA_CHECK(cudaMemcpyAsync(d_ids, ids.data(), ids.size_bytes(), cudaMemcpyHostToDevice, c.stream));
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

void linear(Context& c, const Linear& layer, const float* x, int64_t n, float* y) {
  const Matrix& w = layer.weight;
  // Quantised weights: this one matrix is dequantised into f16 scratch (bit-exact values,
  // rounded to f16), then multiplied as f16 weights are. The model itself stays quantised.
  DType gemm_dtype = w.dtype;
  const void* gemm_w = w.data;
  if (is_quantized(w.dtype)) {
    gemm_dtype = DType::F16;
    void* w16 = c.scratch(c.w_f16, static_cast<size_t>(w.rows * w.cols) * sizeof(uint16_t), "dequantised weights");
    cuda::dequantize_f16(w.dtype, w.data, w.rows, w.cols, w16, c.stream);
    gemm_w = w16;
  }
  void* x_lowp = nullptr;
  if (gemm_dtype != DType::F32)
    x_lowp = c.scratch(c.x_lowp, static_cast<size_t>(n * w.cols) * dtype_size(gemm_dtype), "GEMM input");
  cuda::gemm(c.blas, gemm_dtype, gemm_w, w.rows, w.cols, x, n, y, x_lowp, c.stream);
  if (!layer.bias.empty()) cuda::add_bias(y, layer.bias.data, n, w.rows, c.stream);
}

void rope(Context& c, float* x, int64_t n, int64_t heads, int64_t head_dim, int64_t start, const Vector& inv_freq,
          RopeLayout layout) {
  const auto kernel = layout == RopeLayout::Interleaved ? cuda::RopeLayout::Interleaved : cuda::RopeLayout::HalfSplit;
  cuda::rope(x, n, heads, head_dim, start, inv_freq.data, kernel, c.stream);
}

void silu_mul(Context& c, const float* gate, const float* up, float* out, int64_t n) {
  cuda::silu_mul(gate, up, out, n, c.stream);
}

void gelu_tanh(Context& c, const float* x, float* out, int64_t n) { cuda::gelu_tanh(x, out, n, c.stream); }

void add(Context& c, float* x, const float* y, int64_t n) { cuda::add(x, y, n, c.stream); }

void store_kv(Context& c, KvCache& kv, int64_t layer, int64_t start, int64_t n, const float* k, const float* v) {
  cuda::store_kv(kv.dtype(), k, v, n, kv.num_kv_heads(), kv.head_dim(), start, kv.capacity(), kv.k(layer, 0),
                 kv.v(layer, 0), c.stream);
}

void attention(Context& c, const KvCache& kv, int64_t layer, const float* q, int64_t n, int64_t start, int64_t heads,
               int64_t window, float* out) {
  cuda::AttentionParams p;
  p.q = q;
  p.k = kv.k(layer, 0);
  p.v = kv.v(layer, 0);
  p.out = out;
  p.kv_dtype = kv.dtype();
  p.n = n;
  p.start = start;
  p.heads = heads;
  p.kv_heads = kv.num_kv_heads();
  p.head_dim = kv.head_dim();
  p.capacity = kv.capacity();
  p.window = window;
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
