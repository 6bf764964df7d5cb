// Packed weight rows (cpu/packed_rows.h): packing only moves bytes, the fields lie where the
// decode kernels read them, and every product, decode or prefill, exact or 8-bit, gives the bits
// it gives the same rows row-major; the embedding lookup reads packed rows too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "core/quant.h"
#include "cpu/cpu_ops.h"
#include "cpu/packed_rows.h"
#include "kvinfer/error.h"
#include "cpu_test_util.h"

namespace kvinfer {
namespace {

using test::randn;
using test::StoredMatrix;

// A copy of w's bytes, packed.
struct PackedCopy {
  std::vector<std::byte> bytes;
  Matrix m;
  explicit PackedCopy(const Matrix& w) : bytes(w.data, w.data + w.bytes()), m(w) {
    cpu::pack_rows(w.dtype, w.rows, w.cols, bytes.data());
    m.data = bytes.data();
    m.packed = true;
  }
};

class PackedRows : public ::testing::TestWithParam<DType> {};

// Columns of a test matrix of the parameter's type: `plain` for bf16, `quant` for ggml blocks.
int64_t cols_of(DType t, int64_t plain, int64_t quant) { return t == DType::BF16 ? plain : quant; }

TEST_P(PackedRows, UnpackGivesBackTheRowsAndPackingOnlyMovesBytes) {
  const DType t = GetParam();
  for (int64_t rows : {5, 16, 35, 64})
    for (int64_t cols : {cols_of(t, 16, 32), cols_of(t, 48, 96), cols_of(t, 1024, 512)}) {
      const StoredMatrix w(t, rows, cols, static_cast<uint32_t>(rows * 1000 + cols));
      const PackedCopy p(w.m);
      const std::string what = "rows " + std::to_string(rows) + " cols " + std::to_string(cols);
      // Whole blocks of 16 rows are reordered (when a row holds more than one piece); the rows
      // past them are not; the bytes are the same multiset.
      const size_t packed_bytes = static_cast<size_t>(rows / 16 * 16) * w.m.row_bytes();
      EXPECT_EQ(0, std::memcmp(p.bytes.data() + packed_bytes, w.bytes.data() + packed_bytes,
                               w.bytes.size() - packed_bytes))
          << what;
      if (packed_bytes > 0 && (t != DType::BF16 || cols > 16)) {  // 16 bf16 values: one piece, in place
        EXPECT_NE(0, std::memcmp(p.bytes.data(), w.bytes.data(), packed_bytes)) << what;
      }
      auto sorted = [](std::vector<std::byte> v) {
        std::sort(v.begin(), v.end());
        return v;
      };
      EXPECT_EQ(sorted(p.bytes), sorted(w.bytes)) << what;
      // Every row back, alone and all together.
      std::vector<std::byte> all(w.bytes.size());
      cpu::unpack_rows(p.m, 0, rows, all.data());
      EXPECT_EQ(all, w.bytes) << what;
      std::vector<std::byte> one(w.m.row_bytes());
      for (int64_t r = 0; r < rows; ++r) {
        cpu::unpack_rows(p.m, r, 1, one.data());
        ASSERT_EQ(0, std::memcmp(one.data(), w.bytes.data() + static_cast<size_t>(r) * one.size(), one.size()))
            << what << " row " << r;
      }
    }
}

// The fields of row r's j-th block (or 16 bf16 values) in the packed column j of its block: what
// the kernels read there (packed_rows.h).
TEST_P(PackedRows, EachFieldLiesWhereTheKernelsReadIt) {
  const DType t = GetParam();
  const int64_t rows = 32, cols = cols_of(t, 64, 128);
  const StoredMatrix w(t, rows, cols, 7);
  const PackedCopy p(w.m);
  const size_t row_bytes = w.m.row_bytes();
  const size_t piece = t == DType::BF16 ? 32 : dtype_block(t).bytes;
  for (int64_t r = 0; r < rows; ++r)
    for (size_t j = 0; j < row_bytes / piece; ++j) {
      const std::byte* block = w.bytes.data() + static_cast<size_t>(r) * row_bytes + j * piece;
      const std::byte* column = p.bytes.data() + static_cast<size_t>(r / 16 * 16) * row_bytes + j * 16 * piece;
      const int64_t i = r % 16;
      auto same = [&](size_t packed_at, size_t block_at, size_t bytes) {
        return std::memcmp(column + packed_at, block + block_at, bytes) == 0;
      };
      const std::string what = "row " + std::to_string(r) + " column " + std::to_string(j);
      if (t == DType::BF16) {
        EXPECT_TRUE(same(32 * static_cast<size_t>(i), 0, 32)) << what;
        continue;
      }
      EXPECT_TRUE(same(cpu::packed_d(i), 0, 2)) << what;
      if (t == DType::Q4_1) {
        EXPECT_TRUE(same(cpu::packed_m(i), 2, 2)) << what;
      }
      const size_t codes = t == DType::Q8_0 ? offsetof(core::BlockQ8_0, qs)
                           : t == DType::Q4_0 ? offsetof(core::BlockQ4_0, qs)
                                              : offsetof(core::BlockQ4_1, qs);
      EXPECT_TRUE(same(cpu::packed_codes(t, i), codes, 16)) << what;
      if (t == DType::Q8_0) {
        EXPECT_TRUE(same(cpu::packed_high_codes(i), codes + 16, 16)) << what;
      }
    }
}

// y = x · Wᵀ + b with W packed has the bits it has with W row-major: decode (the packed kernels)
// and prefill (blocks unpacked first), exact, 15- and 8-bit, with rows past the last whole 16, in one
// call with another product, on 1 and 3 threads.
TEST_P(PackedRows, ProductsGiveTheRowMajorBits) {
  const DType t = GetParam();
  const int64_t in = cols_of(t, 1024, 1536);  // quantised: three runs of a small batch's widening
  if (!cpu::packs_rows(t, in)) GTEST_SKIP() << "this CPU's decode kernels read " << dtype_name(t) << " row-major";
  for (int64_t out : {16, 37, 96}) {
    const StoredMatrix w(t, out, in, static_cast<uint32_t>(out)), w2(t, 48, in, 3);
    const PackedCopy p(w.m), p2(w2.m);
    const auto bias = randn(static_cast<size_t>(out), 5);
    const Linear rowmajor{w.m, Vector{bias.data(), out}}, packed{p.m, Vector{bias.data(), out}};
    const Linear rowmajor2{w2.m, {}}, packed2{p2.m, {}};
    for (int64_t n : {1, 2, 17})
      for (ActivationMode mode : {ActivationMode::Exact, ActivationMode::Int15, ActivationMode::Int8}) {
        if (mode != ActivationMode::Exact && t == DType::BF16) continue;
        for (int th : test::thread_counts()) {
          const test::ScopedThreads scoped(th);
          const auto x = randn(static_cast<size_t>(n * in), static_cast<uint32_t>(n + out));
          std::vector<float> want(static_cast<size_t>(n * out)), want2(static_cast<size_t>(n * 48));
          std::vector<float> got(want.size(), std::nanf("")), got2(want2.size(), std::nanf(""));
          const LinearInto a[2] = {{&rowmajor, want.data()}, {&rowmajor2, want2.data()}};
          const LinearInto b[2] = {{&packed, got.data()}, {&packed2, got2.data()}};
          cpu::linears(a, x.data(), n, mode);
          cpu::linears(b, x.data(), n, mode);
          const std::string what = "out " + std::to_string(out) + " n " + std::to_string(n) + " " +
                                   std::string(activation_mode_name(mode)) + " threads " + std::to_string(th);
          EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(float))) << what;
          EXPECT_EQ(0, std::memcmp(got2.data(), want2.data(), want2.size() * sizeof(float))) << what;
        }
      }
  }
}

// A tied LM head's table is packed: the lookup widens the same rows.
TEST_P(PackedRows, EmbeddingReadsPackedRows) {
  const DType t = GetParam();
  const int64_t vocab = 40, hidden = cols_of(t, 64, 64);
  const StoredMatrix w(t, vocab, hidden, 11);
  const PackedCopy p(w.m);
  const std::vector<int32_t> ids = {0, 15, 16, 31, 39, 7, 32};
  std::vector<float> want(ids.size() * static_cast<size_t>(hidden)), got(want.size(), std::nanf(""));
  cpu::embed(w.m, ids, want.data());
  cpu::embed(p.m, ids, got.data());
  EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(float)));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, PackedRows, ::testing::Values(DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_1),
                         [](const auto& p) { return std::string(dtype_name(p.param)); });

// Types without packed kernels are never packed.
TEST(PackedRowsTypes, OnlyTypesWithPackedKernelsPack) {
  for (DType t : {DType::F32, DType::F16, DType::Q5_0, DType::Q5_1, DType::Q4_K, DType::Q5_K, DType::Q6_K})
    EXPECT_FALSE(cpu::packs_rows(t, 512)) << dtype_name(t);
  EXPECT_FALSE(cpu::packs_rows(DType::BF16, 40)) << "bf16 rows of whole 16s only";
  // A matrix marked packed that this CPU does not read packed is refused, not misread.
  StoredMatrix w(DType::F16, 16, 64, 1);
  w.m.packed = true;
  const Linear layer{w.m, {}};
  const auto x = randn(64, 2);
  std::vector<float> y(16);
  EXPECT_THROW(cpu::linear(layer, x.data(), 1, y.data()), Error);
}

}  // namespace
}  // namespace kvinfer
