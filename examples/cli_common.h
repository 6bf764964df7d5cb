#pragma once
// What kvinfer-generate, kvinfer-chat and kvinfer-kv-plan share: model and sampling options, the
// default model, the model's shape read without its weights, the load progress bar, and the stats
// line. What every tool shares (kvinfer-bench too) is in cli/tool.h.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "kvinfer/kvinfer.h"
#include "tool.h"

namespace cli {

struct ModelOptions {
  std::string model;  // empty: the default model (model_path)
  std::string device = "auto";
  std::string kv_dtype = "auto";
  int64_t ctx = 0;
  bool extend_context = false;  // -c may exceed the model's context length (LoadOptions::context_length)
  int64_t threads = 0;  // CPU threads; 0: kvinfer::default_cpu_threads()
  tool::ActivationsChoice activations;  // LoadOptions::activations
  bool weights_in_place = false;  // LoadOptions::weights_in_place
};

struct SamplingOptions {
  float temp = 0.8f;
  int32_t top_k = 40;
  float top_p = 0.95f;
  float min_p = 0.05f;
  float repeat_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  int32_t repeat_last_n = 64;
  std::string seed = "-1";  // -1, or 0 to 2^64 - 1: parsed by generate_options
  std::vector<std::string> logit_bias;  // "ID=BIAS"
  std::vector<std::string> stop;
  int64_t max_new_tokens = 256;
  bool ignore_eos = false;
  std::string grammar_file;  // --grammar FILE
  std::string json_schema;   // --json-schema FILE|JSON
  bool json = false;         // --json
};

// The grammar --grammar, --json-schema or --json ask for, as grammar text read and checked before
// the model loads: a file's content errors name the file (exit 1), an inline schema's the option
// (exit 2). nullopt: none asked for.
struct GrammarSpec {
  std::string text;   // kvinfer's grammar format
  std::string where;  // the option (and file) it came from, for messages
};
std::optional<GrammarSpec> grammar_spec(const SamplingOptions& o);
// Compiles `spec` for the model's vocabulary into options.sampling.grammar.
void set_grammar(kvinfer::GenerateOptions& options, const std::optional<GrammarSpec>& spec, const kvinfer::Model& model);

// Beam search's options (kvinfer-generate): --num-beams 2 or more turns it on.
struct BeamFlags {
  int32_t num_beams = 1;               // --num-beams B; 1: off (plain generation)
  float length_penalty = 1.0f;         // --length-penalty
  std::string early_stopping = "false";  // --early-stopping false|true|never (HF's spelling)
  int32_t no_repeat_ngram_size = 0;    // --no-repeat-ngram-size N
  int32_t num_return_sequences = 1;    // --num-return-sequences R
};

// Speculative decoding's options (kvinfer-generate): a drafter and its k.
struct SpeculativeFlags {
  int32_t lookup = 0;                   // --lookup N: prompt lookup with n-grams up to N; 0: off
  std::string draft_model;              // --draft-model PATH
  bool draft_int8_activations = false;  // --draft-int8-activations: alone, the target's own file
  int32_t draft_tokens = 8;             // --draft-tokens K: at most K drafted tokens a pass
  bool draft_fixed = false;             // --draft-fixed: always K (no adaptive k)
};

void add_model_options(CLI::App& app, ModelOptions& o, const char* ctx_help);
// -m/--model alone, optional: for tools that read a model without running it.
void add_model_option(CLI::App& app, std::string& model);
void add_sampling_options(CLI::App& app, SamplingOptions& o);

// The model to use: the -m path when given, else $KVINFER_MODEL when set, else the default model
// (models/SmolLM2-135M-Instruct.Q4_1.gguf in the source tree; build-tree binaries only, not
// installed ones). Throws a one-line error saying how to get one when there is none.
std::filesystem::path model_path(const std::string& given);

// What the model at `path` is and its shape, read without its weights: a GGUF file's metadata, a
// directory's config.json, or a bare config.json.
struct ModelShape {
  std::string format;  // "gguf", "hf_directory" or "config_json"
  kvinfer::ModelConfig config;
};
ModelShape read_model_shape(const std::filesystem::path& path);

// Loads model_path(o.model), drawing a progress bar on stderr when it is a terminal. -c is checked
// against the model's context length first (UsageError naming -c/--ctx).
std::shared_ptr<const kvinfer::Model> load_model(const ModelOptions& o);
std::optional<kvinfer::DType> kv_dtype(const ModelOptions& o);
// The generation options the flags describe, each value checked (UsageError naming the option);
// a seed of -1 becomes a random one (reported).
kvinfer::GenerateOptions generate_options(const SamplingOptions& o);
void add_speculative_options(CLI::App& app, SpeculativeFlags& o);
// The combination checked before any load (UsageError naming the options): one drafter, not with
// --no-kv-cache, --draft-tokens and --draft-fixed only with a drafter. True when one is chosen.
bool check_speculative_options(const CLI::App& app, const SpeculativeFlags& o, bool no_kv_cache);
// The draft model the options name (--draft-model, else the target's file), loaded as the target
// was (device, threads, weights in place) with --draft-int8-activations, with a cache of
// `capacity` tokens; its vocabulary checked against the target's (kvinfer::Error naming the
// difference). Null when no draft model is asked for.
std::unique_ptr<kvinfer::DraftModel> load_draft_model(const SpeculativeFlags& o, const ModelOptions& target_options,
                                                      const kvinfer::Model& target, int64_t capacity);
void add_beam_options(CLI::App& app, BeamFlags& o);
// Beam search's options when --num-beams is 2 or more (else nullopt), checked before any load
// (UsageError naming the options): not with the sampling options it ignores (--temp other than 0,
// --top-k, --top-p, --min-p, the penalties, --seed, --logit-bias), --stop, a drafter or
// --no-kv-cache; the beam-only options only with --num-beams 2 or more; -n at least 1.
std::optional<kvinfer::BeamSearchOptions> beam_options(const CLI::App& app, const BeamFlags& o,
                                                       const SamplingOptions& sampling, bool speculative,
                                                       bool no_kv_cache);
// One line: prompt tokens, beams, steps and their times, the caches' copies and bytes.
std::string beam_stats_line(const kvinfer::BeamSearchStats& s, int32_t num_beams, const kvinfer::KvCache& kv);

// options.speculative as the flags say, pointing at `draft` (which must outlive the generation).
void set_speculative(kvinfer::GenerateOptions& options, const SpeculativeFlags& o, kvinfer::DraftModel* draft);

// The checks that need the model: --logit-bias ids in its vocabulary.
void check_generate_options(const kvinfer::GenerateOptions& g, const kvinfer::Model& model);
// A token id the user gave in `option`, checked against the model's vocabulary.
void check_token_id(int64_t id, const kvinfer::Model& model, std::string_view option);


// One line: prompt and generated tokens, their rates, time to first token, cache use, stop; with
// speculative decoding, the tokens drafted and accepted too.
std::string stats_line(const kvinfer::GenerationStats& s, kvinfer::StopReason stop, const kvinfer::KvCache& kv,
                       const kvinfer::GenerateOptions& options);

}  // namespace cli
