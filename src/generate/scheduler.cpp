// Continuous batching: a queue, a running set of sequences (each with its own KvCache and
// Sampler), and steps that run them all through one Session::batch.
#include "kvinfer/scheduler.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <limits>
#include <mutex>
#include <unordered_set>

#include <fmt/format.h>

#include "core/memory.h"
#include "generate/prefix_cache.h"
#include "generate/stop_strings.h"
#include "kvinfer/kv_plan.h"
#include "kvinfer/session.h"
#include "kvinfer/tokenizer.h"
#include "models/model_internal.h"

namespace kvinfer {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

struct Pending {
  RequestId id;
  SchedulerRequest request;
  SequenceTokenCallback on_token;
  SequenceDoneCallback on_done;
  Clock::time_point submitted;
  int64_t capacity;  // the cache's positions: prompt + max_new_tokens, at most the context length
  uint64_t kv_bytes;
  bool cancelled = false;
};

// A running sequence: what generate()'s loop keeps in its locals, kept across steps.
struct Sequence {
  Sequence(Pending pending, KvCache cache, Sampler s) : p(std::move(pending)), kv(std::move(cache)), sampler(std::move(s)) {}

  Pending p;
  KvCache kv;
  Sampler sampler;
  std::vector<int32_t> stop_ids;
  Clock::time_point admitted, first_token;
  int64_t prefilled = 0;  // prompt positions in the cache
  int32_t next = -1;      // decoding: the id whose K/V the next step computes
  std::optional<StreamDecoder> stream;
  std::optional<StopStringFilter> stops;
  SequenceResult out;
  bool ended = false;  // finished: out went to on_done; retired at the end of the step

  bool decoding() const { return prefilled == static_cast<int64_t>(p.request.prompt.size()); }
};

}  // namespace

namespace {

// SchedulerOptions::kv_budget_bytes 0: 90 % of what is left now, the rest for everything else the
// process allocates (activations, logits, requests). What is left is the smaller of the model's
// figure less its weights and caches, and the memory the device reports available now (other
// processes may have taken some since the load); unlimited when neither is known.
uint64_t default_kv_budget(const Model& model) {
  const auto& account = ModelAccess::memory(model);
  uint64_t left = account ? account->available() : MemoryBudget::kUnknown;
  left = std::min(left, memory_budget(model.device()).bytes);
  return left == MemoryBudget::kUnknown ? left : left / 10 * 9;
}

}  // namespace

struct Scheduler::State {
  std::shared_ptr<const Model> model;
  SchedulerOptions options;
  Session session;
  DType kv_dtype;
  uint64_t budget;  // kv bytes for the running caches and the prefix cache

  mutable std::mutex mu;  // guards what submit(), cancel() and stats() touch
  std::condition_variable work;
  std::deque<Pending> queue;
  std::unordered_set<RequestId> running_ids;
  std::vector<RequestId> cancels;
  SchedulerStats stats;
  RequestId next_id = 1;
  bool woken = false;

  // The stepping thread's own.
  std::vector<std::unique_ptr<Sequence>> running;  // in admission order
  PrefixCache prefix;
  uint64_t running_bytes = 0;
  std::vector<float> rows;  // (items, vocab) when a failed batch is rerun item by item

  State(std::shared_ptr<const Model> m, const SchedulerOptions& o)
      : model(std::move(m)),
        options(o),
        session(model, {.threads = o.threads}),
        kv_dtype(o.kv_dtype.value_or(default_kv_dtype(model->weight_dtype()))),
        budget(o.kv_budget_bytes),
        prefix(*model, o.prefix_cache_bytes, o.prefix_min_tokens) {
    if (budget == 0) budget = default_kv_budget(*model);
    stats.kv_budget_bytes = budget;
  }

  void finish(Sequence& s, StopReason stop, std::optional<Error> error = std::nullopt);
  void done(SequenceResult& out, const SequenceDoneCallback& on_done, bool failed);
  void admit();
  void publish_state();  // the stats of what runs now; with mu held
  void emit(Sequence& s, int32_t id);
};

namespace {

void check_options(const SchedulerOptions& o) {
  const auto bad = [](std::string_view what, int64_t v, std::string_view rule) {
    throw Error(ErrorKind::InvalidArgument, fmt::format("SchedulerOptions::{} is {}; {}", what, v, rule));
  };
  if (o.max_sequences < 1) bad("max_sequences", o.max_sequences, "it must be at least 1");
  if (o.step_tokens < o.max_sequences)
    bad("step_tokens", o.step_tokens, fmt::format("it must be at least max_sequences ({})", o.max_sequences));
  if (o.max_queued < 0) bad("max_queued", o.max_queued, "it must be 0 or more");
  if (o.prefix_min_tokens < 1) bad("prefix_min_tokens", o.prefix_min_tokens, "it must be at least 1");
  if (o.threads < 0) bad("threads", o.threads, "it must be 0 (the model's) or positive");
}

}  // namespace

Scheduler::Scheduler(std::shared_ptr<const Model> model, const SchedulerOptions& options) {
  if (!model) throw Error(ErrorKind::InvalidArgument, "Scheduler needs a model (got a null pointer)");
  check_options(options);
  state_ = std::make_unique<State>(std::move(model), options);
}

Scheduler::~Scheduler() = default;

const SchedulerOptions& Scheduler::options() const { return state_->options; }

RequestId Scheduler::submit(SchedulerRequest request, SequenceTokenCallback on_token, SequenceDoneCallback on_done) {
  State& st = *state_;
  const Model& model = *st.model;
  const GenerateOptions& o = request.options;
  const auto refuse = [&](ErrorKind kind, const std::string& why) {
    {
      std::lock_guard lock(st.mu);
      ++st.stats.refused;
    }
    throw Error(kind, why);
  };
  if (request.prompt.empty()) refuse(ErrorKind::InvalidArgument, "a request needs a prompt of at least one token");
  if (o.max_new_tokens < 0)
    refuse(ErrorKind::InvalidArgument, fmt::format("max_new_tokens must be >= 0, got {}", o.max_new_tokens));
  if (!o.use_kv_cache) refuse(ErrorKind::InvalidArgument, "the scheduler runs with the KV cache (use_kv_cache = false)");
  if (o.speculative.enabled())
    refuse(ErrorKind::InvalidArgument,
           "the scheduler does not decode speculatively (options.speculative): its steps already batch many sequences");
  if (request.text && !model.has_tokenizer())
    refuse(ErrorKind::InvalidArgument, "a text request needs the model's tokenizer; this model has none");
  if (!request.text && !o.stop_strings.empty())
    refuse(ErrorKind::InvalidArgument, "stop_strings need a text request (SchedulerRequest::text)");
  const int64_t vocab = model.config().vocab_size;
  for (size_t i = 0; i < request.prompt.size(); ++i)
    if (request.prompt[i] < 0 || request.prompt[i] >= vocab)
      refuse(ErrorKind::InvalidArgument, fmt::format("prompt token id {} at index {} is outside the vocabulary (size {})",
                                                     request.prompt[i], i, vocab));
  o.sampling.validate(static_cast<int32_t>(vocab));
  const auto prompt = static_cast<int64_t>(request.prompt.size());
  if (prompt > model.context_length())
    refuse(ErrorKind::ContextFull, fmt::format("a prompt of {} tokens is beyond the model's context length of {}", prompt,
                                               model.context_length()));
  const int64_t capacity = std::min(prompt + std::max<int64_t>(o.max_new_tokens, 1), model.context_length());
  const uint64_t bytes = plan_kv_bytes(model.config(), capacity, st.kv_dtype);
  if (bytes > st.budget)
    refuse(ErrorKind::OutOfMemory,
           fmt::format("a request's KV cache of {} positions ({}) is beyond the scheduler's whole KV budget of {}", capacity,
                       bytes_text(bytes), bytes_text(st.budget)));
  std::lock_guard lock(st.mu);
  // Room: max_queued waiting beyond the free sequence slots (a request for a free slot is queued
  // only until the next step admits it).
  const int64_t free_slots = std::max<int64_t>(0, st.options.max_sequences - static_cast<int64_t>(st.running_ids.size()));
  if (static_cast<int64_t>(st.queue.size()) >= st.options.max_queued + free_slots) {
    ++st.stats.refused;
    throw Error(ErrorKind::Busy, fmt::format("the scheduler's queue is full ({} requests waiting, max_queued {})",
                                             st.queue.size(), st.options.max_queued));
  }
  const RequestId id = st.next_id++;
  st.queue.push_back({id, std::move(request), std::move(on_token), std::move(on_done), Clock::now(), capacity, bytes});
  st.stats.queued = static_cast<int64_t>(st.queue.size());
  st.work.notify_all();
  return id;
}

bool Scheduler::cancel(RequestId id) {
  State& st = *state_;
  std::lock_guard lock(st.mu);
  for (Pending& p : st.queue)
    if (p.id == id && !p.cancelled) return p.cancelled = true;
  if (!st.running_ids.contains(id)) return false;
  st.cancels.push_back(id);
  return true;
}

bool Scheduler::wait_for_work(std::chrono::milliseconds timeout) {
  State& st = *state_;
  std::unique_lock lock(st.mu);
  const bool any = st.work.wait_for(lock, timeout, [&] { return st.woken || !st.queue.empty() || !st.running_ids.empty(); });
  st.woken = false;
  return any && (!st.queue.empty() || !st.running_ids.empty());
}

void Scheduler::wake() {
  State& st = *state_;
  std::lock_guard lock(st.mu);
  st.woken = true;
  st.work.notify_all();
}

SchedulerStats Scheduler::stats() const {
  std::lock_guard lock(state_->mu);
  return state_->stats;
}

void Scheduler::run_until_idle() {
  while (step()) {
  }
}

void Scheduler::State::done(SequenceResult& out, const SequenceDoneCallback& on_done, bool failed) {
  {
    std::lock_guard lock(mu);
    running_ids.erase(out.id);
    if (failed)
      ++stats.failed;
    else if (out.result.stop == StopReason::Cancelled)
      ++stats.cancelled;
    else
      ++stats.completed;
  }
  if (on_done) on_done(out);
}

void Scheduler::State::finish(Sequence& s, StopReason stop, std::optional<Error> error) {
  const auto now = Clock::now();
  GenerateResult& r = s.out.result;
  r.stop = stop;
  if (!r.tokens.empty()) r.stats.decode_seconds = seconds_between(s.first_token, now);
  r.stats.generated_tokens = static_cast<int64_t>(r.tokens.size());
  r.stats.kv_bytes = s.kv.bytes();
  r.stats.kv_tokens = s.kv.size();
  s.out.error = std::move(error);
  s.ended = true;
  done(s.out, s.p.on_done, s.out.error.has_value());
}

// Admits queued requests first come, first served while a slot is free and the cache fits.
void Scheduler::State::admit() {
  for (;;) {
    Pending p;
    {
      std::lock_guard lock(mu);
      if (queue.empty() || static_cast<int64_t>(running.size()) >= options.max_sequences) return;
      const uint64_t need = queue.front().kv_bytes;
      const auto fits = [&] { return budget == MemoryBudget::kUnknown || running_bytes + prefix.bytes() + need <= budget; };
      if (!fits()) prefix.evict(running_bytes + prefix.bytes() + need - budget);
      if (!fits()) return;  // it waits for running sequences to end; nothing overtakes it
      p = std::move(queue.front());
      queue.pop_front();
      stats.queued = static_cast<int64_t>(queue.size());
      running_ids.insert(p.id);
    }
    std::optional<KvCache> kv;
    try {
      kv.emplace(*model, p.capacity, kv_dtype);
    } catch (const Error& e) {
      // The memory figure refused the cache (others took memory): retry later, unless nothing
      // runs that could give memory back.
      if (e.kind() == ErrorKind::OutOfMemory && !running.empty()) {
        std::lock_guard lock(mu);
        running_ids.erase(p.id);
        queue.push_front(std::move(p));
        stats.queued = static_cast<int64_t>(queue.size());
        return;
      }
      SequenceResult out;
      out.id = p.id;
      out.result.stats.prompt_tokens = static_cast<int64_t>(p.request.prompt.size());
      out.error = e;
      done(out, p.on_done, true);
      continue;
    }
    const SamplingParams sampling = p.request.options.sampling;
    auto s = std::make_unique<Sequence>(std::move(p), std::move(*kv),
                                        Sampler(sampling, static_cast<int32_t>(model->config().vocab_size)));
    Sequence& q = *s;
    const GenerateOptions& o = q.p.request.options;
    q.admitted = Clock::now();
    q.out.id = q.p.id;
    q.out.queue_seconds = seconds_between(q.p.submitted, q.admitted);
    q.out.result.stats.prompt_tokens = static_cast<int64_t>(q.p.request.prompt.size());
    q.stop_ids = o.stop_ids;
    if (q.stop_ids.empty() && !o.ignore_eos) q.stop_ids = model->eos_ids();
    if (q.p.request.text) {
      q.stream.emplace(model->tokenizer(), /*skip_special=*/true);
      q.stops.emplace(o.stop_strings);
    }
    q.sampler.accept(q.p.request.prompt);
    q.sampler.set_end_ids(q.stop_ids);
    if (prefix.enabled()) {  // the last prompt token is always computed: its logits are wanted
      q.prefilled = prefix.reuse(q.p.request.prompt, q.out.result.stats.prompt_tokens - 1, q.kv);
      q.out.prefix_tokens = q.prefilled;
      std::lock_guard lock(mu);
      ++stats.prefix_lookups;
      stats.prefix_hits += q.prefilled > 0 ? 1 : 0;
      stats.prefix_tokens_reused += q.prefilled;
    }
    if (o.max_new_tokens == 0) {  // as generate(): no forward pass
      finish(q, StopReason::MaxTokens);
      continue;
    }
    running_bytes += q.kv.bytes();
    running.push_back(std::move(s));
  }
}

void Scheduler::State::publish_state() {
  stats.prefilling = stats.decoding = 0;
  for (auto& s : running) ++(s->decoding() ? stats.decoding : stats.prefilling);
  stats.kv_bytes_in_use = running_bytes + prefix.bytes();
  stats.prefix_cache_bytes = prefix.bytes();
  stats.prefix_entries = prefix.entries();
}

// A sampled id, as generate()'s loop takes it: history, stop checks, the callback.
void Scheduler::State::emit(Sequence& s, int32_t id) {
  GenerateResult& r = s.out.result;
  const GenerateOptions& o = s.p.request.options;
  s.sampler.accept(id);
  r.tokens.push_back(id);
  if (r.tokens.size() == 1) {
    s.first_token = Clock::now();
    r.stats.ttft_seconds = seconds_between(s.p.submitted, s.first_token);
  }
  bool last = true;
  StopReason stop = StopReason::MaxTokens;
  if (std::find(s.stop_ids.begin(), s.stop_ids.end(), id) != s.stop_ids.end() || s.sampler.grammar_finished())
    stop = StopReason::Eos;
  else if (static_cast<int64_t>(r.tokens.size()) >= o.max_new_tokens)
    stop = StopReason::MaxTokens;
  else if (s.kv.remaining() == 0)
    stop = StopReason::ContextFull;
  else
    last = false;
  std::string piece;
  if (s.stream) {
    if (id < model->tokenizer().vocab_size()) piece = s.stream->push(id);
    if (last) piece += s.stream->flush();
    piece = s.stops->push(piece, last);
    r.text += piece;
  }
  const bool go_on = !s.p.on_token || s.p.on_token(id, piece);
  if (s.stops && s.stops->matched())
    finish(s, StopReason::StopString);
  else if (!go_on || last)
    finish(s, go_on ? stop : StopReason::Callback);
  else
    s.next = id;
}

bool Scheduler::step() {
  State& st = *state_;
  // Cancellations first: queued requests end unstarted, running ones where they are.
  std::vector<Pending> dropped;
  std::vector<RequestId> cancels;
  {
    std::lock_guard lock(st.mu);
    for (auto it = st.queue.begin(); it != st.queue.end();)
      if (it->cancelled) {
        dropped.push_back(std::move(*it));
        it = st.queue.erase(it);
        st.running_ids.insert(dropped.back().id);  // done() erases it
      } else {
        ++it;
      }
    st.stats.queued = static_cast<int64_t>(st.queue.size());
    cancels.swap(st.cancels);
  }
  for (Pending& p : dropped) {
    SequenceResult out;
    out.id = p.id;
    out.result.stop = StopReason::Cancelled;
    out.result.stats.prompt_tokens = static_cast<int64_t>(p.request.prompt.size());
    out.queue_seconds = seconds_between(p.submitted, Clock::now());
    st.done(out, p.on_done, false);
  }
  bool worked = !dropped.empty();
  const auto retire = [&] {  // drops the finished sequences, giving back their caches
    for (auto it = st.running.begin(); it != st.running.end();)
      if ((*it)->ended) {
        st.running_bytes -= (*it)->kv.bytes();
        it = st.running.erase(it);
      } else {
        ++it;
      }
  };
  for (auto& s : st.running) {
    const CancelCallback& cancel = s->p.request.options.cancel;
    if (std::find(cancels.begin(), cancels.end(), s->p.id) != cancels.end() || (cancel && cancel())) {
      st.finish(*s, StopReason::Cancelled);
      worked = true;
    }
  }
  retire();
  st.admit();

  // The step's items: every decoding sequence's token, then prompt chunks, oldest first.
  std::vector<BatchItem> items;
  std::vector<Sequence*> owners;  // (items) the sequence of each
  std::vector<int32_t> chunk;     // (items) prompt tokens the item runs; 0 for a decode token
  int64_t budget = st.options.step_tokens;
  for (auto& s : st.running)
    if (s->decoding()) {
      items.push_back({&s->kv, {&s->next, 1}});
      owners.push_back(s.get());
      chunk.push_back(0);
      --budget;
    }
  for (auto& s : st.running) {
    if (s->decoding() || budget == 0) continue;
    const auto& prompt = s->p.request.prompt;
    const int64_t n = std::min(budget, static_cast<int64_t>(prompt.size()) - s->prefilled);
    items.push_back({&s->kv, std::span<const int32_t>(prompt).subspan(static_cast<size_t>(s->prefilled), static_cast<size_t>(n))});
    owners.push_back(s.get());
    chunk.push_back(static_cast<int32_t>(n));
    budget -= n;
  }
  if (items.empty()) {
    std::lock_guard lock(st.mu);
    st.publish_state();
    return worked;
  }

  const int64_t vocab = st.model->config().vocab_size;
  const auto t0 = Clock::now();
  std::vector<bool> failed(items.size(), false);
  std::span<const float> logits;  // (items, vocab)
  try {
    logits = st.session.batch(items);
  } catch (const Error&) {
    // Every cache is as it was: run the items one by one (the same bits) to find the failing ones.
    st.rows.assign(items.size() * static_cast<size_t>(vocab), 0.0f);
    for (size_t i = 0; i < items.size(); ++i) {
      try {
        const std::span<const float> row = st.session.batch({&items[i], 1});
        std::copy(row.begin(), row.end(), st.rows.begin() + static_cast<std::ptrdiff_t>(i) * vocab);
      } catch (const Error& e) {
        failed[i] = true;
        st.finish(*owners[i], StopReason::MaxTokens, e);
      }
    }
    logits = st.rows;
  }
  const auto t1 = Clock::now();

  int64_t prompt_tokens = 0, generated = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    if (failed[i]) continue;
    Sequence& s = *owners[i];
    if (chunk[i] > 0) {
      s.prefilled += chunk[i];
      prompt_tokens += chunk[i];
      if (!s.decoding()) continue;  // more of the prompt next step
      s.out.result.stats.prefill_seconds = seconds_between(s.p.submitted, t1);
      const uint64_t used = st.running_bytes + st.prefix.bytes();
      if (st.prefix.enabled())
        st.prefix.keep(s.kv, s.prefilled, st.budget == MemoryBudget::kUnknown ? st.budget : st.budget - std::min(used, st.budget));
    }
    int32_t id = 0;
    try {
      id = s.sampler.sample(logits.subspan(i * static_cast<size_t>(vocab), static_cast<size_t>(vocab)));
    } catch (const Error& e) {
      st.finish(s, StopReason::MaxTokens, e);
      continue;
    }
    ++generated;
    st.emit(s, id);
  }
  retire();
  std::lock_guard lock(st.mu);
  SchedulerStats& t = st.stats;
  ++t.steps;
  t.last_step_tokens = st.options.step_tokens - budget;
  t.last_step_sequences = static_cast<int64_t>(items.size());
  t.prompt_tokens += prompt_tokens;
  t.generated_tokens += generated;
  t.busy_seconds += seconds_between(t0, t1);
  st.publish_state();
  return true;
}

}  // namespace kvinfer
