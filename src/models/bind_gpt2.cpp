// Binding a GPT-2 checkpoint's tensors (HF GPT2LMHeadModel or llama.cpp's "gpt2" GGUF) to
// ModelWeights, the layout the forward pass shares with the Llama family.
#include <algorithm>
#include <cstdint>
#include <vector>

#include <fmt/format.h>
#include <fmt/std.h>

#include "kvinfer/error.h"
#include "models/load_common.h"

namespace kvinfer {

namespace {

// Rows [first, first + count) of a (rows, cols) matrix, `in` (count, cols), into their columns of
// its transpose `out` (cols, rows), in tiles that stay in cache.
template <typename T>
void transpose_rows(const T* in, int64_t first, int64_t count, int64_t rows, int64_t cols, T* out) {
  constexpr int64_t kTile = 64;
#pragma omp parallel for schedule(static)
  for (int64_t c0 = 0; c0 < cols; c0 += kTile)
    for (int64_t r = 0; r < count; ++r)
      for (int64_t c = c0; c < std::min(cols, c0 + kTile); ++c) out[c * rows + first + r] = in[r * cols + c];
}

// out (cols, rows) = stored (rows, cols)ᵀ, an f32, f16 or bf16 matrix. `stored` is read a block of
// rows at a time with storage.read (pread where it lies in a file: never through the mapping).
void transpose(const HostStorage& storage, const Matrix& stored, std::byte* out) {
  constexpr int64_t kRows = 64;
  const uint64_t row = stored.row_bytes();
  std::vector<std::byte> block(static_cast<size_t>(std::min(kRows, stored.rows) * row));  // (kRows, cols)
  for (int64_t r0 = 0; r0 < stored.rows; r0 += kRows) {
    const int64_t n = std::min(kRows, stored.rows - r0);
    storage.read(stored.data + static_cast<uint64_t>(r0) * row, static_cast<uint64_t>(n) * row, block.data());
    if (dtype_size(stored.dtype) == 4)
      transpose_rows(reinterpret_cast<const uint32_t*>(block.data()), r0, n, stored.rows, stored.cols,
                     reinterpret_cast<uint32_t*>(out));
    else
      transpose_rows(reinterpret_cast<const uint16_t*>(block.data()), r0, n, stored.rows, stored.cols,
                     reinterpret_cast<uint16_t*>(out));
  }
}

// Rows [first, first + count) of a row-major matrix, in place.
Matrix row_block(const Matrix& m, int64_t first, int64_t count) {
  return Matrix{m.dtype, m.data + static_cast<size_t>(first) * m.row_bytes(), count, m.cols};
}

Vector slice(const Vector& v, int64_t first, int64_t count) { return Vector{v.data + first, count}; }

}  // namespace

std::unique_ptr<ModelWeights> bind_gpt2_weights(const ModelConfig& c, const Gpt2TensorNames& names,
                                                const TensorSource& source, HostStorage& storage,
                                                const std::filesystem::path& path) {
  const int64_t hidden = c.hidden_size, inter = c.intermediate_size;
  if (c.num_kv_heads != c.num_heads || c.num_heads * c.head_dim != hidden)
    throw Error(ErrorKind::BadFile, fmt::format("{}: GPT-2 needs heads × head_dim == hidden and no grouped KV heads (got {} heads, {} KV "
                            "heads, head_dim {}, hidden {})",
                            path, c.num_heads, c.num_kv_heads, c.head_dim, hidden));
  auto vector = [&](const std::string& name, int64_t n) {
    return storage.add(storage.read_f32(source.vector(name, n)));
  };
  // A (out, in) projection: Conv1D checkpoints store (in, out) and are transposed into storage.
  auto linear = [&](const std::string& prefix, int64_t out, int64_t in) {
    Linear l;
    if (names.conv1d) {
      const Matrix stored = source.matrix(prefix + ".weight", in, out);
      if (is_quantized(stored.dtype))
        throw Error(ErrorKind::BadFile, fmt::format("{}: Conv1D tensor '{}.weight' is {}; only f32, f16 and bf16 can be transposed", path,
                                prefix, dtype_name(stored.dtype)));
      // Allocated now (the pointer is bound), filled once finish_load's memory check has passed.
      std::byte* t = storage.allocate(stored.bytes());
      storage.fills.push_back([&storage, stored, t] { transpose(storage, stored, t); });
      l.weight = Matrix{stored.dtype, t, out, in};
    } else {
      l.weight = source.matrix(prefix + ".weight", out, in);
    }
    l.bias = vector(prefix + ".bias", out);
    return l;
  };

  auto w = std::make_unique<ModelWeights>();
  w->embed = source.matrix(names.embed, c.vocab_size, hidden);
  w->pos_embed = source.matrix(names.pos_embed, c.max_position_embeddings, hidden);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = fmt::format(fmt::runtime(names.layer), l);
    LayerWeights L;
    L.attn_norm = vector(p + names.attn_norm + ".weight", hidden);
    L.attn_norm_bias = vector(p + names.attn_norm + ".bias", hidden);
    // c_attn's output is [q | k | v]: three row blocks of the (3·hidden, hidden) weight.
    const Linear qkv = linear(p + names.qkv, 3 * hidden, hidden);
    L.q = {row_block(qkv.weight, 0, hidden), slice(qkv.bias, 0, hidden)};
    L.k = {row_block(qkv.weight, hidden, hidden), slice(qkv.bias, hidden, hidden)};
    L.v = {row_block(qkv.weight, 2 * hidden, hidden), slice(qkv.bias, 2 * hidden, hidden)};
    L.o = linear(p + names.attn_out, hidden, hidden);
    L.ffn_norm = vector(p + names.ffn_norm + ".weight", hidden);
    L.ffn_norm_bias = vector(p + names.ffn_norm + ".bias", hidden);
    L.up = linear(p + names.ffn_up, inter, hidden);
    L.down = linear(p + names.ffn_down, hidden, inter);
    w->layers.push_back(std::move(L));
  }
  w->final_norm = vector(names.final_norm + ".weight", hidden);
  w->final_norm_bias = vector(names.final_norm + ".bias", hidden);
  w->lm_head.weight = c.tie_word_embeddings ? w->embed : source.matrix(names.lm_head, c.vocab_size, hidden);
  return w;
}

}  // namespace kvinfer
