#include "cli_common.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <system_error>

#include <fmt/format.h>
#include <fmt/std.h>

#include "core/input_file.h"
#include "grammar/automaton.h"
#include "grammar/gbnf.h"

namespace cli {

namespace {
// The compiled-in default model is the build tree's (models/ of the source checkout): only the
// binaries that run from the build directory use it; an installed copy has none.
const char* default_model() {
  static const bool in_build_tree = [] {
    std::error_code ec;
    const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (ec) return false;
    const auto exe_dir = std::filesystem::weakly_canonical(exe.parent_path(), ec);
    if (ec) return false;
    const auto build_dir = std::filesystem::weakly_canonical(KVINFER_BUILD_BIN_DIR, ec);
    return !ec && exe_dir == build_dir;
  }();
  return in_build_tree ? KVINFER_DEFAULT_MODEL : nullptr;
}
}  // namespace

void add_model_option(CLI::App& app, std::string& model) {
  std::string help = "model: a HF directory (config.json, *.safetensors, tokenizer.json) or a .gguf file; default: ";
  if (const char* dflt = default_model()) {
    help.append(fmt::format("$KVINFER_MODEL if set, else {} (tools/fetch_model.sh downloads it)", dflt));
  } else {
    help.append("$KVINFER_MODEL if set");
  }
  app.add_option("-m,--model", model, help)->check(tool::not_empty());
}

void add_model_options(CLI::App& app, ModelOptions& o, const char* ctx_help) {
  add_model_option(app, o.model);
  app.add_option("--device", o.device, tool::kDeviceHelp)->check(tool::device_value())->capture_default_str();
  app.add_option("-c,--ctx", o.ctx,
                 std::string(ctx_help) +
                     "; also the context length that picks dynamic-NTK and LongRoPE frequencies (a LongRoPE model "
                     "takes its short factors for a -c within its original length, as HF does for such a sequence)")
      ->check(tool::at_least(0))
      ->capture_default_str();
  app.add_flag("--extend-context", o.extend_context,
               "allow -c beyond the model's context length: rotary models only; positions past the length it was "
               "trained on usually give worse output");
  app.add_option("-t,--threads", o.threads,
                 fmt::format("CPU threads, at most {} per core; 0 = $OMP_NUM_THREADS, else the cores other processes leave "
                             "idle (results do not depend on it)",
                             tool::kThreadsPerCore))
      ->check(tool::at_least(0))
      ->capture_default_str();
  tool::add_activations_options(app, o.activations);
  app.add_flag("--weights-in-place", o.weights_in_place,
               "CPU: use the weights in place from the file mapping (4 KiB pages, shared with other processes) "
               "instead of copying them onto huge pages (and packing them for decode) at load; the file must then not be "
               "truncated or rewritten while the tool runs; default: off, copied (the file is closed after the load)");
  app.add_option("--kv-dtype", o.kv_dtype,
                 "KV cache element type: auto (the weights' dtype; f16 for quantised weights), f32, f16, bf16, int8, "
                 "fp8 (8-bit: half of f16's bytes, docs/kv-cache.md)")
      ->capture_default_str();
}

void add_sampling_options(CLI::App& app, SamplingOptions& o) {
  app.add_option("-n,--max-new-tokens", o.max_new_tokens,
                 "tokens to generate at most (generation also stops when the context is full)")
      ->check(tool::at_least(0))
      ->capture_default_str();
  app.add_option("--temp", o.temp, "temperature; 0 = greedy (argmax)")->capture_default_str();
  app.add_option("--top-k", o.top_k, "keep the k most likely tokens; 0 = off")->capture_default_str();
  app.add_option("--top-p", o.top_p, "keep the most likely tokens up to this cumulative probability; 1 = off")
      ->capture_default_str();
  app.add_option("--min-p", o.min_p, "drop tokens less likely than min-p × the most likely one; 0 = off")
      ->capture_default_str();
  app.add_option("--repeat-penalty", o.repeat_penalty, "divide the logits of recent tokens by this; 1 = off")
      ->capture_default_str();
  app.add_option("--presence-penalty", o.presence_penalty, "subtract from the logits of recent tokens; 0 = off")
      ->capture_default_str();
  app.add_option("--frequency-penalty", o.frequency_penalty,
                 "subtract this × count from the logits of recent tokens; 0 = off")
      ->capture_default_str();
  app.add_option("--repeat-last-n", o.repeat_last_n, "recent tokens the penalties look at; -1 = all, 0 = none")
      ->capture_default_str();
  app.add_option("--seed", o.seed, "random seed, 0 to 18446744073709551615; -1 = a random one (printed with the stats)")
      ->type_name("INT")
      ->capture_default_str();
  app.add_option("--logit-bias", o.logit_bias, "ID=BIAS added to a token's logit (repeatable); -inf bans it");
  app.add_option("--stop", o.stop, "stop when the text contains this string (repeatable); it is not printed");
  app.add_flag("--ignore-eos", o.ignore_eos, "do not stop at the model's end-of-generation tokens");
  app.add_option("--grammar", o.grammar_file,
                 "constrain the output to the grammar in FILE (kvinfer's GBNF-style format, docs/structured-output.md)")
      ->type_name("FILE")
      ->check(tool::not_empty());
  app.add_option("--json-schema", o.json_schema,
                 "constrain the output to JSON valid against a JSON schema: a file, or the schema itself ('{...}')")
      ->type_name("FILE|JSON")
      ->check(tool::not_empty());
  app.add_flag("--json", o.json, "constrain the output to a JSON object");
}

std::optional<GrammarSpec> grammar_spec(const SamplingOptions& o) {
  const int given = int(!o.grammar_file.empty()) + int(!o.json_schema.empty()) + int(o.json);
  if (given > 1) throw tool::UsageError("--grammar, --json-schema and --json each set the output's grammar: give one");
  if (given == 0) return std::nullopt;
  GrammarSpec spec;
  bool inline_text = false;
  try {
    if (!o.grammar_file.empty()) {
      spec.where = fmt::format("--grammar \"{}\"", o.grammar_file);
      spec.text = kvinfer::read_input_file(o.grammar_file, kvinfer::kGrammarLimit);
    } else if (!o.json_schema.empty()) {
      const size_t first = o.json_schema.find_first_not_of(" \t\r\n");
      inline_text = first != std::string::npos && (o.json_schema[first] == '{' || o.json_schema.substr(first, 4) == "true" ||
                                                   o.json_schema.substr(first, 5) == "false");
      spec.where = inline_text ? std::string("--json-schema") : fmt::format("--json-schema \"{}\"", o.json_schema);
      const std::string schema = inline_text ? o.json_schema : kvinfer::read_input_file(o.json_schema, kvinfer::kJsonSchemaLimit);
      spec.text = kvinfer::json_schema_to_gbnf(schema);
    } else {
      spec.where = "--json";
      spec.text = kvinfer::json_schema_to_gbnf(R"({"type": "object"})");
    }
    kvinfer::grammar::compile(kvinfer::grammar::parse_gbnf(spec.text));  // its errors before the model loads
  } catch (const tool::UsageError&) {
    throw;
  } catch (const kvinfer::Error& e) {
    const std::string what = fmt::format("{}: {}", spec.where, e.what());
    if (inline_text) throw tool::UsageError(what);
    throw kvinfer::Error(e.kind(), what);
  }
  return spec;
}

void set_grammar(kvinfer::GenerateOptions& options, const std::optional<GrammarSpec>& spec, const kvinfer::Model& model) {
  if (!spec) return;
  try {
    options.sampling.grammar = kvinfer::Grammar::from_gbnf(spec->text, model.grammar_vocabulary());
  } catch (const kvinfer::Error& e) {
    throw kvinfer::Error(e.kind(), fmt::format("{}: {}", spec->where, e.what()));
  }
}

void add_speculative_options(CLI::App& app, SpeculativeFlags& o) {
  app.add_option("--lookup", o.lookup,
                 "speculative decoding by prompt lookup: draft the tokens that followed the most recent earlier "
                 "occurrence of the last N..1 tokens (prompt and output so far) and verify them in one pass; the "
                 "output is unchanged (docs/speculative.md); 0 = off")
      ->check(tool::at_least(0))
      ->capture_default_str();
  app.add_option("--draft-model", o.draft_model,
                 "speculative decoding with a draft model: a cheaper model with this model's vocabulary (HF "
                 "directory or .gguf) drafts tokens that the model verifies in one pass; the output is unchanged")
      ->type_name("PATH")
      ->check(tool::not_empty());
  app.add_flag("--draft-int8-activations", o.draft_int8_activations,
               "load the draft model with 8-bit activations (as --int8-activations); without --draft-model the "
               "draft is the model's own file so loaded: a cheap self-draft");
  app.add_option("--draft-tokens", o.draft_tokens,
                 "speculative decoding: draft at most K tokens a pass, 1 to 256; K adapts (starts at min(4, K), +2 "
                 "after a pass that accepts every draft, -1 after a rejection, pauses after rejections at 1) unless "
                 "--draft-fixed")
      ->type_name("K")
      ->capture_default_str();
  app.add_flag("--draft-fixed", o.draft_fixed, "speculative decoding: draft K tokens every pass (no adaptive k)");
}

void add_beam_options(CLI::App& app, BeamFlags& o) {
  app.add_option("--num-beams", o.num_beams,
                 "beam search with B beams (HF transformers' generate(num_beams=B), deterministic; the best "
                 "hypotheses are printed when done, not streamed; docs/beam-search.md); 1 = off")
      ->type_name("B")
      ->check(tool::at_least(1))
      ->capture_default_str();
  app.add_option("--length-penalty", o.length_penalty,
                 "beam search: a hypothesis scores its log-probabilities' sum / length^P (> 0 favours longer ones)")
      ->type_name("P")
      ->capture_default_str();
  app.add_option("--early-stopping", o.early_stopping,
                 "beam search: false = stop when no running beam can beat the finished ones at its current length "
                 "(HF's default), true = as soon as B hypotheses finish, never = only when none could at any length")
      ->check(CLI::IsMember({"false", "true", "never"}))
      ->capture_default_str();
  app.add_option("--no-repeat-ngram-size", o.no_repeat_ngram_size,
                 "beam search: no n-gram of this many tokens (prompt included) occurs twice in a beam; 0 = off")
      ->type_name("N")
      ->check(tool::at_least(0))
      ->capture_default_str();
  app.add_option("--num-return-sequences", o.num_return_sequences,
                 "beam search: print the R best hypotheses, 1 to B, each after a line '# hypothesis I: score S'")
      ->type_name("R")
      ->check(tool::at_least(1))
      ->capture_default_str();
}

std::optional<kvinfer::BeamSearchOptions> beam_options(const CLI::App& app, const BeamFlags& o,
                                                       const SamplingOptions& sampling, bool speculative,
                                                       bool no_kv_cache) {
  if (o.num_beams < 2) {
    for (const char* beam_only : {"--length-penalty", "--early-stopping", "--no-repeat-ngram-size", "--num-return-sequences"})
      if (app.count(beam_only) > 0) throw tool::UsageError(fmt::format("{} needs --num-beams 2 or more", beam_only));
    return std::nullopt;
  }
  // Beam search is deterministic: options that only shape sampling would be silently ignored.
  if (app.count("--temp") > 0 && sampling.temp != 0.0f)
    throw tool::UsageError("--num-beams cannot be combined with --temp other than 0: beam search does not sample");
  for (const char* ignored : {"--top-k", "--top-p", "--min-p", "--repeat-penalty", "--presence-penalty",
                              "--frequency-penalty", "--repeat-last-n", "--seed", "--logit-bias", "--stop"})
    if (app.count(ignored) > 0)
      throw tool::UsageError(fmt::format("--num-beams cannot be combined with {}: beam search does not use it", ignored));
  if (speculative) throw tool::UsageError("--num-beams cannot be combined with speculative decoding (--lookup, --draft-*)");
  if (no_kv_cache) throw tool::UsageError("--num-beams cannot be combined with --no-kv-cache: every beam keeps its cache");
  if (sampling.max_new_tokens < 1) throw tool::UsageError("-n/--max-new-tokens must be at least 1 with --num-beams");
  if (o.num_return_sequences > o.num_beams)
    throw tool::UsageError(fmt::format("--num-return-sequences: {} is more than the {} beams", o.num_return_sequences,
                                       o.num_beams));
  if (!std::isfinite(o.length_penalty))
    throw tool::UsageError(fmt::format("--length-penalty: {} is not a finite number", o.length_penalty));
  kvinfer::BeamSearchOptions b;
  b.num_beams = o.num_beams;
  b.max_new_tokens = sampling.max_new_tokens;
  b.length_penalty = o.length_penalty;
  b.early_stopping = o.early_stopping == "true"    ? kvinfer::EarlyStopping::Immediate
                     : o.early_stopping == "never" ? kvinfer::EarlyStopping::Never
                                                   : kvinfer::EarlyStopping::Heuristic;
  b.no_repeat_ngram_size = o.no_repeat_ngram_size;
  b.num_return_sequences = o.num_return_sequences;
  b.ignore_eos = sampling.ignore_eos;
  return b;
}

std::string beam_stats_line(const kvinfer::BeamSearchStats& s, int32_t num_beams, const kvinfer::KvCache& kv) {
  const double per_step = s.steps > 0 ? 1000.0 * s.decode_seconds / static_cast<double>(s.steps) : 0.0;
  return fmt::format(
      "[prompt {} tokens at {:.1f} tok/s | beam search: {} beams, {} steps at {:.2f} ms each, selection {:.1f} ms | "
      "cache copies {} ({} rows, {}, {:.2f} ms) | kv caches {} {} in all on {}]",
      s.prompt_tokens, s.prefill_seconds > 0 ? static_cast<double>(s.prompt_tokens) / s.prefill_seconds : 0.0,
      num_beams, s.steps, per_step, 1000.0 * s.select_seconds, s.cache_copies, s.copied_rows,
      kvinfer::format_bytes(s.copied_bytes), 1000.0 * s.copy_seconds, kvinfer::dtype_name(kv.dtype()),
      kvinfer::format_bytes(s.kv_bytes), kvinfer::device_name(kv.device()));
}

bool check_speculative_options(const CLI::App& app, const SpeculativeFlags& o, bool no_kv_cache) {
  const bool model = !o.draft_model.empty() || o.draft_int8_activations;
  const char* drafter = o.lookup > 0 ? "--lookup" : !o.draft_model.empty() ? "--draft-model" : "--draft-int8-activations";
  if (o.lookup > 0 && model)
    throw tool::UsageError(fmt::format("--lookup and {} both choose a drafter: use one",
                                       !o.draft_model.empty() ? "--draft-model" : "--draft-int8-activations"));
  if (o.draft_tokens < 1 || o.draft_tokens > 256)
    throw tool::UsageError(fmt::format("--draft-tokens: {} is not 1 to 256", o.draft_tokens));
  const bool on = o.lookup > 0 || model;
  if (!on && (app.count("--draft-tokens") > 0 || o.draft_fixed))
    throw tool::UsageError(fmt::format("{} needs a drafter: --lookup N or --draft-model PATH",
                                       o.draft_fixed ? "--draft-fixed" : "--draft-tokens"));
  if (on && no_kv_cache)
    throw tool::UsageError(fmt::format(
        "--no-kv-cache cannot be combined with {}: speculative decoding verifies drafts against the cache", drafter));
  return on;
}

std::unique_ptr<kvinfer::DraftModel> load_draft_model(const SpeculativeFlags& o, const ModelOptions& target_options,
                                                      const kvinfer::Model& target, int64_t capacity) {
  if (o.draft_model.empty() && !o.draft_int8_activations) return nullptr;
  ModelOptions d = target_options;
  d.model = o.draft_model.empty() ? model_path(target_options.model).string() : o.draft_model;
  d.activations = {.mode = o.draft_int8_activations ? "int8" : "exact"};
  d.ctx = 0;  // its cache is `capacity` tokens, checked by KvCache against its context length
  d.extend_context = false;
  try {
    auto draft = load_model(d);
    // A draft with a shorter context drafts only while the history fits it.
    const int64_t draft_capacity = std::min(capacity, draft->context_length());
    return std::make_unique<kvinfer::DraftModel>(std::move(draft), target, draft_capacity, kv_dtype(target_options));
  } catch (const tool::UsageError&) {
    throw;
  } catch (const kvinfer::Error& e) {
    const std::string what = e.what();
    // The library's errors start with "draft model:" where they are about the draft already.
    throw kvinfer::Error(e.kind(), what.rfind("draft model", 0) == 0 ? what : fmt::format("--draft-model: {}", what));
  }
}

void set_speculative(kvinfer::GenerateOptions& options, const SpeculativeFlags& o, kvinfer::DraftModel* draft) {
  options.speculative.lookup_ngram = o.lookup;
  options.speculative.draft_model = draft;
  options.speculative.max_draft_tokens = o.draft_tokens;
  options.speculative.adaptive = !o.draft_fixed;
}

namespace {

void draw_progress(uint64_t done, uint64_t total) {
  constexpr int kWidth = 30;
  static int last_percent = -1;  // redraw only when the bar moves: models have thousands of tensors
  const double f = total ? static_cast<double>(done) / static_cast<double>(total) : 1.0;
  const int percent = static_cast<int>(f * 100);
  if (done == 0) last_percent = -1;
  if (percent == last_percent && done != total) return;
  last_percent = percent;
  const int filled = static_cast<int>(f * kWidth);
  std::fprintf(stderr, "\rloading weights [%s%s] %3d%% %s / %s   ", std::string(filled, '#').c_str(),
               std::string(kWidth - filled, '.').c_str(), percent, kvinfer::format_bytes(done).c_str(),
               kvinfer::format_bytes(total).c_str());
  if (done == total) std::fprintf(stderr, "\n");
  std::fflush(stderr);
}

std::pair<int32_t, float> parse_bias(const std::string& s) {
  const auto eq = s.find('=');
  try {
    if (eq == std::string::npos) throw std::invalid_argument("no '='");
    size_t used = 0;
    const long id = std::stol(s.substr(0, eq), &used);
    if (used != eq || id < 0 || id > INT32_MAX) throw std::invalid_argument("bad id");
    const std::string b = s.substr(eq + 1);
    const float bias = b == "-inf" ? -INFINITY : std::stof(b, &used);
    if (b != "-inf" && used != b.size()) throw std::invalid_argument("bad bias");
    return {static_cast<int32_t>(id), bias};
  } catch (const std::exception&) {
    throw tool::UsageError(fmt::format("--logit-bias: '{}' is not ID=BIAS (e.g. 15043=-2.5 or 2=-inf)", s));
  }
}

}  // namespace

std::filesystem::path model_path(const std::string& given) {
  if (!given.empty()) return given;  // -m "" is refused by its validator
  const char* env = std::getenv("KVINFER_MODEL");
  if (env != nullptr && *env != '\0') {
    try {
      kvinfer::model_path_kind(env);
    } catch (const kvinfer::Error& e) {
      throw kvinfer::Error(e.kind(), fmt::format("$KVINFER_MODEL: {}; pass -m PATH or unset it", e.what()));
    }
    return env;
  }
  const char* dflt = default_model();
  if (dflt == nullptr) throw kvinfer::Error(kvinfer::ErrorKind::BadFile, "no model: pass -m PATH or set $KVINFER_MODEL");
  if (!std::filesystem::exists(dflt))
    throw kvinfer::Error(
        kvinfer::ErrorKind::BadFile, fmt::format("no model: pass -m PATH, or run tools/fetch_model.sh to download the default ({})", dflt));
  return dflt;
}

ModelShape read_model_shape(const std::filesystem::path& path) {
  kvinfer::ModelInfo info = kvinfer::inspect_model(path);
  return {std::string(kvinfer::model_format_name(info.format)), std::move(info.config)};
}

std::shared_ptr<const kvinfer::Model> load_model(const ModelOptions& o) {
  const std::filesystem::path path = model_path(o.model);
  if (o.ctx > 0 && !o.extend_context) {
    const kvinfer::ModelConfig c = read_model_shape(path).config;
    if (o.ctx > c.max_position_embeddings)
      throw tool::UsageError(fmt::format(
          "-c/--ctx: {} tokens is beyond the model's context length of {} tokens; --extend-context allows it "
          "(rotary models; the output usually degrades past the trained length)",
          kvinfer::format_count(o.ctx), kvinfer::format_count(c.max_position_embeddings)));
  }
  const tool::DeviceChoice dev = tool::parse_device(o.device);
  kvinfer::LoadOptions options{.device = dev.device, .device_index = dev.index, .on_progress = {},
                               .activations = o.activations.value()};
  options.weights_in_place = o.weights_in_place;
  options.threads = tool::checked_threads(o.threads, "-t/--threads");
  // A cache of --ctx tokens is planned: weights and cache are checked against the memory
  // available before any weight is read.
  options.kv_tokens = o.ctx;
  options.kv_dtype = kv_dtype(o);
  // -c is the model's context length too: the length dynamic NTK and LongRoPE pick their
  // frequencies by (docs/rope-scaling.md), as llama.cpp's -c does; below the trained length too.
  options.context_length = o.ctx;
  if (isatty(fileno(stderr))) options.on_progress = draw_progress;
  return kvinfer::Model::load(path, options);
}

std::optional<kvinfer::DType> kv_dtype(const ModelOptions& o) {
  if (o.kv_dtype == "auto") return std::nullopt;
  try {
    return kvinfer::parse_dtype(o.kv_dtype);
  } catch (const kvinfer::Error& e) {
    throw tool::UsageError(fmt::format("--kv-dtype: {}", e.what()));
  }
}

namespace {

// --seed: -1 or a whole number that fits 64 bits; anything else is refused, never clamped.
uint64_t parse_seed(const std::string& text) {
  if (text == "-1") return (uint64_t{std::random_device{}()} << 31) ^ std::random_device{}();
  size_t used = 0;
  uint64_t v = 0;
  try {
    if (!text.empty() && text[0] >= '0' && text[0] <= '9') v = std::stoull(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size())
    throw tool::UsageError(
        fmt::format("--seed: '{}' is not -1 (random) or a whole number from 0 to 18446744073709551615", text));
  return v;
}

// The library's name of a sampling parameter, and the option that sets it.
constexpr std::pair<std::string_view, std::string_view> kSamplingOptions[] = {
    {"temperature", "--temp"},
    {"top_k", "--top-k"},
    {"top_p", "--top-p"},
    {"min_p", "--min-p"},
    {"repetition_penalty", "--repeat-penalty"},
    {"presence_penalty", "--presence-penalty"},
    {"frequency_penalty", "--frequency-penalty"},
    {"penalty_last_n", "--repeat-last-n"},
    {"logit_bias", "--logit-bias"},
};

// SamplingParams::validate, its errors naming the option instead of the parameter.
void validate_sampling(const kvinfer::SamplingParams& s, int64_t vocab_size) {
  try {
    s.validate(static_cast<int32_t>(vocab_size));
  } catch (const kvinfer::Error& e) {
    constexpr std::string_view kPrefix = "sampling parameter ";
    std::string_view m = e.what();
    if (m.substr(0, kPrefix.size()) == kPrefix) {
      m.remove_prefix(kPrefix.size());
      for (const auto& [param, option] : kSamplingOptions) {
        if (m.substr(0, param.size()) != param) continue;
        m.remove_prefix(param.size());  // then "[i]" for a logit bias, ':' or a space
        if (!m.empty() && m[0] == '[') m.remove_prefix(std::min(m.size(), m.find(']') + 1));
        while (!m.empty() && (m[0] == ':' || m[0] == ' ')) m.remove_prefix(1);
        const bool of_a_token = m.substr(0, 4) == "for ";  // "logit_bias[i] for token id ..."
        throw tool::UsageError(fmt::format("{}: {}{}", option, of_a_token ? "the bias " : "", m));
      }
    }
    throw tool::UsageError(e.what());
  }
}

}  // namespace

kvinfer::GenerateOptions generate_options(const SamplingOptions& o) {
  kvinfer::GenerateOptions g;
  g.max_new_tokens = o.max_new_tokens;
  g.ignore_eos = o.ignore_eos;
  for (const std::string& stop : o.stop)
    if (stop.empty()) throw tool::UsageError("--stop: an empty string; give the text to stop at");
  g.stop_strings = o.stop;
  kvinfer::SamplingParams& s = g.sampling;
  s.temperature = o.temp;
  s.top_k = o.top_k;
  s.top_p = o.top_p;
  s.min_p = o.min_p;
  s.repetition_penalty = o.repeat_penalty;
  s.presence_penalty = o.presence_penalty;
  s.frequency_penalty = o.frequency_penalty;
  s.penalty_last_n = o.repeat_last_n;
  s.seed = parse_seed(o.seed);
  for (const std::string& b : o.logit_bias) s.logit_bias.push_back(parse_bias(b));
  // Every value but the bias ids (which need the vocabulary) checked before the model loads.
  kvinfer::SamplingParams without_ids = s;
  without_ids.logit_bias.clear();
  validate_sampling(without_ids, 1);
  return g;
}

void check_token_id(int64_t id, const kvinfer::Model& model, std::string_view option) {
  const int64_t vocab = model.config().vocab_size;
  if (id < 0 || id >= vocab)
    throw tool::UsageError(fmt::format("{}: token id {} is outside the model's vocabulary (ids 0 to {})", option,
                                       kvinfer::format_count(id), kvinfer::format_count(vocab - 1)));
}

void check_generate_options(const kvinfer::GenerateOptions& g, const kvinfer::Model& model) {
  for (const auto& [id, bias] : g.sampling.logit_bias) check_token_id(id, model, "--logit-bias");
  validate_sampling(g.sampling, model.config().vocab_size);
}

namespace {
// " | speculative lookup 3: drafted 120, accepted 97 (80.8 %), 31 verify passes", in the stats line.
std::string speculative_stats(const kvinfer::GenerationStats& s, const kvinfer::SpeculativeOptions& o) {
  return fmt::format(" | speculative {}: drafted {}, accepted {} ({:.1f} %), {} verify passes",
                     o.lookup_ngram > 0 ? fmt::format("lookup {}", o.lookup_ngram) : std::string("draft model"),
                     s.drafted_tokens, s.accepted_tokens, 100.0 * s.acceptance_rate(), s.verify_passes);
}
}  // namespace

std::string stats_line(const kvinfer::GenerationStats& s, kvinfer::StopReason stop, const kvinfer::KvCache& kv,
                       const kvinfer::GenerateOptions& options) {
  return fmt::format(
      "[prompt {} tokens at {:.1f} tok/s | generated {} tokens at {:.1f} tok/s | first token {:.1f} ms | "
      "kv cache{} {} {}/{} tokens {} on {} | stop: {} | seed {}{}{}]",
      s.prompt_tokens, s.prefill_tokens_per_second(), s.generated_tokens, s.decode_tokens_per_second(),
      s.ttft_seconds * 1000.0, options.use_kv_cache ? "" : " (off: recomputed every step)", kvinfer::dtype_name(kv.dtype()), kv.size(), kv.capacity(),
      kvinfer::format_bytes(kv.bytes()), kvinfer::device_name(kv.device()), kvinfer::stop_reason_name(stop),
      options.sampling.temperature == 0 ? std::string("- (greedy)") : std::to_string(options.sampling.seed),
      options.speculative.enabled() ? speculative_stats(s, options.speculative) : std::string(),
      options.sampling.grammar ? fmt::format(" | grammar {} states, compiled in {:.1f} ms", options.sampling.grammar->stats().states,
                                             options.sampling.grammar->stats().compile_seconds * 1000.0)
                               : std::string());
}

}  // namespace cli
