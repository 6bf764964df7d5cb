#include "kvinfer/model.h"

#include "models/weights.h"

namespace kvinfer {

namespace {
uint64_t count_bytes(const ModelWeights& w, bool tied) {
  auto vec = [](const Vector& v) { return v.bytes(); };
  auto lin = [&](const Linear& l) { return l.weight.bytes() + vec(l.bias); };
  uint64_t b = w.embed.bytes() + vec(w.final_norm) + (tied ? 0 : w.lm_head.weight.bytes());
  for (const LayerWeights& L : w.layers)
    b += vec(L.attn_norm) + vec(L.ffn_norm) + lin(L.q) + lin(L.k) + lin(L.v) + lin(L.o) + lin(L.gate) + lin(L.up) +
         lin(L.down);
  return b;
}
}  // namespace

Model::Model(ModelConfig config, std::unique_ptr<ModelWeights> weights, Device device)
    : config_(std::move(config)),
      weights_(std::move(weights)),
      device_(device),
      weight_dtype_(weights_->layers.empty() ? weights_->embed.dtype : weights_->layers[0].q.weight.dtype),
      weight_bytes_(count_bytes(*weights_, config_.tie_word_embeddings)) {}

Model::~Model() = default;

}  // namespace kvinfer
