// kvinfer-server: an OpenAI-compatible HTTP server over one model (docs/server.md). The HTTP
// threads parse requests and stream their tokens; one thread runs the Scheduler's steps, so every
// request in flight shares each forward pass (continuous batching).
#include <httplib.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "cli_common.h"
#include "core/memory.h"
#include "listen.h"
#include "openai.h"
#include "worker_pool.h"

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// How often a response in progress writes when it has nothing else to write (a space before a
// whole response's JSON, an SSE comment in a stream): a client that left makes the second write
// after it fail, so its sequence is cancelled within about two beats.
constexpr auto kHeartbeat = std::chrono::milliseconds(250);
// The most HTTP worker threads --http-threads may ask for.
constexpr int64_t kMaxHttpThreads = 1024;
// The least --max-body: room for a small request.
constexpr uint64_t kMinBody = 1024;

// One HTTP request's sequence: the scheduler thread fills it, the HTTP thread drains it.
struct Job {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::string> pieces;
  bool done = false;
  kvinfer::SequenceResult result;
};

struct Server {
  Server(std::shared_ptr<const kvinfer::Model> m, const kvinfer::SchedulerOptions& o) : model(m), scheduler(std::move(m), o) {}

  std::shared_ptr<const kvinfer::Model> model;
  kvinfer::Scheduler scheduler;
  server::ServerConfig config;
  std::atomic<bool> draining = false;  // a first signal: refuse new requests, finish those in flight
  std::atomic<bool> aborting = false;  // a second signal: cut the requests in flight off
  std::atomic<int64_t> active = 0;     // HTTP requests with a sequence in flight
  std::atomic<int64_t> next_id = 1;
  const Clock::time_point started = Clock::now();
  // (time, generated tokens) after recent steps, for the tokens/s gauge (the last 10 s).
  std::mutex rate_mu;
  std::deque<std::pair<Clock::time_point, int64_t>> rate;
  // Error responses sent, by HTTP status (400, 404, 413, 429, 500, 503).
  std::mutex rejected_mu;
  std::map<int, int64_t> rejected;

  void count_rejected(int status) {
    std::lock_guard lock(rejected_mu);
    ++rejected[status];
  }

  double tokens_per_second() {
    std::lock_guard lock(rate_mu);
    if (rate.size() < 2) return 0;
    const double s = std::chrono::duration<double>(rate.back().first - rate.front().first).count();
    return s > 0 ? static_cast<double>(rate.back().second - rate.front().second) / s : 0;
  }
};

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace) + "\n", "application/json");
}

void send_error(Server& srv, httplib::Response& res, const server::ApiError& e) {
  srv.count_rejected(e.status);
  send_json(res, e.status, server::error_body(e));
}

// Writes through the sink; false (the client is gone) cancels the sequence.
bool write(httplib::DataSink& sink, const std::string& text) { return sink.write(text.data(), text.size()); }

void handle_generation(Server& srv, server::Endpoint endpoint, const httplib::Request& req, httplib::Response& res) {
  if (srv.draining) return send_error(srv, res, {503, "server_error", "", "the server is shutting down"});
  server::ApiRequest ar;
  try {
    ar = server::parse_request(endpoint, req.body, *srv.model, srv.config);
  } catch (const server::ApiError& e) {
    return send_error(srv, res, e);
  } catch (const kvinfer::Error& e) {  // a sampling value the sampler refuses, a template error
    return send_error(srv, res, {400, "invalid_request_error", "", e.what()});
  }
  auto job = std::make_shared<Job>();
  kvinfer::RequestId id = 0;
  try {
    id = srv.scheduler.submit(
        ar.request,
        [job](int32_t, std::string_view piece) {
          std::lock_guard lock(job->mu);
          if (!piece.empty()) job->pieces.emplace_back(piece);
          job->cv.notify_all();
          return true;  // a client that leaves is cancelled (Scheduler::cancel) by the releaser below
        },
        [job](const kvinfer::SequenceResult& r) {
          std::lock_guard lock(job->mu);
          job->result = r;
          job->done = true;
          job->cv.notify_all();
        });
  } catch (const kvinfer::Error& e) {
    if (e.kind() == kvinfer::ErrorKind::Busy)
      return send_error(srv, res, {429, "rate_limit_exceeded", "", e.what(), "queue_full"});
    return send_error(srv, res, {400, "invalid_request_error", "", e.what()});
  }
  ++srv.active;
  const bool chat = endpoint == server::Endpoint::ChatCompletions;
  server::Completion c;
  c.id = fmt::format("{}-{}", chat ? "chatcmpl" : "cmpl", srv.next_id++);
  c.created = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  c.prompt_tokens = static_cast<int64_t>(ar.request.prompt.size());
  const auto finish = [&srv, id] {
    srv.scheduler.cancel(id);  // a no-op once done; otherwise the client left: the next step ends it
    --srv.active;
  };
  // Both kinds go out as chunked bodies written from this thread, so that a client that
  // disconnects is noticed (a failed write) and its sequence cancelled: a stream writes its
  // tokens, and both write a heartbeat whenever kHeartbeat passed without a write (a space,
  // which JSON ignores, before a whole response; an SSE comment in a stream).
  res.set_chunked_content_provider(
      ar.stream ? "text/event-stream" : "application/json",
      [&srv, ar, c, job](size_t, httplib::DataSink& sink) mutable {
        bool first = true;
        auto last_write = Clock::now();
        const auto send = [&](const std::string& text) {
          last_write = Clock::now();
          return write(sink, text);
        };
        const auto event = [](const json& j) { return "data: " + j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n"; };
        // A chat with tools streams its text as content and each tool call whole once written.
        const bool tools = ar.stream && ar.tools.active();
        server::ToolStream tool_stream(ar.tools.format);
        size_t calls = 0;
        const auto send_tools = [&](const server::ToolStream::Out& out) {
          if (!out.content.empty()) {
            if (!send(event(server::chunk_body(ar, c, out.content, first, false)))) return false;
            first = false;
          }
          for (const server::ToolCall& call : out.calls) {
            for (const json& chunk : server::tool_call_chunks(ar, c, call, calls, first))
              if (!send(event(chunk))) return false;
            ++calls;
            first = false;
          }
          return true;
        };
        std::unique_lock lock(job->mu);
        for (;;) {
          job->cv.wait_for(lock, kHeartbeat, [&] { return job->done || !job->pieces.empty() || srv.aborting; });
          std::deque<std::string> pieces;
          pieces.swap(job->pieces);
          const bool done = job->done;
          lock.unlock();
          if (srv.aborting) return false;  // a fast shutdown: the connection is closed, the sequence cancelled
          for (const std::string& p : pieces) {
            c.text += p;
            if (tools) {
              if (!send_tools(tool_stream.push(p))) return false;
              continue;
            }
            if (ar.stream && !send(event(server::chunk_body(ar, c, p, first, false)))) return false;
            if (ar.stream) first = false;
          }
          if (done) break;
          if (Clock::now() - last_write >= kHeartbeat && !send(ar.stream ? ": keep-alive\n\n" : " ")) return false;
          lock.lock();
        }
        const kvinfer::SequenceResult& r = job->result;
        c.completion_tokens = static_cast<int64_t>(r.result.tokens.size());
        c.finish_reason = server::finish_reason(r.result.stop);
        c.text = r.result.text;
        std::string tail;
        if (r.error) {
          const json err = server::error_body({500, "server_error", "", r.error->what()});
          tail = ar.stream ? "data: " + err.dump() + "\n\n" : err.dump();
        } else if (ar.stream) {
          if (tools) {
            if (!send_tools(tool_stream.finish())) return false;
            if (calls > 0 && c.finish_reason == "stop") c.finish_reason = "tool_calls";
          }
          tail = "data: " + server::chunk_body(ar, c, "", first, true).dump() + "\n\n";
          if (ar.include_usage) tail += "data: " + server::usage_chunk(ar, c).dump() + "\n\n";
        } else {
          tail = server::response_body(ar, c).dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
        }
        if (ar.stream) tail += "data: [DONE]\n\n";
        if (!write(sink, tail)) return false;
        sink.done();
        return true;
      },
      [finish](bool) { finish(); });
}

std::string metrics(Server& srv) {
  const kvinfer::SchedulerStats st = srv.scheduler.stats();
  std::string out;
  const auto gauge = [&](const char* name, const char* help, double value, const char* type = "gauge") {
    out += fmt::format("# HELP kvinfer_{0} {1}\n# TYPE kvinfer_{0} {2}\nkvinfer_{0} {3}\n", name, help, type, value);
  };
  gauge("requests_queued", "requests waiting for a sequence slot", static_cast<double>(st.queued));
  gauge("sequences_prefilling", "running sequences still prefilling their prompt", static_cast<double>(st.prefilling));
  gauge("sequences_decoding", "running sequences decoding", static_cast<double>(st.decoding));
  gauge("batch_sequences", "sequences in the last step's batch", static_cast<double>(st.last_step_sequences));
  gauge("batch_tokens", "tokens in the last step's batch", static_cast<double>(st.last_step_tokens));
  gauge("generation_tokens_per_second", "tokens generated per second over the last 10 s", srv.tokens_per_second());
  gauge("kv_bytes_in_use", "KV cache bytes reserved by running sequences and the prefix cache",
        static_cast<double>(st.kv_bytes_in_use));
  gauge("kv_budget_bytes", "the scheduler's KV budget (--kv-budget; default: docs/server.md)",
        static_cast<double>(st.kv_budget_bytes));
  gauge("prefix_cache_bytes", "KV bytes of kept prompt prefixes", static_cast<double>(st.prefix_cache_bytes));
  gauge("steps_total", "batched forward passes", static_cast<double>(st.steps), "counter");
  gauge("prompt_tokens_total", "prompt tokens computed (prefix hits excluded)", static_cast<double>(st.prompt_tokens), "counter");
  gauge("generation_tokens_total", "tokens generated", static_cast<double>(st.generated_tokens), "counter");
  gauge("requests_completed_total", "requests finished", static_cast<double>(st.completed), "counter");
  gauge("requests_cancelled_total", "requests cancelled (client gone, or cancelled)", static_cast<double>(st.cancelled), "counter");
  gauge("requests_failed_total", "requests that failed", static_cast<double>(st.failed), "counter");
  gauge("requests_refused_total", "requests refused at submission", static_cast<double>(st.refused), "counter");
  gauge("prefix_cache_hits_total", "prompts that reused a kept prefix", static_cast<double>(st.prefix_hits), "counter");
  gauge("prefix_cache_lookups_total", "prompts looked up in the prefix cache", static_cast<double>(st.prefix_lookups), "counter");
  gauge("prefix_cache_tokens_reused_total", "prompt positions copied from the prefix cache",
        static_cast<double>(st.prefix_tokens_reused), "counter");
  out += "# HELP kvinfer_http_requests_rejected_total error responses sent, by HTTP status (4xx refused, 5xx failed)\n"
         "# TYPE kvinfer_http_requests_rejected_total counter\n";
  std::lock_guard lock(srv.rejected_mu);
  for (const int status : {400, 404, 413, 429, 500, 503})  // always present, so that a rate() starts at 0
    out += fmt::format("kvinfer_http_requests_rejected_total{{status=\"{}\"}} {}\n", status,
                       srv.rejected.contains(status) ? srv.rejected.at(status) : 0);
  for (const auto& [status, n] : srv.rejected)
    if (status != 400 && status != 404 && status != 413 && status != 429 && status != 500 && status != 503)
      out += fmt::format("kvinfer_http_requests_rejected_total{{status=\"{}\"}} {}\n", status, n);
  return out;
}

// The server's threads, stopped and joined on every way out of main's body (an exception too).
struct Threads {
  std::atomic<bool> stop_steps = false;
  std::thread stepper, listener;
  Server* srv = nullptr;
  httplib::Server* http = nullptr;

  void stop() {
    if (listener.joinable()) {
      http->stop();
      listener.join();
    }
    stop_steps = true;
    if (stepper.joinable()) {
      srv->scheduler.wake();
      stepper.join();
    }
  }
  ~Threads() { stop(); }
};

// One scheduler step after another; a step that throws (it fails its sequences itself, so only
// something like an allocation failure) is reported and the loop goes on: the server never aborts.
void run_steps(Server& srv, const std::atomic<bool>& stop) {
  while (!stop) {
    try {
      if (!srv.scheduler.step()) {
        srv.scheduler.wait_for_work(std::chrono::milliseconds(100));
        continue;
      }
      std::lock_guard lock(srv.rate_mu);
      srv.rate.emplace_back(Clock::now(), srv.scheduler.stats().generated_tokens);
      while (srv.rate.size() > 2 && srv.rate.back().first - srv.rate.front().first > std::chrono::seconds(10))
        srv.rate.pop_front();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "kvinfer-server: a step failed: %s\n", tool::printable(e.what()).c_str());
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kvinfer-server: an OpenAI-compatible HTTP server (continuous batching over one model)", "kvinfer-server"};
  cli::ModelOptions mo;
  cli::add_model_options(app, mo, "positions one sequence may use, prompt and reply (default: the model's context length)");
  std::string host = "127.0.0.1", model_id, kv_budget = "0", prefix_cache = "0", max_body = "1M";
  int port = 8080;
  kvinfer::SchedulerOptions so;
  int64_t http_threads = 0, default_max_tokens = 16;
  app.add_option("--host", host, "address to listen on")->capture_default_str();
  app.add_option("--port", port, "TCP port (0: any free one; the chosen port is printed)")
      ->check(CLI::Range(0, 65535))->capture_default_str();
  app.add_option("--model-id", model_id, "the model's name in /v1/models and responses (default: the file's name)");
  app.add_option("-P,--parallel", so.max_sequences, "sequences decoded together at most")
      ->check(tool::at_least(1))->capture_default_str();
  app.add_option("--step-tokens", so.step_tokens, "tokens one batched step runs (decode tokens + prompt chunks); "
                 "at least --parallel")->check(tool::at_least(1))->capture_default_str();
  app.add_option("--max-queue", so.max_queued, "requests waiting beyond those running; more get 429")
      ->check(tool::at_least(0))->capture_default_str();
  app.add_option("--kv-budget", kv_budget,
                 "KV cache bytes for all sequences (\"4G\"), at least one sequence of -c positions; 0: 90 % of the "
                 "memory left after the weights (docs/server.md)")
      ->capture_default_str();
  app.add_option("--prefix-cache", prefix_cache, "KV bytes kept for shared prompt prefixes (\"256M\"); 0: off")
      ->capture_default_str();
  app.add_option("--max-body", max_body, "largest request body, at least 1K; larger get 413")->capture_default_str();
  app.add_option("--http-threads", http_threads,
                 fmt::format("HTTP worker threads, 1 to {} (default: --parallel + --max-queue + 4, at most 512)",
                             kMaxHttpThreads))
      ->check(CLI::Range(int64_t{1}, kMaxHttpThreads));
  app.add_option("--default-max-tokens", default_max_tokens, "max_tokens of a completion that names none")
      ->check(tool::at_least(1))->capture_default_str();
  app.footer(std::string(tool::kExitStatusHelp) +
             " kvinfer-server: 1 also when it cannot listen (an address in use); it exits 0 after a signal "
             "(docs/server.md: the first drains, a second stops at once).");
  return tool::run(app, argc, argv, [&] {
    const auto bytes = [](const std::string& text, const char* option) {
      try {
        return kvinfer::parse_byte_count(text, option);
      } catch (const kvinfer::Error& e) {
        throw tool::UsageError(e.what());
      }
    };
    so.kv_budget_bytes = bytes(kv_budget, "--kv-budget");
    so.prefix_cache_bytes = bytes(prefix_cache, "--prefix-cache");
    const uint64_t body_limit = bytes(max_body, "--max-body");
    if (body_limit < kMinBody)
      throw tool::UsageError(fmt::format("--max-body {}: every request would get 413; give at least 1K ({} bytes)",
                                         max_body, kMinBody));
    if (so.step_tokens < so.max_sequences)
      throw tool::UsageError(fmt::format("--step-tokens {} must be at least --parallel ({})", so.step_tokens, so.max_sequences));
    so.kv_dtype = cli::kv_dtype(mo);
    so.threads = tool::checked_threads(mo.threads, "-t/--threads");
    server::check_host(host);
    if (so.kv_budget_bytes > 0) {
      // The least useful budget holds one sequence of the whole context: a smaller one refuses
      // requests that -c allows. The model's metadata says, before any weight is read.
      const kvinfer::ModelInfo info = kvinfer::inspect_model(cli::model_path(mo.model));
      const int64_t ctx = mo.ctx > 0 ? mo.ctx : info.config.max_position_embeddings;
      const uint64_t need = info.kv_bytes(ctx, so.kv_dtype);
      if (so.kv_budget_bytes < need)
        throw tool::UsageError(fmt::format(
            "--kv-budget {}: one sequence of {} positions (-c) needs {} of KV cache ({}); give at least {} or a "
            "smaller -c",
            kv_budget, kvinfer::format_count(ctx), kvinfer::bytes_text(need),
            kvinfer::dtype_name(so.kv_dtype.value_or(info.default_kv_dtype())), need));
    }

    // Listening first: an address in use fails before the model loads. Connections wait in the
    // socket's backlog until the server serves.
    httplib::Server http;
    server::set_listen_options(http);
    const int bound = server::bind_or_throw(http, host, port);

    // SIGTERM and SIGINT are taken by sigwait below: block them in every thread first.
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
    signal(SIGPIPE, SIG_IGN);

    auto model = cli::load_model(mo);
    if (!model->has_tokenizer()) throw kvinfer::Error(kvinfer::ErrorKind::BadFile, "the model has no tokenizer: the server needs one");
    Server srv(model, so);
    srv.config.model_id = model_id.empty() ? cli::model_path(mo.model).filename().string() : model_id;
    srv.config.default_max_tokens = default_max_tokens;
    srv.config.context_length = mo.ctx;
    server::GrammarCache grammars;
    srv.config.grammars = &grammars;

    // Made here, where a refusal is an error line: httplib asks for the queue on its own thread.
    auto pool = std::make_unique<server::WorkerPool>(static_cast<size_t>(
        http_threads > 0 ? http_threads : std::min<int64_t>(512, so.max_sequences + so.max_queued + 4)));
    http.new_task_queue = [&pool] { return pool.release(); };
    http.set_payload_max_length(body_limit);
    http.set_error_handler([&srv](const httplib::Request&, httplib::Response& res) {
      if (!res.body.empty()) return;
      const std::string message = res.status == 413 ? "the request body is too large (--max-body)"
                                  : res.status == 404 ? "no such endpoint"
                                                      : fmt::format("HTTP {}", res.status);
      send_error(srv, res, {res.status, "invalid_request_error", "", message});
    });
    http.set_exception_handler([&srv](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
      std::string what = "unknown error";
      try {
        std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      send_error(srv, res, {500, "server_error", "", what});
    });
    http.Post("/v1/completions", [&](const httplib::Request& q, httplib::Response& r) {
      handle_generation(srv, server::Endpoint::Completions, q, r);
    });
    http.Post("/v1/chat/completions", [&](const httplib::Request& q, httplib::Response& r) {
      handle_generation(srv, server::Endpoint::ChatCompletions, q, r);
    });
    http.Get("/v1/models", [&](const httplib::Request&, httplib::Response& r) {
      const auto created = std::chrono::duration_cast<std::chrono::seconds>(
                               std::chrono::system_clock::now().time_since_epoch()).count();
      send_json(r, 200, {{"object", "list"},
                         {"data", json::array({{{"id", srv.config.model_id}, {"object", "model"}, {"created", created},
                                                {"owned_by", "kvinfer"}}})}});
    });
    http.Get("/health", [&](const httplib::Request&, httplib::Response& r) {
      send_json(r, srv.draining ? 503 : 200, {{"status", srv.draining ? "draining" : "ok"}});
    });
    http.Get("/metrics", [&](const httplib::Request&, httplib::Response& r) {
      r.set_content(metrics(srv), "text/plain; version=0.0.4");
    });

    Threads threads;
    threads.srv = &srv;
    threads.http = &http;
    threads.stepper = std::thread([&] { run_steps(srv, threads.stop_steps); });
    threads.listener = std::thread([&] {
      try {
        http.listen_after_bind();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "kvinfer-server: the listener failed: %s\n", tool::printable(e.what()).c_str());
      }
    });
    std::fprintf(stderr, "kvinfer-server: %s on http://%s:%d (%lld sequences at once, %lld tokens a step)\n",
                 srv.config.model_id.c_str(), host.c_str(), bound, static_cast<long long>(so.max_sequences),
                 static_cast<long long>(so.step_tokens));

    int sig = 0;
    sigwait(&signals, &sig);
    // Drain: refuse new work (503), let every request in flight finish, then stop.
    srv.draining = true;
    std::fprintf(stderr, "kvinfer-server: %s: finishing %lld requests in flight (a second signal stops at once)\n",
                 sig == SIGTERM ? "SIGTERM" : "SIGINT", static_cast<long long>(srv.active.load()));
    const timespec poll{0, 50'000'000};
    while (srv.active > 0) {
      siginfo_t info;
      if (sigtimedwait(&signals, &info, &poll) <= 0) continue;
      // A fast shutdown: every response in progress ends within a heartbeat (its connection
      // closed, its sequence cancelled), the step in progress finishes, and the process exits
      // without waiting for idle keep-alive connections.
      std::fprintf(stderr, "kvinfer-server: %s again: cutting off %lld requests in flight\n",
                   info.si_signo == SIGTERM ? "SIGTERM" : "SIGINT", static_cast<long long>(srv.active.load()));
      srv.aborting = true;
      const auto deadline = Clock::now() + 4 * kHeartbeat;
      while (srv.active > 0 && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      threads.stop_steps = true;
      srv.scheduler.wake();
      threads.stepper.join();
      std::fprintf(stderr, "kvinfer-server: stopped\n");
      std::fflush(nullptr);
      std::_Exit(tool::kExitOk);
    }
    threads.stop();
    std::fprintf(stderr, "kvinfer-server: stopped\n");
    return tool::kExitOk;
  });
}
