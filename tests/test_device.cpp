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

TEST(Device, AutoRunsOnTheCpuAndCudaIsRefusedClearly) {
  auto model = Model::load(test::model_dir("llama_mha"), {.device = Device::Auto});
  EXPECT_EQ(model->device(), Device::CPU);
  try {
    Model::load(test::model_dir("llama_mha"), {.device = Device::CUDA});
    FAIL() << "Device::CUDA should be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("CPU only"), std::string::npos) << e.what();
  }
  EXPECT_EQ(device_name(Device::CUDA), "cuda");
}

}  // namespace
}  // namespace kvinfer
