#pragma once
// Mixture-of-experts kernels (kernels/moe.cu). The experts are picked on the device, from ids
// the routing kernel wrote, so the launches do not depend on which experts a token chose: a
// decode step's graph replays for every choice, and reads only the chosen experts' bytes.
// References: src/cpu/moe.cpp (same routing math, kernels/core/moe.h).
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "core/moe.h"
#include "kvinfer/dtype.h"

namespace kvinfer::cuda {

// One matrix per expert, all (rows, cols) of one dtype: passed by value in the kernel's
// parameters (8 bytes an expert), so a captured graph holds them.
struct ExpertMatrices {
  const std::byte* w[core::kMaxExperts];
};

// ids (n, k) int32 and weights (n, k) f32 from router logits (n, experts): core::route_top_k per row.
void moe_route(const float* logits, int64_t n, int64_t experts, int64_t k, bool normalize, int32_t* ids,
               float* weights, cudaStream_t stream);
// For each pair p < pairs (a row's j-th expert, p = t·k + j): y (pairs, rows) row p =
// W_{ids[p]} · x row (p / x_per), W (rows, cols) of dtype (f32, f16, bf16 or a ggml type, cols then
// a multiple of its block). x (pairs / x_per, cols) f32: x_per = k when the k pairs of a row share
// its input (gate, up), 1 when each pair has its own (down). f32 accumulation in a fixed order.
void moe_gemv(DType dtype, const ExpertMatrices& experts, int64_t num_experts, const int32_t* ids, int64_t pairs,
              int64_t rows, int64_t cols, const float* x, int64_t x_per, float* y, cudaStream_t stream);
// out (n, dim) = Σ_j weights[t, j] · y[row of pair t·k + j], added from 0 in j order, each product
// rounded (the CPU's moe_experts adds, bit for bit). The row of pair p is p, or rows[p] when rows
// is set (a prefill's pairs grouped by expert).
void moe_combine(const float* y, const float* weights, int64_t n, int64_t k, int64_t dim, float* out,
                 cudaStream_t stream, const int32_t* rows = nullptr);
// xg (pairs, dim): row g = x row (pairs_of[g] / k): a prefill's input rows in the experts' order.
void moe_gather(const float* x, const int32_t* pairs_of, int64_t pairs, int64_t k, int64_t dim, float* xg,
                cudaStream_t stream);
// out (n, dim) += sigmoid(gate[t]) · y (n, dim)
void add_gated(float* out, const float* gate, const float* y, int64_t n, int64_t dim, cudaStream_t stream);

}  // namespace kvinfer::cuda
