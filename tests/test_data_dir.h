#pragma once
// Bundle builds (KVINFER_BUNDLE, tools/gpu_bundle.sh) run their tests on another machine, where
// the test data is not at the path it had here: KVINFER_TEST_DATA is then a call of this
// function, which reads $KVINFER_TEST_DATA and falls back to the build's path
// (KVINFER_TEST_DATA_BUILT). Force-included (-include) in those builds only.
#include <cstdlib>

inline const char* kvinfer_test_data_dir() {
  const char* dir = std::getenv("KVINFER_TEST_DATA");
  return dir != nullptr && *dir != '\0' ? dir : KVINFER_TEST_DATA_BUILT;
}
#define KVINFER_TEST_DATA kvinfer_test_data_dir()
