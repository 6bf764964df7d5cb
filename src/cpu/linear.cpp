// Dot products and y = x·Wᵀ + b on the CPU: AVX2/FMA kernels (linear_avx2.cpp) where the CPU has
// them, the portable loops below otherwise. Either way every output element is one dot product
// in one fixed order, whatever n and the thread count (see linear_avx2.h and cpu_ops.h).
#include <algorithm>
#include <array>
#include <atomic>
#include <span>
#include <vector>

#include <fmt/format.h>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "core/convert.h"
#include "cpu/aligned.h"
#include "cpu/cpu_features.h"
#include "cpu/cpu_ops.h"
#include "cpu/dot_bf16_avx512.h"
#include "cpu/dot_quant_avx512.h"
#include "cpu/linear_avx2.h"
#include "cpu/linear_avx512.h"
#include "cpu/linear_int15.h"
#include "cpu/linear_int8.h"
#include "cpu/int8_blocks.h"
#include "cpu/int8_prepared.h"
#include "cpu/linear_int8_avx512.h"
#include "cpu/packed_rows.h"
#include "cpu/prefetch.h"
#include "kvinfer/error.h"

namespace kvinfer::cpu {

namespace {

// Below this many multiply-adds a product stays on one thread: waking the team (a few µs) would
// cost more than the split saves. A decode product of a 576 × 192 Q4_1 matrix (110k) is split.
constexpr double kParallelMinMacs = 1 << 15;
// Weight rows widened to f32 together, then multiplied by every input row: 16 rows of up to 16k
// values stay in L2 while the input streams past.
constexpr int64_t kRowBlock = 16;
static_assert(kRowBlock == kInt8PreparedRows && kRowBlock == kPackedRows &&
              int8_prepared_bytes(DType::Q8_0, 1024) <= kRowBlock * 1024 * sizeof(float) &&
              int8_prepared_bytes(DType::Q4_1, 1024) <= kRowBlock * 1024 * sizeof(float) &&
              int8_prepared_bytes(DType::Q6_K, 1024) <= kRowBlock * 1024 * sizeof(float));  // the 8-bit tiles' scratch
// Input rows a call multiplies together: at most 512 KiB of them (but 48 rows at least), in L2
// with one block of weight rows; longer inputs go in slices of about equal size (linears).
constexpr int64_t kSliceBytes = 512 << 10;

// 8 interleaved partial sums (mul, then add), the tail into lanes 0, 1, ..., a fixed tree.
float dot_portable(const float* a, const float* b, int64_t n) {
  float acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) acc[l] += a[i + l] * b[i + l];
  for (int l = 0; i < n; ++i, ++l) acc[l] += a[i] * b[i];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

// Scratch a thread keeps from call to call, grown when a call needs more, never shrunk: a decode
// step of a batch makes a few hundred calls, and allocating it in each (100 KiB and more, freed
// again) kept the allocator busy. The caller's buffers are shared with its team for the call.
enum class Buffer { Split, Interleaved, SplitInterleaved, Widened, Accumulators, Count };
float* reused(Buffer b, int64_t floats) {
  thread_local std::array<AlignedVector<float>, static_cast<size_t>(Buffer::Count)> buffers;
  AlignedVector<float>& v = buffers[static_cast<size_t>(b)];
  if (v.size() < static_cast<size_t>(floats)) {
    v = AlignedVector<float>();  // nothing to keep
    v.resize(static_cast<size_t>(floats));
  }
  return v.data();
}

// A thread's scratch for block products.
struct Scratch {
  float* widened;  // (16, in) the block's weight rows in f32, when its product widens them; or
                   // the block unpacked for the 8-bit tiles (int8_prepared_bytes: at most 32 · in)
  float* acc;      // (avx512::block_scratch_size(16)) the AVX-512 tiles' accumulators
};

// y[t · out + c] for rows [o0, o0 + rows) of the weight, widened in `w` (rows, in), and every
// input row t. With xi (x interleaved in pairs of rows, on AVX-512 machines): the AVX-512 tiles
// for the rows' whole 8s first (linear_avx512.h). Then (or else) tiles of 3 input rows × 4 weight
// rows, then single products for the last rows. Every kernel gives dot()'s bits. `next` (or null):
// the bytes this thread widens next, fetched into L2 a share per tile (prefetch.h).
void block_products(const float* x, const float* xi, int64_t n, const float* w, int64_t rows, int64_t in, float* y,
                    int64_t out, float* acc, Prefetcher* next) {
  int64_t c0 = 0;  // the first weight row the AVX-512 tiles leave
  if (xi) {
    c0 = rows / 8 * 8;
    avx512::block_products(xi, x, n, w, c0, in, y, out, acc, next);
  }
  const bool simd = cpu_has_avx2_fma_f16c();
  // Without the AVX-512 tiles, the 3-row tiles below fetch `next`, a share each.
  const size_t steps = static_cast<size_t>((n + 2) / 3);
  const size_t share = next && !xi ? (next->bytes() + steps - 1) / steps : 0;
  for (int64_t t = 0; t < n && c0 < rows; t += 3) {
    if (share) next->advance(share);
    const int64_t tr = std::min<int64_t>(3, n - t);
    int64_t c = c0;
    if (simd)
      for (; c + 4 <= rows; c += 4) avx2::dot_tile(x + t * in, tr, w + c * in, in, y + t * out + c, out);
    for (; c < rows; ++c)
      for (int64_t r = t; r < t + tr; ++r) y[r * out + c] = dot(x + r * in, w + c * in, in);
  }
}

// Decode (n = 1) streams the weights once: while a block of rows is multiplied, the bytes a lead
// past its start on (or from its end, if nearer: the next block) are prefetched (prefetch.h), as
// many as the kernel consumes, so the fetches run a bounded distance ahead of the reads. A
// thread's decode blocks are contiguous (linears), so this is its own next block. Row-major
// rows, 16 streams side by side, want 32 KiB: 16 KiB was 2-10 % slower; 2 or 3 blocks ahead,
// too. A packed block (packed_rows.h), one stream the hardware prefetcher follows, wants 2-4 KiB:
// 32 KiB took the packed bf16 products' gain away, 8 KiB half of it. Prefill reuses each block for
// every input row and fetches the next one another way (bytes_of in linears).
constexpr size_t kPrefetchLead = 32 << 10, kPackedLead = 4 << 10;

Prefetcher ahead_of(const Matrix& w, int64_t n, int64_t o0, int64_t rows, size_t row_bytes, bool packed) {
  if (n != 1) return {};
  const size_t block = static_cast<size_t>(rows) * row_bytes;
  const size_t lead = std::min(packed ? kPackedLead : kPrefetchLead, block);
  const size_t start = static_cast<size_t>(o0) * row_bytes + lead;
  const size_t total = static_cast<size_t>(w.rows) * row_bytes;
  if (start >= total) return {};
  return Prefetcher(w.data + start, std::min(block, total - start), Prefetcher::Into::Outer);
}

// A bf16 row widened in the pair order: split_pairs of its widening.
void widen_bf16_pairs(const uint16_t* src, float* dst, int64_t n) {
  if (cpu_has_avx2_fma_f16c()) return avx2::widen_bf16_pairs(src, dst, n);
  const int64_t chunks = n / 16 * 16;
  for (int64_t k = 0; k < chunks; k += 16)
    for (int64_t i = 0; i < 8; ++i) {
      dst[k + i] = core::bf16_to_f32(src[k + 2 * i]);
      dst[k + 8 + i] = core::bf16_to_f32(src[k + 2 * i + 1]);
    }
  for (int64_t k = chunks; k < n; ++k) dst[k] = core::bf16_to_f32(src[k]);
}

// How a product's weight rows meet its input rows.
enum class Path {
  Int8,       // 8-bit activations, integer dot products (linear_int8.h)
  Int15,      // 15-bit activations, two integer passes (linear_int15.h)
  HalfRows,   // decode, bf16/f16 widened in registers
  QuantRows,  // decode, ggml blocks decoded in registers
  Widened,    // a block of rows widened to f32 (if stored narrower), then f32 tiles
};

Path path_of(DType t, int64_t n, bool simd, ActivationMode activations) {
  if (activations == ActivationMode::Int8 && int8_product_supported(t)) return Path::Int8;
  if (activations == ActivationMode::Int15 && int15_product_supported(t)) return Path::Int15;
  if (n == 1 && simd && (t == DType::BF16 || t == DType::F16)) return Path::HalfRows;
  if (n == 1 && simd && is_quantized(t)) return Path::QuantRows;
  return Path::Widened;
}

// How an 8-bit product of n input rows meets its weights: prefill unpacks each block of weight
// rows once, into the thread's scratch (int8_prepared.h), for tiles that take every input row.
enum class Int8Tiles {
  None,    // one input row at a time (decode, and the portable loops)
  Avx512,  // AVX-512 VNNI tiles (linear_int8_avx512.h)
  Avx2,    // AVX2 tiles (linear_avx2.h)
};

Int8Tiles int8_tiles(int64_t n, DType t) {
  if (n < 2) return Int8Tiles::None;
  // Q5_0/Q5_1 and the K-quants have AVX2 tiles only, the same bits on every machine.
  if (cpu_has_avx512_vnni() && !int8_block_type(t) && !int8_super_type(t)) return Int8Tiles::Avx512;
  if (cpu_has_avx2_fma_f16c()) return Int8Tiles::Avx2;
  return Int8Tiles::None;
}

// The quantised input rows of an 8-bit product: per 32-value block, and (for the K-quants) per
// 256-value super-block.
struct Int8Input {
  const Int8Block* blocks;  // (n, in / 32)
  const int8_t* q;          // (n, in)
  const Int8Super* supers;  // (n, in / 256)
  const int8_t* qk;         // (n, in)
};

// The quantised input rows of a 15-bit product.
struct Int15Input {
  const Int8Block* blocks;  // (n, in / 32)
  const int8_t* h;          // (n, in) high codes
  const int8_t* l;          // (n, in) low codes
};

// A product's input rows, as each path takes them.
struct Inputs {
  const float* x;         // (n, in)
  const float* split;     // (n, in) x in the pair order (split_pairs), when a product is bf16
  const float* x_il;      // x interleaved in pairs of rows (avx512::interleave_rows) for prefill's
                          // AVX-512 tiles, when a product widens other weights than bf16; or null
  const float* split_il;  // split interleaved so, when a product widens bf16 weights; or null
  Int8Input x8;           // with 8-bit activations
  Int15Input x15;         // with 15-bit activations
};

// Rows [16b, 16b + 16) of y (n, out) = x · Wᵀ + bias, by `path`, with this thread's scratch.
// `next`: the stored bytes of the block this thread widens next, for prefill to fetch meanwhile.
void block_product(const Linear& layer, Path path, int64_t b, const Inputs& in_rows, int64_t n, const Scratch& scratch,
                   float* y, Prefetcher& next) {
  float* widened = scratch.widened;
  const float* x = in_rows.x;
  const Int8Input& x8 = in_rows.x8;
  const Matrix& w = layer.weight;
  const int64_t in = w.cols, out = w.rows;
  const int64_t o0 = b * kRowBlock, rows = std::min(kRowBlock, out - o0);
  const size_t row_bytes = dtype_row_bytes(w.dtype, in);
  const std::byte* src = w.data + static_cast<size_t>(o0) * row_bytes;
  // A packed block (packed_rows.h, AVX-512 machines only): decode's kernels, prefill's widening
  // and its 8-bit records read it as it is (linears checked that they can).
  const bool packed = o0 + kRowBlock <= packed_rows(w);
  Prefetcher pf = ahead_of(w, n, o0, rows, row_bytes, packed);
  switch (path) {
    case Path::Int8:
      if (int8_super_type(w.dtype)) {  // the K-quants: super-block inputs, AVX2 tiles or one row at a time
        if (int8_tiles(n, w.dtype) == Int8Tiles::Avx2) {
          auto* prepared = reinterpret_cast<std::byte*>(widened);  // (int8_prepared_bytes(dtype, in))
          avx2::int8_super_prepare(w.dtype, src, rows, in, prepared);
          avx2::int8_super_prepared_products(w.dtype, prepared, rows, in, x8.supers, x8.qk, n, y + o0, out);
          break;
        }
        for (int64_t t = 0; t < n; ++t)
          int8_super_rows_product(w.dtype, x8.supers + t * (in / 256), x8.qk + t * in, src, rows, in,
                                  y + t * out + o0, pf);
        break;
      }
      if (const Int8Tiles tiles = int8_tiles(n, w.dtype); tiles != Int8Tiles::None) {
        auto* prepared = reinterpret_cast<std::byte*>(widened);  // (int8_prepared_bytes(dtype, in))
        if (tiles == Int8Tiles::Avx512) {
          if (packed)
            avx512::int8_prepare_packed(w.dtype, src, in, prepared);
          else
            avx512::int8_prepare(w.dtype, src, rows, in, prepared);
          avx512::int8_prepared_products(w.dtype, prepared, rows, in, x8.blocks, x8.q, n, y + o0, out);
        } else {
          avx2::int8_prepare(w.dtype, src, rows, in, prepared);
          avx2::int8_prepared_products(w.dtype, prepared, rows, in, x8.blocks, x8.q, n, y + o0, out);
        }
        break;
      }
      if (packed) {  // n = 1
        avx512::int8_packed_product(w.dtype, x8.blocks, x8.q, src, in, y + o0, pf);
        break;
      }
      for (int64_t t = 0; t < n; ++t)
        int8_rows_product(w.dtype, x8.blocks + t * (in / 32), x8.q + t * in, src, rows, in, y + t * out + o0, pf);
      break;
    case Path::Int15: {  // prefill: AVX2 tiles; decode: one input row at a time
      const Int15Input& x15 = in_rows.x15;
      const bool tiles = n > 1 && cpu_has_avx2_fma_f16c();
      auto* prepared = reinterpret_cast<std::byte*>(widened);  // (int8_prepared_bytes(dtype, in)) for the tiles
      const std::byte* rows_at = src;
      if (packed) {  // the kernels read rows as stored: unpacked after the records (linears() sized both)
        auto* unpacked = prepared + (tiles ? int8_prepared_bytes(w.dtype, in) : 0);  // (16, row_bytes)
        unpack_rows(w, o0, rows, unpacked);
        rows_at = unpacked;
      }
      if (tiles) {
        avx2::int8_prepare(w.dtype, rows_at, rows, in, prepared);
        avx2::int15_prepared_products(w.dtype, prepared, rows, in, x15.blocks, x15.h, x15.l, n, y + o0, out);
        break;
      }
      for (int64_t t = 0; t < n; ++t)
        int15_rows_product(w.dtype, x15.blocks + t * (in / 32), x15.h + t * in, x15.l + t * in, rows_at, rows, in,
                           y + t * out + o0, pf);
      break;
    }
    case Path::HalfRows: {  // decode: 2 bytes a weight, read once, widened in registers
      const auto* h = reinterpret_cast<const uint16_t*>(src);
      if (packed)
        avx512::dot_bf16_packed(in_rows.split, h, in, y + o0, pf);
      else if (w.dtype == DType::BF16 && cpu_has_avx512())
        avx512::dot_bf16_rows(in_rows.split, h, rows, in, y + o0, pf);
      else if (w.dtype == DType::BF16)
        avx2::dot_bf16_rows(in_rows.split, h, rows, in, y + o0, pf);
      else
        avx2::dot_f16_rows(x, h, rows, in, y + o0, pf);
      break;
    }
    case Path::QuantRows:  // decode: each block decoded in registers, read once
      if (packed) {
        avx512::dot_quant_packed(w.dtype, x, src, in, y + o0, pf);
        break;
      }
      if (!cpu_has_avx512() || !avx512::dot_quant_rows(w.dtype, x, src, rows, in, y + o0, pf))
        avx2::dot_quant_rows(w.dtype, x, src, rows, in, y + o0, pf);
      break;
    case Path::Widened: {
      const float* wb = reinterpret_cast<const float*>(src);
      const float* xi = in_rows.x_il;
      if (w.dtype == DType::BF16) {  // widened in the pair order, against the split input
        x = in_rows.split;
        xi = in_rows.split_il;
      }
      // A small batch widens run by run, into L1, as its tiles take the values (linear_avx512.h).
      const bool by_runs = xi && n <= avx512::kWideningRows && rows == kRowBlock && w.dtype != DType::F32 &&
                           (!packed || w.dtype != DType::BF16) && in % avx512::widening_align(w.dtype) == 0;
      if (by_runs) {
        avx512::block_products_widening(xi, x, n, {w.dtype, src, row_bytes, packed}, rows, in, y + o0, out,
                                        scratch.acc, widened, &next);
        break;
      }
      if (w.dtype == DType::BF16) {
        if (packed)
          avx512::widen_bf16_packed(reinterpret_cast<const uint16_t*>(src), in, widened);
        else
          for (int64_t r = 0; r < rows; ++r)
            widen_bf16_pairs(reinterpret_cast<const uint16_t*>(src + static_cast<size_t>(r) * row_bytes),
                             widened + r * in, in);
        wb = widened;
      } else if (w.dtype != DType::F32) {
        if (packed)
          avx512::widen_quant_packed(w.dtype, src, in, widened);
        else
          to_f32(w.dtype, src, widened, rows * in);  // whole rows: whole blocks
        wb = widened;
      }
      block_products(x, xi, n, wb, rows, in, y + o0, out, scratch.acc, &next);
      break;
    }
  }
  if (!layer.bias.empty())
    for (int64_t t = 0; t < n; ++t)
      for (int64_t c = 0; c < rows; ++c) y[t * out + o0 + c] += layer.bias.data[o0 + c];
}

}  // namespace

float dot(const float* a, const float* b, int64_t n) {
  return cpu_has_avx2_fma_f16c() ? avx2::dot(a, b, n) : dot_portable(a, b, n);
}

void split_pairs(const float* src, float* dst, int64_t n) {
  if (cpu_has_avx2_fma_f16c()) return avx2::split_pairs(src, dst, n);
  const int64_t chunks = n / 16 * 16;
  for (int64_t k = 0; k < chunks; k += 16)
    for (int64_t i = 0; i < 8; ++i) {
      dst[k + i] = src[k + 2 * i];
      dst[k + 8 + i] = src[k + 2 * i + 1];
    }
  std::copy(src + chunks, src + n, dst + chunks);
}

float sum(const float* a, int64_t n) {
  float acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) acc[l] += a[i + l];
  for (int l = 0; i < n; ++i, ++l) acc[l] += a[i];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

void linear(const Linear& layer, const float* x, int64_t n, float* y, ActivationMode activations) {
  const LinearInto product{&layer, y};
  linears({&product, 1}, x, n, activations);
}

void linears(std::span<const LinearInto> products, const float* x, int64_t n, ActivationMode activations) {
  if (products.empty()) return;
  const int64_t in = products.front().layer->weight.cols;
  // A long prefill goes in slices of input rows that stay in L2 while every block of weight rows
  // multiplies them: each element is the same product either way. Slices of equal size: each
  // slice widens every block again, so 64 rows go in one slice, not 48 and 16.
  const int64_t most = std::max<int64_t>(48, kSliceBytes / std::max<int64_t>(1, in * 4));
  const int64_t slices = (n + most - 1) / most, slice = (n + slices - 1) / slices;
  if (slices > 1) {
    std::vector<LinearInto> part(products.begin(), products.end());
    for (int64_t r = 0; r < n; r += slice) {
      for (size_t p = 0; p < part.size(); ++p) part[p].y = products[p].y + r * products[p].layer->weight.rows;
      linears(part, x + r * in, std::min(slice, n - r), activations);
    }
    return;
  }
  const bool simd = cpu_has_avx2_fma_f16c();
  // The products' row blocks numbered one after another: block g of the call is block
  // g - first[p] of product p.
  std::vector<int64_t> first(products.size() + 1, 0);  // (products + 1) first block of each product
  bool quantise = false, quantise_k = false, quantise15 = false, split = false, widens = false, widens_bf16 = false;
  int64_t widen_rows = 0;  // rows of the f32 staging buffer a thread needs (0: none)
  double macs = 0;
  for (size_t p = 0; p < products.size(); ++p) {
    const Matrix& w = products[p].layer->weight;
    // Checked here: an exception must not escape the parallel region (to_f32 would throw there).
    if (w.cols != in)
      throw Error(ErrorKind::InvalidArgument, fmt::format("linears: a product takes {} inputs where the first takes {}", w.cols, in));
    if (in % dtype_block(w.dtype).elements != 0)
      throw Error(ErrorKind::InvalidArgument, fmt::format("linear: rows of {} values are not whole {} blocks", in, dtype_name(w.dtype)));
    if (w.packed && !packs_rows(w.dtype, w.cols))  // the packed kernels would read another layout
      throw Error(ErrorKind::InvalidArgument, fmt::format("linear: a packed {} matrix of {} columns, which this CPU does not read packed",
                              dtype_name(w.dtype), w.cols));
    first[p + 1] = first[p] + (w.rows + kRowBlock - 1) / kRowBlock;
    macs += static_cast<double>(n) * static_cast<double>(in) * static_cast<double>(w.rows);
    const Path path = path_of(w.dtype, n, simd, activations);
    quantise = quantise || (path == Path::Int8 && !int8_super_type(w.dtype));
    quantise15 = quantise15 || path == Path::Int15;
    quantise_k = quantise_k || (path == Path::Int8 && int8_super_type(w.dtype));
    widens = widens || (path == Path::Widened && w.dtype != DType::BF16);
    widens_bf16 = widens_bf16 || (path == Path::Widened && w.dtype == DType::BF16);
    if (path == Path::Widened && w.dtype != DType::F32) widen_rows = kRowBlock;
    if (path == Path::Int8 && int8_tiles(n, w.dtype) != Int8Tiles::None) widen_rows = kRowBlock;  // ≥ 32 · in bytes
    // 15-bit prefill's records (≤ 32 · in bytes) and a packed block unpacked (≤ 17 · in) fit 16 · in floats.
    if (path == Path::Int15 && (packed_rows(w) > 0 || (n > 1 && simd))) widen_rows = kRowBlock;
    split = split || w.dtype == DType::BF16;
  }
  // Small products stay on one thread: waking (and spinning) a team costs more than they do.
  [[maybe_unused]] const bool parallel = macs >= kParallelMinMacs;  // read by the OpenMP pragmas only

  // With 8-bit activations, every input row quantised once for all the products, in the formats
  // they take.
  const int64_t nb = quantise ? in / 32 : 0, ns = quantise_k ? in / 256 : 0;
  std::vector<Int8Block> xb(static_cast<size_t>(n * nb));               // (n, in / 32) scales
  std::vector<int8_t> xq(quantise ? static_cast<size_t>(n * in) : 0);    // (n, in) codes
  std::vector<Int8Super> xsup(static_cast<size_t>(n * ns));            // (n, in / 256) scales and sums
  std::vector<int8_t> xqk(quantise_k ? static_cast<size_t>(n * in) : 0);  // (n, in) codes
  // With 15-bit activations, in the same way.
  const int64_t nb15 = quantise15 ? in / 32 : 0;
  std::vector<Int8Block> xb15(static_cast<size_t>(n * nb15));               // (n, in / 32) scales
  std::vector<int8_t> xh(quantise15 ? static_cast<size_t>(n * in) : 0);      // (n, in) high codes
  std::vector<int8_t> xl(quantise15 ? static_cast<size_t>(n * in) : 0);      // (n, in) low codes
  if (quantise || quantise_k || quantise15) {
#pragma omp parallel for schedule(static) if (parallel && n > 1)
    for (int64_t t = 0; t < n; ++t) {
      if (quantise) quantize_int8(x + t * in, in, xb.data() + t * nb, xq.data() + t * in);
      if (quantise_k) quantize_int8_super(x + t * in, in, xsup.data() + t * ns, xqk.data() + t * in);
      if (quantise15) quantize_int15(x + t * in, in, xb15.data() + t * nb15, xh.data() + t * in, xl.data() + t * in);
    }
  }
  // For bf16 products, every input row in the pair order; on AVX-512 machines, prefill's f32
  // tiles take the rows (or those split ones) interleaved in pairs (linear_avx512.h).
  const bool tiles512 = n > 1 && cpu_has_avx512();
  const bool interleave = tiles512 && widens, interleave_split = tiles512 && widens_bf16;
  const int64_t il_size = tiles512 ? avx512::interleaved_size(n, in) : 0;
  float* xs = reused(Buffer::Split, split ? n * in : 0);                      // (n, in)
  float* x_il = reused(Buffer::Interleaved, interleave ? il_size : 0);          // (⌈n/2⌉, in/8, 2, 8)
  float* split_il = reused(Buffer::SplitInterleaved, interleave_split ? il_size : 0);  // (⌈n/2⌉, in/8, 2, 8)
  const Inputs inputs{x, xs, interleave ? x_il : nullptr, interleave_split ? split_il : nullptr,
                      {xb.data(), xq.data(), xsup.data(), xqk.data()},
                      {xb15.data(), xh.data(), xl.data()}};

  // A decode's one row is split here, before the team starts: inside, the team would wait for it.
  const bool rearrange = n > 1 && (split || interleave || interleave_split);
  if (n == 1 && split) split_pairs(x, xs, in);
  // Threads share out the input's rearrangements, then the row blocks of all the products; each
  // y element is computed by one thread, whole, by the kernel its product's path names.
  std::atomic<int64_t> next_block{0};  // prefill: the first block no thread has claimed
#pragma omp parallel if (parallel)
  {
    [[maybe_unused]] int threads = 1;  // the team's size
#if defined(_OPENMP)
    threads = omp_get_num_threads();
#endif
    if (rearrange) {
#pragma omp for schedule(static)
      for (int64_t t = 0; t < n; t += 2) {  // rows t and t + 1: one interleaved pair
        const int64_t rows = std::min<int64_t>(2, n - t), pair = t * (in / 8 * 8);
        for (int64_t r = t; split && r < t + rows; ++r) split_pairs(x + r * in, xs + r * in, in);
        if (interleave) avx512::interleave_rows(x + t * in, rows, in, x_il + pair);
        if (interleave_split) avx512::interleave_rows(xs + t * in, rows, in, split_il + pair);
      }
    }
    const Scratch scratch{reused(Buffer::Widened, widen_rows * in),  // (16, in) when a product widens
                          reused(Buffer::Accumulators, tiles512 ? avx512::block_scratch_size(kRowBlock) : 0)};
    // Block g of the call: its product and its row block within the product.
    size_t p = 0;
    auto locate = [&](int64_t g) {
      while (g >= first[p + 1]) ++p;
      while (g < first[p]) --p;
      return p;
    };
    // Block h's stored bytes on prefill's widened path: fetched into L2 while the thread multiplies
    // the block before it, so that the widening, or the f32 tiles, read them from L2. Not f32
    // blocks for the AVX2 tiles, which fetch in bursts between tiles: those did not repay it.
    auto bytes_of = [&](int64_t h) {
      if (h < 0 || h >= first.back()) return Prefetcher();
      const size_t q = locate(h);
      const Matrix& w = products[q].layer->weight;
      if (path_of(w.dtype, n, simd, activations) != Path::Widened) return Prefetcher();
      if (w.dtype == DType::F32 && !tiles512) return Prefetcher();
      const size_t row_bytes = dtype_row_bytes(w.dtype, w.cols);
      const int64_t o0 = (h - first[q]) * kRowBlock, rows = std::min(kRowBlock, w.rows - o0);
      return Prefetcher(w.data + static_cast<size_t>(o0) * row_bytes, static_cast<size_t>(rows) * row_bytes,
                        Prefetcher::Into::L2);
    };
    auto run_block = [&](int64_t g, int64_t h) {
      Prefetcher next = bytes_of(h);
      const size_t q = locate(g);
      const Linear& layer = *products[q].layer;
      const Path path = path_of(layer.weight.dtype, n, simd, activations);
      block_product(layer, path, g - first[q], inputs, n, scratch, products[q].y, next);
    };
    if (n > 1) {
      // Prefill blocks go to whichever thread is free: when one core runs slower than the other (a
      // shared machine), equal shares would leave the faster one waiting. A thread claims its next
      // blocks when it starts the last of those it holds, so that their weights can be fetched
      // meanwhile; near the end it claims only when free, so that no thread holds a block while
      // another has none. It claims a run of blocks at a time, shorter as fewer are left (at most
      // 8, one when fewer than 4 a thread are): each claim moves the counter's cache line between
      // the cores, which cost a few % of a decode step of 16 sequences claimed block by block.
      const int64_t blocks = first.back();
      auto claim = [&](int64_t& b, int64_t& e) {
        const int64_t left = blocks - next_block.load(std::memory_order_relaxed);
        const int64_t count = std::clamp<int64_t>(left / (4 * threads), 1, 8);
        b = next_block.fetch_add(count, std::memory_order_relaxed);
        e = std::min(blocks, b + count);
      };
      int64_t g = 0, end = 0;
      claim(g, end);
      while (g < blocks) {
        int64_t h = g + 1, h_end = end;  // the block after g: the next one held, or of a run claimed now
        if (h >= end) {
          if (next_block.load(std::memory_order_relaxed) + threads < blocks)
            claim(h, h_end);
          else
            h = -1;
        }
        run_block(g, h < blocks ? h : -1);
        if (h >= 0) {
          g = h;
          end = h_end;
        } else {
          claim(g, end);
        }
      }
    } else {  // decode: equal contiguous shares, each one stream; the region's end is the only wait
#pragma omp for schedule(static) nowait
      for (int64_t g = 0; g < first.back(); ++g) run_block(g, -1);
    }
  }
}

}  // namespace kvinfer::cpu
