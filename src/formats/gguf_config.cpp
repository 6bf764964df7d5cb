// GGUF metadata → ModelConfig, as llama.cpp's llama_model::load_hparams reads "llama" and "qwen2".
#include "core/escape.h"
#include "core/file_error.h"
#include "core/moe.h"
#include "formats/config_limits.h"
#include "formats/gguf_config.h"

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <variant>

#include <fmt/format.h>
#include <fmt/std.h>

#include "formats/rope_parameters.h"
#include "kvinfer/error.h"

namespace kvinfer {

namespace {

// A dimension beyond int32 is a corrupt file, not a model (token ids are int32 too); capping
// every dimension there keeps the products the loader forms far from overflowing int64.
constexpr int64_t kMaxDim = std::numeric_limits<int32_t>::max();
constexpr const char* kLongRopeFactors = "rope_factors_long.weight";

// The keys of one architecture, `{arch}.name`; errors name the file and the key.
class Hparams {
 public:
  Hparams(const GgufFile& f, const std::string& arch) : f_(f), prefix_(arch) { prefix_.push_back('.'); }

  const GgufFile& file() const { return f_; }
  std::string key(std::string_view name) const { return std::string(prefix_).append(name); }
  bool has(std::string_view name) const { return f_.has(key(name)); }
  Error error(std::string_view name, const std::string& why) const {
    return Error(file_error_kind(why), fmt::format("{}: key '{}' {}", f_.path(), key(name), why));
  }

  // A positive integer no larger than kMaxDim; `fallback` when the key is absent.
  int64_t dim(std::string_view name, std::optional<int64_t> fallback = std::nullopt) const {
    if (!has(name)) {
      if (fallback) return *fallback;
      throw error(name, "is missing");
    }
    const int64_t v = f_.integer(key(name));  // throws naming the key when it is not an integer
    if (v <= 0 || v > kMaxDim) throw error(name, fmt::format("must be in [1, {}], got {}", kMaxDim, v));
    return v;
  }
  // A positive finite number; `fallback` when the key is absent.
  double positive(std::string_view name, std::optional<double> fallback = std::nullopt) const {
    if (!has(name)) {
      if (fallback) return *fallback;
      throw error(name, "is missing");
    }
    const double v = f_.number(key(name));
    if (!(v > 0) || !std::isfinite(v)) throw error(name, fmt::format("must be positive and finite, got {}", v));
    return v;
  }
  std::string string(std::string_view name) const { return f_.string(key(name)); }

 private:
  const GgufFile& f_;
  std::string prefix_;
};

Architecture parse_architecture(const GgufFile& f, const std::string& arch) {
  if (arch == "llama") return Architecture::Llama;  // Mixtral when it has experts (parse_experts)
  if (arch == "qwen2") return Architecture::Qwen2;
  if (arch == "gpt2") return Architecture::GPT2;
  if (arch == "qwen3") return Architecture::Qwen3;
  if (arch == "gemma2") return Architecture::Gemma2;
  if (arch == "gemma3") return Architecture::Gemma3;
  if (arch == "qwen2moe") return Architecture::Qwen2Moe;
  if (arch == "qwen3moe") return Architecture::Qwen3Moe;
  if (arch == "phi3") return Architecture::Phi3;
  throw Error(ErrorKind::Unsupported, fmt::format("{}: key 'general.architecture' names unsupported architecture '{}' (supported: llama, "
                          "qwen2, qwen2moe, qwen3, qwen3moe, gemma2, gemma3, gpt2, phi3)",
                          f.path(), escape_name(arch)));
}

// Experts, as llama.cpp reads them: "llama" with expert_count > 0 is Mixtral (the k weights
// renormalised); "qwen2moe" has experts of expert_feed_forward_length and a shared expert of
// expert_shared_feed_forward_length, its weights not renormalised; "qwen3moe" has experts of
// expert_feed_forward_length, no shared expert, its weights renormalised (llama.cpp's qwen3moe
// graph always does). expert_weights_norm, when present, says. A layer without
// blk.N.ffn_gate_inp.weight has a dense MLP (Qwen2/3-MoE's mlp_only_layers, written as
// ffn_gate/up/down).
void parse_experts(const Hparams& h, ModelConfig& c) {
  const bool qwen3 = c.arch == Architecture::Qwen3Moe;
  const bool moe = c.arch == Architecture::Qwen2Moe || qwen3;
  if (!moe && !(h.has("expert_count") && h.file().integer(h.key("expert_count")) > 0)) return;
  if (!moe) c.arch = Architecture::Mixtral;
  c.num_experts = h.dim("expert_count");
  if (c.num_experts > core::kMaxExperts)
    throw h.error("expert_count", fmt::format("is {}; kvinfer supports at most {} experts", c.num_experts, core::kMaxExperts));
  c.num_experts_per_tok = h.dim("expert_used_count");
  if (c.num_experts_per_tok > c.num_experts)
    throw h.error("expert_used_count", fmt::format("({}) exceeds expert_count ({})", c.num_experts_per_tok, c.num_experts));
  if (h.has("expert_gating_func") && h.file().integer(h.key("expert_gating_func")) != 1)
    throw h.error("expert_gating_func", fmt::format("is {}; only softmax gating (1) is supported",
                                                    h.file().integer(h.key("expert_gating_func"))));
  if (h.has("expert_weights_scale")) {
    const double scale = h.file().number(h.key("expert_weights_scale"));
    if (scale != 0.0 && scale != 1.0)  // llama.cpp: 0 means no scaling
      throw h.error("expert_weights_scale", fmt::format("is {}; scaled expert weights are not supported", scale));
  }
  c.norm_topk_prob = h.has("expert_weights_norm") ? h.file().boolean(h.key("expert_weights_norm")) : !moe || qwen3;
  c.moe_intermediate_size = moe ? h.dim("expert_feed_forward_length") : c.intermediate_size;
  if (c.arch == Architecture::Qwen2Moe && h.has("expert_shared_feed_forward_length"))
    c.shared_expert_intermediate_size = h.dim("expert_shared_feed_forward_length");
  for (int64_t l = 0; l < c.num_layers; ++l)
    if (!h.file().find_tensor(fmt::format("blk.{}.ffn_gate_inp.weight", l))) c.dense_layers.push_back(l);
}

// YaRN as convert_hf_to_gguf.py writes HF's parameters: factor, original_context_length (default:
// the context length, as llama.cpp), yarn_beta_fast/slow, and HF's attention_factor as
// yarn_attn_factor. kvinfer computes HF's numbers: the attention factor is yarn_attn_factor when
// stored, else HF's 0.1 ln(factor) + 1 (llama.cpp always takes the latter, ignoring
// yarn_attn_factor), times rope.scaling.attn_factor as llama.cpp multiplies it in.
RopeScaling parse_yarn(const Hparams& h, double factor, int64_t context_length) {
  RopeScaling s;
  s.type = RopeScaling::Type::Yarn;
  s.factor = factor;
  s.original_max_position_embeddings = h.dim("rope.scaling.original_context_length", context_length);
  s.beta_fast = h.has("rope.scaling.yarn_beta_fast") ? h.positive("rope.scaling.yarn_beta_fast") : 32.0;
  s.beta_slow = h.has("rope.scaling.yarn_beta_slow") ? h.positive("rope.scaling.yarn_beta_slow") : 1.0;
  if (h.has("rope.scaling.yarn_ext_factor") && h.file().number(h.key("rope.scaling.yarn_ext_factor")) != 1.0)
    throw h.error("rope.scaling.yarn_ext_factor", fmt::format("is {}; only 1 (HF's YaRN) is supported",
                                                              h.file().number(h.key("rope.scaling.yarn_ext_factor"))));
  if (h.has("rope.scaling.yarn_log_multiplier"))
    throw h.error("rope.scaling.yarn_log_multiplier", "is set; YaRN's mscale_all_dim (DeepSeek style) is not supported");
  s.attention_factor = h.has("rope.scaling.yarn_attn_factor") ? h.positive("rope.scaling.yarn_attn_factor")
                                                              : yarn_attention_factor(factor, 0.0, 0.0);
  if (h.has("rope.scaling.attn_factor")) s.attention_factor *= h.positive("rope.scaling.attn_factor");
  return s;
}

// LongRoPE as llama.cpp's "phi3" stores it: the short and long factors as the tensors
// rope_factors_short/long.weight (read by load_gguf.cpp), the attention factor in
// rope.scaling.attn_factor (convert_hf_to_gguf.py's sqrt(1 + ln(s) / ln(original)), s = context /
// original), the original length in rope.scaling.original_context_length.
RopeScaling parse_longrope(const Hparams& h, int64_t context_length) {
  RopeScaling s;
  s.type = RopeScaling::Type::LongRope;
  s.original_max_position_embeddings = h.dim("rope.scaling.original_context_length", context_length);
  s.factor = static_cast<double>(context_length) / static_cast<double>(s.original_max_position_embeddings);
  s.attention_factor = h.has("rope.scaling.attn_factor")
                           ? h.positive("rope.scaling.attn_factor")
                           : longrope_attention_factor(s.factor, s.original_max_position_embeddings);
  return s;
}

// As llama.cpp: the factor is `rope.scaling.factor` (or the older `rope.scale_linear`) and the
// type defaults to linear. Llama 3 scaling is not in the metadata but in rope_freqs.weight.
RopeScaling parse_rope_scaling(const Hparams& h, int64_t context_length) {
  if (h.file().find_tensor(kLongRopeFactors)) {
    if (h.has("rope.scaling.type") && h.string("rope.scaling.type") != "longrope")
      throw h.error("rope.scaling.type", fmt::format("is '{}' but the file has tensor '{}' (LongRoPE)",
                                                     h.string("rope.scaling.type"), kLongRopeFactors));
    return parse_longrope(h, context_length);
  }
  std::optional<double> factor;
  if (h.has("rope.scaling.factor"))
    factor = h.positive("rope.scaling.factor");
  else if (h.has("rope.scale_linear"))
    factor = h.positive("rope.scale_linear");
  const std::string type = h.has("rope.scaling.type") ? h.string("rope.scaling.type") : factor ? "linear" : "none";
  RopeScaling s;
  if (type == "none") {
    // llama.cpp would still divide the frequencies by a factor given here: refuse the ambiguity.
    if (factor && *factor != 1.0)
      throw h.error("rope.scaling.type", fmt::format("is 'none' but the scaling factor is {}", *factor));
    return s;
  }
  if (type != "linear" && type != "yarn")
    throw h.error("rope.scaling.type", fmt::format("is '{}'; supported: none, linear, yarn (and longrope with its "
                                                   "factor tensors)",
                                                   type));
  if (!factor) throw h.error("rope.scaling.factor", fmt::format("is missing (rope.scaling.type is {})", type));
  if (!(*factor >= 1.0)) throw h.error("rope.scaling.factor", fmt::format("must be >= 1, got {}", *factor));
  if (type == "yarn") return parse_yarn(h, *factor, context_length);
  s.type = RopeScaling::Type::Linear;
  s.factor = *factor;
  return s;
}

// The vocabulary size: `{arch}.vocab_size`, else the tokenizer's token count, else the rows of
// token_embd.weight (ggml dims [hidden, vocab]).
int64_t parse_vocab_size(const Hparams& h) {
  const GgufFile& f = h.file();
  if (h.has("vocab_size")) return h.dim("vocab_size");
  int64_t n = 0;
  std::string from;
  if (f.has("tokenizer.ggml.tokens")) {
    n = static_cast<int64_t>(f.strings("tokenizer.ggml.tokens").size());
    from = "the token count of tokenizer.ggml.tokens";
  } else if (const GgufTensorInfo* t = f.find_tensor("token_embd.weight"); t && t->dims.size() == 2) {
    n = t->dims[1];
    from = "the rows of tensor 'token_embd.weight'";
  } else {
    throw h.error("vocab_size", "is missing, and there is neither tokenizer.ggml.tokens nor a 2-D token_embd.weight");
  }
  if (n <= 0 || n > kMaxDim)
    throw Error(ErrorKind::BadFile, fmt::format("{}: vocabulary size {} (from {}) is not in [1, {}]", f.path(), n, from, kMaxDim));
  return n;
}

std::optional<int32_t> token_id(const GgufFile& f, const char* key, int64_t vocab) {
  if (!f.has(key)) return std::nullopt;
  const int64_t id = f.integer(key);
  if (id < 0 || id >= vocab)
    throw Error(ErrorKind::BadFile, fmt::format("{}: key '{}' holds {}, outside the vocabulary [0, {})", f.path(), key, id, vocab));
  return static_cast<int32_t>(id);
}

// The Llama family's rotary embeddings and RMSNorm epsilon.
void parse_rope(const Hparams& h, ModelConfig& c) {
  if (c.head_dim % 2 != 0)
    throw h.error("attention.key_length", fmt::format("must be even for rotary embeddings, got {}", c.head_dim));
  if (h.has("attention.value_length") && h.dim("attention.value_length") != c.head_dim)
    throw h.error("attention.value_length", fmt::format("({}) differs from the key length ({}); kvinfer needs "
                                                        "equal key and value head sizes",
                                                        h.dim("attention.value_length"), c.head_dim));
  // phi3 (Phi-4-mini) rotates only the first rope.dimension_count dimensions of each head.
  if (const int64_t d = h.dim("rope.dimension_count", c.head_dim); c.arch == Architecture::Phi3 && d != c.head_dim) {
    if (d > c.head_dim || d % 2 != 0)
      throw h.error("rope.dimension_count", fmt::format("({}) must be even and at most the head size ({})", d, c.head_dim));
    c.rotary_dim = d;
  } else if (d != c.head_dim) {
    throw h.error("rope.dimension_count", fmt::format("({}) differs from the head size ({}): partial rotary "
                                                      "embeddings are not supported",
                                                      h.dim("rope.dimension_count"), c.head_dim));
  }
  c.rope_theta = h.positive("rope.freq_base", 10000.0);
  c.rope_scaling = parse_rope_scaling(h, c.max_position_embeddings);
  c.norm_eps = h.positive("attention.layer_norm_rms_epsilon");

  // "llama": llama.cpp permuted the Q/K rows for ggml's interleaved rope. "qwen2": rows as in HF
  // (NEOX rope), with q/k/v biases and none on the output projection.
  c.rope_layout = c.arch == Architecture::Llama ? RopeLayout::Interleaved : RopeLayout::HalfSplit;
  c.attention_bias = c.arch == Architecture::Qwen2 || c.arch == Architecture::Qwen2Moe;
  // "qwen3", "qwen3moe": per-head q/k norms; biases only where the file has them.
  if (c.arch == Architecture::Qwen3 || c.arch == Architecture::Qwen3Moe) {
    c.qk_norm = true;
    c.attention_bias = h.file().find_tensor("blk.0.attn_q.bias") != nullptr;
    c.attention_out_bias = h.file().find_tensor("blk.0.attn_output.bias") != nullptr;
  }
  // phi3: every layer windowed when attention.sliding_window is nonzero (0: Phi-4, none).
  if (c.arch == Architecture::Phi3 && h.has("attention.sliding_window")) {
    const int64_t window = h.file().integer(h.key("attention.sliding_window"));
    if (window < 0 || window > kMaxDim)
      throw h.error("attention.sliding_window", fmt::format("must be in [0, {}], got {}", kMaxDim, window));
    if (window > 0) c.sliding_window = window;
  }
}

// "gemma2" and "gemma3" as llama.cpp's load_hparams reads them. The converter stores the norms
// with HF's + 1 applied and writes neither query_pre_attn_scalar nor layer_types: llama.cpp
// scales scores by 1/sqrt(head_dim), except on the 27B models (46 and 62 layers), which use
// hidden / heads; the sliding layers follow sliding_window_pattern (default 2 for Gemma 2, 6 for
// Gemma 3: the last layer of each period is global), and Gemma 3's sliding layers rotate with
// rope.freq_base_swa (default 10000).
void parse_gemma(const Hparams& h, ModelConfig& c) {
  const bool g2 = c.arch == Architecture::Gemma2;
  c.qk_norm = !g2;
  const bool is_27b = c.num_layers == (g2 ? 46 : 62);
  c.query_pre_attn_scalar = static_cast<double>(is_27b ? c.hidden_size / c.num_heads : c.head_dim);
  c.attn_logit_softcapping = h.has("attn_logit_softcapping") ? h.positive("attn_logit_softcapping") : g2 ? 50.0 : 0.0;
  c.final_logit_softcapping = h.has("final_logit_softcapping") ? h.positive("final_logit_softcapping") : g2 ? 30.0 : 0.0;
  if (h.has("attention.sliding_window") || g2) c.sliding_window = h.dim("attention.sliding_window", 4096);
  if (!c.sliding_window) return;
  const GgufValue* pattern = h.file().find(h.key("attention.sliding_window_pattern"));
  if (pattern != nullptr && std::holds_alternative<std::vector<bool>>(pattern->value)) {
    c.sliding_layers = std::get<std::vector<bool>>(pattern->value);
    if (static_cast<int64_t>(c.sliding_layers.size()) != c.num_layers)
      throw h.error("attention.sliding_window_pattern",
                    fmt::format("has {} entries for {} layers", c.sliding_layers.size(), c.num_layers));
  } else {
    const int64_t period = h.dim("attention.sliding_window_pattern", g2 ? 2 : 6);
    for (int64_t l = 0; l < c.num_layers; ++l) c.sliding_layers.push_back(l % period < period - 1);
  }
  if (!g2) c.rope_local_theta = h.positive("rope.freq_base_swa", 10000.0);
}

}  // namespace

ModelConfig gguf_config(const GgufFile& f) {
  const std::string arch = f.string("general.architecture");
  ModelConfig c;
  c.arch = parse_architecture(f, arch);
  const Hparams h(f, arch);

  c.num_layers = h.dim("block_count");
  if (c.num_layers > kMaxLayers)
    throw h.error("block_count", fmt::format("is {}; kvinfer supports at most {} layers", c.num_layers, kMaxLayers));
  c.max_position_embeddings = h.dim("context_length");
  c.hidden_size = h.dim("embedding_length");
  c.intermediate_size = h.dim("feed_forward_length");
  c.num_heads = h.dim("attention.head_count");
  c.num_kv_heads = h.dim("attention.head_count_kv", c.num_heads);
  if (c.num_heads % c.num_kv_heads != 0)
    throw h.error("attention.head_count_kv",
                  fmt::format("({}) must divide attention.head_count ({})", c.num_kv_heads, c.num_heads));
  if (!h.has("attention.key_length") && c.hidden_size % c.num_heads != 0)
    throw h.error("embedding_length", fmt::format("({}) is not a multiple of attention.head_count ({}) and no "
                                                  "attention.key_length is given",
                                                  c.hidden_size, c.num_heads));
  c.head_dim = h.dim("attention.key_length", c.hidden_size / c.num_heads);
  if (c.is_gpt2()) {
    // Learned positions, LayerNorm with bias, biases on every projection; no rope keys.
    if (c.num_kv_heads != c.num_heads || c.head_dim * c.num_heads != c.hidden_size)
      throw h.error("attention.head_count_kv", "must equal attention.head_count, with key_length × head_count == "
                                               "embedding_length, for gpt2");
    c.norm_eps = h.positive("attention.layer_norm_epsilon");
    c.attention_bias = c.attention_out_bias = c.mlp_bias = true;
  } else {
    parse_rope(h, c);
    if (c.is_gemma()) parse_gemma(h, c);
  }
  parse_experts(h, c);
  c.vocab_size = parse_vocab_size(h);
  c.tie_word_embeddings = f.find_tensor("output.weight") == nullptr;
  c.bos_token_id = token_id(f, "tokenizer.ggml.bos_token_id", c.vocab_size);
  if (auto eos = token_id(f, "tokenizer.ggml.eos_token_id", c.vocab_size)) c.eos_token_ids = {*eos};
  return c;
}

}  // namespace kvinfer
