#pragma once
// What kvinfer-bench prints: the human table, the JSON and CSV files and the SVG plot, all from
// one Report (what was run, the measurements, the bandwidth probe).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bench_run.h"
#include "kvinfer/config.h"
#include "models/decode_bytes.h"
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
  kvinfer::ActivationMode activations = kvinfer::ActivationMode::Exact;  // --activations
  int threads = 1;
  int64_t prompt_tokens = 0;  // P
  int64_t tokens = 0;         // N
  std::string prompt_source;  // "random ids from seed 0", "--prompt text"
  uint64_t seed = 0;
  std::string mode;  // on, off, both
  int64_t off_every = 1;
  std::vector<int64_t> positions;  // 1-based report steps, each <= N, sorted, unique
};

// --device cuda: the device's copy bandwidth (cuda_backend::measure_copy_bandwidth).
struct DeviceCopy {
  std::string device;      // cudaGetDeviceProperties' name
  double gb_per_s = 0;     // read + write bytes of a D2D cudaMemcpy, 1e9 B/s, median
  uint64_t bytes = 0;      // one copy's size
  int reps = 0;
  bool simulated = false;  // the CUDA simulation build: a CPU, not a GPU; no floor is computed
};

// The decode floor: the fewest bytes a batch-1 decode step must move (decode_step_bytes) at the
// context of the middle decode step, over the memory bandwidth measured (the device copy on
// CUDA, the read probe on the CPU): the fastest a memory-bound decode can go.
struct DecodeFloor {
  int64_t step = 0;     // the middle decode step: 1 + ceil((N - 1) / 2), N >= 2
  int64_t context = 0;  // positions it attends
  kvinfer::DecodeStepBytes bytes;
};

struct Report {
  BenchInfo info;
  RunResult run;
  std::optional<Bandwidth> bandwidth;     // nullopt: --no-bandwidth-probe
  std::optional<DeviceCopy> device_copy;  // the CUDA device's; nullopt on the CPU or with --no-bandwidth-probe
  std::optional<DecodeFloor> floor;       // nullopt: no decode step (N = 1, or cache off only)
};

// The middle decode step of a cache-on run of N steps (steps 2..N decode): 1 + ceil((N-1)/2); 0
// when N < 2.
int64_t middle_decode_step(int64_t tokens);

// The decode floor's figures, where they can be had: the bandwidth it is measured against (GB/s)
// and what it is (nullopt when not measured, or the device is simulated), the floor's ms per
// token and tokens/s, the achieved decode tokens/s (1 / median decode step) and its fraction of
// the floor's.
struct FloorFigures {
  std::optional<double> gb_per_s;
  std::string source;  // "device copy", "host read probe", or why there is none
  std::optional<double> floor_ms, floor_tokens_per_s, achieved_tokens_per_s, fraction;
};
FloorFigures floor_figures(const Report& r);

// Parameters of a model of this config (embeddings, projections, norms, biases).
uint64_t count_params(const kvinfer::ModelConfig& config);

// Positions step i attends to (1-based): the P + i - 1 tokens of the sequence so far, or the
// sliding window.
int64_t attended_positions(const BenchInfo& info, int64_t step);

// The tokens agree wherever both modes ran (true when only one mode ran).
bool tokens_match(const Report& r);

std::string format_table(const Report& r);
std::string format_floor(const Report& r);  // the table's device-copy and decode-floor lines
std::string format_json(const Report& r);  // pretty-printed, ends with a newline
std::string format_csv(const Report& r);   // header, then one row per step
std::string format_svg(const Report& r);   // step latency of both modes against the step


}  // namespace bench
