// Scheduler: continuous batching gives every request what generating it alone gives (tokens,
// text, stop reason), whatever joins, leaves or shares a prefix; and its policy: chunked
// prefill beside decoding, the step's token budget, the KV budget, the queue bound, cancelling.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kvinfer/kvinfer.h"

namespace kvinfer {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

const fs::path kModels = fs::path(KVINFER_TEST_DATA) / "models";

std::shared_ptr<const Model> load(const char* name) {
  return Model::load(kModels / name, {.device = Device::CPU, .threads = 1});
}

std::vector<int32_t> random_prompt(std::mt19937_64& rng, const Model& m, size_t lo, size_t hi) {
  std::vector<int32_t> p(std::uniform_int_distribution<size_t>(lo, hi)(rng));
  for (int32_t& id : p) id = static_cast<int32_t>(std::uniform_int_distribution<int64_t>(0, m.config().vocab_size - 1)(rng));
  return p;
}

// A mix of greedy and sampled requests (each with its own seed) of random lengths.
std::vector<SchedulerRequest> random_requests(const Model& m, int count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<SchedulerRequest> out;
  for (int i = 0; i < count; ++i) {
    SchedulerRequest r;
    r.prompt = random_prompt(rng, m, 1, 30);
    r.options.max_new_tokens = std::uniform_int_distribution<int64_t>(1, 12)(rng);
    r.options.ignore_eos = i % 3 != 0;  // some may end at an eos id
    if (i % 2 == 1) r.options.sampling = {.temperature = 0.9f, .top_k = 20, .top_p = 0.95f, .seed = rng()};
    out.push_back(std::move(r));
  }
  return out;
}

GenerateResult alone(const std::shared_ptr<const Model>& model, const SchedulerRequest& r) {
  Session s(model);
  const int64_t capacity = std::min<int64_t>(static_cast<int64_t>(r.prompt.size()) + std::max<int64_t>(r.options.max_new_tokens, 1),
                                             model->context_length());
  KvCache kv(*model, capacity);
  if (r.text) return generate(s, kv, model->tokenizer(), r.prompt, r.options);
  return generate_tokens(s, kv, r.prompt, r.options);
}

// Submits every request, runs the scheduler until idle, returns the results by submission order.
std::vector<SequenceResult> run_all(Scheduler& sched, const std::vector<SchedulerRequest>& requests,
                                    std::vector<std::vector<int32_t>>* streamed = nullptr) {
  std::vector<SequenceResult> results(requests.size());
  if (streamed) streamed->assign(requests.size(), {});
  for (size_t i = 0; i < requests.size(); ++i) {
    sched.submit(
        requests[i],
        [streamed, i](int32_t tok, std::string_view) {
          if (streamed) (*streamed)[i].push_back(tok);
          return true;
        },
        [&results, i](const SequenceResult& r) { results[i] = r; });
  }
  sched.run_until_idle();
  return results;
}

TEST(Scheduler, EveryRequestGetsWhatItGetsAlone) {
  for (const char* name : {"llama_gqa4", "gpt2_tiny", "mistral_window"}) {
    SCOPED_TRACE(name);
    const auto model = load(name);
    const auto requests = random_requests(*model, 20, 3);
    // Four running at a time, 12 tokens a step: prompts are chunked, sequences join as others end.
    Scheduler sched(model, {.step_tokens = 12, .max_sequences = 4});
    std::vector<std::vector<int32_t>> streamed;
    const auto results = run_all(sched, requests, &streamed);
    for (size_t i = 0; i < requests.size(); ++i) {
      const GenerateResult want = alone(model, requests[i]);
      ASSERT_FALSE(results[i].error) << results[i].error->what();
      EXPECT_EQ(results[i].result.tokens, want.tokens) << "request " << i;
      EXPECT_EQ(streamed[i], want.tokens) << "request " << i;
      EXPECT_EQ(results[i].result.stop, want.stop) << "request " << i;
      EXPECT_EQ(results[i].result.stats.kv_tokens, want.stats.kv_tokens) << "request " << i;
    }
    const SchedulerStats st = sched.stats();
    EXPECT_EQ(st.completed, 20);
    EXPECT_EQ(st.queued + st.decoding + st.prefilling, 0);
    EXPECT_EQ(st.kv_bytes_in_use, 0u);
    EXPECT_LE(st.last_step_tokens, 12);
  }
}

TEST(Scheduler, TextRequestsStreamWhatGenerateStreams) {
  const auto model = load("chatml_tiny");
  std::mt19937_64 rng(5);
  std::vector<SchedulerRequest> requests;
  for (int i = 0; i < 8; ++i) {
    SchedulerRequest r;
    r.text = true;
    r.prompt = model->tokenizer().encode("Once upon a time " + std::to_string(i));
    r.options.max_new_tokens = 24;
    r.options.sampling = {.temperature = 1.0f, .seed = rng()};
    if (i % 2 == 0) r.options.stop_strings = {"e"};
    requests.push_back(std::move(r));
  }
  Scheduler sched(model, {.step_tokens = 8, .max_sequences = 3});
  std::vector<std::string> pieces(requests.size());
  std::vector<SequenceResult> results(requests.size());
  for (size_t i = 0; i < requests.size(); ++i)
    sched.submit(
        requests[i], [&pieces, i](int32_t, std::string_view p) { return pieces[i] += p, true; },
        [&results, i](const SequenceResult& r) { results[i] = r; });
  sched.run_until_idle();
  int stopped = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    const GenerateResult want = alone(model, requests[i]);
    EXPECT_EQ(results[i].result.text, want.text) << "request " << i;
    EXPECT_EQ(pieces[i], want.text) << "request " << i;
    EXPECT_EQ(results[i].result.stop, want.stop) << "request " << i;
    stopped += want.stop == StopReason::StopString;
  }
  EXPECT_GT(stopped, 0);  // the stop strings were exercised
}

TEST(Scheduler, DecodingNeverWaitsForALongPrompt) {
  const auto model = load("llama_gqa4");
  Scheduler sched(model, {.step_tokens = 8, .max_sequences = 2});
  int64_t tokens = 0;
  SchedulerRequest first{{1, 2, 3}, {.max_new_tokens = 40, .ignore_eos = true}};
  sched.submit(first, [&](int32_t, std::string_view) { return ++tokens, true; });
  ASSERT_TRUE(sched.step());  // the first prompt, and its first token
  EXPECT_EQ(tokens, 1);
  std::mt19937_64 rng(1);
  SchedulerRequest second{random_prompt(rng, *model, 100, 100), {.max_new_tokens = 2}};
  sched.submit(second);
  // 100 prompt tokens at 8 a step less the decoding token: 15 steps of chunks, one token each.
  for (int step = 0; step < 15; ++step) {
    ASSERT_TRUE(sched.step());
    EXPECT_EQ(tokens, step + 2) << "the decoding sequence stalled at step " << step;
    EXPECT_EQ(sched.stats().last_step_tokens, step < 14 ? 8 : 1 + 2);  // 14 chunks of 7, then 2
    EXPECT_EQ(sched.stats().last_step_sequences, 2);
  }
  sched.run_until_idle();
  EXPECT_EQ(sched.stats().completed, 2);
}

// The default budget: 90 % of what the model's memory figure leaves (here an explicit limit, far
// below what the machine has available), so that the process keeps room for everything else.
TEST(Scheduler, TheDefaultKvBudgetIsNinetyPercentOfWhatIsLeft) {
  constexpr uint64_t kLimit = uint64_t{64} << 20;
  const auto model = Model::load(kModels / "llama_gqa4", {.device = Device::CPU, .memory_limit = kLimit, .threads = 1});
  Scheduler sched(model, {.step_tokens = 64, .max_sequences = 8});
  EXPECT_EQ(sched.stats().kv_budget_bytes, (kLimit - model->weight_bytes()) / 10 * 9);
}

TEST(Scheduler, TheKvBudgetQueuesWhatDoesNotFit) {
  const auto model = load("llama_gqa4");
  const uint64_t one = plan_kv_bytes(model->config(), 20 + 10, default_kv_dtype(model->weight_dtype()));
  Scheduler sched(model, {.step_tokens = 64, .max_sequences = 8, .kv_budget_bytes = 2 * one});
  EXPECT_EQ(sched.stats().kv_budget_bytes, 2 * one);
  std::mt19937_64 rng(2);
  std::vector<SchedulerRequest> requests;
  for (int i = 0; i < 5; ++i) requests.push_back({random_prompt(rng, *model, 20, 20), {.max_new_tokens = 10, .ignore_eos = true}});
  for (const auto& r : requests) sched.submit(r);
  int64_t most = 0;
  while (sched.step()) {
    const SchedulerStats st = sched.stats();
    most = std::max(most, st.decoding + st.prefilling);
    EXPECT_LE(st.kv_bytes_in_use, 2 * one);
  }
  EXPECT_EQ(most, 2);  // two caches fit; the others waited, first come first served
  EXPECT_EQ(sched.stats().completed, 5);
  // A cache beyond the whole budget can never run: refused at once.
  SchedulerRequest huge{random_prompt(rng, *model, 20, 20), {.max_new_tokens = 100}};
  try {
    sched.submit(huge);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::OutOfMemory);
    EXPECT_THAT(e.what(), HasSubstr("beyond the scheduler's whole KV budget"));
  }
}

TEST(Scheduler, AFullQueueIsBusyAndBadRequestsAreRefused) {
  const auto model = load("llama_gqa4");
  Scheduler sched(model, {.step_tokens = 8, .max_sequences = 1, .max_queued = 2});
  const auto kind_of = [&](SchedulerRequest r) {
    try {
      sched.submit(std::move(r));
    } catch (const Error& e) {
      return e.kind();
    }
    return ErrorKind::Device;  // "none"
  };
  EXPECT_EQ(kind_of({{}, {}}), ErrorKind::InvalidArgument);                      // empty prompt
  EXPECT_EQ(kind_of({{1, 500}, {}}), ErrorKind::InvalidArgument);                // outside the vocabulary
  EXPECT_EQ(kind_of({{1}, {.max_new_tokens = -1}}), ErrorKind::InvalidArgument);
  EXPECT_EQ(kind_of({{1}, {.use_kv_cache = false}}), ErrorKind::InvalidArgument);
  EXPECT_EQ(kind_of({std::vector<int32_t>(129, 1), {}}), ErrorKind::ContextFull);  // beyond 128 positions
  // One slot free and two places to wait: the fourth is refused.
  for (int i = 0; i < 3; ++i) sched.submit({{1, 2}, {.max_new_tokens = 2}});
  EXPECT_EQ(kind_of({{1, 2}, {}}), ErrorKind::Busy);
  EXPECT_EQ(sched.stats().refused, 6);
  sched.run_until_idle();
  EXPECT_EQ(sched.stats().completed, 3);
  EXPECT_THROW(Scheduler(model, {.step_tokens = 4, .max_sequences = 8}), Error);
}

TEST(Scheduler, CancelEndsQueuedAndRunningRequests) {
  const auto model = load("llama_gqa4");
  Scheduler sched(model, {.step_tokens = 8, .max_sequences = 1});
  std::vector<SequenceResult> done;
  const auto keep = [&](const SequenceResult& r) { done.push_back(r); };
  const RequestId running = sched.submit({{1, 2, 3}, {.max_new_tokens = 50, .ignore_eos = true}}, {}, keep);
  const RequestId queued = sched.submit({{4, 5}, {.max_new_tokens = 5}}, {}, keep);
  for (int i = 0; i < 3; ++i) sched.step();
  EXPECT_TRUE(sched.cancel(queued));
  EXPECT_TRUE(sched.cancel(running));
  EXPECT_FALSE(sched.cancel(12345));
  sched.run_until_idle();
  ASSERT_EQ(done.size(), 2u);
  for (const SequenceResult& r : done) EXPECT_EQ(r.result.stop, StopReason::Cancelled);
  const auto& q = done[0].id == queued ? done[0] : done[1];
  const auto& r = done[0].id == running ? done[0] : done[1];
  EXPECT_TRUE(q.result.tokens.empty());
  EXPECT_EQ(r.result.tokens.size(), 3u);
  EXPECT_EQ(sched.stats().cancelled, 2);
  EXPECT_FALSE(sched.cancel(running));  // already ended
}

TEST(Scheduler, SharedPrefixesAreCopiedWithTheSameTokens) {
  const auto model = load("llama_gqa4");
  std::mt19937_64 rng(9);
  const std::vector<int32_t> system = random_prompt(rng, *model, 40, 40);
  std::vector<SchedulerRequest> requests;
  for (int i = 0; i < 6; ++i) {
    SchedulerRequest r{system, {.max_new_tokens = 6, .ignore_eos = true}};
    const auto tail = random_prompt(rng, *model, 1, 10);
    r.prompt.insert(r.prompt.end(), tail.begin(), tail.end());
    if (i % 2) r.options.sampling = {.temperature = 0.8f, .seed = rng()};
    requests.push_back(std::move(r));
  }
  // One at a time, so that each prompt finds the ones before it.
  Scheduler plain(model, {.step_tokens = 16, .max_sequences = 1});
  Scheduler shared(model, {.step_tokens = 16, .max_sequences = 1, .prefix_cache_bytes = 1 << 20});
  const auto want = run_all(plain, requests);
  const auto got = run_all(shared, requests);
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(got[i].result.tokens, want[i].result.tokens) << "request " << i;
    EXPECT_EQ(got[i].prefix_tokens, i == 0 ? 0 : 40) << "request " << i;
  }
  const SchedulerStats st = shared.stats();
  EXPECT_EQ(st.prefix_lookups, 6);
  EXPECT_EQ(st.prefix_hits, 5);
  EXPECT_EQ(st.prefix_tokens_reused, 5 * 40);
  EXPECT_EQ(st.prompt_tokens + 5 * 40, plain.stats().prompt_tokens);
  EXPECT_LE(st.prefix_cache_bytes, 1u << 20);
  EXPECT_GE(st.prefix_entries, 1);
  // Bounded: a cache that holds one prompt's rows keeps the most recent one only.
  const uint64_t one_prompt = plan_kv_bytes(model->config(), 50, default_kv_dtype(model->weight_dtype()));
  Scheduler small(model, {.step_tokens = 16, .max_sequences = 1, .prefix_cache_bytes = one_prompt});
  run_all(small, requests);
  EXPECT_EQ(small.stats().prefix_entries, 1);
  EXPECT_LE(small.stats().prefix_cache_bytes, one_prompt);
}

// A sliding-window model (mistral_window: window 6, rings of 11 rows): a kept prompt of 43
// positions holds only its last 11, so it gives a new prompt at least 37 positions (its
// earliest rewind) or none; the longest usable entry is taken, the rest computed, and every
// request's tokens are those of a run without the prefix cache.
TEST(Scheduler, SharedPrefixesOfWindowedModelsAreTakenWhereTheRingsHoldThem) {
  const auto model = load("mistral_window");
  const auto vocab = static_cast<int32_t>(model->config().vocab_size);
  std::mt19937_64 rng(11);
  const std::vector<int32_t> system = random_prompt(rng, *model, 40, 40);
  // Request i: the first cut[i] ids of `system`, then 3 ids that leave it at once.
  const int64_t cut[] = {40, 20, 40, 38, 36};
  std::vector<SchedulerRequest> requests;
  for (size_t i = 0; i < std::size(cut); ++i) {
    SchedulerRequest r{{system.begin(), system.begin() + cut[i]}, {.max_new_tokens = 5, .ignore_eos = true}};
    const int32_t off = cut[i] < 40 ? system[static_cast<size_t>(cut[i])] : static_cast<int32_t>(i);
    for (int32_t t = 1; t <= 3; ++t) r.prompt.push_back((off + t * static_cast<int32_t>(i + 1)) % vocab);
    requests.push_back(std::move(r));
  }
  Scheduler plain(model, {.step_tokens = 16, .max_sequences = 1});
  Scheduler shared(model, {.step_tokens = 16, .max_sequences = 1, .prefix_cache_bytes = 1 << 20});
  const auto want = run_all(plain, requests);
  const auto got = run_all(shared, requests);
  // 1: 20 shared with request 0's entry, which holds no window before 37; 2: request 0's 40;
  // 3: 38 of request 0's (or 2's); 4: 36 is too few for theirs, request 1's entry gives its 20.
  const int64_t reused[] = {0, 0, 40, 38, 20};
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(got[i].result.tokens, want[i].result.tokens) << "request " << i;
    EXPECT_EQ(got[i].prefix_tokens, reused[i]) << "request " << i;
  }
}

TEST(Scheduler, ServesRequestsSubmittedFromOtherThreads) {
  const auto model = load("llama_gqa4");
  Scheduler sched(model, {.step_tokens = 32, .max_sequences = 8});
  const auto requests = random_requests(*model, 16, 4);
  std::vector<SequenceResult> results(requests.size());
  std::atomic<int> finished = 0;
  std::thread stepper([&] {
    while (finished < static_cast<int>(requests.size()))
      if (!sched.step()) sched.wait_for_work(std::chrono::milliseconds(20));
  });
  std::vector<std::thread> clients;
  for (size_t c = 0; c < 4; ++c)
    clients.emplace_back([&, c] {
      for (size_t i = c; i < requests.size(); i += 4)
        sched.submit(requests[i], {}, [&, i](const SequenceResult& r) {
          results[i] = r;
          ++finished;
        });
    });
  for (auto& t : clients) t.join();
  stepper.join();
  for (size_t i = 0; i < requests.size(); ++i) EXPECT_EQ(results[i].result.tokens, alone(model, requests[i]).tokens);
}

}  // namespace
}  // namespace kvinfer
