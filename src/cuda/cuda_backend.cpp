#include "cuda/cuda_backend.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <map>
#include <set>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "cpu/cpu_ops.h"
#include "cuda/device_memory.h"
#include "cuda_check.h"
#include "cuda_gemm.h"
#include "cuda_gemv.h"
#include "cuda_ops.h"
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
    // Once for the handle's life (cuda::gemm sets neither): the stream first, since
    // cublasSetStream resets the workspace; alpha and beta are host values.
    if (cublasSetStream(blas, stream) != CUBLAS_STATUS_SUCCESS ||
        cublasSetWorkspace(blas, blas_workspace.get(), blas_workspace.bytes()) != CUBLAS_STATUS_SUCCESS ||
        cublasSetPointerMode(blas, CUBLAS_POINTER_MODE_HOST) != CUBLAS_STATUS_SUCCESS) {
      cublasDestroy(blas);
      cudaStreamDestroy(stream);
      throw Error("cuBLAS: cannot bind the session's stream, workspace and pointer mode to its handle");
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
  DeviceBuffer x_lowp;     // (n, in) of the weights' dtype (f16 for quantised weights), n > 8
  DeviceBuffer w_tile;     // (tile rows, in) f16: rows of one quantised matrix, dequantised for a GEMM, n > 8
  DeviceBuffer workspace;  // split-K partials of decode attention
  uint64_t tile_bytes = kDequantTileBytes;  // bound of w_tile
};

std::shared_ptr<Context> create_context() { return std::make_shared<Context>(); }

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

}  // namespace kvinfer::cuda_backend
