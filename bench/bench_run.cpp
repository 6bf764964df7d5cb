// The cache-on / cache-off experiment (bench_run.h): greedy steps, timed with steady_clock.
#include "bench_run.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <span>
#include <string>

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <fmt/format.h>

#include "kvinfer/error.h"
#include "kvinfer/generate.h"
#include "kvinfer/kv_cache.h"
#include "kvinfer/session.h"

namespace bench {

using Clock = std::chrono::steady_clock;

double estimate_total_ms(const std::vector<std::optional<double>>& step_ms) {
  const auto n = static_cast<int64_t>(step_ms.size());
  if (n == 0) return 0;
  if (!step_ms.front() || !step_ms.back())
    throw kvinfer::Error(kvinfer::ErrorKind::InvalidArgument, "estimate_total_ms: the first and last steps must be measured");
  double total = 0;
  int64_t prev = 0;  // index of the last measured step
  for (int64_t i = 0; i < n; ++i) {
    if (!step_ms[static_cast<size_t>(i)]) continue;
    const double t0 = *step_ms[static_cast<size_t>(prev)], t1 = *step_ms[static_cast<size_t>(i)];
    // The steps strictly between prev and i, on the line through (prev, t0) and (i, t1).
    for (int64_t j = prev + 1; j < i; ++j)
      total += t0 + (t1 - t0) * static_cast<double>(j - prev) / static_cast<double>(i - prev);
    total += t1;
    prev = i;
  }
  return total;
}

std::vector<int64_t> off_steps(int64_t n, int64_t every, const std::vector<int64_t>& always) {
  std::vector<int64_t> s;
  for (int64_t i = 1; i <= n; i += every) s.push_back(i);
  s.push_back(n);
  for (int64_t a : always)
    if (a >= 1 && a <= n) s.push_back(a);
  std::sort(s.begin(), s.end());
  s.erase(std::unique(s.begin(), s.end()), s.end());
  return s;
}

bool reset_peak_rss() {
  std::ofstream f("/proc/self/clear_refs");
  if (!f) return false;
  f << "5";
  f.flush();
  return static_cast<bool>(f);
}

uint64_t read_peak_rss() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;  // "VmHWM:   1234 kB"
  return 0;
}

namespace {

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Hands freed memory back to the system, so the next mode's peak starts from what is live.
void release_free_memory() {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

ModeResult empty_mode(int64_t n) {
  ModeResult m;
  m.step_ms.assign(static_cast<size_t>(n), std::nullopt);
  m.tokens.assign(static_cast<size_t>(n), 0);
  return m;
}

// Step 1: prefill of the prompt (the time to first token); step i > 1: decode of token i-1.
ModeResult run_cache_on(const std::shared_ptr<const kvinfer::Model>& model, const RunOptions& o, kvinfer::KvCache& kv) {
  ModeResult m = empty_mode(o.tokens);
  kvinfer::Session session(model);
  for (int64_t i = 1; i <= o.tokens; ++i) {
    const auto start = Clock::now();
    std::span<const float> logits =
        i == 1 ? session.prefill(kv, o.prompt) : session.decode(kv, m.tokens[static_cast<size_t>(i - 2)]);
    const int32_t next = kvinfer::argmax(logits);
    m.step_ms[static_cast<size_t>(i - 1)] = ms_since(start);
    m.tokens[static_cast<size_t>(i - 1)] = next;
    if (o.on_step) o.on_step("cache on", i, o.tokens);
  }
  m.ran = true;
  m.steps_run = o.tokens;
  return m;
}

// Step i: clear, prefill prompt + tokens 1..i-1 (P+i-1 ids). `given`: the cache-on tokens to feed
// (empty: feed its own, which needs every step).
ModeResult run_cache_off(const std::shared_ptr<const kvinfer::Model>& model, const RunOptions& o, kvinfer::KvCache& kv,
                         const std::vector<int32_t>& given) {
  ModeResult m = empty_mode(o.tokens);
  kvinfer::Session session(model);
  std::vector<int32_t> seq = o.prompt;  // (P + N) prompt, then the generated tokens
  seq.insert(seq.end(), given.begin(), given.end());
  const std::vector<int64_t> steps =
      given.empty() ? off_steps(o.tokens, 1, {}) : off_steps(o.tokens, o.off_every, o.always);
  const auto prompt_len = static_cast<int64_t>(o.prompt.size());
  for (int64_t i : steps) {
    const auto start = Clock::now();
    kv.clear();
    std::span<const float> logits =
        session.prefill(kv, std::span<const int32_t>(seq.data(), static_cast<size_t>(prompt_len + i - 1)));
    const int32_t next = kvinfer::argmax(logits);
    m.step_ms[static_cast<size_t>(i - 1)] = ms_since(start);
    m.tokens[static_cast<size_t>(i - 1)] = next;
    if (given.empty()) seq.push_back(next);
    if (o.on_step) o.on_step("cache off", i, o.tokens);
  }
  m.ran = true;
  m.steps_run = static_cast<int64_t>(steps.size());
  m.estimated = m.steps_run < o.tokens;
  return m;
}

}  // namespace

RunResult run_experiment(const std::shared_ptr<const kvinfer::Model>& model, const RunOptions& o) {
  if (o.prompt.empty() || o.tokens <= 0) throw kvinfer::Error(kvinfer::ErrorKind::InvalidArgument, "the experiment needs a prompt and N > 0 tokens");
  if (o.off_every < 1) throw kvinfer::Error(kvinfer::ErrorKind::InvalidArgument, fmt::format("--off-every must be >= 1, got {}", o.off_every));
  if (o.cache_off && !o.cache_on && o.off_every > 1)
    throw kvinfer::Error(kvinfer::ErrorKind::InvalidArgument, "--off-every > 1 needs the cache-on tokens to skip steps: use --mode both");
  const int64_t capacity = static_cast<int64_t>(o.prompt.size()) + o.tokens;
  RunResult r;
  r.on = empty_mode(o.tokens);
  r.off = empty_mode(o.tokens);
  // Each mode: reset the high-water mark, allocate its cache, run, read the peak, free it all.
  auto run_mode = [&](bool on) {
    release_free_memory();
    const bool reset = reset_peak_rss();
    kvinfer::KvCache kv(*model, capacity, o.kv_dtype);
    r.kv_dtype = kv.dtype();
    r.kv_bytes = kv.bytes();
    ModeResult m = on ? run_cache_on(model, o, kv)
                      : run_cache_off(model, o, kv, o.cache_on ? r.on.tokens : std::vector<int32_t>{});
    m.peak_rss = {read_peak_rss(), reset};
    return m;
  };
  if (o.cache_on) {
    r.on = run_mode(true);
    r.on.total_ms = estimate_total_ms(r.on.step_ms);
  }
  if (o.cache_off) {
    r.off = run_mode(false);
    r.off.total_ms = estimate_total_ms(r.off.step_ms);
  }
  if (o.cache_on && o.cache_off) {
    for (int64_t i = 0; i < o.tokens; ++i) {
      if (!r.off.step_ms[static_cast<size_t>(i)]) continue;
      ++r.compared;
      const int32_t a = r.on.tokens[static_cast<size_t>(i)], b = r.off.tokens[static_cast<size_t>(i)];
      if (a != b && !r.mismatch) r.mismatch = Mismatch{i + 1, a, b};
    }
  }
  return r;
}

}  // namespace bench
