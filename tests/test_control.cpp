// What an embedding application controls: the log callback, cancelling a load or a prefill, the
// threads of a model and of a session, chunked prefill (the same bits as one pass), and the one
// set of sampling defaults.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <mutex>
#include <optional>
#include <thread>
#include <string>
#include <vector>

#include "kvinfer/kvinfer.h"
#include "test_files.h"

namespace kvinfer {
namespace {

using test::error_of;
using test::filled_kv;
using test::fixture_dir;
using ::testing::HasSubstr;

// llama_gqa4: f32, 2 layers, vocab 128.
std::shared_ptr<const Model> fixture(LoadOptions options = {}) {
  options.device = Device::CPU;
  return Model::load(fixture_dir("llama_gqa4"), options);
}

std::vector<int32_t> ids(int n) {
  std::vector<int32_t> v;
  for (int i = 0; i < n; ++i) v.push_back((i * 37 + 5) % 128);
  return v;
}

bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size_bytes()) == 0;
}

// ---- log ----

struct Captured {
  std::mutex mutex;
  std::vector<std::pair<LogLevel, std::string>> lines;
};

TEST(Log, SilentUntilACallbackIsInstalledAndAfterItIsRemoved) {
  Captured c;
  const auto capture = [&c](LogLevel level, std::string_view message) {
    const std::lock_guard lock(c.mutex);
    c.lines.emplace_back(level, std::string(message));
  };
  fixture();  // no callback: nothing to see, nothing to crash
  set_log_callback(capture, LogLevel::Info);
  fixture();
  set_log_callback({});
  const size_t after_load = c.lines.size();
  fixture();
  ASSERT_GE(after_load, 1u);
  EXPECT_EQ(c.lines.size(), after_load);
  EXPECT_EQ(c.lines[0].first, LogLevel::Info);
  EXPECT_THAT(c.lines[0].second, HasSubstr(fixture_dir("llama_gqa4").string()));
  EXPECT_THAT(c.lines[0].second, HasSubstr("CPU threads"));
  for (const auto& [level, line] : c.lines) EXPECT_EQ(line.find('\n'), std::string::npos) << line;

  // A callback installed for errors only hears nothing of a load.
  c.lines.clear();
  set_log_callback(capture, LogLevel::Error);
  fixture();
  set_log_callback({});
  EXPECT_TRUE(c.lines.empty());
  EXPECT_EQ(log_level_name(LogLevel::Warning), "warning");
}

// ---- cancelling a load ----

TEST(Cancel, ALoadStopsAtTheFirstCheckAndThrowsCancelled) {
  int asked = 0;
  const std::string message = error_of(ErrorKind::Cancelled, [&] {
    fixture({.cancel = [&] {
      ++asked;
      return true;
    }});
  });
  EXPECT_EQ(asked, 1);
  EXPECT_THAT(message, HasSubstr("load cancelled"));
  EXPECT_THAT(message, HasSubstr(fixture_dir("llama_gqa4").string()));
}

TEST(Cancel, ALoadIsAskedBetweenTensorsAndCanBeCancelledPartWay) {
  int calls = 0;
  fixture({.cancel = [&] {
    ++calls;
    return false;
  }});
  ASSERT_GT(calls, 3);  // once up front, then before every tensor
  for (int stop_at : {2, calls / 2, calls}) {
    int asked = 0;
    error_of(ErrorKind::Cancelled, [&] { fixture({.cancel = [&] { return ++asked == stop_at; }}); });
    EXPECT_EQ(asked, stop_at);
  }
}

// ---- chunked prefill ----

TEST(ChunkedPrefill, EveryChunkSizeGivesTheBitsOfOnePass) {
  const auto model = fixture();
  const std::vector<int32_t> prompt = ids(23);
  Session whole(model);  // 512-token chunks: one pass
  KvCache kv_whole(*model, 32);
  const auto copy = [](std::span<const float> s) { return std::vector<float>(s.begin(), s.end()); };
  const std::vector<float> all = copy(whole.prefill(kv_whole, prompt, Logits::All));
  const std::vector<float> next = copy(whole.decode(kv_whole, 7));
  for (int64_t chunk : {1, 2, 5, 22, 23}) {
    SCOPED_TRACE(chunk);
    Session s(model, {.prefill_chunk_tokens = chunk});
    KvCache kv(*model, 32);
    EXPECT_TRUE(same_bits(s.prefill(kv, prompt, Logits::All), all));
    EXPECT_EQ(kv.size(), 23);
    EXPECT_TRUE(same_bits(s.decode(kv, 7), next));
    EXPECT_TRUE(filled_kv(kv) == filled_kv(kv_whole));
    KvCache kv_last(*model, 32);
    EXPECT_TRUE(same_bits(s.prefill(kv_last, prompt), std::span<const float>(all).last(128)));
    KvCache kv_step(*model, 32);
    s.step(kv_step, prompt);
    EXPECT_TRUE(same_bits(s.logits(), std::span<const float>(all).last(128)));
  }
}

TEST(ChunkedPrefill, CancelBetweenChunksLeavesTheCacheAsItWas) {
  const auto model = fixture();
  Session s(model, {.prefill_chunk_tokens = 4});
  KvCache kv(*model, 64);
  s.prefill(kv, ids(5));
  const std::vector<std::byte> before = filled_kv(kv);
  int asked = 0;
  const auto cancel_third = [&] { return ++asked == 3; };
  EXPECT_THAT(error_of(ErrorKind::Cancelled, [&] { s.prefill(kv, ids(20), Logits::Last, cancel_third); }),
              HasSubstr("prefill cancelled after 12 of 20 tokens"));
  EXPECT_EQ(asked, 3);  // before chunks 2, 3 and 4
  EXPECT_EQ(kv.size(), 5);
  EXPECT_TRUE(filled_kv(kv) == before);
  EXPECT_THAT(error_of(ErrorKind::InvalidArgument, [&] { s.logits(); }), HasSubstr("no logits"));
  // A whole input that does not fit is refused before any chunk runs.
  EXPECT_THAT(error_of(ErrorKind::ContextFull, [&] { s.prefill(kv, ids(60)); }), HasSubstr("do not fit"));
  EXPECT_EQ(kv.size(), 5);
  // One chunk: never asked.
  asked = 0;
  s.prefill(kv, ids(4), Logits::Last, [&] { return ++asked > 0; });
  EXPECT_EQ(asked, 0);
  EXPECT_EQ(kv.size(), 9);
  EXPECT_THAT(error_of(ErrorKind::InvalidArgument, [&] { Session(model, {.prefill_chunk_tokens = 0}); }),
              HasSubstr("prefill_chunk_tokens"));
}

TEST(Cancel, GenerationStopsBeforeTheNextStepOrDuringItsPrefill) {
  const auto model = fixture();
  Session s(model, {.prefill_chunk_tokens = 4});
  KvCache kv(*model, 64);
  GenerateOptions o;
  o.max_new_tokens = 20;
  o.ignore_eos = true;
  int asked = 0;
  o.cancel = [&] { return ++asked == 5; };  // the prompt's 2 chunks ask once, then before each step
  const GenerateResult r = generate_greedy(s, kv, ids(8), o);
  EXPECT_EQ(r.stop, StopReason::Cancelled);
  EXPECT_EQ(stop_reason_name(r.stop), "cancelled");
  EXPECT_EQ(r.tokens.size(), 4u);
  EXPECT_EQ(kv.size(), 8 + 3);  // the prompt and every generated token but the last
  // The same tokens as a run nobody cancels.
  KvCache kv2(*model, 64);
  o.cancel = {};
  o.max_new_tokens = 4;
  EXPECT_EQ(generate_greedy(s, kv2, ids(8), o).tokens, r.tokens);

  // Cancelled during the prompt: no token, the cache as before.
  KvCache kv3(*model, 64);
  o.cancel = [] { return true; };
  const GenerateResult p = generate_greedy(s, kv3, ids(9), o);
  EXPECT_EQ(p.stop, StopReason::Cancelled);
  EXPECT_TRUE(p.tokens.empty());
  EXPECT_EQ(kv3.size(), 0);
}

// ---- threads ----

TEST(Threads, PerModelAndPerSessionCountsGiveTheSameBits) {
  const auto one = fixture({.threads = 1});
  const auto two = fixture({.threads = 2});
  EXPECT_EQ(one->threads(), 1);
  EXPECT_EQ(two->threads(), 2);
  std::vector<std::vector<float>> results;
  for (const auto& [model, threads] : {std::pair{one, 0}, std::pair{two, 0}, std::pair{one, 3}}) {
    Session s(model, {.threads = threads});
    KvCache kv(*model, 32);
    const auto l = s.prefill(kv, ids(17), Logits::All);
    results.emplace_back(l.begin(), l.end());
  }
  EXPECT_TRUE(results[0] == results[1]);
  EXPECT_TRUE(results[0] == results[2]);
  EXPECT_THAT(error_of(ErrorKind::InvalidArgument, [&] { fixture({.threads = -1}); }), HasSubstr("threads"));
  EXPECT_THAT(error_of(ErrorKind::InvalidArgument, [&] { Session(one, {.threads = -2}); }), HasSubstr("threads"));
}

TEST(Threads, TheDefaultFollowsOmpNumThreadsElseTheIdleCores) {
  {
    test::ScopedEnv env("OMP_NUM_THREADS", "3");
    EXPECT_EQ(default_cpu_threads(), 3);
    EXPECT_EQ(fixture()->threads(), 3);
  }
  {
    test::ScopedEnv env("OMP_NUM_THREADS", "2,1");
    EXPECT_EQ(default_cpu_threads(), 2);
  }
  test::ScopedEnv env("OMP_NUM_THREADS", std::nullopt);
  const int n = default_cpu_threads();
  EXPECT_GE(n, 1);
  EXPECT_LE(n, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
}

// ---- sampling defaults ----

TEST(SamplingDefaults, AreGreedyWithEveryFilterOffInEveryPlace) {
  const SamplingParams d;
  EXPECT_EQ(d.temperature, 0.0f);
  EXPECT_EQ(d.top_k, 0);
  EXPECT_EQ(d.top_p, 1.0f);
  EXPECT_EQ(d.min_p, 0.0f);
  EXPECT_EQ(d.repetition_penalty, 1.0f);
  const GenerateOptions g;
  const SamplingParams greedy = SamplingParams::greedy();
  for (const SamplingParams* p : {&g.sampling, &greedy}) {
    EXPECT_EQ(p->temperature, d.temperature);
    EXPECT_EQ(p->top_k, d.top_k);
    EXPECT_EQ(p->top_p, d.top_p);
    EXPECT_EQ(p->min_p, d.min_p);
    EXPECT_EQ(p->penalty_last_n, d.penalty_last_n);
  }
  // "Temperature 0.7, top-p 0.9" is all that applies: over 1000 equal logits, top-p keeps about
  // 900 tokens, where a hidden top-k of 40 would keep 40.
  SamplingParams p;
  p.temperature = 0.7f;
  p.top_p = 0.9f;
  Sampler s(p, 1000);
  const std::vector<float> flat(1000, 0.0f);
  s.sample(flat);
  EXPECT_NEAR(static_cast<double>(s.last_candidates().size()), 900.0, 1.0);
}

}  // namespace
}  // namespace kvinfer
