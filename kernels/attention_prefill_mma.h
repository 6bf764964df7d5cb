#pragma once
// The tensor-core prefill kernel (kernels/attention_prefill_mma.cu) for f16 and bf16 KV caches.
// Internal: attention_prefill (cuda_ops.h) checks the arguments and dispatches here.
#include <cuda_runtime_api.h>

#include "cuda_ops.h"

namespace kvinfer::cuda {

// p as attention_prefill's, already checked; p.kv_dtype is F16 or BF16.
void attention_prefill_mma(const AttentionParams& p, cudaStream_t stream);

}  // namespace kvinfer::cuda
