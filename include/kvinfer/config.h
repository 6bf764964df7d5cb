#pragma once
// ModelConfig: the architecture hyper-parameters of a checkpoint, read from HF config.json or
// from GGUF metadata. inspect_model (kvinfer/model_info.h) reads it from any model path, GGUF
// file, HF directory or config.json, without loading the weights; Model::config() after a load.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvinfer/export.h"

KVINFER_PUBLIC_BEGIN
namespace kvinfer {

// Llama, Mistral and Qwen2: RMSNorm, rotary positions, SwiGLU MLP. GPT2: learned absolute
// positions, LayerNorm (weight and bias), a GELU (tanh) MLP, biases everywhere, tied LM head.
// Qwen3: Llama's blocks with a per-head RMSNorm on q and k. Gemma2, Gemma3: (1 + w) RMSNorms
// before and after each block, GeGLU (tanh GELU), embeddings times sqrt(hidden), sliding-window
// and global layers; Gemma 2 soft-caps attention scores and logits, Gemma 3 norms q and k per
// head and gives sliding layers their own rope base.
// Mixtral (Mistral's attention) and Qwen2Moe (Qwen2's): a mixture of SwiGLU experts for the MLP.
// Qwen3Moe: Qwen3's attention (per-head q/k norms) with Qwen2-MoE's experts, no shared expert.
// Phi3 (Phi-3, Phi-4-mini): the Llama block with fused qkv and gate_up projections, partial rotary.
enum class Architecture { Llama, Mistral, Qwen2, GPT2, Qwen3, Gemma2, Gemma3, Mixtral, Qwen2Moe, Phi3, Qwen3Moe };
std::string_view architecture_name(Architecture a);

// How rotary frequencies are adjusted for long contexts (HF `rope_scaling`). docs/rope-scaling.md
// says how each type is computed and, for dynamic and longrope, which context length picks the
// frequencies (the model's, fixed at load: never the length of one call).
struct RopeScaling {
  enum class Type { None, Linear, Llama3, Yarn, Dynamic, LongRope };
  Type type = Type::None;
  double factor = 1.0;
  // llama3 only
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;  // llama3, yarn, longrope
  // yarn: the ramp between interpolated and original frequencies (HF's beta_fast, beta_slow,
  // truncate of the correction range to whole dimensions)
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  bool truncate = true;
  // yarn, longrope: cos and sin are multiplied by it (HF's attention_scaling), resolved from the
  // config (attention_factor, or what HF derives from factor, mscale, mscale_all_dim); 1: none
  double attention_factor = 1.0;
  // longrope: per-frequency divisors (rotary_dim / 2 each), short up to the original length
  std::vector<float> short_factor = {}, long_factor = {};
};

// Which dimensions of a head rope rotates together. HF checkpoints pair (i, i + head_dim/2)
// (half-split, GPT-NeoX style). llama.cpp's converter permutes the Q and K rows of "llama" GGUF
// files so that ggml's interleaved rope, pairing (2i, 2i + 1) (GPT-J style), gives the same result;
// such a model must be rotated interleaved. Frequency i is the same in both layouts.
enum class RopeLayout { HalfSplit, Interleaved };

struct ModelConfig {
  Architecture arch = Architecture::Llama;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;  // == num_heads: MHA; 1: MQA; in between: GQA
  int64_t head_dim = 0;      // explicit in config.json or hidden_size / num_heads
  double norm_eps = 1e-6;  // rms_norm_eps (Llama family), layer_norm_epsilon (GPT-2)
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  RopeLayout rope_layout = RopeLayout::HalfSplit;
  int64_t rotary_dim = 0;  // the first dimensions of each head rope rotates (partial rotary); 0: all
  int64_t max_position_embeddings = 2048;  // GPT-2: n_positions, the rows of the position table
  std::optional<int64_t> sliding_window;  // Mistral: attend to the last N positions only
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v (and o for Llama) projections carry biases
  bool attention_out_bias = false;
  bool mlp_bias = false;
  std::optional<int32_t> bos_token_id;
  std::vector<int32_t> eos_token_ids;
  // Mixture of experts (Mixtral, Qwen2-MoE, Qwen3-MoE); num_experts 0: every MLP is dense.
  int64_t num_experts = 0;                      // num_local_experts (Mixtral), num_experts (Qwen2/3-MoE)
  int64_t num_experts_per_tok = 0;              // k: the experts each token runs
  int64_t moe_intermediate_size = 0;            // each expert's (Mixtral: intermediate_size)
  int64_t shared_expert_intermediate_size = 0;  // Qwen2-MoE's shared expert; 0: none
  bool norm_topk_prob = true;                   // the k chosen gate weights renormalised to sum 1
  std::vector<int64_t> dense_layers;            // layers with a dense MLP (Qwen2-MoE's mlp_only_layers, sparse step)

  // Qwen3, Gemma 2/3 (zero where unused).
  bool qk_norm = false;                 // q and k RMSNorm-ed per head (head_dim weights) before rope
  double query_pre_attn_scalar = 0;     // scores scaled by its inverse root; 0: by 1/sqrt(head_dim)
  double attn_logit_softcapping = 0;    // scores become c · tanh(s / c) before the mask; 0: none
  double final_logit_softcapping = 0;   // logits likewise; 0: none
  double rope_local_theta = 0;          // Gemma 3: sliding layers' rope base (unscaled); 0: rope_theta
  // Which layers use sliding_window (HF layer_types, "sliding_attention"); empty: every layer
  // when sliding_window is set (Mistral).
  std::vector<bool> sliding_layers;

  // Query heads sharing one KV head (num_heads / num_kv_heads).
  int64_t group_size() const { return num_heads / num_kv_heads; }
  // The block structure: LayerNorm + GELU MLP (GPT-2) or RMSNorm + SwiGLU (the Llama family).
  bool is_gpt2() const { return arch == Architecture::GPT2; }
  bool is_gemma() const { return arch == Architecture::Gemma2 || arch == Architecture::Gemma3; }
  // The attention window of layer l (<= 0: none): sliding_window on a sliding layer.
  int64_t layer_window(int64_t l) const {
    if (!sliding_window) return 0;
    if (sliding_layers.empty()) return *sliding_window;
    return sliding_layers[static_cast<size_t>(l)] ? *sliding_window : 0;
  }
  // Whether layer `layer`'s MLP is a mixture of experts.
  bool is_moe_layer(int64_t layer) const {
    if (num_experts == 0) return false;
    for (int64_t d : dense_layers)
      if (d == layer) return false;
    return true;
  }
  // Dimensions of each head that rope rotates (even, <= head_dim).
  int64_t rope_dim() const { return rotary_dim > 0 ? rotary_dim : head_dim; }
};

// Parses HF config.json text. `source` names the file in error messages.
ModelConfig parse_config(std::string_view json_text, const std::string& source = "config.json");
// Reads and parses a config.json file.
ModelConfig load_config(const std::filesystem::path& config_json);

}  // namespace kvinfer
KVINFER_PUBLIC_END
