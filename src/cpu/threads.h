#pragma once
// The CPU threads of one call: OpenMP's thread count is a per-thread setting (the nthreads-var
// ICV of the calling thread), so a session sets its own for the length of a call and gives the
// caller's back, without touching other threads or sessions.
#if defined(_OPENMP)
#include <omp.h>
#endif

namespace kvinfer::cpu {

class ThreadScope {
 public:
  explicit ThreadScope(int threads) {
#if defined(_OPENMP)
    saved_ = omp_get_max_threads();
    if (threads > 0) omp_set_num_threads(threads);
#else
    static_cast<void>(threads);
#endif
  }
  ~ThreadScope() {
#if defined(_OPENMP)
    omp_set_num_threads(saved_);
#endif
  }
  ThreadScope(const ThreadScope&) = delete;
  ThreadScope& operator=(const ThreadScope&) = delete;

 private:
  [[maybe_unused]] int saved_ = 1;
};

}  // namespace kvinfer::cpu
