// kvinfer-bench-grammar: what constrained sampling costs (docs/structured-output.md, "Cost").
// For a vocabulary and a set of JSON schemas (the JSON Schema Test Suite's that compile, and the
// realistic ones in bench/schemas/): each schema's compile time, then random walks through its
// language, a token at a time (uniform among the allowed ones, seeded), timing what a Sampler with
// the grammar adds to a step: the mask, banning the rest of the row, reading the chosen token.
// With -m the model's decode step is timed in the same run and the mask given as a share of it.
// --per-schema adds a line for every schema (the realistic ones always get one). On a busy machine,
// --clock thread times the mask and the decode step (then on one thread) in the calling thread's
// CPU time, so that the time other processes hold the core is not counted in either.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <ctime>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "grammar/token_matcher.h"
#include "kvinfer/kvinfer.h"
#include "tool.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Microseconds now: wall time, or this thread's CPU time (--clock thread).
bool thread_clock = false;
double now_us() {
  if (thread_clock) {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
  }
  return std::chrono::duration<double, std::micro>(Clock::now().time_since_epoch()).count();
}
double us_since(Clock::time_point t) { return std::chrono::duration<double, std::micro>(Clock::now() - t).count(); }

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5))];
}

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Set {
  std::string name;
  std::vector<std::pair<std::string, std::string>> schemas;  // (label, schema text)
};

struct Result {
  int compiled = 0, refused = 0;
  std::vector<double> compile_ms, mask_us;
  int64_t states = 0;
};

double mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0 : sum / static_cast<double>(v.size());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kvinfer-bench-grammar: compile time and per-token mask cost of JSON-schema grammars", "kvinfer-bench-grammar"};
  std::vector<std::string> tokenizers;
  std::vector<int32_t> vocab_sizes;
  bool per_schema = false;
  std::string model, suite = "/usr/share/json-schema-test-suite/tests/draft7", schemas = "bench/schemas";
  int walks = 4, max_tokens = 96;
  uint64_t seed = 1;
  app.add_option("--tokenizer", tokenizers, "a GGUF file or a HF tokenizer directory (repeatable)")->required();
  app.add_option("--vocab-size", vocab_sizes,
                 "the logits row's size for the --tokenizer in the same place (a model's vocab_size, e.g. 151936 "
                 "for Qwen2.5; the ids past the tokenizer's are never allowed); 0 or absent: the tokenizer's");
  app.add_flag("--per-schema", per_schema, "a line for every schema, not only the realistic ones");
  std::string clock = "wall";
  app.add_option("--clock", clock,
                 "wall: elapsed time; thread: the calling thread's CPU time (a busy machine), the decode step on one thread")
      ->check(CLI::IsMember({"wall", "thread"}))
      ->capture_default_str();
  int threads = 0;
  app.add_option("-t,--threads", threads, "the decode step's threads with --clock wall (0: the default)")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  app.add_option("-m,--model", model, "a model whose decode step (median of 64, one sequence) the mask is compared with");
  app.add_option("--suite", suite, "the JSON Schema Test Suite's draft7 folder (\"\": none)")->capture_default_str();
  app.add_option("--schemas", schemas, "a folder of realistic schemas (*.json)")->capture_default_str();
  app.add_option("--walks", walks, "random walks per schema")->capture_default_str();
  app.add_option("--max-tokens", max_tokens, "tokens per walk at most")->capture_default_str();
  app.add_option("--seed", seed, "the walks' seed")->capture_default_str();
  return tool::run(app, argc, argv, [&] {
    thread_clock = clock == "thread";
    std::vector<Set> sets;
    if (!suite.empty() && fs::is_directory(suite)) {
      Set s{"JSON Schema Test Suite (draft 7)", {}};
      std::vector<fs::path> files;
      for (const auto& e : fs::directory_iterator(suite))
        if (e.path().extension() == ".json") files.push_back(e.path());
      std::sort(files.begin(), files.end());
      for (const auto& f : files) {
        const auto groups = nlohmann::json::parse(read(f));
        for (size_t i = 0; i < groups.size(); ++i)
          s.schemas.emplace_back(fmt::format("{}#{}", f.filename().string(), i), groups[i]["schema"].dump());
      }
      sets.push_back(std::move(s));
    }
    if (fs::is_directory(schemas)) {
      Set s{"realistic API schemas (bench/schemas)", {}};
      std::vector<fs::path> files;
      for (const auto& e : fs::directory_iterator(schemas))
        if (e.path().extension() == ".json") files.push_back(e.path());
      std::sort(files.begin(), files.end());
      for (const auto& f : files) s.schemas.emplace_back(f.filename().string(), read(f));
      sets.push_back(std::move(s));
    }
    double step_us = 0;
    if (!model.empty()) {
      auto m = kvinfer::Model::load(model);
      kvinfer::Session session(m, {.threads = thread_clock ? 1 : threads});
      kvinfer::KvCache kv(*m, 256);
      session.prefill(kv, std::vector<int32_t>{1, 2, 3, 4});
      std::vector<double> steps;
      int32_t id = 5;
      for (int i = 0; i < 64; ++i) {
        const double t0 = now_us();
        const auto logits = session.decode(kv, id);
        steps.push_back(now_us() - t0);
        id = kvinfer::argmax(logits);
      }
      step_us = percentile(steps, 0.5);
      std::printf("decode step of %s: median %.0f µs (64 steps, one sequence, %s)\n", model.c_str(), step_us,
                  thread_clock ? "one thread, its CPU time" : "wall time");
    }
    for (size_t k = 0; k < tokenizers.size(); ++k) {
      const std::string& path = tokenizers[k];
      const kvinfer::Tokenizer tok = path.ends_with(".gguf") ? kvinfer::Tokenizer::from_gguf(path) : kvinfer::Tokenizer::from_hf(path);
      const int32_t row = k < vocab_sizes.size() ? vocab_sizes[k] : 0;
      if (row != 0 && row < tok.vocab_size())
        throw tool::UsageError(fmt::format("--vocab-size {} is below the {} tokens of {}", row, tok.vocab_size(), path));
      const auto t0 = Clock::now();
      auto vocab = std::make_shared<const kvinfer::GrammarVocabulary>(tok, row);
      std::printf("\n%s: %d tokens, a row of %d, vocabulary trie in %.1f ms\n", path.c_str(), tok.vocab_size(),
                  vocab->vocab_size(), us_since(t0) / 1000);
      std::printf("%-40s %8s %8s %10s %10s %10s %10s %10s %10s %10s\n", "schemas", "compiled", "refused", "compile ms",
                  "(max)", "mask µs", "(mean)", "(p90)", "(p99)", "(max)");
      for (const Set& set : sets) {
        Result r;
        std::mt19937_64 rng(seed);
        std::vector<uint64_t> mask((static_cast<size_t>(vocab->vocab_size()) + 63) / 64);
        std::vector<float> logits(static_cast<size_t>(vocab->vocab_size()), 0.0f);
        const bool lines = per_schema || set.name.starts_with("realistic");
        for (const auto& [label, text] : set.schemas) {
          std::shared_ptr<const kvinfer::Grammar> g;
          try {
            g = kvinfer::Grammar::from_json_schema(text, vocab);
          } catch (const kvinfer::Error&) {
            ++r.refused;
            continue;
          }
          ++r.compiled;
          r.compile_ms.push_back(g->stats().compile_seconds * 1000);
          r.states += g->stats().states;
          const size_t before = r.mask_us.size();
          for (int w = 0; w < walks; ++w) {
            kvinfer::grammar::TokenMatcher m(g);
            for (int t = 0; t < max_tokens && !m.finished(); ++t) {
              const double t1 = now_us();
              m.fill_mask(mask);
              // What Sampler::sample adds: the banned tokens of the row to -inf.
              for (size_t i = 0; i < mask.size(); ++i) {
                const uint64_t bits = mask[i];
                if (bits == ~uint64_t{0}) continue;
                const size_t end = std::min(logits.size(), i * 64 + 64);
                for (size_t id = i * 64; id < end; ++id)
                  if (((bits >> (id & 63)) & 1) == 0) logits[id] = -std::numeric_limits<float>::infinity();
              }
              const double masked = now_us() - t1;
              std::vector<int32_t> allowed;
              for (size_t i = 0; i < mask.size(); ++i)
                for (uint64_t b = mask[i]; b != 0; b &= b - 1) allowed.push_back(static_cast<int32_t>(i * 64 + static_cast<size_t>(__builtin_ctzll(b))));
              if (allowed.empty()) break;
              const int32_t pick = allowed[rng() % allowed.size()];
              const double t2 = now_us();
              if (!m.accept(pick)) return tool::kExitError;
              r.mask_us.push_back(masked + now_us() - t2);
              std::fill(logits.begin(), logits.end(), 0.0f);
            }
          }
          if (lines) {
            const std::vector<double> own(r.mask_us.begin() + static_cast<std::ptrdiff_t>(before), r.mask_us.end());
            std::printf("  %-38s %8lld %8s %10.1f %10s %10.1f %10.1f %10.1f %10.1f %10.1f\n", label.c_str(),
                        static_cast<long long>(g->stats().states), "states", g->stats().compile_seconds * 1000, "",
                        percentile(own, 0.5), mean(own), percentile(own, 0.9), percentile(own, 0.99), percentile(own, 1.0));
          }
        }
        std::printf("%-40s %8d %8d %10.1f %10.1f %10.1f %10.1f %10.1f %10.1f %10.1f\n", set.name.c_str(), r.compiled, r.refused,
                    percentile(r.compile_ms, 0.5), percentile(r.compile_ms, 1.0), percentile(r.mask_us, 0.5),
                    mean(r.mask_us), percentile(r.mask_us, 0.9), percentile(r.mask_us, 0.99), percentile(r.mask_us, 1.0));
        if (step_us > 0)
          std::printf("%-40s mask per token: median %.2f %%, mean %.2f %%, p99 %.2f %% of a decode step (%zu tokens)\n", "",
                      100 * percentile(r.mask_us, 0.5) / step_us, 100 * mean(r.mask_us) / step_us,
                      100 * percentile(r.mask_us, 0.99) / step_us, r.mask_us.size());
      }
    }
    return tool::kExitOk;
  });
}
