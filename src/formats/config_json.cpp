// HF config.json → ModelConfig. Accepts both the transformers 4 spelling (rope_theta +
// rope_scaling) and the transformers 5 one (rope_parameters).
#include <algorithm>
#include <cmath>
#include <sstream>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/std.h>
#include <nlohmann/json.hpp>

#include "core/file_error.h"
#include "core/input_file.h"
#include "core/moe.h"
#include "kvinfer/config.h"
#include "kvinfer/error.h"
#include "formats/config_limits.h"
#include "formats/rope_parameters.h"

namespace kvinfer {

using nlohmann::json;

std::string_view architecture_name(Architecture a) {
  switch (a) {
    case Architecture::Llama: return "LlamaForCausalLM";
    case Architecture::Mistral: return "MistralForCausalLM";
    case Architecture::Qwen2: return "Qwen2ForCausalLM";
    case Architecture::GPT2: return "GPT2LMHeadModel";
    case Architecture::Qwen3: return "Qwen3ForCausalLM";
    case Architecture::Gemma2: return "Gemma2ForCausalLM";
    case Architecture::Gemma3: return "Gemma3ForCausalLM";
    case Architecture::Mixtral: return "MixtralForCausalLM";
    case Architecture::Qwen2Moe: return "Qwen2MoeForCausalLM";
    case Architecture::Phi3: return "Phi3ForCausalLM";
    case Architecture::Qwen3Moe: return "Qwen3MoeForCausalLM";
  }
  return "?";
}

namespace {

// The largest size config.json may state. A dimension beyond int32 is a corrupt file, not a model
// (token ids are int32, and GGUF metadata has the same cap, gguf_config.cpp); capping every size
// here keeps the products the loader forms (heads × head_dim, 4 × n_embd, layers × ...) far from
// overflowing int64 before any tensor is looked at.
constexpr int64_t kMaxDim = INT32_MAX;

class Reader {
 public:
  // `prefix` names a nested object in errors: "rope_scaling." gives 'rope_scaling.factor'.
  Reader(const json& j, const std::string& source, std::string prefix = "")
      : j_(j), source_(source), prefix_(std::move(prefix)) {}

  Error error(const std::string& key, const std::string& why) const {
    return Error(file_error_kind(why), fmt::format("{}: '{}{}' {}", source_, prefix_, key, why));
  }
  bool has(const std::string& key) const { return j_.contains(key) && !j_[key].is_null(); }
  bool json_has_null(const std::string& key) const { return j_.contains(key) && j_[key].is_null(); }

  int64_t positive_int(const std::string& key) const {
    if (!has(key)) throw error(key, "is missing");
    return positive_int_value(key, j_[key]);
  }
  int64_t positive_int(const std::string& key, int64_t fallback) const {
    return has(key) ? positive_int_value(key, j_[key]) : fallback;
  }
  double number(const std::string& key, double fallback) const {
    if (!has(key)) return fallback;
    if (!j_[key].is_number()) throw error(key, fmt::format("is not a number: {}", j_[key].dump()));
    return j_[key].get<double>();
  }
  // A number still positive and finite as f32, the type kvinfer computes with: JSON holds no NaN
  // or infinity, but 1e39 is infinite in f32 and 1e-46 is zero (gguf_config.cpp's f32 keys alike).
  double positive(const std::string& key, double fallback) const {
    const double v = number(key, fallback);
    const auto f = static_cast<float>(v);
    if (!(f > 0) || !std::isfinite(f)) throw error(key, fmt::format("must be positive and finite (f32), got {}", v));
    return v;
  }
  bool boolean(const std::string& key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!j_[key].is_boolean()) throw error(key, fmt::format("is not a boolean: {}", j_[key].dump()));
    return j_[key].get<bool>();
  }
  std::string string(const std::string& key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    if (!j_[key].is_string()) throw error(key, fmt::format("is not a string: {}", j_[key].dump()));
    return j_[key].get<std::string>();
  }
  int32_t token_id(const std::string& key, const json& v) const {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX)
      throw error(key, fmt::format("holds {}, not a token id", v.dump()));
    return v.get<int32_t>();
  }
  const json& operator[](const std::string& key) const { return j_[key]; }
  const std::string& source() const { return source_; }

 private:
  int64_t positive_int_value(const std::string& key, const json& v) const {
    if (!v.is_number_integer() || v.get<int64_t>() <= 0)
      throw error(key, fmt::format("must be a positive integer, got {}", v.dump()));
    if (v.get<int64_t>() > kMaxDim)
      throw error(key, fmt::format("is {}, beyond the limit of {} for a size", v.dump(), kMaxDim));
    return v.get<int64_t>();
  }
  const json& j_;
  const std::string& source_;
  std::string prefix_;
};

Architecture parse_architecture(const Reader& r) {
  if (!r.has("architectures") || !r["architectures"].is_array() || r["architectures"].empty())
    throw r.error("architectures", "is missing (expected e.g. [\"LlamaForCausalLM\"])");
  const json& a = r["architectures"][0];
  std::string name = a.is_string() ? a.get<std::string>() : a.dump();
  for (Architecture arch : {Architecture::Llama, Architecture::Mistral, Architecture::Qwen2, Architecture::GPT2,
                            Architecture::Qwen3, Architecture::Gemma2, Architecture::Gemma3, Architecture::Mixtral,
                            Architecture::Qwen2Moe, Architecture::Phi3, Architecture::Qwen3Moe})
    if (name == architecture_name(arch)) return arch;
  throw r.error("architectures",
                fmt::format("names unsupported architecture '{}' (supported: LlamaForCausalLM, "
                            "MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, Gemma2ForCausalLM, "
                            "Gemma3ForCausalLM, GPT2LMHeadModel, MixtralForCausalLM, Qwen2MoeForCausalLM, "
                            "Qwen3MoeForCausalLM, Phi3ForCausalLM)",
                            name));
}

// One of longrope's factor lists: rope_dim / 2 numbers, positive and finite in f32 (HF keeps them
// as an f32 tensor).
std::vector<float> longrope_factors(const Reader& r, const std::string& key, int64_t n) {
  if (!r.has(key)) throw r.error(key, "is missing (rope_type longrope)");
  const json& a = r[key];
  if (!a.is_array() || static_cast<int64_t>(a.size()) != n)
    throw r.error(key, fmt::format("must be a list of {} numbers (rotary dimensions / 2), got {}", n,
                                   a.is_array() ? fmt::format("{} entries", a.size()) : a.dump()));
  std::vector<float> f;
  for (const json& v : a) {
    const float x = v.is_number() ? v.get<float>() : 0.0f;
    if (!(x > 0) || !std::isfinite(x)) throw r.error(key, fmt::format("holds {}; factors must be positive and finite", v.dump()));
    f.push_back(x);
  }
  return f;
}

// `rope` is either the rope_scaling object (transformers 4) or rope_parameters (5). `c` holds the
// sizes parsed so far (max_position_embeddings, rope_dim()); `top_original_max` the top-level
// original_max_position_embeddings, which HF puts over the rope parameters' (llama3, yarn, longrope).
RopeScaling parse_rope_scaling(const json& rope, const std::string& source, const std::string& key, const ModelConfig& c,
                               std::optional<int64_t> top_original_max) {
  Reader r(rope, source, key + ".");
  RopeScaling s;
  std::string type = r.string("rope_type", r.string("type", "default"));
  // Phi3Config reads the old names "su" and "yarn" as longrope (its only scaling).
  if (c.arch == Architecture::Phi3 && (type == "su" || type == "yarn")) type = "longrope";
  if (type == "su") type = "longrope";
  if (c.arch == Architecture::Phi3 && type != "default" && type != "longrope")
    throw Error(ErrorKind::Unsupported, fmt::format("{}: '{}' has rope_type '{}'; Phi3ForCausalLM takes default or longrope",
                                                    source, key, type));
  if (type == "default") return s;
  const bool has_factor = r.has("factor");
  s.factor = r.positive("factor", 1.0);
  if (!(s.factor >= 1.0)) throw r.error("factor", fmt::format("must be >= 1, got {}", s.factor));
  // HF's standardize_rope_params: the top-level key wins, else the rope parameters', else
  // max_position_embeddings.
  const auto original_max = [&](int64_t fallback) {
    return top_original_max ? *top_original_max : r.positive_int("original_max_position_embeddings", fallback);
  };
  if (type == "yarn") {
    s.type = RopeScaling::Type::Yarn;
    s.original_max_position_embeddings = original_max(c.max_position_embeddings);
    if (!has_factor)  // HF: the ratio of the context lengths
      s.factor = static_cast<double>(c.max_position_embeddings) / static_cast<double>(s.original_max_position_embeddings);
    // HF takes `beta_fast or 32`: 0 means the default too.
    s.beta_fast = r.number("beta_fast", 0.0) != 0.0 ? r.number("beta_fast", 0.0) : 32.0;
    s.beta_slow = r.number("beta_slow", 0.0) != 0.0 ? r.number("beta_slow", 0.0) : 1.0;
    s.truncate = r.boolean("truncate", true);
    s.attention_factor = r.has("attention_factor")
                             ? r.positive("attention_factor", 1.0)
                             : yarn_attention_factor(s.factor, r.number("mscale", 0.0), r.number("mscale_all_dim", 0.0));
  } else if (type == "dynamic") {
    s.type = RopeScaling::Type::Dynamic;
    if (!has_factor) throw r.error("factor", "is missing (rope_type dynamic)");
  } else if (type == "longrope") {
    s.type = RopeScaling::Type::LongRope;
    s.original_max_position_embeddings = original_max(c.max_position_embeddings);
    if (!has_factor)
      s.factor = static_cast<double>(c.max_position_embeddings) / static_cast<double>(s.original_max_position_embeddings);
    s.short_factor = longrope_factors(r, "short_factor", c.rope_dim() / 2);
    s.long_factor = longrope_factors(r, "long_factor", c.rope_dim() / 2);
    s.attention_factor = r.has("attention_factor")
                             ? r.positive("attention_factor", 1.0)
                             : longrope_attention_factor(s.factor, s.original_max_position_embeddings);
  } else if (type == "linear") {
    s.type = RopeScaling::Type::Linear;
  } else if (type == "llama3") {
    s.type = RopeScaling::Type::Llama3;
    s.low_freq_factor = r.positive("low_freq_factor", 1.0);
    s.high_freq_factor = r.positive("high_freq_factor", 4.0);
    s.original_max_position_embeddings = top_original_max.value_or(r.positive_int("original_max_position_embeddings", 8192));
    if (!(s.high_freq_factor > s.low_freq_factor))
      throw Error(ErrorKind::BadFile, fmt::format("{}: '{}' needs 0 < low_freq_factor < high_freq_factor, got {} and {}", source, key,
                              s.low_freq_factor, s.high_freq_factor));
  } else {
    throw Error(ErrorKind::Unsupported, fmt::format("{}: '{}' has unsupported rope_type '{}' (supported: default, linear, llama3, "
                                                    "yarn, dynamic, longrope)",
                                                    source, key, type));
  }
  return s;
}

// HF rotates only this fraction of each head (top level, or in rope_parameters in transformers 5);
// kvinfer rotates all of it, as gguf_config.cpp refuses a rope.dimension_count below the head size.
void check_full_rotary(const Reader& r) {
  const double f = r.number("partial_rotary_factor", 1.0);
  if (f != 1.0)
    throw r.error("partial_rotary_factor", fmt::format("is {}; partial rotary embeddings are not supported", f));
}

// HF layer_types: one "sliding_attention" or "full_attention" per layer.
std::vector<bool> parse_layer_types(const Reader& r, int64_t layers) {
  const json& t = r["layer_types"];
  if (!t.is_array() || static_cast<int64_t>(t.size()) != layers)
    throw r.error("layer_types", fmt::format("must be a list of {} layer types (num_hidden_layers), got {}", layers,
                                             t.dump()));
  std::vector<bool> sliding;
  for (const json& v : t) {
    if (v != "sliding_attention" && v != "full_attention")
      throw r.error("layer_types", fmt::format("holds {}; supported: \"sliding_attention\", \"full_attention\"",
                                               v.dump()));
    sliding.push_back(v == "sliding_attention");
  }
  return sliding;
}

// Qwen2Config / Qwen3Config: with use_sliding_window, layer_types (or else the layers from
// max_window_layers on) attend to the last sliding_window positions; without it, none does.
// Their MoE variants refuse the window (not supported).
void parse_qwen_window(const Reader& r, ModelConfig& c) {
  if (!r.boolean("use_sliding_window", false)) return;
  if (c.arch == Architecture::Qwen2Moe || c.arch == Architecture::Qwen3Moe)
    throw r.error("use_sliding_window", fmt::format("is true; {}-MoE sliding-window attention is not supported",
                                                    c.arch == Architecture::Qwen2Moe ? "Qwen2" : "Qwen3"));
  c.sliding_window = r.positive_int("sliding_window", 4096);
  if (r.has("layer_types")) {
    c.sliding_layers = parse_layer_types(r, c.num_layers);
  } else {
    const int64_t first = r.positive_int("max_window_layers", 28);
    for (int64_t l = 0; l < c.num_layers; ++l) c.sliding_layers.push_back(l >= first);
  }
}

// A soft-cap: `fallback` when the key is absent, none (0) when it is null.
double softcap(const Reader& r, const std::string& key, double fallback) {
  if (r.has(key)) return r.positive(key, fallback);
  return r.json_has_null(key) ? 0.0 : fallback;
}

// Gemma2Config / Gemma3TextConfig beyond the Llama family's keys.
void parse_gemma(const Reader& r, ModelConfig& c) {
  const bool g2 = c.arch == Architecture::Gemma2;
  c.qk_norm = !g2;
  c.attention_bias = c.attention_out_bias = r.boolean("attention_bias", false);
  c.query_pre_attn_scalar = r.positive("query_pre_attn_scalar", 256);
  c.attn_logit_softcapping = softcap(r, "attn_logit_softcapping", g2 ? 50.0 : 0.0);
  c.final_logit_softcapping = softcap(r, "final_logit_softcapping", g2 ? 30.0 : 0.0);
  if (r.boolean("use_bidirectional_attention", false))
    throw r.error("use_bidirectional_attention", "is true; only causal attention is supported");
  if (!r.has("sliding_window")) {
    if (!r.json_has_null("sliding_window")) c.sliding_window = 4096;  // the configs' default
  } else {
    c.sliding_window = r.positive_int("sliding_window");
  }
  if (r.has("layer_types")) {
    c.sliding_layers = parse_layer_types(r, c.num_layers);
  } else {  // Gemma 2: every other layer from the first; Gemma 3: sliding_window_pattern - 1 of each
    const int64_t pattern = g2 ? 2 : r.positive_int("sliding_window_pattern", 6);
    for (int64_t l = 0; l < c.num_layers; ++l) c.sliding_layers.push_back((l + 1) % pattern != 0);
  }
}

// Gemma3TextConfig's two rope tables: rope_parameters.full_attention (theta, scaling) for global
// layers and rope_parameters.sliding_attention (theta, unscaled) for sliding ones; or, as
// transformers 4 wrote them, rope_theta + rope_scaling and rope_local_base_freq.
void parse_gemma3_rope(const Reader& r, ModelConfig& c, std::optional<int64_t> top_original_max) {
  if (r.has("rope_parameters") && r["rope_parameters"].is_object() && r["rope_parameters"].contains("full_attention")) {
    const Reader p(r["rope_parameters"], r.source(), "rope_parameters.");
    for (const char* k : {"full_attention", "sliding_attention"})
      if (!p.has(k) || !p[k].is_object()) throw p.error(k, "is missing or not an object");
    const Reader full(p["full_attention"], r.source(), "rope_parameters.full_attention.");
    const Reader local(p["sliding_attention"], r.source(), "rope_parameters.sliding_attention.");
    c.rope_theta = full.positive("rope_theta", 1000000.0);
    c.rope_scaling =
        parse_rope_scaling(p["full_attention"], r.source(), "rope_parameters.full_attention", c, top_original_max);
    c.rope_local_theta = local.positive("rope_theta", 10000.0);
    if (parse_rope_scaling(p["sliding_attention"], r.source(), "rope_parameters.sliding_attention", c,
                           top_original_max).type !=
        RopeScaling::Type::None)
      throw local.error("rope_type", "is not 'default'; scaled rope on sliding layers is not supported");
    return;
  }
  if (r.has("rope_parameters"))
    throw r.error("rope_parameters", "has no 'full_attention' and 'sliding_attention' entries (Gemma 3)");
  c.rope_theta = r.positive("rope_theta", 1000000.0);
  c.rope_local_theta = r.positive("rope_local_base_freq", 10000.0);
  if (r.has("rope_scaling")) {
    if (!r["rope_scaling"].is_object()) throw r.error("rope_scaling", "is not an object");
    c.rope_scaling = parse_rope_scaling(r["rope_scaling"], r.source(), "rope_scaling", c, top_original_max);
  }
}

// The key holding the expert count. Qwen3MoeConfig maps num_experts onto num_local_experts
// (attribute_map): published configs say num_experts, transformers 5's save_pretrained writes
// num_local_experts. Missing both, the error names num_experts.
std::string experts_count_key(const Reader& r, Architecture arch) {
  if (arch == Architecture::Mixtral) return "num_local_experts";
  if (arch == Architecture::Qwen3Moe && !r.has("num_experts") && r.has("num_local_experts")) return "num_local_experts";
  return "num_experts";
}

// MixtralConfig's, Qwen2MoeConfig's and Qwen3MoeConfig's experts: top-k softmax routing over
// num_experts SwiGLU experts (transformers' MixtralTopKRouter, Qwen2MoeTopKRouter, Qwen3MoeTopKRouter).
void parse_moe(const Reader& r, ModelConfig& c) {
  const bool mixtral = c.arch == Architecture::Mixtral;
  const std::string count_key = experts_count_key(r, c.arch);
  c.num_experts = r.positive_int(count_key);
  c.num_experts_per_tok = r.positive_int("num_experts_per_tok");
  if (c.num_experts_per_tok > c.num_experts)
    throw r.error("num_experts_per_tok", fmt::format("({}) exceeds {} ({})", c.num_experts_per_tok, count_key,
                                                     c.num_experts));
  if (c.num_experts > core::kMaxExperts)
    throw r.error(count_key, fmt::format("is {}; kvinfer supports at most {} experts", c.num_experts, core::kMaxExperts));
  if (mixtral) {  // Mixtral always renormalises the k weights; its experts are intermediate_size wide
    c.moe_intermediate_size = c.intermediate_size;
    c.norm_topk_prob = true;
    return;
  }
  c.moe_intermediate_size = r.positive_int("moe_intermediate_size");
  c.norm_topk_prob = r.boolean("norm_topk_prob", false);
  // Qwen3MoeConfig has no shared expert (a shared_expert_intermediate_size there is ignored, as HF does).
  if (c.arch == Architecture::Qwen2Moe && r.has("shared_expert_intermediate_size")) {
    if (!r["shared_expert_intermediate_size"].is_number_integer() || r["shared_expert_intermediate_size"].get<int64_t>() < 0)
      throw r.error("shared_expert_intermediate_size", fmt::format("must be a non-negative integer, got {}",
                                                                  r["shared_expert_intermediate_size"].dump()));
    c.shared_expert_intermediate_size = r["shared_expert_intermediate_size"].get<int64_t>();
    if (c.shared_expert_intermediate_size > kMaxDim)
      throw r.error("shared_expert_intermediate_size", fmt::format("is beyond the limit of {} for a size", kMaxDim));
  }
  // As Qwen2MoeDecoderLayer and Qwen3MoeDecoderLayer: a layer is dense when listed in mlp_only_layers or when
  // (layer + 1) is not a multiple of decoder_sparse_step.
  const int64_t step = r.positive_int("decoder_sparse_step", 1);
  std::vector<int64_t> only;
  if (r.has("mlp_only_layers")) {
    if (!r["mlp_only_layers"].is_array()) throw r.error("mlp_only_layers", "is not an array");
    for (const json& v : r["mlp_only_layers"]) {
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= c.num_layers)
        throw r.error("mlp_only_layers", fmt::format("holds {}, not a layer index below num_hidden_layers ({})",
                                                     v.dump(), c.num_layers));
      only.push_back(v.get<int64_t>());
    }
  }
  for (int64_t l = 0; l < c.num_layers; ++l)
    if (std::find(only.begin(), only.end(), l) != only.end() || (l + 1) % step != 0) c.dense_layers.push_back(l);
}

// Phi3: only the first int(head_dim · partial_rotary_factor) dimensions of each head rotate.
void parse_partial_rotary(const Reader& r, ModelConfig& c) {
  const double f = r.number("partial_rotary_factor", 1.0);
  const auto dim = static_cast<int64_t>(static_cast<double>(c.head_dim) * f);  // HF: int(head_dim * factor)
  if (!(f > 0.0 && f <= 1.0) || dim < 2 || dim % 2 != 0)
    throw r.error("partial_rotary_factor", fmt::format("is {}: the rotated dimensions (head_dim {} × it = {}) must be "
                                                       "even and at least 2",
                                                       f, c.head_dim, dim));
  c.rotary_dim = dim == c.head_dim ? 0 : dim;
}

// The Llama family's config.json: LlamaConfig, MistralConfig, Qwen2Config, Qwen3Config, Gemma2Config,
// Gemma3TextConfig, Phi3Config, MixtralConfig, Qwen2MoeConfig, Qwen3MoeConfig.
void parse_llama_family(const Reader& r, ModelConfig& c) {
  c.vocab_size = r.positive_int("vocab_size");
  c.hidden_size = r.positive_int("hidden_size");
  c.intermediate_size = r.positive_int("intermediate_size");
  c.num_layers = r.positive_int("num_hidden_layers");
  if (c.num_layers > kMaxLayers)
    throw r.error("num_hidden_layers", fmt::format("is {}; kvinfer supports at most {} layers", c.num_layers, kMaxLayers));
  c.num_heads = r.positive_int("num_attention_heads");
  c.num_kv_heads = r.positive_int("num_key_value_heads", c.num_heads);
  if (c.num_heads % c.num_kv_heads != 0)
    throw r.error("num_key_value_heads", fmt::format("({}) must divide num_attention_heads ({})", c.num_kv_heads,
                                                     c.num_heads));
  if (r.has("head_dim")) {
    c.head_dim = r.positive_int("head_dim");
  } else if (c.arch == Architecture::Qwen3 || c.is_gemma()) {
    c.head_dim = c.arch == Architecture::Qwen3 ? 128 : 256;  // Qwen3Config's and GemmaConfig's defaults
  } else {
    if (c.hidden_size % c.num_heads != 0)
      throw r.error("hidden_size", fmt::format("({}) is not a multiple of num_attention_heads ({}) and no head_dim "
                                               "is given", c.hidden_size, c.num_heads));
    c.head_dim = c.hidden_size / c.num_heads;
  }
  if (c.head_dim % 2 != 0) throw r.error("head_dim", fmt::format("must be even for rotary embeddings, got {}", c.head_dim));

  if (c.is_gemma()) {
    // GeGLU: gelu_pytorch_tanh (HF's hidden_activation; hidden_act in older configs).
    const std::string key = r.has("hidden_activation") ? "hidden_activation" : "hidden_act";
    const std::string act = r.string(key, "gelu_pytorch_tanh");
    if (act != "gelu_pytorch_tanh")
      throw r.error(key, fmt::format("is '{}'; only gelu_pytorch_tanh is supported for Gemma", act));
  } else {
    std::string act = r.string("hidden_act", "silu");
    if (act != "silu") throw r.error("hidden_act", fmt::format("is '{}'; only silu is supported", act));
  }
  c.norm_eps = r.positive("rms_norm_eps", 1e-6);
  c.max_position_embeddings = r.positive_int("max_position_embeddings", 2048);
  c.tie_word_embeddings = r.boolean("tie_word_embeddings", c.is_gemma());

  c.rope_theta = r.positive("rope_theta", 10000.0);
  // Phi3Config always has original_max_position_embeddings (4096 by default); other configs
  // when config.json states it.
  std::optional<int64_t> top_original_max;
  if (c.arch == Architecture::Phi3 || r.has("original_max_position_embeddings"))
    top_original_max = r.positive_int("original_max_position_embeddings", 4096);
  if (c.arch == Architecture::Phi3) {
    parse_partial_rotary(r, c);
  } else {
    check_full_rotary(r);
  }
  if (c.arch == Architecture::Gemma3) {
    parse_gemma3_rope(r, c, top_original_max);
  } else if (r.has("rope_parameters")) {
    if (!r["rope_parameters"].is_object()) throw r.error("rope_parameters", "is not an object");
    const Reader p(r["rope_parameters"], r.source(), "rope_parameters.");
    c.rope_theta = p.positive("rope_theta", c.rope_theta);
    if (c.arch == Architecture::Phi3) {
      if (p.has("partial_rotary_factor")) parse_partial_rotary(p, c);
    } else {
      check_full_rotary(p);
    }
    c.rope_scaling = parse_rope_scaling(r["rope_parameters"], r.source(), "rope_parameters", c, top_original_max);
  } else if (r.has("rope_scaling")) {
    if (!r["rope_scaling"].is_object()) throw r.error("rope_scaling", "is not an object");
    c.rope_scaling = parse_rope_scaling(r["rope_scaling"], r.source(), "rope_scaling", c, top_original_max);
  }

  switch (c.arch) {
    case Architecture::Llama:
      c.attention_bias = r.boolean("attention_bias", false);
      c.attention_out_bias = c.attention_bias;
      c.mlp_bias = r.boolean("mlp_bias", false);
      break;
    case Architecture::Mistral:
    case Architecture::Mixtral:
      if (r.has("sliding_window")) c.sliding_window = r.positive_int("sliding_window");
      break;
    case Architecture::Qwen2:
    case Architecture::Qwen2Moe:
      // Qwen2 always has q/k/v biases, never an o_proj bias; Qwen2-MoE's config says (qkv_bias).
      c.attention_bias = c.arch == Architecture::Qwen2 || r.boolean("qkv_bias", true);
      parse_qwen_window(r, c);
      break;
    case Architecture::Qwen3:
    case Architecture::Qwen3Moe:
      c.qk_norm = true;
      c.attention_bias = c.attention_out_bias = r.boolean("attention_bias", false);
      parse_qwen_window(r, c);
      break;
    case Architecture::Gemma2:
    case Architecture::Gemma3: parse_gemma(r, c); break;
    case Architecture::Phi3:  // fused qkv_proj and gate_up_proj, no biases
      if (r.has("sliding_window")) c.sliding_window = r.positive_int("sliding_window");
      break;
    case Architecture::GPT2: break;  // parse_gpt2
  }
  if (c.arch == Architecture::Mixtral || c.arch == Architecture::Qwen2Moe || c.arch == Architecture::Qwen3Moe)
    parse_moe(r, c);
}

// GPT2LMHeadModel's config.json (GPT2Config): n_embd, n_layer, n_head, n_positions, n_inner.
void parse_gpt2(const Reader& r, ModelConfig& c) {
  c.vocab_size = r.positive_int("vocab_size");
  c.hidden_size = r.positive_int("n_embd");
  c.num_layers = r.positive_int("n_layer");
  if (c.num_layers > kMaxLayers)
    throw r.error("n_layer", fmt::format("is {}; kvinfer supports at most {} layers", c.num_layers, kMaxLayers));
  c.num_heads = r.positive_int("n_head");
  c.num_kv_heads = c.num_heads;
  c.intermediate_size = r.positive_int("n_inner", 4 * c.hidden_size);
  if (c.hidden_size % c.num_heads != 0)
    throw r.error("n_embd", fmt::format("({}) is not a multiple of n_head ({})", c.hidden_size, c.num_heads));
  c.head_dim = c.hidden_size / c.num_heads;
  c.max_position_embeddings = r.positive_int("n_positions", 1024);
  c.norm_eps = r.positive("layer_norm_epsilon", 1e-5);
  // gelu_new and gelu_pytorch_tanh are the same function: GELU with the tanh approximation.
  const std::string act = r.string("activation_function", "gelu_new");
  if (act != "gelu_new" && act != "gelu_pytorch_tanh")
    throw r.error("activation_function",
                  fmt::format("is '{}'; supported: gelu_new, gelu_pytorch_tanh (GELU, tanh approximation)", act));
  if (!r.boolean("scale_attn_weights", true))
    throw r.error("scale_attn_weights", "is false; only attention scaled by 1/sqrt(head_dim) is supported");
  if (r.boolean("scale_attn_by_inverse_layer_idx", false))
    throw r.error("scale_attn_by_inverse_layer_idx", "is true; this attention scaling is not supported");
  // reorder_and_upcast_attn only makes HF compute attention in f32, which kvinfer always does.
  c.tie_word_embeddings = r.boolean("tie_word_embeddings", true);  // false: lm_head.weight is stored
  c.attention_bias = c.attention_out_bias = c.mlp_bias = true;
}

}  // namespace

ModelConfig parse_config(std::string_view json_text, const std::string& source) {
  json j;
  try {
    j = json::parse(json_text);
  } catch (const json::exception& e) {
    throw Error(ErrorKind::BadFile, fmt::format("{}: invalid JSON: {}", source, e.what()));
  }
  if (!j.is_object()) throw Error(ErrorKind::BadFile, fmt::format("{}: not a JSON object", source));
  Reader r(j, source);

  ModelConfig c;
  c.arch = parse_architecture(r);
  if (c.is_gpt2()) {
    parse_gpt2(r, c);
  } else {
    parse_llama_family(r, c);
  }
  if (r.has("bos_token_id")) c.bos_token_id = r.token_id("bos_token_id", r["bos_token_id"]);
  if (r.has("eos_token_id")) {
    const json& eos = r["eos_token_id"];
    if (eos.is_array()) {
      for (const json& id : eos) c.eos_token_ids.push_back(r.token_id("eos_token_id", id));
    } else {
      c.eos_token_ids.push_back(r.token_id("eos_token_id", eos));
    }
  }
  return c;
}

ModelConfig load_config(const std::filesystem::path& config_json) {
  return parse_config(read_input_file(config_json, kJsonSettingsLimit), config_json.string());
}

}  // namespace kvinfer
