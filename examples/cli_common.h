#pragma once
// What kvinfer-generate, kvinfer-chat and kvinfer-kv-plan share: model and sampling options, the
// default model, the load progress bar, and the stats line.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "kvinfer/kvinfer.h"

namespace cli {

struct ModelOptions {
  std::string model;  // empty: the default model (model_path)
  std::string device = "auto";
  std::string kv_dtype = "auto";
  int64_t ctx = 0;
  int threads = 0;  // CPU threads; 0: one per core
  bool int8_activations = false;  // LoadOptions::int8_activations
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
  int64_t seed = -1;
  std::vector<std::string> logit_bias;  // "ID=BIAS"
  std::vector<std::string> stop;
  int64_t max_new_tokens = 256;
  bool ignore_eos = false;
};

// Parse errors as one line: "<tool>: <what is wrong> (see --help)".
void one_line_errors(CLI::App& app);
void add_model_options(CLI::App& app, ModelOptions& o, const char* ctx_help);
// -m/--model alone, optional: for tools that read a model without running it.
void add_model_option(CLI::App& app, std::string& model);
void add_sampling_options(CLI::App& app, SamplingOptions& o);

// The model to use: the -m path when given, else $KVINFER_MODEL when set, else the default model
// (models/SmolLM2-135M-Instruct.Q4_1.gguf in the source tree). Throws a one-line error saying how
// to get one when the default is absent.
std::filesystem::path model_path(const std::string& given);

// Loads model_path(o.model), drawing a progress bar on stderr when it is a terminal.
std::shared_ptr<const kvinfer::Model> load_model(const ModelOptions& o);
std::optional<kvinfer::DType> kv_dtype(const ModelOptions& o);
// The generation options the flags describe; a seed of -1 becomes a random one (reported).
kvinfer::GenerateOptions generate_options(const SamplingOptions& o);


// One line: prompt and generated tokens, their rates, time to first token, cache use, stop.
std::string stats_line(const kvinfer::GenerationStats& s, kvinfer::StopReason stop, const kvinfer::KvCache& kv,
                       const kvinfer::GenerateOptions& options);

}  // namespace cli
