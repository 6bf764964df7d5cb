#include <vector>

#include <fmt/format.h>

#include "cpu/cpu_ops.h"
#include "kvinfer/error.h"

namespace kvinfer::cpu {

namespace {
constexpr double kParallelMinMacs = 1 << 20;
}  // namespace

float dot(const float* a, const float* b, int64_t n) {
  float acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) acc[l] += a[i + l] * b[i + l];
  for (int l = 0; i < n; ++i, ++l) acc[l] += a[i] * b[i];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

float sum(const float* a, int64_t n) {
  float acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) acc[l] += a[i + l];
  for (int l = 0; i < n; ++i, ++l) acc[l] += a[i];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

void linear(const Linear& layer, const float* x, int64_t n, float* y) {
  const Matrix& w = layer.weight;
  const int64_t in = w.cols, out = w.rows;
  // Checked here: an exception must not escape the parallel region (to_f32 would throw there).
  if (in % dtype_block(w.dtype).elements != 0)
    throw Error(fmt::format("linear: rows of {} values are not whole {} blocks", in, dtype_name(w.dtype)));
  const size_t row_bytes = dtype_row_bytes(w.dtype, in);
  // Each weight row is widened once and reused by all n input rows; every y element is one
  // dot() call, so the result does not depend on n (nor on the thread count). Small products
  // stay on one thread: waking (and spinning) a team costs more than they do.
  const bool parallel = static_cast<double>(n) * static_cast<double>(in) * static_cast<double>(out) >= kParallelMinMacs;
#pragma omp parallel if (parallel)
  {
    std::vector<float> row(w.dtype == DType::F32 ? 0 : static_cast<size_t>(in));  // (in)
#pragma omp for schedule(static)
    for (int64_t o = 0; o < out; ++o) {
      const float* wrow = reinterpret_cast<const float*>(w.data + static_cast<size_t>(o) * row_bytes);
      if (w.dtype != DType::F32) {
        to_f32(w.dtype, w.data + static_cast<size_t>(o) * row_bytes, row.data(), in);
        wrow = row.data();
      }
      const float b = layer.bias.empty() ? 0.0f : layer.bias.data[o];
      for (int64_t t = 0; t < n; ++t) {
        float acc = dot(x + t * in, wrow, in);
        y[t * out + o] = layer.bias.empty() ? acc : acc + b;
      }
    }
  }
}

}  // namespace kvinfer::cpu
