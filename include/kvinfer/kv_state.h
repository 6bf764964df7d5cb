#pragma once
// Saving and restoring a sequence's KV cache (llama.cpp's llama_state_seq_*): the filled
// positions' K/V rows, the token ids they were computed from, and the identity of the model that
// computed them. A restored cache continues bit for bit as the original would have.
#include <cstdint>
#include <filesystem>
#include <optional>

#include "kvinfer/kv_cache.h"
#include "kvinfer/model.h"
#include "kvinfer/export.h"

KVINFER_PUBLIC_BEGIN
namespace kvinfer {

// Writes kv's filled positions (kv.size() of them; on a sliding-window layer those its ring still
// holds, so a restored cache has the same earliest_rewind()), their token ids and model's
// identity to `file` (replaced atomically: written beside it, then renamed; a CUDA cache is
// copied to the host). Only a regular file or a new path is replaced: a device, FIFO, socket,
// directory or dangling link is refused before anything is written (docs/reliability.md, "Files
// kvinfer writes"). Throws kvinfer::Error (BadFile) when the file cannot be written,
// InvalidArgument when kv was not made for this model's shape or its rings lost the window
// before its next position (a forward pass that failed after writing past it).
void save_kv_state(const KvCache& kv, const Model& model, const std::filesystem::path& file);

// A fresh cache for `model` on its device holding what `file` saved: the same positions, K/V
// bits (in the saved cache's dtype) and token ids, whichever device saved it. capacity_tokens: at
// least the saved positions; default: the saved cache's capacity; checked like any new cache
// (context length, memory). The file is validated like every other input, before anything is
// allocated for it: a bad magic, version or header checksum, a field out of range, a size that
// disagrees with the header (truncated, trailing bytes), a token id outside the vocabulary or a
// payload checksum that does not match is BadFile naming the file and field; a file saved by
// another model (its fingerprint: config, tensor shapes, a sample of the weights; see
// docs/kv-cache.md for what it does not cover) is InvalidArgument naming what differs.
KvCache load_kv_state(const Model& model, const std::filesystem::path& file,
                      std::optional<int64_t> capacity_tokens = std::nullopt);

}  // namespace kvinfer
KVINFER_PUBLIC_END
