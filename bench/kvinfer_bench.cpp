// kvinfer-bench: the "KV cache on vs off" experiment in one command. Greedy generation of N
// tokens after a P-token prompt, with the cache and without it (the whole sequence recomputed at
// every step), on a model file or a named synthetic shape; prints where the time goes, the memory
// read bandwidth each decode step achieves, the decode floor (the bytes a step must read over the
// bandwidth measured) and optionally JSON, CSV and an SVG plot.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bench_report.h"
#include "bench_run.h"
#include "core/input_file.h"
#include "core/output_file.h"
#include "cuda/device_memory.h"
#include "kvinfer/kvinfer.h"
#include "models/synthetic.h"
#include "models/decode_bytes.h"
#include "read_bandwidth.h"
#include "tool.h"

namespace {

namespace fs = std::filesystem;
using kvinfer::Error;
using kvinfer::ErrorKind;

constexpr int kExitModesDisagree = 3;  // cache on and off chose different tokens (printed, and in the JSON)

struct Args {
  std::string model, shape, dtype = "f32", kv_dtype = "auto", mode = "both", device = "auto";
  std::string positions = "1,64,256,512,1000", prompt_text, json, csv, svg;
  int64_t prompt_tokens = 16, tokens = 1000, off_every = 1, seed = 0;
  int64_t threads = 0;
  bool list_shapes = false, no_probe = false, prompt_tokens_given = false, dtype_given = false;
  tool::ActivationsChoice activations;
  bool weights_in_place = false;
};

std::string shapes_text() {
  std::string s;
  for (const kvinfer::SyntheticShape& sh : kvinfer::synthetic_shapes())
    s += fmt::format("  {:<16}{}\n", sh.name, sh.description);
  return s;
}

std::vector<int64_t> parse_positions(const std::string& text, int64_t n) {
  std::vector<int64_t> v;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    size_t used = 0;
    long long p = 0;
    try {
      p = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || item.find_first_not_of(" \t", used) != std::string::npos || p < 1)
      throw Error(ErrorKind::InvalidArgument, fmt::format("--positions: '{}' is not a step number >= 1 (give a list like 1,64,256)", item));
    v.push_back(std::min<int64_t>(p, n));  // past the last step: the last step
  }
  if (v.empty()) throw Error(ErrorKind::InvalidArgument, "--positions: the list is empty (give a list like 1,64,256)");
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

// P + N positions against the model's context: learned positions (GPT-2) cannot go further, and
// beyond a rope model's trained context the numbers would describe a model nobody runs.
void check_positions(const kvinfer::ModelConfig& c, int64_t p, int64_t n) {
  int64_t total = 0;
  if (__builtin_add_overflow(p, n, &total) || total > c.max_position_embeddings)
    throw tool::UsageError(fmt::format(
        "-p/-n: P + N = {} + {} positions exceed the model's {} {}; lower -p or -n", kvinfer::format_count(p),
        kvinfer::format_count(n), kvinfer::format_count(c.max_position_embeddings),
        c.is_gpt2() ? "learned positions (n_positions)" : "positions (max_position_embeddings)"));
}

void draw_progress(const char* what, uint64_t done, uint64_t total) {
  static int last = -1;
  const int percent = total ? static_cast<int>(100 * done / total) : 100;
  if (percent == last && done != total) return;
  last = done == total ? -1 : percent;
  std::fprintf(stderr, "\r%s %3d%%%s", what, percent, done == total ? "\n" : "");
  std::fflush(stderr);
}

// Every check that needs no model, so that a typo fails at once.
void check_args(const Args& a) {
  using tool::UsageError;
  if (a.model.empty() && a.shape.empty())
    throw UsageError("no model: give -m PATH or -s NAME (--list-shapes lists the names)");
  if (!a.model.empty() && !a.shape.empty()) throw UsageError("-m and -s exclude each other: give a model file or a shape");
  if (a.off_every > 1 && a.mode == "on") throw UsageError("--off-every applies to cache off: it needs --mode off or both");
  if (a.off_every > 1 && a.mode == "off")
    throw UsageError("--off-every > 1 skips steps, which needs the cache-on tokens: use --mode both");
  if (a.json == "-" && a.csv == "-") throw UsageError("--json - and --csv - cannot both write to stdout");
  if (!a.model.empty() && a.dtype_given)
    throw UsageError("--dtype sets the weights of a synthetic shape (-s); a model file has its own");
  if (!a.prompt_text.empty() && a.prompt_tokens_given) throw UsageError("--prompt sets P from the text: drop -p");
  if (!a.prompt_text.empty() && !a.shape.empty())
    throw UsageError("--prompt needs a tokenizer: synthetic shapes have none (use -p P)");
  if (!a.model.empty()) kvinfer::model_path_kind(a.model);  // "no such file or directory", as the other tools
}

// --dtype: a plain type (parse_dtype) or one of the quantised types random_model writes.
kvinfer::DType weight_dtype(const std::string& name) {
  for (kvinfer::DType t : {kvinfer::DType::Q8_0, kvinfer::DType::Q4_0, kvinfer::DType::Q4_1, kvinfer::DType::Q4_K,
                           kvinfer::DType::Q5_K, kvinfer::DType::Q6_K})
    if (kvinfer::dtype_name(t) == name) return t;
  return kvinfer::parse_dtype(name);
}

std::optional<kvinfer::DType> kv_dtype(const Args& a) {
  try {
    if (a.kv_dtype == "auto") return std::nullopt;
    return kvinfer::parse_dtype(a.kv_dtype);
  } catch (const Error& e) {
    throw tool::UsageError(fmt::format("--kv-dtype: {}", e.what()));
  }
}

// The synthetic shape built, or the model file loaded; P + N checked against its positions
// first whenever the config can be read without the weights. Fills info's model fields.
std::shared_ptr<const kvinfer::Model> make_model(const Args& a, int threads, bool tty, bench::BenchInfo& info) {
  const tool::DeviceChoice device = tool::parse_device(a.device);
  std::shared_ptr<const kvinfer::Model> model;
  if (!a.shape.empty()) {
    const kvinfer::ModelConfig config = kvinfer::synthetic_config(a.shape);
    check_positions(config, a.prompt_tokens, a.tokens);
    kvinfer::RandomModelOptions o{weight_dtype(a.dtype), static_cast<uint64_t>(a.seed), device.device, device.index,
                                  {}, a.activations.value(), threads};
    if (tty) o.on_progress = [](uint64_t d, uint64_t t) { draw_progress("building random weights", d, t); };
    model = kvinfer::random_model(config, o);
    info.model = a.shape;
    info.synthetic = true;
    for (const auto& sh : kvinfer::synthetic_shapes())
      if (sh.name == a.shape) info.description = sh.description;
  } else {
    const fs::path config_json = fs::path(a.model) / "config.json";
    if (a.prompt_text.empty() && fs::is_directory(a.model) && kvinfer::input_exists(config_json))
      check_positions(kvinfer::load_config(config_json), a.prompt_tokens, a.tokens);
    kvinfer::LoadOptions o{device.device, device.index, {}, a.activations.value()};
    o.weights_in_place = a.weights_in_place;
    o.threads = threads;
    if (tty) o.on_progress = [](uint64_t d, uint64_t t) { draw_progress("loading weights", d, t); };
    model = kvinfer::Model::load(a.model, o);
    info.model = a.model;
  }
  info.config = model->config();
  info.weight_dtype = std::string(kvinfer::dtype_name(model->weight_dtype()));
  info.weight_bytes = model->weight_bytes();
  info.step_weight_bytes = model->step_weight_bytes();
  info.device = std::string(kvinfer::device_name(model->device()));
  info.activations = model->activations();
  return model;
}

// The prompt: P random ids in [0, vocab) from the seed, or the ids of the --prompt text.
std::vector<int32_t> make_prompt(const Args& a, const kvinfer::Model& model, bench::BenchInfo& info) {
  std::vector<int32_t> prompt;
  if (!a.prompt_text.empty()) {
    prompt = model.tokenizer().encode(a.prompt_text);
    if (prompt.empty()) throw tool::UsageError("--prompt: the text encodes to no tokens");
    info.prompt_source = "--prompt text";
  } else {
    const auto vocab = static_cast<uint64_t>(model.config().vocab_size);
    uint64_t state = static_cast<uint64_t>(a.seed);
    for (int64_t i = 0; i < a.prompt_tokens; ++i) {  // splitmix64: the same ids on every platform
      uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
      prompt.push_back(static_cast<int32_t>((z ^ (z >> 31)) % vocab));
    }
    info.prompt_source = fmt::format("random ids in [0, {}) from seed {}", vocab, a.seed);
  }
  check_positions(model.config(), static_cast<int64_t>(prompt.size()), a.tokens);
  return prompt;
}

// --json, --csv and --svg: files checked and begun up front (a bad path fails before the run) and
// written whole at the end (kvinfer::OutputFile: regular files or new paths only), or stdout ("-").
class Outputs {
 public:
  explicit Outputs(const Args& a) : a_(a) {
    open(json_, a.json, "--json");
    open(csv_, a.csv, "--csv");
    open(svg_, a.svg, "--svg");
  }
  // The table goes to stderr when stdout carries the JSON or the CSV.
  void write(const bench::Report& r) {
    std::FILE* table_out = a_.json == "-" || a_.csv == "-" ? stderr : stdout;
    if (table_out == stdout) {
      tool::write_stdout(bench::format_table(r));
    } else {
      std::fputs(bench::format_table(r).c_str(), table_out);
      std::fflush(table_out);
    }
    if (!a_.json.empty()) put(json_, bench::format_json(r), "--json");
    if (!a_.csv.empty()) put(csv_, bench::format_csv(r), "--csv");
    if (!a_.svg.empty()) put(svg_, bench::format_svg(r), "--svg");
  }

 private:
  // Errors name the option: "--json: /dev/full: is a character device; ...".
  template <typename F>
  static void naming(const char* flag, F&& f) {
    try {
      f();
    } catch (const Error& e) {
      throw Error(e.kind(), fmt::format("{}: {}", flag, e.what()));
    }
  }
  static void open(std::optional<kvinfer::OutputFile>& f, const std::string& path, const char* flag) {
    if (!path.empty() && path != "-") naming(flag, [&] { f.emplace(path); });
  }
  static void put(std::optional<kvinfer::OutputFile>& f, const std::string& text, const char* flag) {
    if (!f) return tool::write_stdout(text);
    naming(flag, [&] {
      f->write(text.data(), text.size());
      f->commit();
    });
  }
  const Args& a_;
  std::optional<kvinfer::OutputFile> json_, csv_, svg_;
};

// CUDA device `index`'s copy bandwidth: 1 GiB copies, as the GPU benchmarks (64 MiB on the CUDA
// simulation's CPU-backed device, whose figure measures no GPU), at most a quarter of the device
// memory the model left free.
bench::DeviceCopy measure_device_copy(int index) {
  namespace cb = kvinfer::cuda_backend;
  const cb::DeviceScope on(index);
  const size_t want = cb::kSimulatedDevice ? size_t{64} << 20 : size_t{1} << 30;
  const size_t bytes = std::min(want, cb::device_free_bytes() / 4 / (size_t{1} << 20) * (size_t{1} << 20));
  if (bytes == 0) throw Error(ErrorKind::OutOfMemory, "device copy bandwidth: under 4 MiB of device memory is free after the model");
  const cb::CopyBandwidth c = cb::measure_copy_bandwidth(bytes);
  return {cb::device_description(index), c.bytes_per_s / 1e9, c.bytes, c.reps, cb::kSimulatedDevice};
}

int run(const Args& a) {
  check_args(a);
  const std::vector<int64_t> positions = parse_positions(a.positions, a.tokens);
  const std::optional<kvinfer::DType> cache_dtype = kv_dtype(a);
  const int threads =
      a.threads > 0 ? tool::checked_threads(a.threads, "-t/--threads") : kvinfer::default_cpu_threads();
  const bool tty = isatty(fileno(stderr)) != 0;
  Outputs outputs(a);

  bench::Report report;
  bench::BenchInfo& info = report.info;
  const std::shared_ptr<const kvinfer::Model> model = make_model(a, threads, tty, info);
  const std::vector<int32_t> prompt = make_prompt(a, *model, info);
  info.threads = threads;
  info.prompt_tokens = static_cast<int64_t>(prompt.size());
  info.tokens = a.tokens;
  info.seed = static_cast<uint64_t>(a.seed);
  info.mode = a.mode;
  info.off_every = a.off_every;
  info.positions = positions;

  if (!a.no_probe) {
    if (tty) std::fprintf(stderr, "measuring memory read bandwidth...\n");
    report.bandwidth = bench::measure_read_bandwidth(threads);
    if (model->device() == kvinfer::Device::CUDA) {
      if (tty) std::fprintf(stderr, "measuring device copy bandwidth...\n");
      report.device_copy = measure_device_copy(model->device_index());
    }
  }
  bench::RunOptions ro;
  ro.prompt = prompt;
  ro.tokens = a.tokens;
  ro.cache_on = a.mode != "off";
  ro.cache_off = a.mode != "on";
  ro.off_every = a.off_every;
  ro.always = positions;
  ro.kv_dtype = cache_dtype;
  if (tty)
    ro.on_step = [](const char* mode, int64_t step, int64_t steps) {
      std::fprintf(stderr, "\r%s: step %lld of %lld%s", mode, static_cast<long long>(step),
                   static_cast<long long>(steps), step == steps ? "\n" : "");
      std::fflush(stderr);
    };
  report.run = bench::run_experiment(model, ro);
  if (report.run.on.ran && a.tokens >= 2) {  // the decode floor at the middle decode step
    const int64_t step = bench::middle_decode_step(a.tokens), context = info.prompt_tokens + step - 1;
    report.floor = bench::DecodeFloor{step, context, kvinfer::decode_step_bytes(*model, context, report.run.kv_dtype)};
  }

  outputs.write(report);
  return bench::tokens_match(report) ? tool::kExitOk : kExitModesDisagree;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "kvinfer-bench: greedy generation with the KV cache on vs off: time per step, speedup, peak memory, "
      "the memory bandwidth each decode step achieves and the decode floor",
      "kvinfer-bench"};
  app.get_formatter()->column_width(32);
  Args a;
  app.add_option("-m,--model", a.model, "model: a HF directory (config.json, *.safetensors) or a .gguf file")
      ->type_name("PATH")
      ->check(tool::not_empty());
  app.add_option("-s,--shape", a.shape, "a named synthetic shape with random weights (list below, or --list-shapes)")
      ->type_name("NAME");
  app.add_flag("--list-shapes", a.list_shapes, "print the synthetic shapes and exit");
  app.add_option("--dtype", a.dtype,
                 "weights of a synthetic shape: f32, f16, bf16, or ggml's block types q8_0, q4_0, q4_1, q4_k, "
                 "q5_k, q6_k (quantised as llama.cpp's reference quantisers do; the K types need sizes that are "
                 "multiples of 256)")
      ->check(CLI::IsMember({"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q4_k", "q5_k", "q6_k"}))
      ->type_name("DTYPE")
      ->capture_default_str();
  app.add_option("--kv-dtype", a.kv_dtype,
                 "KV cache dtype: auto (the library's default: the weights' dtype, f16 "
                 "for quantised weights), f32, f16, bf16, int8, fp8")
      ->type_name("DTYPE")
      ->capture_default_str();
  app.add_option("-p,--prompt-tokens", a.prompt_tokens, "P: prompt length, P random ids in [0, vocab) from --seed")
      ->check(tool::at_least(1))
      ->capture_default_str();
  app.add_option("--prompt", a.prompt_text,
                 "prompt text instead of random ids (a model with a tokenizer); P = its tokens");
  app.add_option("-n,--tokens", a.tokens, "N: tokens to generate (greedy, EOS ignored)")
      ->check(tool::at_least(1))
      ->capture_default_str();
  app.add_option("--mode", a.mode, "on (cache on only), off (cache off only), both")
      ->check(CLI::IsMember({"on", "off", "both"}))
      ->capture_default_str();
  app.add_option("--off-every", a.off_every,
                 "cache off: run step 1, every K-th step, the last and the --positions steps only, and estimate the "
                 "total (trapezoid rule in step index); 1 = every step, exact")
      ->check(tool::at_least(1))
      ->capture_default_str();
  app.add_option("--positions", a.positions, "steps whose latency the report shows (past N: the last step)")
      ->type_name("LIST")
      ->capture_default_str();
  app.add_option("-t,--threads", a.threads,
                 fmt::format("CPU threads, at most {} per core; 0 = the library's default ($OMP_NUM_THREADS, else the "
                             "cores other processes leave idle)",
                             tool::kThreadsPerCore))
      ->check(tool::at_least(0))
      ->capture_default_str();
  app.add_option("--device", a.device, tool::kDeviceHelp)->check(tool::device_value())->capture_default_str();
  app.add_option("--seed", a.seed, "seed of the random prompt ids and of a synthetic shape's weights, >= 0")
      ->check(tool::at_least(0))
      ->capture_default_str();
  app.add_option("--json", a.json,
                 "write every figure and the per-step arrays as JSON to FILE (- = stdout, the table "
                 "then goes to stderr); default: none")
      ->type_name("FILE");
  app.add_option("--csv", a.csv, "write one row per step to FILE (- = stdout); default: none")->type_name("FILE");
  app.add_option("--svg", a.svg, "write a plot of step latency against step to FILE; default: none")->type_name("FILE");
  app.add_flag("--no-bandwidth-probe", a.no_probe,
               "skip measuring the memory read bandwidth (and, on CUDA, the device copy bandwidth): the decode "
               "floor is then not computed");
  tool::add_activations_options(app, a.activations);
  app.add_flag("--weights-in-place", a.weights_in_place,
               "-m: use the weights in place from the file mapping (4 KiB pages, row-major) instead of copying "
               "them onto huge pages (and packing them for decode) at load; default: off, copied");
  app.footer("Synthetic shapes (-s):\n" + shapes_text() +
             "\nCache on: step 1 prefills the P prompt tokens (time to first token), step i > 1 decodes token i-1.\n"
             "Cache off: step i clears the cache and prefills all P + i - 1 tokens, as HF's use_cache=False.\n"
             "Both modes must pick the same tokens; otherwise the first mismatch is printed and the exit status is 3.\n"
             "Decode floor: the bytes the middle decode step must read (every weight as stored, the LM head once,\n"
             "one embedding row, K/V of the positions attended, the new K/V row written) over the bandwidth\n"
             "measured: on CUDA a D2D cudaMemcpy (read + write), on the CPU the read probe. Achieved decode\n"
             "tokens/s (1 / median decode step) is reported as a % of the floor's tokens/s.\n" +
             std::string(tool::kExitStatusHelp) + "\n"
             "Published: gpt2-medium, 1000 tokens: ~21.7 s with the cache, ~107 s without (4.9x):\n"
             "  kvinfer-bench -s gpt2-medium -n 1000 --svg kv.svg");
  return tool::run(app, argc, argv, [&] {
    a.prompt_tokens_given = app.count("--prompt-tokens") > 0;
    a.dtype_given = app.count("--dtype") > 0;
    if (a.list_shapes) {
      tool::write_stdout(shapes_text());
      return tool::kExitOk;
    }
    return run(a);
  });
}
