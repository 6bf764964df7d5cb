#pragma once
// The CUDA backend as the forward pass sees it: the same ops as src/cpu/cpu_ops.h over device
// pointers, enqueued on one stream. No CUDA headers here: built with CUDA in cuda_backend.cpp,
// without it in stubs.cpp (every call throws "built without CUDA").
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "kvinfer/config.h"
#include "kvinfer/kv_cache.h"
#include "kvinfer/sampler.h"
#include "models/weights.h"
#include "ops/self_attention.h"
#include "ops/moe.h"

struct CUstream_st;  // cudaStream_t is CUstream_st*; declared here without the CUDA headers

namespace kvinfer::cuda_backend {

// One session's stream, cuBLAS handle with its own workspace (so that concurrent sessions get
// the same bits as a session alone: cuBLAS picks its kernels per workspace) and device scratch
// (token ids, narrowed GEMM inputs, an f16 tile of a quantised matrix for prefill GEMMs, the
// split-K workspace of decode attention).
class Context;
// A context on CUDA device `device` (its stream, scratch and cuBLAS handle live there). The
// calls below that take a Context must run with that device current (DeviceScope).
std::shared_ptr<Context> create_context(int device = 0);

// cuBLAS's workspace per session: what NVIDIA recommends for Hopper, enough for every GEMM here.
constexpr uint64_t kCublasWorkspaceBytes = uint64_t{32} << 20;
// linear() with n <= 8 input rows reads the weights in place (cuda::gemv); with more, a quantised
// matrix is dequantised a tile of rows at a time into f16 scratch of at most this many bytes
// (unless one row alone is larger) for cuBLAS: 16 MiB is at least 4096 rows at 2048 columns, a
// GEMM that fills the GPU, and 1/64 of the f16 copy of an 8B model's LM head.
constexpr uint64_t kDequantTileBytes = uint64_t{16} << 20;
// Rows of a (rows, cols) quantised matrix in one f16 tile of at most tile_bytes: a multiple of
// 64 when 64 rows fit, at least 1, at most rows.
int64_t dequant_tile_rows(int64_t rows, int64_t cols, uint64_t tile_bytes);
// Device bytes a session needs beyond its KV cache and its activations: cuBLAS's workspace and
// the largest f16 tile of a quantised matrix (tile_bytes as set_dequant_tile_bytes).
uint64_t session_scratch_bytes(const ModelWeights& w, uint64_t tile_bytes = kDequantTileBytes);
// Tests: the tile bound of this session's prefill GEMMs (default kDequantTileBytes), and the
// bytes of dequantised-weight scratch it holds now.
void set_dequant_tile_bytes(Context& c, uint64_t bytes);
uint64_t dequant_scratch_bytes(Context& c);

// Copies every tensor of host weights to device memory; the result's pointers are device
// pointers and its storage owns them. A tied LM head shares the embedding's copy.
std::unique_ptr<ModelWeights> upload(const ModelWeights& host, const std::function<void(uint64_t, uint64_t)>& progress = {});

void embed(Context& c, const Matrix& table, std::span<const int32_t> ids, float* out, EmbedIds kind);
void rms_norm(Context& c, const float* x, const Vector& weight, int64_t n, int64_t dim, float eps, float* y);
void layer_norm(Context& c, const float* x, const Vector& weight, const Vector& bias, int64_t n, int64_t dim,
                float eps, float* y);
// segments: the rows of each sequence of a batched call (empty or one: a single sequence). Batch
// invariance: the rows of sequences of at most cuda::kGemvMaxRows rows go through gemv together,
// a few rows a launch (its per-row sums do not depend on the count), and each longer sequence
// through its own GEMM, so every sequence's rows get the bits its call alone gives them.
void linear(Context& c, const Linear& layer, const float* x, int64_t n, float* y,
            std::span<const int64_t> segments = {});
// Rotates the first 2 · inv_freq.n values of each head; cos and sin scaled by attention_factor.
void rope(Context& c, float* x, int64_t n, int64_t heads, int64_t head_dim, int64_t start, const Vector& inv_freq,
          RopeLayout layout, float attention_factor = 1.0f);
void silu_mul(Context& c, const float* gate, const float* up, float* out, int64_t n);
void gelu_tanh(Context& c, const float* x, float* out, int64_t n);
void add(Context& c, float* x, const float* y, int64_t n);
// cpu_ops.h's head_rms_norm, gelu_tanh_mul, scale and softcap.
void head_rms_norm(Context& c, float* x, const Vector& weight, int64_t rows, int64_t head_dim, float eps);
void gelu_tanh_mul(Context& c, const float* gate, const float* up, float* out, int64_t n);
void scale(Context& c, float* x, int64_t n, float factor);
void softcap(Context& c, float* x, int64_t n, float cap);
void store_kv(Context& c, KvCache& kv, int64_t layer, int64_t start, int64_t n, const float* k, const float* v);
void attention(Context& c, const KvCache& kv, int64_t layer, const float* q, int64_t n, int64_t start, int64_t heads,
               int64_t window, float* out, const ScoreOptions& scores = {});
// Mixture of experts (kernels/moe.cu): routing on the device (ids int32). Decode steps and
// sequences of up to cuda::kGemvMaxRows rows: every (row, chosen expert) pair a GEMV over that
// expert's matrices, picked on the device from the ids, so that a decode step reads only its
// experts' bytes and its graph replays whatever they are. A longer sequence (prefill): the ids are
// brought to the host (one synchronisation) and its rows grouped by expert, each expert's
// matrices multiplied once by all the rows that chose it. segments: as linear()'s.
void moe_route(Context& c, const float* logits, int64_t n, int64_t experts, int64_t k, bool normalize, int32_t* ids,
               float* weights);
void moe_experts(Context& c, const MoeWeights& m, const float* x, int64_t n, int64_t hidden, const int32_t* ids,
                 const float* weights, int64_t k, const MoeScratch& scratch, float* out,
                 std::span<const int64_t> segments = {});
void add_gated(Context& c, float* out, const float* gate, const float* y, int64_t n, int64_t dim);
// One decode step as one CUDA graph launch. `body` enqueues the step's device work (the forward
// pass of one token); in step mode the token id and position are read from device memory (the
// ops take them from the context), so a graph captured once replays for every later position.
// `key` lists the device memory the step uses beyond the weights (activations, the cache): a
// graph serves the steps whose key is its own (with the decode attention workspace; never the
// prefill-only scratch, whose growth does not touch a step). A key's first step runs eagerly in
// step mode (it sizes every buffer), its second is captured, later ones replay (a launch and an
// 8-byte copy from pinned memory).
// With $KVINFER_CUDA_GRAPHS=0 (read when the session is created) body() runs as any other call.
void decode_step(Context& c, int32_t token, int64_t start, const std::function<std::vector<const void*>()>& key,
                 const std::function<void()>& body);
// Decode-step graphs captured and launched by every session of this process (tests, benchmarks).
struct GraphCounts {
  int64_t captured = 0, launched = 0;
};
GraphCounts graph_counts();

// The session's stream (a cudaStream_t): the benchmarks time its ops with events on it.
CUstream_st* stream(Context& c);
// Waits for the stream and copies n floats of device memory to the host.
void to_host(Context& c, const float* device, float* host, int64_t n);
// ops::first_nonfinite: copies x (n floats) to the host, waiting for the stream, and scans it.
int64_t first_nonfinite(Context& c, const float* x, int64_t n, float* value);

// ---- device sampling (Session::step, Session::sample; kernels/cuda_sample.h) -------------------
// What scan_logits brings back of n device floats: 12 bytes instead of 4n.
struct LogitsScan {
  int32_t argmax;           // the first maximum (lowest index on ties)
  int32_t first_nonfinite;  // the first NaN or ±inf, -1 if none
  float max_value;          // logits[argmax]
};
// Scans n floats on the device and waits for the stream.
LogitsScan scan_logits(Context& c, const float* logits, int64_t n);
// The largest k top_k_candidates selects on the device.
int32_t max_device_top_k();
// What the Sampler applies before top-k: logit bias entries (in order) and penalised tokens
// (distinct ids, their counts in the window), with the penalty factors.
struct LogitAdjustments {
  std::span<const std::pair<int32_t, float>> bias;
  std::span<const std::pair<int32_t, int32_t>> penalised;
  float repetition = 1.0f, presence = 0.0f, frequency = 0.0f;
};
// The top k (1 <= k <= min(vocab, max_device_top_k())) of one row of vocab device logits after
// the adjustments, by (adjusted logit descending, id ascending), as (id, adjusted logit) pairs in
// ascending id order: 4 + 8k bytes come back. Empty when an adjusted logit is NaN or +inf (the
// caller lets the CPU Sampler decide). Waits for the stream. Valid until the next call on c.
std::span<const std::pair<int32_t, float>> top_k_candidates(Context& c, const float* logits, int64_t vocab,
                                                            const LogitAdjustments& adjust, int32_t k);
// What Session::sample does with a row of vocab device logits: sampler's bias and penalties and
// the top-k set on the device, its remaining steps on the host (Sampler::sample_top_k). When the
// set would exceed max_device_top_k(), or an adjusted logit is NaN or +inf, host_row() copies the
// row and sampler.sample() decides, as on the CPU.
int32_t sample_row(Context& c, Sampler& sampler, const float* row, int64_t vocab,
                   const std::function<std::span<const float>()>& host_row);

}  // namespace kvinfer::cuda_backend
