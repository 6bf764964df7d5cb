// The AVX2/F16C and AVX-512 paths of cpu::to_f32 (src/cpu/convert_avx2.cpp, convert_avx512.cpp)
// against the portable scalar code (cpu::to_f32_scalar), bit for bit: NaN payloads, subnormals and
// signed zeros included. Each kernel the CPU runs is checked on its own, as well as the dispatch.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/quant.h"
#include "cpu/convert_avx2.h"
#include "cpu/convert_avx512.h"
#include "cpu/cpu_features.h"
#include "cpu/cpu_ops.h"
#include "kvinfer/dtype.h"
#include "kvinfer/error.h"

namespace kvinfer::cpu {
namespace {

#define KVI_SKIP_WITHOUT_AVX2()                                                                            \
  if (!cpu_has_avx2_fma_f16c())                                                                            \
  GTEST_SKIP() << "CPU lacks AVX2+FMA+F16C (or KVINFER_NO_AVX2 is set): to_f32 runs the scalar code only"

uint32_t bits_of(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

// Widens n values of src with to_f32 (dispatched), and with each SIMD kernel this CPU runs that
// takes t (AVX2, AVX-512), into buffers offset by dst_offset floats, and expects to_f32_scalar's
// bytes from each. Returns whether they all matched.
bool expect_same(DType t, const std::byte* src, int64_t n, const std::string& what, int dst_offset = 0) {
  const size_t size = static_cast<size_t>(n + dst_offset);
  std::vector<float> want(size, -1.0f);
  to_f32_scalar(t, src, want.data() + dst_offset, n);
  struct Kernel {
    const char* name;
    bool runs;
    bool (*widen)(DType, const std::byte*, float*, int64_t);
  };
  const Kernel kernels[] = {
      {"to_f32", true, [](DType u, const std::byte* s, float* d, int64_t k) {
         to_f32(u, s, d, k);
         return true;
       }},
      {"avx2", cpu_has_avx2_fma_f16c(), to_f32_avx2},
      {"avx512", cpu_has_avx512(), to_f32_avx512},
  };
  bool all = true;
  for (const Kernel& kernel : kernels) {
    std::vector<float> got(size, -1.0f);
    if (!kernel.runs || !kernel.widen(t, src, got.data() + dst_offset, n)) continue;
    if (std::memcmp(got.data(), want.data(), size * sizeof(float)) == 0) continue;
    all = false;
    for (size_t i = 0; i < size; ++i) {
      if (bits_of(got[i]) != bits_of(want[i])) {
        ADD_FAILURE() << dtype_name(t) << " " << what << " (" << kernel.name << "): value "
                      << static_cast<int64_t>(i) - dst_offset << " of " << n << ": simd 0x" << std::hex
                      << bits_of(got[i]) << " (" << got[i] << "), scalar 0x" << bits_of(want[i]) << " (" << want[i]
                      << ")";
        break;
      }
    }
  }
  return all;
}

std::vector<std::byte> random_bytes(size_t n, std::mt19937& rng) {
  std::vector<std::byte> v(n);
  for (auto& b : v) b = static_cast<std::byte>(rng() & 0xFF);
  return v;
}

void put_u16(std::byte* p, uint16_t v) { std::memcpy(p, &v, 2); }

// ---- f16 / bf16 -----------------------------------------------------------------------------------

std::vector<uint16_t> all_patterns() {
  std::vector<uint16_t> v(65536);
  for (uint32_t i = 0; i < 65536; ++i) v[i] = static_cast<uint16_t>(i);
  return v;
}

TEST(ConvertSimd, F16AllPatternsMatchScalar) {
  KVI_SKIP_WITHOUT_AVX2();
  const std::vector<uint16_t> h = all_patterns();
  const auto* src = reinterpret_cast<const std::byte*>(h.data());
  EXPECT_TRUE(expect_same(DType::F16, src, 65536, "all patterns"));
  // Unaligned source and destination, and a length with a tail.
  EXPECT_TRUE(expect_same(DType::F16, src + 2, 65531, "offset source", 1));
  // Signalling NaNs (quiet bit clear) keep their payload, as core::f16_to_f32 does.
  std::vector<uint16_t> snan = {0x7c01, 0xfc01, 0x7dff, 0xfdff, 0x7e00, 0xfe00, 0x7fff, 0x7c00,
                                0x0001, 0x8001, 0x03ff, 0x0000, 0x8000, 0x7bff, 0xfbff, 0x7d55};
  EXPECT_TRUE(expect_same(DType::F16, reinterpret_cast<const std::byte*>(snan.data()), 16, "nan payloads"));
}

TEST(ConvertSimd, F16OddLengths) {
  KVI_SKIP_WITHOUT_AVX2();
  std::mt19937 rng(7);
  const auto bytes = random_bytes(2 * 80, rng);
  for (int64_t n : {1, 2, 7, 8, 9, 15, 16, 17, 23, 24, 31, 33, 47, 71}) {
    EXPECT_TRUE(expect_same(DType::F16, bytes.data(), n, "n=" + std::to_string(n)));
    EXPECT_TRUE(expect_same(DType::F16, bytes.data() + 2, n, "offset n=" + std::to_string(n), 3));
  }
}

TEST(ConvertSimd, BF16AllPatternsAndRandomRowsMatchScalar) {
  KVI_SKIP_WITHOUT_AVX2();
  const std::vector<uint16_t> h = all_patterns();  // every NaN, infinity, subnormal and zero
  EXPECT_TRUE(expect_same(DType::BF16, reinterpret_cast<const std::byte*>(h.data()), 65536, "all patterns"));
  std::mt19937 rng(11);
  std::vector<uint16_t> r(1 << 20);
  const uint16_t specials[] = {0x7f80, 0xff80, 0x7fc0, 0xffc1, 0x7f81, 0x0001, 0x807f, 0x0000, 0x8000};
  for (size_t i = 0; i < r.size(); ++i)
    r[i] = (i % 17 == 0) ? specials[(i / 17) % std::size(specials)] : static_cast<uint16_t>(rng());
  const auto* src = reinterpret_cast<const std::byte*>(r.data());
  EXPECT_TRUE(expect_same(DType::BF16, src, static_cast<int64_t>(r.size()), "random row"));
  EXPECT_TRUE(expect_same(DType::BF16, src + 2, static_cast<int64_t>(r.size()) - 5, "offset random row", 1));
}

TEST(ConvertSimd, BF16OddLengths) {
  KVI_SKIP_WITHOUT_AVX2();
  std::mt19937 rng(13);
  const auto bytes = random_bytes(2 * 80, rng);
  for (int64_t n : {1, 2, 7, 8, 9, 15, 16, 17, 31, 33, 47, 71}) {
    EXPECT_TRUE(expect_same(DType::BF16, bytes.data(), n, "n=" + std::to_string(n)));
    EXPECT_TRUE(expect_same(DType::BF16, bytes.data() + 2, n, "offset n=" + std::to_string(n), 3));
  }
}

// ---- quantised blocks ---------------------------------------------------------------------------

const DType kQuantTypes[] = {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
                             DType::Q4_K, DType::Q5_K, DType::Q6_K};

// Finite f16 scales of every kind: zero, ±tiny subnormal, smallest normal, ordinary, largest.
const uint16_t kFiniteScales[] = {0x0000, 0x8000, 0x0001, 0x8001, 0x0155, 0x03ff, 0x83ff, 0x0400, 0x8400,
                                  0x211f, 0x2e66, 0xae66, 0x3c00, 0xbc00, 0x3555, 0x5640, 0x7bff, 0xfbff};

// `blocks` blocks of random codes whose scale fields come from `scales` (cycled, fields
// decorrelated) or, every few blocks, are random finite halves.
std::vector<std::byte> random_blocks(DType t, int64_t blocks, std::mt19937& rng, const std::vector<uint16_t>& scales) {
  const auto bb = static_cast<size_t>(dtype_block(t).bytes);
  auto v = random_bytes(bb * static_cast<size_t>(blocks) + 1, rng);  // +1: room for an offset copy
  const auto fields = core::half_fields(t);
  for (size_t b = 0; b < static_cast<size_t>(blocks); ++b) {
    for (size_t f = 0; f < fields.size(); ++f) {
      uint16_t s;
      if (b % 5 == 4) {
        do s = static_cast<uint16_t>(rng()); while ((s & 0x7c00) == 0x7c00);  // any finite half
      } else {
        s = scales[(b * (f + 1) + f * 7) % scales.size()];
      }
      put_u16(v.data() + b * bb + fields[f], s);
    }
  }
  return v;
}

TEST(ConvertSimd, QuantisedBlocksMatchScalar) {
  KVI_SKIP_WITHOUT_AVX2();
  const std::vector<uint16_t> scales(std::begin(kFiniteScales), std::end(kFiniteScales));
  for (DType t : kQuantTypes) {
    std::mt19937 rng(100 + static_cast<unsigned>(t));
    const int64_t elems = dtype_block(t).elements;
    for (int64_t blocks : {1, 2, 3, 7, 64, 1000}) {
      const auto data = random_blocks(t, blocks, rng, scales);
      const std::string what = std::to_string(blocks) + " blocks";
      EXPECT_TRUE(expect_same(t, data.data(), blocks * elems, what));
      // Unaligned source (the row is copied one byte on) and destination.
      std::vector<std::byte> shifted(data.size());
      std::memcpy(shifted.data() + 1, data.data(), data.size() - 1);
      EXPECT_TRUE(expect_same(t, shifted.data() + 1, blocks * elems, what + ", offset", 1));
    }
  }
}

// Every code value in every position: blocks of one repeated random byte pattern per block.
TEST(ConvertSimd, QuantisedExtremeCodesMatchScalar) {
  KVI_SKIP_WITHOUT_AVX2();
  const std::vector<uint16_t> scales = {0x3c00, 0xbc00, 0x0001, 0x7bff};
  for (DType t : kQuantTypes) {
    const auto bb = static_cast<size_t>(dtype_block(t).bytes);
    std::vector<std::byte> data(bb * 256 * scales.size());
    for (size_t b = 0; b < 256 * scales.size(); ++b) {
      std::memset(data.data() + b * bb, static_cast<int>(b % 256), bb);  // all codes 0x00 .. 0xff
      for (size_t field : core::half_fields(t)) put_u16(data.data() + b * bb + field, scales[b / 256]);
    }
    EXPECT_TRUE(expect_same(t, data.data(), static_cast<int64_t>(256 * scales.size()) * dtype_block(t).elements,
                            "repeated bytes"));
  }
}

// Infinite and NaN scales (not produced by any quantiser, but read from a file as they are):
// ±inf, quiet and signalling NaNs with payloads, in one field at a time and in both.
//
// One case is left out: Q4_1/Q5_1 with d non-finite and m a NaN, where q·d and m are both NaNs
// and q·d + m returns one of the two payloads. Which one depends on the operand order the
// compiler picks for a commutative add; GCC 12 -O2 even picks differently for values 0..27 and
// 28..31 of the scalar loop, so the scalar "definition" itself is not stable across builds. Both
// paths give a NaN there. (The K-quants' d1·q − m1 is a subtraction, whose order is fixed: all
// their pairs are tested.)
bool nan_meets_nan(DType t, uint16_t d, uint16_t m) {
  const bool has_add = t == DType::Q4_1 || t == DType::Q5_1;
  return has_add && (d & 0x7c00) == 0x7c00 && (m & 0x7c00) == 0x7c00 && (m & 0x3ff) != 0;
}

TEST(ConvertSimd, QuantisedNonFiniteScalesMatchScalar) {
  KVI_SKIP_WITHOUT_AVX2();
  const std::vector<uint16_t> scales = {0x7c00, 0xfc00, 0x7e00, 0xfe01, 0x7c01, 0xfd55, 0x3c00, 0x0000, 0x8000, 0x0001};
  for (DType t : kQuantTypes) {
    std::mt19937 rng(300 + static_cast<unsigned>(t));
    // Every (d, m) pair of the list, so that NaNs with different payloads meet in one value.
    const auto fields = core::half_fields(t);
    const size_t pairs = scales.size() * scales.size(), bb = static_cast<size_t>(dtype_block(t).bytes);
    auto data = random_bytes(bb * pairs, rng);
    for (size_t b = 0; b < pairs; ++b) {
      const uint16_t d = scales[b / scales.size()];
      uint16_t m = scales[b % scales.size()];
      if (nan_meets_nan(t, d, m)) m = 0x3c00;
      put_u16(data.data() + b * bb + fields[0], d);
      if (fields.size() > 1) put_u16(data.data() + b * bb + fields[1], m);
    }
    EXPECT_TRUE(expect_same(t, data.data(), static_cast<int64_t>(pairs) * dtype_block(t).elements,
                            "non-finite scales"));
  }
}

TEST(ConvertSimd, DispatchStillRejectsPartialBlocks) {
  std::vector<std::byte> src(64);
  std::vector<float> dst(64);
  EXPECT_THROW(to_f32(DType::Q4_0, src.data(), dst.data(), 31), Error);
  EXPECT_THROW(to_f32_scalar(DType::Q4_0, src.data(), dst.data(), 31), Error);
}

}  // namespace
}  // namespace kvinfer::cpu
