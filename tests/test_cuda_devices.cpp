// Two CUDA devices in one process: a model, its caches and its sessions live on the device the
// caller chose (LoadOptions::device_index), whatever device the calling thread has current; the
// kernels' shared-memory limits and attributes are each device's own. Needs two devices: in the
// simulation build ctest runs it with KVINFER_SIM_DEVICE=sm_90,sm_86 (a 227 KiB and a 99 KiB
// device), on a machine with fewer it skips, saying so.
#include <cuda_runtime_api.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <thread>
#include <vector>

#include "core/kv_cache_access.h"
#include "cuda/device_memory.h"
#include "cuda_check.h"
#include "cuda_ops.h"
#include "cuda_test_buffer.h"
#include "kvinfer/kvinfer.h"
#include "reference.h"

namespace kvinfer {
namespace {

using ::testing::HasSubstr;
using kvinfer_test::DeviceBuffer;

class CudaTwoDevices : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() < 2)
      GTEST_SKIP() << "needs two CUDA devices (" << cuda_device_count()
                   << " here; the simulation build's ctest gives KVINFER_SIM_DEVICE=sm_90,sm_86)";
    CUDA_CHECK(cudaSetDevice(0));
  }
};

int device_of(const void* p) {
  cudaPointerAttributes a{};
  CUDA_CHECK(cudaPointerGetAttributes(&a, p));
  return a.type == cudaMemoryTypeDevice ? a.device : -1;
}

// Prefill attention over an f16 cache on one device. At head_dim 128 both devices run the same
// kernel (two stages, 87,040 B of shared memory: each device needs its own opt-in attribute
// above 48 KiB); at 256 the tile follows the device's own limit (two stages on a 227 KiB device,
// one on a 99 KiB one). Returns the outputs.
std::vector<float> prefill(int device, int64_t hd) {
  CUDA_CHECK(cudaSetDevice(device));
  const int64_t kHd = hd, kN = 40, kHeads = 2, kKvHeads = 1;
  std::vector<float> q(static_cast<size_t>(kN * kHeads * kHd));
  std::vector<uint16_t> kv(static_cast<size_t>(kN * kKvHeads * kHd));
  for (size_t i = 0; i < q.size(); ++i) q[i] = std::sin(0.37f * static_cast<float>(i));
  for (size_t i = 0; i < kv.size(); ++i) kv[i] = static_cast<uint16_t>(0x3000 + (i * 37) % 0x800);  // f16 in [0.125, 0.5)
  DeviceBuffer q_d(q), k_d(kv), v_d(kv), out_d(q.size() * sizeof(float));
  cuda::AttentionParams p;
  p.q = q_d.as<float>();
  p.k = k_d.as<std::byte>();
  p.v = v_d.as<std::byte>();
  p.out = out_d.as<float>();
  p.kv_dtype = DType::F16;
  p.n = kN;
  p.start = 0;
  p.heads = kHeads;
  p.kv_heads = kKvHeads;
  p.head_dim = kHd;
  p.capacity = kN;
  p.rows = kN;
  p.scale = 1.0f / std::sqrt(static_cast<float>(hd));
  cuda::attention_prefill(p, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  return out_d.to_host<float>();
}

TEST_F(CudaTwoDevices, KernelLimitsAndAttributesAreEachDevicesOwn) {
  for (int64_t hd : {128, 256}) {
    const std::vector<float> first = prefill(0, hd);
    const std::vector<float> second = prefill(1, hd);  // after device 0's limit and attribute were set
    const std::vector<float> again = prefill(0, hd);
    ASSERT_EQ(first.size(), second.size());
    for (size_t i = 0; i < first.size(); ++i) {
      ASSERT_TRUE(std::isfinite(second[i])) << hd << ": " << i;
      ASSERT_NEAR(first[i], second[i], 1e-3f) << hd << ": " << i;  // one stage or two: the same up to rounding
    }
    EXPECT_EQ(first, again) << hd;
  }
}

std::vector<int32_t> greedy_tokens(const std::shared_ptr<const Model>& m, const std::vector<int32_t>& prompt, int n) {
  KvCache kv(*m, static_cast<int64_t>(prompt.size()) + n);
  Session s(m);
  std::vector<int32_t> out;
  auto logits = s.prefill(kv, prompt);
  for (int i = 0; i < n; ++i) {
    out.push_back(argmax(logits));
    logits = s.decode(kv, out.back());
  }
  return out;
}

// A model loaded on device 1 keeps its weights, caches and sessions there, from any thread, and
// gives the tokens the same model gives on device 0 and on the CPU.
TEST_F(CudaTwoDevices, AModelLivesAndRunsOnTheDeviceItWasLoadedOn) {
  const auto dir = test::model_dir("llama_gqa4");
  test::Reference ref("llama_gqa4");
  auto cpu = Model::load(dir, {.device = Device::CPU});
  auto on1 = Model::load(dir, {.device = Device::CUDA, .device_index = 1});
  auto on0 = Model::load(dir, {.device = Device::CUDA, .device_index = 0});
  EXPECT_EQ(on1->device_index(), 1);
  EXPECT_EQ(on0->device_index(), 0);
  int current = -1;
  CUDA_CHECK(cudaGetDevice(&current));
  EXPECT_EQ(current, 0) << "loading on device 1 left it current";

  KvCache kv1(*on1, 16);
  EXPECT_EQ(kv1.device_index(), 1);
  EXPECT_EQ(device_of(KvCacheAccess::k(kv1, 0, 0)), 1);
  const std::vector<int32_t> want = greedy_tokens(cpu, ref.prompt_ids, 8);
  EXPECT_EQ(greedy_tokens(on1, ref.prompt_ids, 8), want);
  EXPECT_EQ(greedy_tokens(on0, ref.prompt_ids, 8), want);
  std::vector<int32_t> from_thread;
  std::thread([&] { from_thread = greedy_tokens(on1, ref.prompt_ids, 8); }).join();  // its current device is 0
  EXPECT_EQ(from_thread, want);

  // A cache of one device's model is refused by the other's sessions, before anything runs.
  Session s0(on0);
  try {
    s0.prefill(kv1, ref.prompt_ids);
    ADD_FAILURE() << "a device-1 cache ran on device 0";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("KV cache on cuda:1 but the model runs on cuda"));
  }
  try {
    Model::load(dir, {.device = Device::CUDA, .device_index = 2});
    ADD_FAILURE() << "device 2 of 2 loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Device);
    EXPECT_THAT(e.what(), HasSubstr("CUDA device 2 requested but this machine has 2 (0 .. 1)"));
  }
}

// CUDA's rules for two devices, as the backend relies on them: a stream belongs to the device
// current at its creation, a kernel may only be launched on a stream of the current device, and
// each device synchronises its own work.
TEST_F(CudaTwoDevices, StreamsAndLaunchesBelongToADevice) {
  CUDA_CHECK(cudaSetDevice(1));
  cudaStream_t s1 = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  DeviceBuffer x(std::vector<float>(64, 1.0f)), y(std::vector<float>(64, 2.0f));
  EXPECT_EQ(device_of(x.ptr), 1);
  CUDA_CHECK(cudaSetDevice(0));
  try {
    cuda::add(x.as<float>(), y.as<float>(), 64, s1);
    ADD_FAILURE() << "a kernel was launched on device 1's stream with device 0 current";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("cudaErrorInvalidResourceHandle"));
  }
  CUDA_CHECK(cudaSetDevice(1));
  cuda::add(x.as<float>(), y.as<float>(), 64, s1);
  CUDA_CHECK(cudaStreamSynchronize(s1));
  for (float v : x.to_host<float>()) ASSERT_EQ(v, 3.0f);
  CUDA_CHECK(cudaStreamDestroy(s1));
  CUDA_CHECK(cudaSetDevice(0));
  // Each device's name, whichever is current (device_description took device 0's).
  for (int d = 0; d < 2; ++d) {
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, d));
    EXPECT_EQ(cuda_backend::device_description(d), prop.name) << d;
  }
}

}  // namespace
}  // namespace kvinfer
