// Model::load for HF directories: maps the checkpoint, checks every tensor against the config
// and binds the weights in their stored dtype.
#include <algorithm>
#include <array>
#include <set>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fmt/std.h>

#include "formats/hf_checkpoint.h"
#include "kvinfer/error.h"
#include "kvinfer/tokenizer.h"
#include "cuda/device_memory.h"
#include "models/load_common.h"
#include "tokenizer/load.h"

namespace kvinfer {

namespace {

const TensorNames kHfNames = {
    .embed = "model.embed_tokens.weight",
    .final_norm = "model.norm.weight",
    .lm_head = "lm_head.weight",
    .layer = "model.layers.{}.",
    .attn_norm = "input_layernorm.weight",
    .q = "self_attn.q_proj",
    .k = "self_attn.k_proj",
    .v = "self_attn.v_proj",
    .o = "self_attn.o_proj",
    .ffn_norm = "post_attention_layernorm.weight",
    .gate = "mlp.gate_proj",
    .up = "mlp.up_proj",
    .down = "mlp.down_proj",
    .q_norm = "self_attn.q_norm.weight",
    .k_norm = "self_attn.k_norm.weight",
    .post_attn_norm = "",
    .post_ffn_norm = "",
    .norm_plus_one = false,
    .moe = {},
    .qkv = {},
    .gate_up = {},
};

// Gemma 2/3: a norm before and after each block; post_attention_layernorm is the attention
// block's post-norm here, pre_feedforward_layernorm the feed-forward block's input norm.
TensorNames gemma_names() {
  TensorNames n = kHfNames;
  n.ffn_norm = "pre_feedforward_layernorm.weight";
  n.post_attn_norm = "post_attention_layernorm.weight";
  n.post_ffn_norm = "post_feedforward_layernorm.weight";
  n.norm_plus_one = true;
  return n;
}

// Mixtral and Qwen2-MoE: the per-expert tensors that published checkpoints and transformers 5's
// save_pretrained write, or the fused (experts, 2·inter, hidden) gate_up_proj and stacked
// down_proj that transformers 5 holds in memory (save_pretrained(save_original_format=False)).
TensorNames moe_names(const HfCheckpoint& ckpt) {
  const ModelConfig& c = ckpt.config();
  TensorNames names = kHfNames;
  MoeNames& m = names.moe;
  int64_t first = 0;  // the first mixture-of-experts layer: where the layout is looked up
  while (first < c.num_layers && !c.is_moe_layer(first)) ++first;
  const std::string fused_gate_up = fmt::format("model.layers.{}.mlp.experts.gate_up_proj", first);
  const bool fused = ckpt.find(fused_gate_up) != nullptr;
  const bool mixtral = c.arch == Architecture::Mixtral;
  m.layout = fused ? MoeNames::Layout::FusedGateUp : MoeNames::Layout::PerExpert;
  m.router = fused || !mixtral ? "mlp.gate.weight" : "block_sparse_moe.gate.weight";
  if (fused) {
    m.gate = "mlp.experts.gate_up_proj";
    m.down = "mlp.experts.down_proj";
  } else if (mixtral) {  // w1: gate, w3: up, w2: down
    m.gate = "block_sparse_moe.experts.{}.w1.weight";
    m.up = "block_sparse_moe.experts.{}.w3.weight";
    m.down = "block_sparse_moe.experts.{}.w2.weight";
  } else {
    m.gate = "mlp.experts.{}.gate_proj.weight";
    m.up = "mlp.experts.{}.up_proj.weight";
    m.down = "mlp.experts.{}.down_proj.weight";
  }
  m.shared_gate = "mlp.shared_expert.gate_proj.weight";
  m.shared_up = "mlp.shared_expert.up_proj.weight";
  m.shared_down = "mlp.shared_expert.down_proj.weight";
  m.shared_expert_gate = "mlp.shared_expert_gate.weight";
  return names;
}

// Phi3ForCausalLM: q/k/v fused in qkv_proj, gate/up in gate_up_proj.
TensorNames phi3_names() {
  TensorNames n = kHfNames;
  n.qkv = "self_attn.qkv_proj";
  n.gate_up = "mlp.gate_up_proj";
  return n;
}

// GPT2LMHeadModel: the original checkpoints name the tensors without the "transformer." prefix
// that save_pretrained writes today; both are read. Projections are Conv1D weights, (in, out).
Gpt2TensorNames gpt2_names(const HfCheckpoint& ckpt) {
  const std::string p = ckpt.find("transformer.wte.weight") ? "transformer." : "";
  return {.embed = p + "wte.weight",
          .pos_embed = p + "wpe.weight",
          .final_norm = p + "ln_f",
          .lm_head = "lm_head.weight",
          .layer = p + "h.{}.",
          .attn_norm = "ln_1",
          .qkv = "attn.c_attn",
          .attn_out = "attn.c_proj",
          .ffn_norm = "ln_2",
          .ffn_up = "mlp.c_fc",
          .ffn_down = "mlp.c_proj",
          .conv1d = true};
}

class HfSource : public TensorSource {
 public:
  explicit HfSource(const HfCheckpoint& ckpt) : ckpt_(ckpt) {}

  Matrix matrix(const std::string& name, int64_t rows, int64_t cols) const override {
    const TensorView& t = shaped(name, {rows, cols});
    return Matrix{t.float_dtype(), t.data, rows, cols};
  }
  Matrix vector(const std::string& name, int64_t n) const override {
    const TensorView& t = shaped(name, {n});
    return Matrix{t.float_dtype(), t.data, 1, n};
  }
  Matrix stacked(const std::string& name, int64_t count, int64_t rows, int64_t cols) const override {
    const TensorView& t = shaped(name, {count, rows, cols});
    return Matrix{t.float_dtype(), t.data, count * rows, cols};
  }
  bool has(const std::string& name) const override { return ckpt_.find(name) != nullptr; }
  bool used(const std::string& name) const { return used_.contains(name); }

 private:
  const TensorView& shaped(const std::string& name, const std::vector<int64_t>& shape) const {
    const TensorView& t = ckpt_.get(name);
    if (t.shape != shape)
      throw Error(ErrorKind::BadFile, fmt::format("{}: tensor '{}' has shape [{}] but config.json implies [{}]", *t.file, name,
                              fmt::join(t.shape, ", "), fmt::join(shape, ", ")));
    used_.insert(name);
    return t;
  }
  const HfCheckpoint& ckpt_;
  mutable std::set<std::string, std::less<>> used_;
};

// Buffers a layer may carry that HF itself skips on load (_keys_to_ignore_on_load_unexpected):
// Llama's rope frequencies from older transformers, GPT-2's causal-mask buffers.
constexpr std::array<std::string_view, 3> kUnusedLayerBuffers = {"self_attn.rotary_emb.inv_freq", "attn.bias",
                                                                 "attn.masked_bias"};

// Every tensor under a layer prefix must have been bound, as load_gguf.cpp asks of every tensor:
// one for a layer beyond the layer count means config.json and the checkpoint disagree, any other
// (a bias the config does not turn on) would be dropped without a word.
void check_layer_tensors(const HfCheckpoint& ckpt, const HfSource& source, const std::string& layer) {
  const ModelConfig& c = ckpt.config();
  for (const std::string& name : ckpt.names()) {
    const auto t = layer_tensor(name, layer);
    if (!t || source.used(name) || std::ranges::find(kUnusedLayerBuffers, t->part) != kUnusedLayerBuffers.end())
      continue;
    const std::filesystem::path& file = *ckpt.find(name)->file;
    if (t->layer >= c.num_layers)
      throw Error(ErrorKind::BadFile, fmt::format("{}: tensor '{}' is for layer {}, but config.json has {} {}", file, name, t->layer,
                              c.is_gpt2() ? "n_layer" : "num_hidden_layers", c.num_layers));
    throw Error(ErrorKind::Unsupported, fmt::format("{}: tensor '{}' is not part of a {} model as config.json describes it and kvinfer "
                            "reads it",
                            file, name, architecture_name(c.arch)));
  }
}

}  // namespace

std::shared_ptr<const Model> load_hf(const std::filesystem::path& path, const LoadOptions& options) {
  const Device device = resolve_device(path, options.device, options.device_index);
  const cuda_backend::DeviceScope on(device == Device::CUDA ? options.device_index : -1);  // budget, upload
  const MemoryBudget budget = load_budget(device, options);  // before anything is allocated
  auto ckpt = std::make_shared<const HfCheckpoint>(path);
  const ModelConfig& c = ckpt->config();
  auto storage = std::make_shared<HostStorage>();
  storage->checkpoint = ckpt;
  storage->mapped = ckpt->files();
  const HfSource source(*ckpt);
  std::unique_ptr<ModelWeights> w;
  if (c.is_gpt2()) {
    const Gpt2TensorNames names = gpt2_names(*ckpt);
    w = bind_gpt2_weights(c, names, source, *storage, path / "config.json");
    check_layer_tensors(*ckpt, source, names.layer);
  } else {
    const TensorNames names = c.num_experts > 0           ? moe_names(*ckpt)
                              : c.arch == Architecture::Phi3 ? phi3_names()
                              : c.is_gemma()                 ? gemma_names()
                                                             : kHfNames;
    w = bind_weights(c, names, source, *storage, path / "config.json");
    check_layer_tensors(*ckpt, source, names.layer);
    w->rope_inv_freq = storage->add(rope_inv_freq(c, options.context_length));
    if (c.rope_local_theta > 0) w->rope_local_inv_freq = storage->add(rope_local_inv_freq(c, options.context_length));
  }
  w->storage = storage;
  std::shared_ptr<const Tokenizer> tokenizer;
  if (hf_has_tokenizer(path))
    tokenizer = std::make_shared<const Tokenizer>(Tokenizer::from_hf(path));
  return finish_load(c, std::move(w), device, std::move(tokenizer), path, options, budget, *storage);
}

}  // namespace kvinfer
