#include "kvinfer/model.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <vector>

#include <fmt/format.h>
#include <fmt/std.h>

#include "core/input_file.h"
#include "core/memory.h"
#include "kvinfer/grammar.h"
#include "cpu/threads.h"
#include "kvinfer/error.h"
#include "kvinfer/tokenizer.h"
#include "models/load_common.h"
#include "models/model_internal.h"
#include "models/weights.h"

namespace kvinfer {

namespace {
// The bytes of every layer, the final norm and the LM head, once. A mixture-of-experts layer
// counts every expert, or with `experts_used` > 0 the largest `experts_used` of them: what one
// token reads.
uint64_t block_bytes(const ModelWeights& w, int64_t experts_used = 0) {
  auto vec = [](const Vector& v) { return v.bytes(); };
  auto lin = [&](const Linear& l) { return l.weight.bytes() + vec(l.bias); };
  uint64_t b = vec(w.final_norm) + vec(w.final_norm_bias) + w.lm_head.weight.bytes();
  for (const LayerWeights& L : w.layers) {
    b += vec(L.attn_norm) + vec(L.attn_norm_bias) + vec(L.ffn_norm) + vec(L.ffn_norm_bias) + lin(L.q) + lin(L.k) +
         lin(L.v) + lin(L.o) + lin(L.gate) + lin(L.up) + lin(L.down) + vec(L.q_norm) + vec(L.k_norm) +
         vec(L.post_attn_norm) + vec(L.post_ffn_norm);
    b += lin(L.moe.router) + lin(L.shared_expert_gate);
    std::vector<uint64_t> experts;  // (experts) each one's bytes
    for (int64_t e = 0; e < L.moe.experts(); ++e) {
      const auto i = static_cast<size_t>(e);
      experts.push_back(lin(L.moe.gate[i]) + lin(L.moe.up[i]) + lin(L.moe.down[i]));
    }
    std::sort(experts.begin(), experts.end(), std::greater<>());
    const auto used = experts_used > 0 ? std::min(experts.size(), static_cast<size_t>(experts_used)) : experts.size();
    for (size_t e = 0; e < used; ++e) b += experts[e];
  }
  return b;
}

uint64_t step_bytes(const ModelWeights& w, int64_t experts_used) {
  return block_bytes(w, experts_used) + w.embed.row_bytes() + (w.pos_embed.data ? w.pos_embed.row_bytes() : 0);
}

}  // namespace

uint64_t model_weight_bytes(const ModelWeights& w, bool tied) {
  return block_bytes(w) + (tied ? 0 : w.embed.bytes()) + w.pos_embed.bytes();
}

std::shared_ptr<const Model> Model::load(const std::filesystem::path& path, const LoadOptions& options) {
  if (options.threads < 0)
    throw Error(ErrorKind::InvalidArgument,
                fmt::format("{}: LoadOptions::threads is {}; it must be 0 (the default) or positive", path, options.threads));
  // The load's own parallel work (copies, transposes, packing) runs on the model's threads.
  const cpu::ThreadScope threads(options.threads > 0 ? options.threads : default_cpu_threads());
  if (model_path_kind(path) == ModelPathKind::Directory) return load_hf(path, options);
  if (model_file_kind(path) == ModelFileKind::Gguf) return load_gguf(path, options);
  throw Error(ErrorKind::BadFile, fmt::format("{}: a config.json holds no weights: give the model's directory or a GGUF file", path));
}

Model::Model(std::unique_ptr<Internal> internal) : internal_(std::move(internal)) {}

std::shared_ptr<const Model> ModelAccess::make(ModelParts p) {
  if (!p.weights) throw Error(ErrorKind::InvalidArgument, "a model needs weights");
  if (p.threads < 0)
    throw Error(ErrorKind::InvalidArgument,
                fmt::format("LoadOptions::threads is {}; it must be 0 (the default) or positive", p.threads));
  const ModelWeights& w = *p.weights;
  auto internal = std::make_unique<Model::Internal>();
  internal->weights = std::move(p.weights);
  internal->memory = std::move(p.memory);
  internal->fingerprint = p.fingerprint;
  auto m = std::shared_ptr<Model>(new Model(std::move(internal)));
  m->config_ = std::move(p.config);
  m->device_ = p.device;
  m->device_index_ = p.device == Device::CUDA ? p.device_index : 0;
  m->tokenizer_ = std::move(p.tokenizer);
  m->source_ = std::move(p.source);
  m->weight_dtype_ = w.layers.empty() ? w.embed.dtype : w.layers[0].q.weight.dtype;
  m->weight_bytes_ = model_weight_bytes(w, m->config_.tie_word_embeddings);
  m->step_weight_bytes_ = step_bytes(w, m->config_.num_experts_per_tok);
  m->activations_ = p.activations;
  m->check_finite_ = p.check_finite;
  m->context_length_ = p.context_length > 0 ? p.context_length : m->config_.max_position_embeddings;
  m->threads_ = p.threads > 0 ? p.threads : default_cpu_threads();
  return m;
}

Model::~Model() = default;

uint64_t ModelAccess::fingerprint(const Model& model) {
  const uint64_t f = model.internal_->fingerprint;
  return f != 0 ? f : model_fingerprint(model.config(), *model.internal_->weights, nullptr);
}

const Tokenizer& Model::tokenizer() const {
  if (!tokenizer_)
    throw Error(ErrorKind::Unsupported, fmt::format("{}: the model has no tokenizer (no tokenizer.json or tokenizer.ggml.* metadata)", source_));
  return *tokenizer_;
}

std::shared_ptr<const GrammarVocabulary> Model::grammar_vocabulary() const {
  const Tokenizer& t = tokenizer();  // throws without one
  std::call_once(internal_->grammar_once, [&] {
    internal_->grammar_vocabulary = std::make_shared<const GrammarVocabulary>(t, static_cast<int32_t>(config_.vocab_size));
  });
  return internal_->grammar_vocabulary;
}

std::vector<int32_t> Model::eos_ids() const {
  std::vector<int32_t> ids = config_.eos_token_ids;
  if (tokenizer_)
    for (int32_t id : tokenizer_->eos_ids())
      if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  return ids;
}

}  // namespace kvinfer
