#pragma once
// Weight rows packed for decode: each block of 16 rows stored column by column, in the order the
// decode kernels read it.
//
// A decode step reads every weight once, 16 rows (one row block of linear.cpp) at a time. In
// row-major order that is 16 short streams side by side, one a row, which the hardware prefetcher
// learns anew for each row, and each kernel gathers its registers' bytes from 16 places. Packed,
// a block is stored by columns: the 16 rows' first 32 values (a ggml block each, or 16 bf16 values
// for bf16), then their next ones, and so on. The kernels read a block front to back, one stream
// a thread, and each register from one place (docs/benchmarks-history.md has the measurements).
//
//   row-major:  r0[c0 c1 c2 ..] r1[c0 c1 c2 ..] .. r15[c0 c1 c2 ..]
//   packed:     c0[r0 .. r15] c1[r0 .. r15] c2[r0 .. r15] ..
//
// Within a column the 16 rows' pieces go field by field, each field for all 16 rows in turn:
//   bf16:  the rows' 16 values (32 bytes a row)
//   Q8_0:  16 f16 scales d (32 bytes) | the rows' codes 0..15 (16 a row, 256 bytes) | codes 16..31
//   Q4_0:  16 d | the rows' 16 code bytes (256 bytes)
//   Q4_1:  16 d | 16 minima m | the rows' 16 code bytes
// so that rows 4g .. 4g + 3's 16 code bytes are one 64-byte load and the 16 scales one 32-byte
// load. A block keeps its place and size (16 · row_bytes from row 16b on): offsets of whole
// blocks, the prefetch regions and the threads' shares are as before. Rows past the last whole 16
// stay row-major.
//
// Only the CPU packs, and only where its decode kernels read the packed order (packs_rows): the
// AVX-512 bf16, Q8_0/Q4_0/Q4_1 and 8-bit products. Prefill widens a packed block (or makes its
// 8-bit records) straight from the packed order; the embedding lookup of a tied table unpacks
// the rows it needs (unpack_rows). The bytes are only moved, and every product gives the same
// bits either way.
#include <cstddef>
#include <cstdint>

#include "models/weights.h"

namespace kvinfer::cpu {

// The rows of a packed block: linear.cpp's row block.
inline constexpr int64_t kPackedRows = 16;

// Where row r's fields lie in a packed column of Q8_0, Q4_0 or Q4_1 blocks (16 · block bytes),
// from the column's start.
constexpr size_t packed_d(int64_t r) { return 2 * static_cast<size_t>(r); }             // f16 d
constexpr size_t packed_m(int64_t r) { return 32 + 2 * static_cast<size_t>(r); }        // Q4_1's f16 m
constexpr size_t packed_codes(DType t, int64_t r) {                                      // code bytes
  return (t == DType::Q4_1 ? 64 : 32) + 16 * static_cast<size_t>(r);                     // (Q8_0: 0..15)
}
constexpr size_t packed_high_codes(int64_t r) { return 288 + 16 * static_cast<size_t>(r); }  // Q8_0: 16..31

// Whether this CPU's decode kernels read a matrix of type t with `cols` values a row packed.
bool packs_rows(DType t, int64_t cols);

// The rows of m that lie in packed blocks: rows / 16 · 16 when m.packed, else none.
inline int64_t packed_rows(const Matrix& m) { return m.packed ? m.rows / kPackedRows * kPackedRows : 0; }

// Reorders the matrix at `data` (rows, cols) of type t, row-major, into the packed order in
// place (packs_rows(t, cols) must hold); the caller then sets Matrix::packed.
void pack_rows(DType t, int64_t rows, int64_t cols, std::byte* data);

// Rows [first, first + count) of m, row-major, into dst (count · row_bytes): whichever order
// they are stored in.
void unpack_rows(const Matrix& m, int64_t first, int64_t count, std::byte* dst);

}  // namespace kvinfer::cpu
