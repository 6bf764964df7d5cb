// The packed row order of decode's weights (packed_rows.h).
#include "cpu/packed_rows.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/quant.h"
#include "cpu/cpu_features.h"

namespace kvinfer::cpu {

namespace {

// A field of a row's piece of a column (a ggml block, or 16 bf16 values): its bytes at `at`.
struct Field {
  size_t at, bytes;
};

// Each packed type's fields, in their packed order.
template <DType T>
constexpr auto kFields = std::array{Field{0, 32}};  // bf16: the 16 values
template <>
constexpr auto kFields<DType::Q8_0> = std::array{Field{0, 2}, Field{2, 16}, Field{18, 16}};  // d, codes 0..15, 16..31
template <>
constexpr auto kFields<DType::Q4_0> = std::array{Field{0, 2}, Field{2, 16}};  // d, codes
template <>
constexpr auto kFields<DType::Q4_1> = std::array{Field{0, 2}, Field{2, 2}, Field{4, 16}};  // d, m, codes
static_assert(offsetof(core::BlockQ8_0, qs) == 2 && offsetof(core::BlockQ4_0, qs) == 2 &&
              offsetof(core::BlockQ4_1, m) == 2 && offsetof(core::BlockQ4_1, qs) == 4);
static_assert(packed_codes(DType::Q8_0, 0) == kPackedRows * 2 && packed_high_codes(0) == kPackedRows * 18 &&
              packed_m(0) == kPackedRows * 2 && packed_codes(DType::Q4_1, 0) == kPackedRows * 4);

// Copies rows [r0, r1) of one block of 16 rows of `row_bytes` between the packed order (at
// packed) and row-major rows (rows, the block's row r at rows + (r - r0) · row_bytes): into the
// packed order, or (kUnpack) out of it. Column by column, so that the packed side is read or
// written front to back; each field's size is a constant, so that each copy is a move or two.
// The packed side, and the row-major side, of a copy: the one read is const.
template <bool kUnpack>
using PackedSide = std::conditional_t<kUnpack, const std::byte*, std::byte*>;
template <bool kUnpack>
using RowsSide = std::conditional_t<kUnpack, std::byte*, const std::byte*>;

template <DType T, bool kUnpack>
void copy_block(PackedSide<kUnpack> packed, RowsSide<kUnpack> rows, size_t row_bytes, int64_t r0, int64_t r1) {
  constexpr size_t kPiece = T == DType::BF16 ? 32 : dtype_block(T).bytes;
  for (size_t c = 0; c < row_bytes / kPiece; ++c) {
    const PackedSide<kUnpack> column = packed + c * kPackedRows * kPiece;
    [&]<size_t... k>(std::index_sequence<k...>) {
      size_t base = 0;  // the field's start in the column
      (
          [&] {
            constexpr Field f = kFields<T>[k];
            for (int64_t r = r0; r < r1; ++r) {
              const PackedSide<kUnpack> in_column = column + base + static_cast<size_t>(r) * f.bytes;
              const RowsSide<kUnpack> in_row = rows + static_cast<size_t>(r - r0) * row_bytes + c * kPiece + f.at;
              if constexpr (kUnpack)
                std::memcpy(in_row, in_column, f.bytes);
              else
                std::memcpy(in_column, in_row, f.bytes);
            }
            base += kPackedRows * f.bytes;
          }(),
          ...);
    }(std::make_index_sequence<kFields<T>.size()>{});
  }
}

template <bool kUnpack>
void copy_block(DType t, PackedSide<kUnpack> packed, RowsSide<kUnpack> rows, size_t row_bytes, int64_t r0, int64_t r1) {
  switch (t) {
    case DType::BF16: return copy_block<DType::BF16, kUnpack>(packed, rows, row_bytes, r0, r1);
    case DType::Q8_0: return copy_block<DType::Q8_0, kUnpack>(packed, rows, row_bytes, r0, r1);
    case DType::Q4_0: return copy_block<DType::Q4_0, kUnpack>(packed, rows, row_bytes, r0, r1);
    default: return copy_block<DType::Q4_1, kUnpack>(packed, rows, row_bytes, r0, r1);
  }
}

bool packed_type(DType t) { return t == DType::BF16 || t == DType::Q8_0 || t == DType::Q4_0 || t == DType::Q4_1; }

}  // namespace

bool packs_rows(DType t, int64_t cols) {
  if (t == DType::BF16) return cpu_has_avx512() && cols % 16 == 0;  // avx512::dot_bf16_packed
  // avx512::dot_quant_packed for exact products, avx512::int8_packed_product for 8-bit ones
  return packed_type(t) && cpu_has_avx512_vnni();
}

void pack_rows(DType t, int64_t rows, int64_t cols, std::byte* data) {
  const size_t row_bytes = dtype_row_bytes(t, cols), block_bytes = kPackedRows * row_bytes;
  const int64_t blocks = rows / kPackedRows;
#pragma omp parallel if (blocks > 1)
  {
    std::vector<std::byte> rowwise(block_bytes);  // (16, row_bytes) a block as it was
#pragma omp for schedule(static)
    for (int64_t b = 0; b < blocks; ++b) {
      std::byte* block = data + static_cast<size_t>(b) * block_bytes;
      std::memcpy(rowwise.data(), block, block_bytes);
      copy_block<false>(t, block, rowwise.data(), row_bytes, 0, kPackedRows);
    }
  }
}

void unpack_rows(const Matrix& m, int64_t first, int64_t count, std::byte* dst) {
  const size_t row_bytes = m.row_bytes();
  const int64_t end = first + count, packed_end = std::min(end, packed_rows(m));
  for (int64_t r = first; r < packed_end;) {  // the rows in packed blocks, a block at a time
    const int64_t block = r / kPackedRows * kPackedRows, r1 = std::min(packed_end, block + kPackedRows);
    copy_block<true>(m.dtype, m.data + static_cast<size_t>(block) * row_bytes,
                     dst + static_cast<size_t>(r - first) * row_bytes, row_bytes, r - block, r1 - block);
    r = r1;
  }
  const int64_t rest = std::max(first, packed_end);  // row-major
  std::memcpy(dst + static_cast<size_t>(rest - first) * row_bytes, m.data + static_cast<size_t>(rest) * row_bytes,
              static_cast<size_t>(end - rest) * row_bytes);
}

}  // namespace kvinfer::cpu
