#pragma once
// What kvinfer-bench prints: the human table, the JSON and CSV files and the SVG plot, all from
// one Report (what was run, the measurements, the bandwidth probe).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bench_run.h"
#include "kvinfer/config.h"
#include "read_bandwidth.h"

namespace bench {

// What was run: the header of the table and the "config" object of the JSON.
struct BenchInfo {
  std::string model;        // the -m path, or the -s shape name
  bool synthetic = false;   // a named shape with random weights
  std::string description;  // the shape's description ("" for a model file)
  kvinfer::ModelConfig config;
  std::string weight_dtype;
  uint64_t weight_bytes = 0;       // Model::weight_bytes()
  uint64_t step_weight_bytes = 0;  // Model::step_weight_bytes(): weights one decode step reads
  std::string device;              // "cpu" or "cuda", resolved
  bool int8_activations = false;   // --int8-activations
  int threads = 1;
  int64_t prompt_tokens = 0;  // P
  int64_t tokens = 0;         // N
  std::string prompt_source;  // "random ids from seed 0", "--prompt text"
  uint64_t seed = 0;
  std::string mode;  // on, off, both
  int64_t off_every = 1;
  std::vector<int64_t> positions;  // 1-based report steps, each <= N, sorted, unique
};

struct Report {
  BenchInfo info;
  RunResult run;
  std::optional<Bandwidth> bandwidth;  // nullopt: --no-bandwidth-probe
};

// Parameters of a model of this config (embeddings, projections, norms, biases).
uint64_t count_params(const kvinfer::ModelConfig& config);

// Positions step i attends to (1-based): the P + i - 1 tokens of the sequence so far, or the
// sliding window.
int64_t attended_positions(const BenchInfo& info, int64_t step);

// The tokens agree wherever both modes ran (true when only one mode ran).
bool tokens_match(const Report& r);

std::string format_table(const Report& r);
std::string format_json(const Report& r);  // pretty-printed, ends with a newline
std::string format_csv(const Report& r);   // header, then one row per step
std::string format_svg(const Report& r);   // step latency of both modes against the step


}  // namespace bench
