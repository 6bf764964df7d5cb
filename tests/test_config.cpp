// parse_config / load_config: HF config.json in its transformers 4 and 5 spellings, defaults,
// and a kvinfer::Error naming the source and the key at fault for everything unsupported.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvinfer/config.h"
#include "kvinfer/error.h"
#include "test_files.h"

namespace kvinfer {
namespace {

using test::error_of;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using json = nlohmann::json;

const std::string kSource = "x/config.json";

// The smallest Llama config.json kvinfer accepts: every optional key absent.
json llama() {
  return {{"architectures", {"LlamaForCausalLM"}},
          {"vocab_size", 32000},
          {"hidden_size", 4096},
          {"intermediate_size", 11008},
          {"num_hidden_layers", 32},
          {"num_attention_heads", 32}};
}

ModelConfig parse(const json& j) { return parse_config(j.dump(), kSource); }

// The error message for `j`; the test fails unless it names the source file.
std::string parse_error(const json& j) {
  std::string msg = error_of([&] { parse(j); });
  EXPECT_THAT(msg, HasSubstr(kSource));
  return msg;
}

TEST(Config, LlamaDefaults) {
  ModelConfig c = parse(llama());
  EXPECT_EQ(c.arch, Architecture::Llama);
  EXPECT_EQ(c.vocab_size, 32000);
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.intermediate_size, 11008);
  EXPECT_EQ(c.num_layers, 32);
  EXPECT_EQ(c.num_heads, 32);
  EXPECT_EQ(c.num_kv_heads, 32);  // absent: MHA
  EXPECT_EQ(c.head_dim, 128);     // absent: hidden / heads
  EXPECT_EQ(c.group_size(), 1);
  EXPECT_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::None);
  EXPECT_EQ(c.norm_eps, 1e-6);
  EXPECT_EQ(c.max_position_embeddings, 2048);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_FALSE(c.attention_out_bias);
  EXPECT_FALSE(c.mlp_bias);
  EXPECT_FALSE(c.sliding_window.has_value());
  EXPECT_FALSE(c.bos_token_id.has_value());
  EXPECT_TRUE(c.eos_token_ids.empty());
}

TEST(Config, ExplicitHeadDimWinsOverHiddenOverHeads) {
  json j = llama();
  j["hidden_size"] = 56;
  j["num_attention_heads"] = 14;
  j["num_key_value_heads"] = 2;
  j["head_dim"] = 16;
  ModelConfig c = parse(j);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.group_size(), 7);

  j["head_dim"] = nullptr;  // null is absent: derived, and 56 / 14 = 4
  EXPECT_EQ(parse(j).head_dim, 4);
}

TEST(Config, GqaAndMqa) {
  json j = llama();
  j["num_key_value_heads"] = 8;
  EXPECT_EQ(parse(j).num_kv_heads, 8);
  EXPECT_EQ(parse(j).group_size(), 4);
  j["num_key_value_heads"] = 1;
  EXPECT_EQ(parse(j).group_size(), 32);
}

TEST(Config, Transformers4RopeThetaAndLinearScaling) {
  json j = llama();
  j["rope_theta"] = 500000.0;
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};  // old spelling: `type`
  ModelConfig c = parse(j);
  EXPECT_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::Linear);
  EXPECT_EQ(c.rope_scaling.factor, 2.0);

  j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 4.0}};
  EXPECT_EQ(parse(j).rope_scaling.factor, 4.0);

  j["rope_scaling"] = nullptr;
  EXPECT_EQ(parse(j).rope_scaling.type, RopeScaling::Type::None);
}

TEST(Config, Transformers4Llama3Scaling) {
  json j = llama();
  j["rope_theta"] = 500000.0;
  j["rope_scaling"] = {{"factor", 8.0},
                       {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 8192},
                       {"rope_type", "llama3"}};
  ModelConfig c = parse(j);
  EXPECT_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::Llama3);
  EXPECT_EQ(c.rope_scaling.factor, 8.0);
  EXPECT_EQ(c.rope_scaling.low_freq_factor, 1.0);
  EXPECT_EQ(c.rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
}

TEST(Config, Transformers5RopeParameters) {
  json j = llama();
  j["rope_parameters"] = {{"rope_theta", 1000000.0}, {"rope_type", "default"}};
  ModelConfig c = parse(j);
  EXPECT_EQ(c.rope_theta, 1000000.0);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::None);

  j["rope_parameters"] = {{"factor", 2.0}, {"rope_theta", 10000.0}, {"rope_type", "linear"}};
  c = parse(j);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::Linear);
  EXPECT_EQ(c.rope_scaling.factor, 2.0);

  j["rope_parameters"] = {{"factor", 8.0},         {"high_freq_factor", 4.0}, {"low_freq_factor", 1.0},
                          {"rope_theta", 500000.0}, {"rope_type", "llama3"},  {"original_max_position_embeddings", 32}};
  c = parse(j);
  EXPECT_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::Llama3);
  EXPECT_EQ(c.rope_scaling.factor, 8.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 32);

  // `type` is accepted here too.
  j["rope_parameters"] = {{"factor", 3.0}, {"type", "linear"}};
  EXPECT_EQ(parse(j).rope_scaling.type, RopeScaling::Type::Linear);
}

TEST(Config, UnsupportedRopeTypeIsNamed) {
  for (const char* type : {"ntk-by-parts", "proportional"}) {
    SCOPED_TRACE(type);
    json j = llama();
    j["rope_scaling"] = {{"type", type}, {"factor", 2.0}};
    EXPECT_THAT(parse_error(j), AllOf(HasSubstr("rope_scaling"), HasSubstr(type)));
    j.erase("rope_scaling");
    j["rope_parameters"] = {{"rope_type", type}, {"factor", 2.0}, {"rope_theta", 10000.0}};
    EXPECT_THAT(parse_error(j), AllOf(HasSubstr("rope_parameters"), HasSubstr(type)));
  }
}

// YaRN in both spellings, with HF 5.24's defaults: beta 32 / 1 (also for 0), truncate, the
// original length from max_position_embeddings, the factor from the ratio of the lengths, the
// attention factor 0.1 ln(factor) + 1, or mscale / mscale_all_dim's ratio, or as stated.
TEST(Config, YarnInBothSpellingsWithHfsDefaults) {
  json j = llama();
  j["max_position_embeddings"] = 32768;
  j["rope_scaling"] = {{"type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 8192}};
  ModelConfig c = parse(j);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::Yarn);
  EXPECT_EQ(c.rope_scaling.factor, 4.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(c.rope_scaling.beta_fast, 32.0);
  EXPECT_EQ(c.rope_scaling.beta_slow, 1.0);
  EXPECT_TRUE(c.rope_scaling.truncate);
  EXPECT_DOUBLE_EQ(c.rope_scaling.attention_factor, 0.1 * std::log(4.0) + 1.0);
  j.erase("rope_scaling");
  j["rope_parameters"] = {{"rope_type", "yarn"}, {"rope_theta", 1e6},   {"beta_fast", 0},
                          {"beta_slow", 2.0},    {"truncate", false},   {"mscale", 0.707},
                          {"mscale_all_dim", 1.0}};  // no factor, no original length
  c = parse(j);
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 32768);
  EXPECT_EQ(c.rope_scaling.factor, 1.0);  // 32768 / 32768
  EXPECT_EQ(c.rope_scaling.beta_fast, 32.0);
  EXPECT_EQ(c.rope_scaling.beta_slow, 2.0);
  EXPECT_FALSE(c.rope_scaling.truncate);
  EXPECT_EQ(c.rope_scaling.attention_factor, 1.0);  // get_mscale(1) = 1
  j["rope_parameters"]["factor"] = 16.0;
  EXPECT_DOUBLE_EQ(parse(j).rope_scaling.attention_factor,
                   (0.1 * 0.707 * std::log(16.0) + 1.0) / (0.1 * 1.0 * std::log(16.0) + 1.0));
  j["rope_parameters"]["attention_factor"] = 1.25;
  EXPECT_EQ(parse(j).rope_scaling.attention_factor, 1.25);
  j["original_max_position_embeddings"] = 4096;  // HF: a top-level key wins
  EXPECT_EQ(parse(j).rope_scaling.original_max_position_embeddings, 4096);
}

TEST(Config, DynamicNtkNeedsItsFactor) {
  json j = llama();
  j["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 2.0}};
  EXPECT_EQ(parse(j).rope_scaling.type, RopeScaling::Type::Dynamic);
  EXPECT_EQ(parse(j).rope_scaling.attention_factor, 1.0);
  j["rope_scaling"] = {{"rope_type", "dynamic"}};
  EXPECT_THAT(parse_error(j), AllOf(HasSubstr("'rope_scaling.factor'"), HasSubstr("missing")));
}

// Phi3ForCausalLM: partial rotary, LongRoPE (also named "su", and "yarn" for Phi-3), the original
// length from the top-level key (4096 when absent), the attention factor
// sqrt(1 + ln(max / original) / ln(original)), the window.
TEST(Config, Phi3LongRopeAndPartialRotary) {
  json j = {{"architectures", {"Phi3ForCausalLM"}},
            {"vocab_size", 200064},
            {"hidden_size", 3072},
            {"intermediate_size", 8192},
            {"num_hidden_layers", 32},
            {"num_attention_heads", 24},
            {"num_key_value_heads", 8},
            {"max_position_embeddings", 131072},
            {"original_max_position_embeddings", 4096},
            {"partial_rotary_factor", 0.75},
            {"rope_scaling",
             {{"type", "longrope"}, {"short_factor", std::vector<double>(48, 1.0)}, {"long_factor", std::vector<double>(48, 2.5)}}}};
  ModelConfig c = parse(j);
  EXPECT_EQ(c.arch, Architecture::Phi3);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.rope_dim(), 96);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::LongRope);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 4096);
  EXPECT_EQ(c.rope_scaling.factor, 32.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.attention_factor, std::sqrt(1.0 + std::log(32.0) / std::log(4096.0)));
  EXPECT_EQ(c.rope_scaling.long_factor, std::vector<float>(48, 2.5f));
  EXPECT_FALSE(c.sliding_window);
  for (const char* old : {"su", "yarn"}) {
    j["rope_scaling"]["type"] = old;
    EXPECT_EQ(parse(j).rope_scaling.type, RopeScaling::Type::LongRope) << old;
  }
  j["sliding_window"] = 2047;
  EXPECT_EQ(parse(j).sliding_window, 2047);
  j["rope_scaling"]["long_factor"] = std::vector<double>(64, 1.0);  // head_dim / 2, not rotary_dim / 2
  EXPECT_THAT(parse_error(j), AllOf(HasSubstr("'rope_scaling.long_factor'"), HasSubstr("48 numbers")));
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  EXPECT_THAT(parse_error(j), AllOf(HasSubstr("'rope_scaling'"), HasSubstr("Phi3ForCausalLM")));
  j.erase("rope_scaling");
  j["partial_rotary_factor"] = 0.305;  // int(39.04) = 39 dims: odd
  EXPECT_THAT(parse_error(j), AllOf(HasSubstr("'partial_rotary_factor'"), HasSubstr("even")));
}

TEST(Config, BadRopeValuesAreNamed) {
  json j = llama();
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 0.5}};
  EXPECT_THAT(parse_error(j), HasSubstr("factor"));
  j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 4.0}, {"high_freq_factor", 1.0}};
  EXPECT_THAT(parse_error(j), HasSubstr("low_freq_factor"));
  j["rope_scaling"] = "linear";
  EXPECT_THAT(parse_error(j), HasSubstr("'rope_scaling'"));
  j.erase("rope_scaling");
  j["rope_theta"] = -1.0;
  EXPECT_THAT(parse_error(j), HasSubstr("'rope_theta'"));
}

// Numbers kvinfer computes with in f32 must be positive and finite there, as gguf_config.cpp asks
// of its f32 keys: JSON holds no NaN or infinity, but 1e39 is infinite in f32 and 1e-50 is zero.
// And only full rotary embeddings are supported.
TEST(Config, NonsensicalNumbersAreNamedWithTheirValue) {
  const json linear = {{"rope_type", "linear"}, {"factor", 2.0}};
  const json llama3 = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0}};
  const json plain = {{"rope_type", "default"}};
  struct Case {
    const char* object;  // "": a top-level key; else the rope object holding it, as `base`
    json base;
    const char* key;
    double value;
    const char* shown;
  };
  const Case cases[] = {
      {"", {}, "rms_norm_eps", -1e-5, "got -1e-05"},
      {"", {}, "rms_norm_eps", 0.0, "got 0"},
      {"", {}, "rms_norm_eps", 1e39, "got 1e+39"},
      {"", {}, "rms_norm_eps", 1e-50, "got 1e-50"},
      {"", {}, "rope_theta", 1e39, "got 1e+39"},
      {"", {}, "rope_theta", -10000.0, "got -10000"},
      {"rope_parameters", plain, "rope_theta", 0.0, "got 0"},
      {"rope_scaling", linear, "factor", 1e39, "got 1e+39"},
      {"rope_scaling", linear, "factor", -2.0, "got -2"},
      {"rope_parameters", linear, "factor", 0.0, "got 0"},
      {"rope_scaling", llama3, "low_freq_factor", -1.0, "got -1"},
      {"rope_parameters", llama3, "high_freq_factor", 1e39, "got 1e+39"},
      {"", {}, "partial_rotary_factor", 0.5, "is 0.5; partial rotary"},
      {"", {}, "partial_rotary_factor", 0.0, "is 0; partial rotary"},
      {"rope_parameters", plain, "partial_rotary_factor", 0.25, "is 0.25; partial rotary"},
  };
  for (const Case& c : cases) {
    const std::string key = *c.object ? std::string(c.object) + "." + c.key : c.key;
    SCOPED_TRACE(key + " = " + json(c.value).dump());
    json j = llama();
    json& holder = *c.object ? (j[c.object] = c.base) : j;
    holder[c.key] = c.value;
    EXPECT_THAT(parse_error(j), AllOf(HasSubstr("'" + key + "'"), HasSubstr(c.shown)));
  }
  json j = llama();
  j["partial_rotary_factor"] = 1.0;  // all of each head: what kvinfer does
  EXPECT_NO_THROW(parse(j));

  json gpt2 = {{"architectures", {"GPT2LMHeadModel"}}, {"vocab_size", 50257}, {"n_embd", 768}, {"n_layer", 12},
               {"n_head", 12}};
  EXPECT_EQ(parse(gpt2).norm_eps, 1e-5);
  for (double eps : {0.0, -1e-5, 1e39}) {
    gpt2["layer_norm_epsilon"] = eps;
    EXPECT_THAT(parse_error(gpt2), AllOf(HasSubstr("'layer_norm_epsilon'"), HasSubstr("positive and finite")));
  }
}

TEST(Config, EosAndBosForms) {
  json j = llama();
  j["eos_token_id"] = 2;
  j["bos_token_id"] = 1;
  ModelConfig c = parse(j);
  EXPECT_THAT(c.eos_token_ids, ElementsAre(2));
  EXPECT_EQ(c.bos_token_id, 1);

  j["eos_token_id"] = {128001, 128008, 128009};
  j["bos_token_id"] = nullptr;
  c = parse(j);
  EXPECT_THAT(c.eos_token_ids, ElementsAre(128001, 128008, 128009));
  EXPECT_FALSE(c.bos_token_id.has_value());

  j["eos_token_id"] = nullptr;
  EXPECT_TRUE(parse(j).eos_token_ids.empty());

  j["eos_token_id"] = {1, -2};
  EXPECT_THAT(parse_error(j), AllOf(HasSubstr("'eos_token_id'"), HasSubstr("-2")));
  j["eos_token_id"] = "2";
  EXPECT_THAT(parse_error(j), HasSubstr("'eos_token_id'"));
  j["eos_token_id"] = 2;
  j["bos_token_id"] = 1.5;
  EXPECT_THAT(parse_error(j), AllOf(HasSubstr("'bos_token_id'"), HasSubstr("1.5")));
}

TEST(Config, TiedEmbeddingsDefaultToFalse) {
  json j = llama();
  EXPECT_FALSE(parse(j).tie_word_embeddings);
  j["tie_word_embeddings"] = true;
  EXPECT_TRUE(parse(j).tie_word_embeddings);
  j["tie_word_embeddings"] = "yes";
  EXPECT_THAT(parse_error(j), HasSubstr("'tie_word_embeddings'"));
}

TEST(Config, LlamaBiases) {
  json j = llama();
  j["attention_bias"] = true;
  j["mlp_bias"] = true;
  ModelConfig c = parse(j);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_TRUE(c.attention_out_bias);  // Llama's o_proj follows attention_bias
  EXPECT_TRUE(c.mlp_bias);
}

TEST(Config, Qwen2HasQkvBiasesAndNoSlidingWindow) {
  json j = llama();
  j["architectures"] = {"Qwen2ForCausalLM"};
  j["use_sliding_window"] = false;
  j["sliding_window"] = 32768;  // as Qwen2.5 publishes it: not in effect
  ModelConfig c = parse(j);
  EXPECT_EQ(c.arch, Architecture::Qwen2);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_FALSE(c.attention_out_bias);
  EXPECT_FALSE(c.mlp_bias);
  EXPECT_FALSE(c.sliding_window.has_value());

  // use_sliding_window: the layers from max_window_layers on (default 28), or those layer_types names.
  j["use_sliding_window"] = true;
  j["num_hidden_layers"] = 4;
  j["sliding_window"] = 64;
  j["max_window_layers"] = 3;
  c = parse(j);
  EXPECT_EQ(c.sliding_window, 64);
  EXPECT_EQ(c.sliding_layers, (std::vector<bool>{false, false, false, true}));
  EXPECT_EQ(c.layer_window(2), 0);
  EXPECT_EQ(c.layer_window(3), 64);
  j["layer_types"] = {"sliding_attention", "full_attention", "sliding_attention", "full_attention"};
  EXPECT_EQ(parse(j).sliding_layers, (std::vector<bool>{true, false, true, false}));
  j["layer_types"] = {"sliding_attention", "full_attention"};
  EXPECT_THAT(parse_error(j), HasSubstr("'layer_types'"));
  j["layer_types"] = {"sliding_attention", "full_attention", "chunked_attention", "full_attention"};
  EXPECT_THAT(parse_error(j), AllOf(HasSubstr("'layer_types'"), HasSubstr("chunked_attention")));
}

TEST(Config, Qwen3HasQkNormsAndDefaults) {
  json j = llama();
  j["architectures"] = {"Qwen3ForCausalLM"};
  ModelConfig c = parse(j);
  EXPECT_EQ(c.arch, Architecture::Qwen3);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.head_dim, 128);  // Qwen3Config's default, not hidden / heads
  EXPECT_FALSE(c.attention_bias);
  j["attention_bias"] = true;
  EXPECT_TRUE(parse(j).attention_out_bias);
}

// Gemma 2 and 3 (Gemma3TextConfig): their defaults, both rope spellings, windows, refusals.
TEST(Config, GemmaKeys) {
  json j = llama();
  j["architectures"] = {"Gemma2ForCausalLM"};
  j["num_hidden_layers"] = 4;
  ModelConfig c = parse(j);
  EXPECT_EQ(c.arch, Architecture::Gemma2);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.query_pre_attn_scalar, 256);
  EXPECT_EQ(c.attn_logit_softcapping, 50);  // Gemma2Config's defaults
  EXPECT_EQ(c.final_logit_softcapping, 30);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.sliding_window, 4096);
  EXPECT_EQ(c.sliding_layers, (std::vector<bool>{true, false, true, false}));
  j["attn_logit_softcapping"] = nullptr;
  j["final_logit_softcapping"] = 12.5;
  c = parse(j);
  EXPECT_EQ(c.attn_logit_softcapping, 0);
  EXPECT_EQ(c.final_logit_softcapping, 12.5);
  j["hidden_activation"] = "gelu";
  EXPECT_THAT(parse_error(j), HasSubstr("'hidden_activation'"));

  j = llama();
  j["architectures"] = {"Gemma3ForCausalLM"};
  j["num_hidden_layers"] = 7;
  j["rope_theta"] = 1000000.0;  // transformers 4's spelling
  j["rope_local_base_freq"] = 10000.0;
  j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 8.0}};
  j["sliding_window_pattern"] = 3;
  c = parse(j);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.attn_logit_softcapping, 0);
  EXPECT_EQ(c.final_logit_softcapping, 0);
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.rope_local_theta, 1e4);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::Linear);
  EXPECT_EQ(c.sliding_layers, (std::vector<bool>{true, true, false, true, true, false, true}));
  j.erase("rope_theta");
  j.erase("rope_local_base_freq");
  j.erase("rope_scaling");
  j["rope_parameters"] = {{"full_attention", {{"rope_type", "default"}, {"rope_theta", 500000.0}}},
                          {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 20000.0}}}};
  c = parse(j);
  EXPECT_EQ(c.rope_theta, 5e5);
  EXPECT_EQ(c.rope_local_theta, 2e4);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::None);
  j["rope_parameters"]["sliding_attention"]["rope_type"] = "linear";
  j["rope_parameters"]["sliding_attention"]["factor"] = 2.0;
  EXPECT_THAT(parse_error(j), HasSubstr("sliding_attention"));
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 10000.0}};
  EXPECT_THAT(parse_error(j), HasSubstr("'rope_parameters'"));
  j.erase("rope_parameters");
  j["use_bidirectional_attention"] = true;
  EXPECT_THAT(parse_error(j), HasSubstr("'use_bidirectional_attention'"));
}

TEST(Config, MistralSlidingWindow) {
  json j = llama();
  j["architectures"] = {"MistralForCausalLM"};
  j["sliding_window"] = 4096;
  ModelConfig c = parse(j);
  EXPECT_EQ(c.arch, Architecture::Mistral);
  EXPECT_EQ(c.sliding_window, 4096);

  j["sliding_window"] = nullptr;
  EXPECT_FALSE(parse(j).sliding_window.has_value());
  j["sliding_window"] = 0;
  EXPECT_THAT(parse_error(j), HasSubstr("'sliding_window'"));
}

TEST(Config, UnsupportedArchitectureIsNamed) {
  json j = llama();
  j["architectures"] = {"FalconForCausalLM"};
  EXPECT_THAT(parse_error(j), AllOf(HasSubstr("'architectures'"), HasSubstr("FalconForCausalLM")));
  j.erase("architectures");
  EXPECT_THAT(parse_error(j), HasSubstr("'architectures'"));
}

TEST(Config, UnsupportedActivationIsNamed) {
  json j = llama();
  j["hidden_act"] = "gelu";
  EXPECT_THAT(parse_error(j), AllOf(HasSubstr("'hidden_act'"), HasSubstr("gelu")));
}

TEST(Config, KvHeadsMustDivideHeads) {
  json j = llama();
  j["num_key_value_heads"] = 5;
  EXPECT_THAT(parse_error(j), AllOf(HasSubstr("'num_key_value_heads'"), HasSubstr("(5)"), HasSubstr("(32)")));
  j["num_key_value_heads"] = 64;  // more KV heads than query heads
  EXPECT_THAT(parse_error(j), HasSubstr("'num_key_value_heads'"));
}

TEST(Config, HiddenNotDivisibleByHeadsNeedsHeadDim) {
  json j = llama();
  j["hidden_size"] = 100;
  j["num_attention_heads"] = 3;
  EXPECT_THAT(parse_error(j), AllOf(HasSubstr("'hidden_size'"), HasSubstr("100"), HasSubstr("head_dim")));
  j["head_dim"] = 32;
  EXPECT_EQ(parse(j).head_dim, 32);
  j["head_dim"] = 33;  // rotary embeddings need pairs
  EXPECT_THAT(parse_error(j), AllOf(HasSubstr("'head_dim'"), HasSubstr("33")));
}

TEST(Config, MissingRequiredKeysAreNamed) {
  for (const char* key :
       {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads"}) {
    SCOPED_TRACE(key);
    json j = llama();
    j.erase(key);
    EXPECT_THAT(parse_error(j), AllOf(HasSubstr(std::string("'") + key + "'"), HasSubstr("missing")));
  }
}

TEST(Config, WrongTypesAndValuesAreNamed) {
  const std::pair<const char*, json> cases[] = {
      {"hidden_size", "4096"},      {"num_hidden_layers", -2},        {"vocab_size", 0},
      {"intermediate_size", 11008.5}, {"num_key_value_heads", "8"},  {"max_position_embeddings", -1},
      {"rms_norm_eps", "1e-5"},     {"head_dim", json::array({64})}, {"hidden_act", 7},
      {"attention_bias", 1},
  };
  for (const auto& [key, value] : cases) {
    SCOPED_TRACE(key);
    json j = llama();
    j[key] = value;
    EXPECT_THAT(parse_error(j), AllOf(HasSubstr(std::string("'") + key + "'"), HasSubstr(value.dump())));
  }
}

TEST(Config, InvalidJsonNamesTheSource) {
  EXPECT_THAT(error_of([] { parse_config("{\"vocab_size\": 12,", kSource); }),
              AllOf(HasSubstr(kSource), HasSubstr("invalid JSON")));
  EXPECT_THAT(error_of([] { parse_config("[1, 2]", kSource); }), HasSubstr(kSource));
  EXPECT_THAT(error_of([] { parse_config("", kSource); }), HasSubstr(kSource));
}

TEST(Config, MissingFileIsNamed) {
  test::TempDir tmp;
  const auto path = tmp / "config.json";
  EXPECT_THAT(error_of([&] { load_config(path); }), HasSubstr(path.string()));
}

// ---- real config.json files from the Hugging Face Hub (tests/data/configs) ----

ModelConfig real(const std::string& name) {
  return load_config(std::filesystem::path(KVINFER_TEST_DATA) / "configs" / (name + ".json"));
}

TEST(RealConfigs, SmolLM2) {
  ModelConfig c = real("smollm2-135m-instruct");
  EXPECT_EQ(c.arch, Architecture::Llama);
  EXPECT_EQ(c.num_layers, 30);
  EXPECT_EQ(c.num_heads, 9);
  EXPECT_EQ(c.num_kv_heads, 3);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.hidden_size, 576);
  EXPECT_EQ(c.vocab_size, 49152);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.rope_theta, 100000.0);  // written as an integer
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::None);
}

TEST(RealConfigs, Llama31) {
  ModelConfig c = real("llama-3.1-8b-instruct");
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::Llama3);
  EXPECT_EQ(c.rope_scaling.factor, 8.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(c.max_position_embeddings, 131072);
  EXPECT_THAT(c.eos_token_ids, ElementsAre(128001, 128008, 128009));
  EXPECT_EQ(c.bos_token_id, 128000);
  EXPECT_FALSE(c.tie_word_embeddings);
}

TEST(RealConfigs, Llama2Llama3MistralQwen) {
  ModelConfig l2 = real("llama-2-7b");
  EXPECT_EQ(l2.num_kv_heads, 32);
  EXPECT_EQ(l2.rope_theta, 10000.0);  // absent
  EXPECT_EQ(l2.rope_scaling.type, RopeScaling::Type::None);  // null
  EXPECT_EQ(l2.norm_eps, 1e-5);

  ModelConfig l3 = real("llama-3-8b");
  EXPECT_EQ(l3.vocab_size, 128256);
  EXPECT_EQ(l3.group_size(), 4);
  EXPECT_THAT(l3.eos_token_ids, ElementsAre(128001));

  ModelConfig m = real("mistral-7b-v0.1");
  EXPECT_EQ(m.arch, Architecture::Mistral);
  EXPECT_EQ(m.sliding_window, 4096);
  EXPECT_EQ(m.intermediate_size, 14336);

  ModelConfig q = real("qwen2.5-0.5b-instruct");
  EXPECT_EQ(q.arch, Architecture::Qwen2);
  EXPECT_EQ(q.head_dim, 64);  // 896 / 14, not written
  EXPECT_EQ(q.num_kv_heads, 2);
  EXPECT_FALSE(q.sliding_window.has_value());  // use_sliding_window: false
  EXPECT_TRUE(q.attention_bias);
  EXPECT_TRUE(q.tie_word_embeddings);
  EXPECT_EQ(q.rope_theta, 1000000.0);
}

TEST(RealConfigs, EveryFixtureConfigParses) {
  for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::path(KVINFER_TEST_DATA) / "models")) {
    if (!entry.is_directory()) continue;
    SCOPED_TRACE(entry.path().filename().string());
    ModelConfig c = load_config(entry.path() / "config.json");
    // chatml_tiny's vocabulary is its trained tokenizer's; the others use 128 random ids.
    EXPECT_EQ(c.vocab_size, entry.path().filename() == "chatml_tiny" ? 384 : 128);
    const auto name = entry.path().filename();
    const bool three = name == "gpt2_untied_f16" || name == "gemma2_tiny" || name == "gemma3_tiny" ||
                       name == "qwen2_moe_tiny" || name == "qwen3_moe_tiny";
    EXPECT_EQ(c.num_layers, three ? 3 : 2);
  }
  // The new families' fixtures as their config.json says (tests/data/models/PROVENANCE.md).
  ModelConfig g2 = load_config(test::fixture_dir("gemma2_tiny") / "config.json");
  EXPECT_EQ(g2.arch, Architecture::Gemma2);
  EXPECT_EQ(g2.sliding_layers, (std::vector<bool>{true, false, true}));
  EXPECT_EQ(g2.attn_logit_softcapping, 1.5);
  EXPECT_EQ(g2.final_logit_softcapping, 2.0);
  EXPECT_EQ(load_config(test::fixture_dir("gemma2_scalar") / "config.json").query_pre_attn_scalar, 24);
  ModelConfig g3 = load_config(test::fixture_dir("gemma3_tiny") / "config.json");
  EXPECT_EQ(g3.sliding_layers, (std::vector<bool>{true, true, false}));
  EXPECT_EQ(g3.rope_local_theta, 10000.0);
  EXPECT_EQ(g3.rope_theta, 1000000.0);
  EXPECT_EQ(g3.rope_scaling.type, RopeScaling::Type::Linear);
  EXPECT_EQ(g3.rope_scaling.factor, 8.0);
  EXPECT_TRUE(g3.qk_norm);
  ModelConfig qw = load_config(test::fixture_dir("qwen2_window") / "config.json");
  EXPECT_EQ(qw.sliding_window, 4);
  EXPECT_EQ(qw.sliding_layers, (std::vector<bool>{false, true}));
  EXPECT_TRUE(load_config(test::fixture_dir("qwen3_tiny") / "config.json").qk_norm);
  ModelConfig gqa = load_config(test::fixture_dir("llama_gqa4") / "config.json");
  EXPECT_THAT(gqa.eos_token_ids, ElementsAre(1, 2));
  EXPECT_EQ(gqa.bos_token_id, 0);
  ModelConfig rope = load_config(test::fixture_dir("llama3_rope") / "config.json");
  EXPECT_EQ(rope.rope_scaling.type, RopeScaling::Type::Llama3);
  EXPECT_EQ(rope.rope_scaling.original_max_position_embeddings, 32);
  EXPECT_EQ(rope.rope_theta, 500000.0);
}

// Mixtral and Qwen2-MoE: the experts' keys, Qwen2-MoE's dense layers, and one error per bad key.
TEST(Config, MixtureOfExperts) {
  json m = llama();
  m["architectures"] = {"MixtralForCausalLM"};
  m["num_local_experts"] = 8;
  m["num_experts_per_tok"] = 2;
  m["sliding_window"] = nullptr;
  ModelConfig c = parse(m);
  EXPECT_EQ(c.arch, Architecture::Mixtral);
  EXPECT_EQ(c.num_experts, 8);
  EXPECT_EQ(c.num_experts_per_tok, 2);
  EXPECT_EQ(c.moe_intermediate_size, 11008);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_FALSE(c.sliding_window);
  EXPECT_TRUE(c.is_moe_layer(0) && c.is_moe_layer(31));

  json q = llama();
  q["architectures"] = {"Qwen2MoeForCausalLM"};
  q["num_experts"] = 60;
  q["num_experts_per_tok"] = 4;
  q["moe_intermediate_size"] = 1408;
  q["shared_expert_intermediate_size"] = 5632;
  q["decoder_sparse_step"] = 2;
  q["mlp_only_layers"] = {4};
  c = parse(q);
  EXPECT_EQ(c.arch, Architecture::Qwen2Moe);
  EXPECT_TRUE(c.attention_bias);  // qkv_bias defaults to true
  EXPECT_FALSE(c.norm_topk_prob);
  EXPECT_EQ(c.shared_expert_intermediate_size, 5632);
  // Sparse step 2: layers 1, 3, 5, ... are MoE, but 4 is dense anyway and 5 is not listed.
  EXPECT_FALSE(c.is_moe_layer(0));
  EXPECT_TRUE(c.is_moe_layer(1));
  EXPECT_FALSE(c.is_moe_layer(4));
  EXPECT_TRUE(c.is_moe_layer(5));

  json bad = m;
  bad["num_experts_per_tok"] = 9;
  EXPECT_THAT(parse_error(bad), HasSubstr("'num_experts_per_tok' (9) exceeds num_local_experts (8)"));
  bad = m;
  bad.erase("num_local_experts");
  EXPECT_THAT(parse_error(bad), HasSubstr("'num_local_experts' is missing"));
  bad = m;
  bad["num_local_experts"] = 300;
  EXPECT_THAT(parse_error(bad), HasSubstr("kvinfer supports at most 256 experts"));
  bad = q;
  bad["mlp_only_layers"] = {32};
  EXPECT_THAT(parse_error(bad), HasSubstr("'mlp_only_layers' holds 32"));
  bad = q;
  bad.erase("moe_intermediate_size");
  EXPECT_THAT(parse_error(bad), HasSubstr("'moe_intermediate_size' is missing"));
  bad = q;
  bad["use_sliding_window"] = true;
  EXPECT_THAT(parse_error(bad), HasSubstr("'use_sliding_window' is true; Qwen2-MoE sliding-window attention is not supported"));
}

// Qwen3-MoE: Qwen3's attention keys with Qwen2-MoE's experts; the expert count under either
// spelling (published configs: num_experts; transformers 5's save_pretrained: num_local_experts).
TEST(Config, Qwen3MixtureOfExperts) {
  json q = llama();
  q["architectures"] = {"Qwen3MoeForCausalLM"};
  q["hidden_size"] = 2048;
  q["num_attention_heads"] = 32;
  q["num_key_value_heads"] = 4;
  q["head_dim"] = 128;  // Qwen3-30B-A3B's: not hidden / heads
  q["num_experts"] = 128;
  q["num_experts_per_tok"] = 8;
  q["moe_intermediate_size"] = 768;
  q["norm_topk_prob"] = true;
  q["mlp_only_layers"] = json::array();
  q["shared_expert_intermediate_size"] = 512;  // not a Qwen3MoeConfig key: ignored, as HF does
  ModelConfig c = parse(q);
  EXPECT_EQ(c.arch, Architecture::Qwen3Moe);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_EQ(c.num_experts, 128);
  EXPECT_EQ(c.num_experts_per_tok, 8);
  EXPECT_EQ(c.moe_intermediate_size, 768);
  EXPECT_EQ(c.shared_expert_intermediate_size, 0);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_TRUE(c.dense_layers.empty());
  q.erase("num_experts");
  q["num_local_experts"] = 64;
  EXPECT_EQ(parse(q).num_experts, 64);
  q.erase("norm_topk_prob");
  EXPECT_FALSE(parse(q).norm_topk_prob);  // Qwen3MoeConfig's default
  ModelConfig f = load_config(test::fixture_dir("qwen3_moe_tiny") / "config.json");
  EXPECT_EQ(f.arch, Architecture::Qwen3Moe);
  EXPECT_EQ(f.num_experts, 4);
  EXPECT_EQ(f.head_dim, 32);
  EXPECT_TRUE(f.norm_topk_prob);
  EXPECT_EQ(f.dense_layers, (std::vector<int64_t>{1}));

  json bad = q;
  bad["use_sliding_window"] = true;
  EXPECT_THAT(parse_error(bad), HasSubstr("'use_sliding_window' is true; Qwen3-MoE sliding-window attention is not supported"));
  bad = q;
  bad.erase("num_local_experts");
  EXPECT_THAT(parse_error(bad), HasSubstr("'num_experts' is missing"));
  bad = q;
  bad["hidden_act"] = "gelu";
  EXPECT_THAT(parse_error(bad), HasSubstr("'hidden_act' is 'gelu'"));
}

}  // namespace
}  // namespace kvinfer
