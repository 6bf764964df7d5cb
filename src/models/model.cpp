#include "kvinfer/model.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>
#include <fmt/std.h>

#include "core/input_file.h"
#include "core/memory.h"
#include "kvinfer/error.h"
#include "kvinfer/tokenizer.h"
#include "models/load_common.h"
#include "models/model_access.h"
#include "models/weights.h"

namespace kvinfer {

namespace {
// The bytes of every layer, the final norm and the LM head, once.
uint64_t block_bytes(const ModelWeights& w) {
  auto vec = [](const Vector& v) { return v.bytes(); };
  auto lin = [&](const Linear& l) { return l.weight.bytes() + vec(l.bias); };
  uint64_t b = vec(w.final_norm) + vec(w.final_norm_bias) + w.lm_head.weight.bytes();
  for (const LayerWeights& L : w.layers)
    b += vec(L.attn_norm) + vec(L.attn_norm_bias) + vec(L.ffn_norm) + vec(L.ffn_norm_bias) + lin(L.q) + lin(L.k) +
         lin(L.v) + lin(L.o) + lin(L.gate) + lin(L.up) + lin(L.down);
  return b;
}

uint64_t step_bytes(const ModelWeights& w) {
  return block_bytes(w) + w.embed.row_bytes() + (w.pos_embed.data ? w.pos_embed.row_bytes() : 0);
}

// A GGUF file is known by its first four bytes, whatever its name.
bool is_gguf_file(const std::filesystem::path& path) { return starts_with_magic(path, "GGUF", kMappedModelLimit); }
}  // namespace

uint64_t model_weight_bytes(const ModelWeights& w, bool tied) {
  return block_bytes(w) + (tied ? 0 : w.embed.bytes()) + w.pos_embed.bytes();
}

std::shared_ptr<const Model> Model::load(const std::filesystem::path& path, const LoadOptions& options) {
  if (model_path_kind(path) == ModelPathKind::Directory) return load_hf(path, options);
  if (is_gguf_file(path)) return load_gguf(path, options);
  throw Error(fmt::format("{}: not a GGUF file (it does not start with \"GGUF\") and not a model directory", path));
}

Model::Model(ModelConfig config, std::unique_ptr<ModelWeights> weights, Device device,
             std::shared_ptr<const Tokenizer> tokenizer, std::filesystem::path source, bool int8_activations,
             std::shared_ptr<MemoryAccount> memory, bool check_finite, int64_t context_length)
    : config_(std::move(config)),
      weights_(std::move(weights)),
      device_(device),
      tokenizer_(std::move(tokenizer)),
      source_(std::move(source)),
      weight_dtype_(weights_->layers.empty() ? weights_->embed.dtype : weights_->layers[0].q.weight.dtype),
      weight_bytes_(model_weight_bytes(*weights_, config_.tie_word_embeddings)),
      step_weight_bytes_(step_bytes(*weights_)),
      int8_activations_(int8_activations),
      memory_(std::move(memory)),
      check_finite_(check_finite),
      context_length_(context_length > 0 ? context_length : config_.max_position_embeddings) {}

Model::~Model() = default;

uint64_t ModelAccess::fingerprint(const Model& model) {
  return model.fingerprint_ != 0 ? model.fingerprint_ : model_fingerprint(model.config(), model.weights(), nullptr);
}

const Tokenizer& Model::tokenizer() const {
  if (!tokenizer_)
    throw Error(fmt::format("{}: the model has no tokenizer (no tokenizer.json or tokenizer.ggml.* metadata)", source_));
  return *tokenizer_;
}

std::vector<int32_t> Model::eos_ids() const {
  std::vector<int32_t> ids = config_.eos_token_ids;
  if (tokenizer_)
    for (int32_t id : tokenizer_->eos_ids())
      if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  return ids;
}

}  // namespace kvinfer
