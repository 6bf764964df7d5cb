// Device discovery must treat every CUDA runtime failure (no driver, insufficient driver, no
// device) as "no device", and the CPU path must work either way.
#include <gtest/gtest.h>

#include "kvinfer/kvinfer.h"
#include "reference.h"

namespace kvinfer {
namespace {

TEST(Device, CountNeverThrowsAndIsStable) {
  const int n = cuda_device_count();
  EXPECT_GE(n, 0);
  EXPECT_EQ(cuda_device_count(), n);
  if (n == 0) std::printf("no CUDA device here: device discovery reported 0 without crashing\n");
}

TEST(Device, AutoPicksCudaExactlyWhenADeviceExists) {
  const bool has_device = cuda_device_count() > 0;
  auto model = Model::load(test::model_dir("llama_mha"), {.device = Device::Auto});
#if defined(KVINFER_CUDA_SIM)
  // The simulation build's device ($KVINFER_SIM_DEVICE) runs every GPU thread on the CPU: Auto
  // never picks it, only an explicit Device::CUDA does.
  EXPECT_EQ(model->device(), Device::CPU);
#else
  EXPECT_EQ(model->device(), has_device ? Device::CUDA : Device::CPU);
#endif
  KvCache kv(*model, 8);
  EXPECT_EQ(kv.device(), model->device());
  if (has_device) return;
  try {
    Model::load(test::model_dir("llama_mha"), {.device = Device::CUDA});
    FAIL() << "Device::CUDA without a device should be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no CUDA device is usable"), std::string::npos) << e.what();
  }
  EXPECT_EQ(device_name(Device::CUDA), "cuda");
}

// A session refuses a cache that lives on another device than its model.
TEST(Device, CacheOnAnotherDeviceIsRefused) {
  auto model = Model::load(test::model_dir("llama_mha"), {.device = Device::CPU});
  Session s(model);
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: cannot make a device cache to refuse";
  KvCache kv(model->config(), 8, DType::F32, Device::CUDA);
  const int32_t id = 1;
  EXPECT_THROW(s.prefill(kv, {&id, 1}), Error);
}

}  // namespace
}  // namespace kvinfer
