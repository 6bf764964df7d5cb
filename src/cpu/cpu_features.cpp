#include "cpu/cpu_features.h"

#include <cstdlib>
#include <cstring>

namespace kvinfer::cpu {

namespace {

bool detect_avx2_fma_f16c() {
  if (const char* env = std::getenv("KVINFER_NO_AVX2"); env && *env && std::strcmp(env, "0") != 0) return false;
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
#else
  return false;
#endif
}

}  // namespace

bool cpu_has_avx2_fma_f16c() {
  static const bool has = detect_avx2_fma_f16c();
  return has;
}

}  // namespace kvinfer::cpu
