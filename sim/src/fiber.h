#pragma once
// Stackful fibers for the simulated GPU threads: each runs on its own stack and switches to and
// from the scheduler of its block, on the same host thread. x86-64: a few instructions per switch
// (fiber.cpp); elsewhere ucontext. AddressSanitizer is told about every switch.
#include <cstddef>

namespace kvi_sim {

struct Fiber;

// A fiber whose first switch-in calls entry(arg) on a fresh stack; taken from a per-host-thread
// pool. entry must never return: it ends with finish().
Fiber* fiber_start(void (*entry)(void*), void* arg);
// From the scheduler: runs f until it yields or finishes.
void fiber_resume(Fiber* f);
// From inside the running fiber f: back to the scheduler; returns when resumed.
void fiber_yield(Fiber* f);
// From inside the running fiber f: back to the scheduler for good; f returns to the pool.
[[noreturn]] void fiber_finish(Fiber* f);
// A fiber that will never be resumed (its block faulted): back to the pool, its stack reset.
void fiber_abandon(Fiber* f);

// While one exists, ASan's detect_stack_use_after_return is off (process-wide): with it, every
// fiber (every simulated GPU thread) mapped a fake stack of its own at its first call and unmapped
// it when it finished, and kernels ran ~15x slower. Host code outside a launch keeps the check.
class FakeStacksOff {
 public:
  FakeStacksOff();
  ~FakeStacksOff();
  FakeStacksOff(const FakeStacksOff&) = delete;
  FakeStacksOff& operator=(const FakeStacksOff&) = delete;
};

}  // namespace kvi_sim
