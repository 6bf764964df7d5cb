#pragma once
// Inputs and references shared by the CPU-op tests (test_cpu_ops.cpp, test_cpu_int8.cpp): random
// vectors, random quantised blocks, a weight matrix with its exact values, a relative error.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "core/convert.h"
#include "core/quant.h"
#include "cpu/cpu_ops.h"

namespace kvinfer::test {

inline std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// max |got - want| / max |want|: a relative error that is not fooled by entries near zero.
inline double rel_error(const std::vector<float>& got, const std::vector<double>& want) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    err = std::max(err, std::fabs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::fabs(want[i]));
  }
  return err / scale;
}

// Random blocks of a quantised type: random bytes (every code and packed scale pattern), with
// f16 scales of ±[0.002, 0.02) so that the values stay in a weight-like range.
inline std::vector<std::byte> random_blocks(DType t, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::byte> b(rows * dtype_row_bytes(t, cols));
  for (auto& x : b) x = static_cast<std::byte>(rng() & 0xFF);
  std::uniform_real_distribution<float> scale(0.002f, 0.02f);
  for (size_t block = 0; block < b.size(); block += static_cast<size_t>(dtype_block(t).bytes))
    for (size_t off : core::half_fields(t)) {
      const uint16_t h = core::f32_to_f16(rng() % 2 ? scale(rng) : -scale(rng));
      b[block + off] = static_cast<std::byte>(h & 0xFF);
      b[block + off + 1] = static_cast<std::byte>(h >> 8);
    }
  return b;
}

// Columns of a test matrix: `plain` for f32/f16/bf16 (not a multiple of the 8-lane dot), two
// K-quant blocks (sixteen 32-value blocks) for the quantised types.
inline int64_t cols_for(DType t, int64_t plain) { return is_quantized(t) ? 512 : plain; }

// A weight matrix stored in `dtype`, plus its exact f32 values (the rounded ones).
struct StoredMatrix {
  std::vector<std::byte> bytes;
  std::vector<float> values;
  Matrix m;
  StoredMatrix(DType dtype, int64_t rows, int64_t cols, uint32_t seed) {
    auto v = randn(static_cast<size_t>(rows * cols), seed, 0.5f);
    if (is_quantized(dtype)) {
      bytes = random_blocks(dtype, rows, cols, seed);
    } else {
      bytes.resize(v.size() * dtype_size(dtype));
      cpu::from_f32(dtype, v.data(), bytes.data(), rows * cols);
    }
    values.resize(v.size());
    cpu::to_f32(dtype, bytes.data(), values.data(), rows * cols);
    m = Matrix{dtype, bytes.data(), rows, cols};
  }
};

// The thread counts a thread-independence test runs: 1 and 3 (3 whatever the cores), or 1 alone
// without OpenMP.
inline std::vector<int> thread_counts() {
#if defined(_OPENMP)
  return {1, 3};
#else
  return {1};
#endif
}

// OpenMP's thread count set for a scope, and restored after it.
class ScopedThreads {
 public:
  explicit ScopedThreads(int threads) {
#if defined(_OPENMP)
    saved_ = omp_get_max_threads();
    omp_set_num_threads(threads);
#else
    static_cast<void>(threads);
#endif
  }
  ~ScopedThreads() {
#if defined(_OPENMP)
    omp_set_num_threads(saved_);
#endif
  }
  ScopedThreads(const ScopedThreads&) = delete;
  ScopedThreads& operator=(const ScopedThreads&) = delete;

 private:
  [[maybe_unused]] int saved_ = 1;
};

}  // namespace kvinfer::test
