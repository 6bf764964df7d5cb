#pragma once
// The KV-cache on/off experiment itself: greedy decoding of N tokens after a P-token prompt, once
// with the cache (prefill, then one decode per token) and once without (the cache cleared and the
// whole sequence prefilled again at every step, as HF's use_cache=False). Timings only; printing
// is bench_report's job.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kvinfer/dtype.h"
#include "kvinfer/model.h"

namespace bench {

struct RunOptions {
  std::vector<int32_t> prompt;  // (P) token ids
  int64_t tokens = 0;           // N: generated tokens, EOS ignored
  bool cache_on = true;
  bool cache_off = true;
  // Cache off runs only step 1, every off_every-th step after it (1, 1+K, 1+2K, ...), step N and
  // the steps in `always`; the others are estimated. 1 = every step (exact).
  int64_t off_every = 1;
  std::vector<int64_t> always;             // 1-based steps cache off always runs
  std::optional<kvinfer::DType> kv_dtype;  // nullopt: the library's default for the model
  // Called after each step: mode ("cache on"/"cache off"), step done (1-based), steps in the mode.
  std::function<void(const char* mode, int64_t step, int64_t steps)> on_step = {};
};

// Peak resident memory of the process over one mode.
struct PeakRss {
  uint64_t bytes = 0;  // VmHWM
  bool reset = false;  // the high-water mark was reset before the mode (else: since start)
};

struct ModeResult {
  bool ran = false;
  // (N) milliseconds of step i at [i-1]; std::nullopt for a step that was not run (cache off
  // with off_every > 1).
  std::vector<std::optional<double>> step_ms;
  std::vector<int32_t> tokens;  // (N) the argmax of every step run (0 where not run)
  int64_t steps_run = 0;
  double total_ms = 0;  // sum of step times; estimated when steps_run < N
  bool estimated = false;
  PeakRss peak_rss;
};

struct Mismatch {
  int64_t step = 0;  // 1-based
  int32_t on_token = 0, off_token = 0;
};

struct RunResult {
  kvinfer::DType kv_dtype = kvinfer::DType::F32;  // the cache's dtype, resolved
  uint64_t kv_bytes = 0;                          // KvCache::bytes() for capacity P + N
  ModeResult on, off;
  int64_t compared = 0;              // steps where both modes produced a token
  std::optional<Mismatch> mismatch;  // the first step where they differ
};

// Runs the experiment: cache on first, then cache off fed the cache-on tokens (or, without
// cache on, its own tokens). Each mode gets its own Session and KvCache (capacity P + N),
// freed before the next mode starts, so its peak RSS is its own. Throws kvinfer::Error.
RunResult run_experiment(const std::shared_ptr<const kvinfer::Model>& model, const RunOptions& options);

// Sum over steps 1..n of the piecewise-linear interpolation of the measured step times (the
// trapezoid rule in step index): exact when every step was measured. Steps 1 and n must be.
double estimate_total_ms(const std::vector<std::optional<double>>& step_ms);

// Steps cache off runs: 1, 1+K, 1+2K, ..., n, and `always` (those in 1..n); sorted, unique.
std::vector<int64_t> off_steps(int64_t n, int64_t every, const std::vector<int64_t>& always);

// The process's peak RSS: resets VmHWM by writing "5" to /proc/self/clear_refs (returns false
// when that is not allowed), and reads it back from /proc/self/status.
bool reset_peak_rss();
uint64_t read_peak_rss();

}  // namespace bench
