// The CUDA backend of a build without CUDA: every entry throws, so that a request for the CUDA
// device fails with a clear message instead of at link time. Device::Auto never gets here,
// because cuda_device_count() is 0 in such a build.
#include "cuda/cuda_backend.h"
#include "cuda/device_memory.h"
#include "kvinfer/error.h"

namespace kvinfer::cuda_backend {

namespace {
[[noreturn]] void unavailable() {
  throw Error(ErrorKind::Device, "this build of kvinfer has no CUDA backend (configure with -DKVINFER_CUDA=ON and nvcc)");
}
}  // namespace

class Context {};
std::shared_ptr<Context> create_context(int) { unavailable(); }
uint64_t session_scratch_bytes(const ModelWeights&, uint64_t) { unavailable(); }
int64_t dequant_tile_rows(int64_t, int64_t, uint64_t) { unavailable(); }
void set_dequant_tile_bytes(Context&, uint64_t) { unavailable(); }
uint64_t dequant_scratch_bytes(Context&) { unavailable(); }
std::unique_ptr<ModelWeights> upload(const ModelWeights&, const std::function<void(uint64_t, uint64_t)>&) { unavailable(); }
// A CPU model's scope (index -1) is the only one a build without CUDA meets.
DeviceScope::DeviceScope(int index) {
  if (index >= 0) unavailable();
}
// Nothing to put back; previous_ read here because clang -Wunused-private-field sees this file
// define every member and none read it (the TSan build's -Werror).
DeviceScope::~DeviceScope() { (void)previous_; }
void* device_alloc(size_t, std::string_view) { unavailable(); }
void device_free(void* p) noexcept { (void)p; }
size_t device_free_bytes() { unavailable(); }
void copy_to_device(void*, const void*, size_t) { unavailable(); }
void copy_to_host(void*, const void*, size_t) { unavailable(); }
void copy_on_device(void*, const void*, size_t) { unavailable(); }
CopyBandwidth measure_copy_bandwidth(size_t, int) { unavailable(); }
std::string device_description(int) { unavailable(); }
void embed(Context&, const Matrix&, std::span<const int32_t>, float*, EmbedIds) { unavailable(); }
void rms_norm(Context&, const float*, const Vector&, int64_t, int64_t, float, float*) { unavailable(); }
void layer_norm(Context&, const float*, const Vector&, const Vector&, int64_t, int64_t, float, float*) {
  unavailable();
}
void linear(Context&, const Linear&, const float*, int64_t, float*, std::span<const int64_t>) { unavailable(); }
void rope(Context&, float*, int64_t, int64_t, int64_t, int64_t, const Vector&, RopeLayout, float) { unavailable(); }
void silu_mul(Context&, const float*, const float*, float*, int64_t) { unavailable(); }
void gelu_tanh(Context&, const float*, float*, int64_t) { unavailable(); }
void add(Context&, float*, const float*, int64_t) { unavailable(); }
void head_rms_norm(Context&, float*, const Vector&, int64_t, int64_t, float) { unavailable(); }
void gelu_tanh_mul(Context&, const float*, const float*, float*, int64_t) { unavailable(); }
void scale(Context&, float*, int64_t, float) { unavailable(); }
void softcap(Context&, float*, int64_t, float) { unavailable(); }
void store_kv(Context&, KvCache&, int64_t, int64_t, int64_t, const float*, const float*) { unavailable(); }
void attention(Context&, const KvCache&, int64_t, const float*, int64_t, int64_t, int64_t, int64_t, float*,
               const ScoreOptions&) {
  unavailable();
}
void moe_route(Context&, const float*, int64_t, int64_t, int64_t, bool, int32_t*, float*) { unavailable(); }
void moe_experts(Context&, const MoeWeights&, const float*, int64_t, int64_t, const int32_t*, const float*, int64_t,
                 const MoeScratch&, float*, std::span<const int64_t>) {
  unavailable();
}
void add_gated(Context&, float*, const float*, const float*, int64_t, int64_t) { unavailable(); }
void decode_step(Context&, int32_t, int64_t, const std::function<std::vector<const void*>()>&,
                 const std::function<void()>&) {
  unavailable();
}
GraphCounts graph_counts() { return {}; }
CUstream_st* stream(Context&) { unavailable(); }
void to_host(Context&, const float*, float*, int64_t) { unavailable(); }
int64_t first_nonfinite(Context&, const float*, int64_t, float*) { unavailable(); }
LogitsScan scan_logits(Context&, const float*, int64_t) { unavailable(); }
int32_t max_device_top_k() { unavailable(); }
std::span<const std::pair<int32_t, float>> top_k_candidates(Context&, const float*, int64_t, const LogitAdjustments&,
                                                            int32_t) {
  unavailable();
}
int32_t sample_row(Context&, Sampler&, const float*, int64_t, const std::function<std::span<const float>()>&) {
  unavailable();
}

}  // namespace kvinfer::cuda_backend
