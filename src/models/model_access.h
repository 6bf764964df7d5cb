#pragma once
// What internal code reads of a Model that its users do not: its identity for saved KV caches.
#include <cstdint>

#include "kvinfer/model.h"

namespace kvinfer {

struct ModelWeights;
struct HostStorage;

struct ModelAccess {
  // The model's fingerprint (model_fingerprint below), as computed at load; for a Model built
  // without a load (tests), computed now from its config and tensor shapes only.
  static uint64_t fingerprint(const Model& model);
  static void set_fingerprint(Model& model, uint64_t fingerprint) { model.fingerprint_ = fingerprint; }
};

// A 64-bit identity (hash64) of a checkpoint as loaded: every ModelConfig field that shapes the
// forward pass (architecture, sizes, norm epsilon, rope theta, scaling and layout, context,
// sliding window, tying, biases); every tensor's role (its place in ModelWeights), dtype and
// shape; each norm/bias/rope vector whole; and of each weight matrix its first and last 4 KiB as
// stored. Computed from host memory before the weights are packed or uploaded, so the same
// checkpoint gives the same value on every device and CPU. Not covered: bytes in the middle of a
// matrix (a change there alone is not detected), the tokenizer, LoadOptions (int8_activations,
// the device: a cache from one continues in another, with the bits its own model computed).
// storage: reads the matrices' bytes (HostStorage::read); null: config, shapes and dtypes only.
uint64_t model_fingerprint(const ModelConfig& config, const ModelWeights& weights, const HostStorage* storage);

}  // namespace kvinfer
