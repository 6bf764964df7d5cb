#pragma once
// kvinfer-server's HTTP worker threads: httplib's TaskQueue, with its threads made one at a time so
// that a count the system refuses is one error naming --http-threads (httplib's own ThreadPool
// would be destroyed with its threads still running: std::terminate).
#include <httplib.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "kvinfer/error.h"

namespace server {

class WorkerPool final : public httplib::TaskQueue {
 public:
  explicit WorkerPool(size_t threads) {
    threads_.reserve(threads);
    try {
      while (threads_.size() < threads) threads_.emplace_back([this] { work(); });
    } catch (const std::system_error& e) {
      const size_t made = threads_.size();
      shutdown();
      throw kvinfer::Error(kvinfer::ErrorKind::OutOfMemory,
                           fmt::format("--http-threads {}: the system refused thread {} ({}); give fewer", threads,
                                       made + 1, e.code().message()));
    }
  }
  ~WorkerPool() override { shutdown(); }
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  void enqueue(std::function<void()> fn) override {
    {
      std::lock_guard lock(mu_);
      jobs_.push_back(std::move(fn));
    }
    cv_.notify_one();
  }

  // Runs what is queued, then ends the threads.
  void shutdown() override {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }

 private:
  void work() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
        if (jobs_.empty()) return;
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      try {
        job();
      } catch (...) {  // a connection's failure ends that connection, never the server
      }
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;
  bool stop_ = false;
};

}  // namespace server
