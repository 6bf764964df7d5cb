#pragma once
// Saving and restoring a sequence's KV cache (llama.cpp's llama_state_seq_*): the filled
// positions' K/V rows, the token ids they were computed from, and the identity of the model that
// computed them. A restored cache continues bit for bit as the original would have.
#include <cstdint>
#include <filesystem>
#include <optional>

#include "kvinfer/kv_cache.h"
#include "kvinfer/model.h"

namespace kvinfer {

// Writes kv's filled positions (kv.size() of them), their token ids and model's identity to
// `file` (replaced atomically: written beside it, then renamed). Throws kvinfer::Error (BadFile)
// when the file cannot be written, InvalidArgument when kv was not made for this model's shape.
void save_kv_state(const KvCache& kv, const Model& model, const std::filesystem::path& file);

// A fresh cache for `model` on its device holding what `file` saved: the same positions, K/V
// bits and token ids. capacity_tokens: at least the saved positions; default: the saved cache's
// capacity. The file is validated like every other input: a bad magic, version, truncation, a
// size that disagrees with the header, or a token id outside the vocabulary is BadFile naming
// the file and field; a file saved by another model (config, weights) or in another cache dtype
// is InvalidArgument naming what differs.
KvCache load_kv_state(const Model& model, const std::filesystem::path& file,
                      std::optional<int64_t> capacity_tokens = std::nullopt);

}  // namespace kvinfer
