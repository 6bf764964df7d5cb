#pragma once
// Launchers of the sampling kernels (kernels/sample.cu): what Session::sample runs on the device so
// that only a few ints, or the top-k candidates, come back to the host instead of the whole row of
// logits. Their reference is the CPU Sampler (src/generate/sampler.cpp): the same float operations
// in the same order, the same order of candidates (higher logit first, lower id on ties).
// Raw device pointers, enqueued on the given stream; argument errors throw kvinfer::Error.
#include <cuda_runtime_api.h>

#include <cstdint>

namespace kvinfer::cuda {

// Largest top-k set the device selects; above it the caller copies the row (docs/sampling.md).
constexpr int32_t kMaxDeviceTopK = 1024;

struct IdValue {  // a logit bias entry: logits[id] += value
  int32_t id;
  float value;
};
struct IdCount {  // a penalised token: id and its count in the penalty window (ids distinct)
  int32_t id;
  int32_t count;
};
struct Penalties {
  float repetition;  // 1 = off
  float presence;
  float frequency;
};

// What scan_logits writes (3 int32): out[0] the first maximum of logits (lowest index on ties,
// NaN never wins; 0 if every value is NaN), out[1] the first index whose value is NaN or ±inf
// (-1 if none), out[2] the bits of the maximum's value.
constexpr int kScanInts = 3;
void scan_logits(const float* logits, int64_t n, int32_t* out, cudaStream_t stream);

// adjusted (vocab) = logits with the bias entries added in order (float) then, for each penalised
// token, l = l > 0 ? l / repetition : l * repetition; l -= float(count) * frequency + presence
// (exactly the Sampler's operations). *bad = 1 when a touched logit ends NaN or +inf (the CPU
// Sampler then throws or must decide on its own), else 0. adjusted must not alias logits.
void adjust_logits(const float* logits, int64_t vocab, const IdValue* bias, int32_t n_bias, const IdCount* penalised,
                   int32_t n_penalised, Penalties p, float* adjusted, int32_t* bad, cudaStream_t stream);

// The top k of logits (vocab) by (value descending, id ascending), 1 <= k <= min(vocab,
// kMaxDeviceTopK): exactly the first k in that order, ties at the k-th value resolved by lowest id.
// Written in ascending id order to out_ids[0..k) and out_values[0..k). No value may be NaN
// (-0.0 and +0.0 are equal, as in float comparisons). vocab <= 65535 × 1024.
void top_k(const float* logits, int64_t vocab, int32_t k, int32_t* out_ids, float* out_values, cudaStream_t stream);

}  // namespace kvinfer::cuda
