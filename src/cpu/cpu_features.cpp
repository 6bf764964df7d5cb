#include "cpu/cpu_features.h"

#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace kvinfer::cpu {

namespace {

// True when the environment variable `name` is set to anything but "" and "0".
bool forbidden(const char* name) {
  const char* env = std::getenv(name);
  return env && *env && std::strcmp(env, "0") != 0;
}

// CPUID: FMA (leaf 1, ECX bit 12), F16C (leaf 1, ECX bit 29), AVX2 (leaf 7, EBX bit 5), and the
// OS saving the YMM registers (OSXSAVE, ECX bit 27, and XCR0 bits 1 and 2). Read directly:
// clang's __builtin_cpu_supports knows no "f16c".
bool detect_avx2_fma_f16c() {
  if (forbidden("KVINFER_NO_AVX2")) return false;
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
  const bool fma = c & (1u << 12), f16c = c & (1u << 29), osxsave = c & (1u << 27);
  if (!fma || !f16c || !osxsave) return false;
  unsigned xcr0_lo = 0, xcr0_hi = 0;
  __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  if ((xcr0_lo & 6u) != 6u) return false;  // XMM and YMM state
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  return b & (1u << 5);
#else
  return false;
#endif
}

// CPUID leaf 7: AVX-512F (EBX bit 16) and AVX-512DQ (EBX bit 17); XCR0 bits 5 to 7: the OS
// saves the opmask registers and all 32 ZMM registers.
bool detect_avx512() {
  if (forbidden("KVINFER_NO_AVX512") || !cpu_has_avx2_fma_f16c()) return false;
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
  unsigned xcr0_lo = 0, xcr0_hi = 0;
  __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  if ((xcr0_lo & 0xE6u) != 0xE6u) return false;  // XMM, YMM, opmask, ZMM_Hi256, Hi16_ZMM
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  return (b & (1u << 16)) && (b & (1u << 17));
#else
  return false;
#endif
}

// CPUID leaf 7: AVX512_VNNI (ECX bit 11).
bool detect_avx512_vnni() {
  if (!cpu_has_avx512()) return false;
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  return c & (1u << 11);
#else
  return false;
#endif
}

}  // namespace

bool cpu_has_avx2_fma_f16c() {
  static const bool has = detect_avx2_fma_f16c();
  return has;
}

bool cpu_has_avx512() {
  static const bool has = detect_avx512();
  return has;
}

bool cpu_has_avx512_vnni() {
  static const bool has = detect_avx512_vnni();
  return has;
}

}  // namespace kvinfer::cpu
