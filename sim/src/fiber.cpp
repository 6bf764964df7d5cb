#include "fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KVI_SIM_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define KVI_SIM_ASAN 1
#endif
#if defined(KVI_SIM_ASAN)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>

#include <mutex>

// The ASan runtime's switch of detect_stack_use_after_return, read by every instrumented function
// on entry (not in its public headers).
extern "C" int __asan_option_detect_stack_use_after_return;
#endif

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

namespace kvi_sim {

namespace {
// Kernels keep small frames; sanitizers enlarge them. Pages are touched only as used.
constexpr size_t kStackBytes = size_t{256} << 10;

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "kvinfer CUDA simulation: %s\n", what);
  std::abort();
}
}  // namespace

#if defined(__x86_64__)
extern "C" void kvi_sim_switch(void** save_sp, void* load_sp);
extern "C" void kvi_sim_fiber_trampoline();
extern "C" [[noreturn]] void kvi_sim_fiber_entry(Fiber* f);

// Saves the callee-saved registers on the current stack, stores the stack pointer in *save_sp, and
// resumes the stack at load_sp the same way. MXCSR and the x87 control word are not switched:
// no fiber changes them, so all share the host thread's.
asm(R"(
  .text
  .p2align 4
  .globl kvi_sim_switch
  .type kvi_sim_switch,@function
kvi_sim_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size kvi_sim_switch,.-kvi_sim_switch

  .p2align 4
  .globl kvi_sim_fiber_trampoline
  .type kvi_sim_fiber_trampoline,@function
kvi_sim_fiber_trampoline:
  movq %r12, %rdi
  andq $-16, %rsp
  call kvi_sim_fiber_entry@PLT
  ud2
  .size kvi_sim_fiber_trampoline,.-kvi_sim_fiber_trampoline
)");
#endif

struct Fiber {
  unsigned char* stack = nullptr;  // lowest usable byte (a guard page lies below)
  void (*entry)(void*) = nullptr;
  void* arg = nullptr;
#if defined(__x86_64__)
  void* sp = nullptr;
#else
  ucontext_t ctx;
#endif
  void* asan_fake_stack = nullptr;
};

namespace {
struct Scheduler {
#if defined(__x86_64__)
  void* sp = nullptr;
#else
  ucontext_t ctx;
#endif
  void* asan_fake_stack = nullptr;
  const void* stack_bottom = nullptr;  // the host thread's stack, as ASan reports it
  size_t stack_size = 0;
  std::vector<Fiber*> pool;
  ~Scheduler() {
    for (Fiber* f : pool) {
      munmap(f->stack - getpagesize(), kStackBytes + static_cast<size_t>(getpagesize()));
      delete f;
    }
  }
};
thread_local Scheduler g_sched;

Fiber* new_fiber() {
  const size_t page = static_cast<size_t>(getpagesize());
  void* m =
      mmap(nullptr, kStackBytes + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) die("cannot map a fiber stack");
  if (mprotect(m, page, PROT_NONE) != 0) die("cannot protect a fiber stack's guard page");
  auto* f = new Fiber;
  f->stack = static_cast<unsigned char*>(m) + page;
  return f;
}

inline void asan_start(void** fake_save, const void* bottom, size_t size) {
#if defined(KVI_SIM_ASAN)
  __sanitizer_start_switch_fiber(fake_save, bottom, size);
#else
  (void)fake_save, (void)bottom, (void)size;
#endif
}
inline void asan_finish(void* fake, const void** bottom_old, size_t* size_old) {
#if defined(KVI_SIM_ASAN)
  __sanitizer_finish_switch_fiber(fake, bottom_old, size_old);
#else
  (void)fake, (void)bottom_old, (void)size_old;
#endif
}

#if !defined(__x86_64__)
void ucontext_entry(unsigned hi, unsigned lo) {
  auto* f = reinterpret_cast<Fiber*>((static_cast<uintptr_t>(hi) << 32) | lo);
  asan_finish(nullptr, &g_sched.stack_bottom, &g_sched.stack_size);
  f->entry(f->arg);
  die("a fiber's entry returned");
}
#endif
}  // namespace

#if defined(__x86_64__)
extern "C" void kvi_sim_fiber_entry(Fiber* f) {
  asan_finish(nullptr, &g_sched.stack_bottom, &g_sched.stack_size);
  f->entry(f->arg);
  die("a fiber's entry returned");
}
#endif

Fiber* fiber_start(void (*entry)(void*), void* arg) {
  Fiber* f = nullptr;
  if (g_sched.pool.empty()) {
    f = new_fiber();
  } else {
    f = g_sched.pool.back();
    g_sched.pool.pop_back();
  }
  f->entry = entry;
  f->arg = arg;
  f->asan_fake_stack = nullptr;
#if defined(__x86_64__)
  // The frame kvi_sim_switch pops: r15..r12, rbx, rbp, then the trampoline as return address
  // (r12 carries the fiber).
  auto* top = reinterpret_cast<uint64_t*>(reinterpret_cast<uintptr_t>(f->stack + kStackBytes) & ~uintptr_t{15});
  top[-1] = 0;
  top[-2] = reinterpret_cast<uint64_t>(&kvi_sim_fiber_trampoline);
  top[-3] = 0;                              // rbp
  top[-4] = 0;                              // rbx
  top[-5] = reinterpret_cast<uint64_t>(f);  // r12
  top[-6] = top[-7] = top[-8] = 0;          // r13, r14, r15
  f->sp = top - 8;
#else
  if (getcontext(&f->ctx) != 0) die("getcontext failed");
  f->ctx.uc_stack.ss_sp = f->stack;
  f->ctx.uc_stack.ss_size = kStackBytes;
  f->ctx.uc_link = nullptr;
  const auto p = reinterpret_cast<uintptr_t>(f);
  makecontext(&f->ctx, reinterpret_cast<void (*)()>(&ucontext_entry), 2, static_cast<unsigned>(p >> 32),
              static_cast<unsigned>(p & 0xffffffffu));
#endif
  return f;
}

void fiber_resume(Fiber* f) {
  asan_start(&g_sched.asan_fake_stack, f->stack, kStackBytes);
#if defined(__x86_64__)
  kvi_sim_switch(&g_sched.sp, f->sp);
#else
  swapcontext(&g_sched.ctx, &f->ctx);
#endif
  asan_finish(g_sched.asan_fake_stack, nullptr, nullptr);
}

void fiber_yield(Fiber* f) {
  asan_start(&f->asan_fake_stack, g_sched.stack_bottom, g_sched.stack_size);
#if defined(__x86_64__)
  kvi_sim_switch(&f->sp, g_sched.sp);
#else
  swapcontext(&f->ctx, &g_sched.ctx);
#endif
  asan_finish(f->asan_fake_stack, &g_sched.stack_bottom, &g_sched.stack_size);
}

// Not instrumented by ASan: its frame must stay on the real stack, because the call below releases
// this fiber's fake stack (where detect_stack_use_after_return would put it).
__attribute__((no_sanitize_address)) void fiber_finish(Fiber* f) {
  g_sched.pool.push_back(f);  // reused only after this switch: the scheduler runs on its own stack
  asan_start(nullptr, g_sched.stack_bottom, g_sched.stack_size);
#if defined(__x86_64__)
  kvi_sim_switch(&f->sp, g_sched.sp);
#else
  swapcontext(&f->ctx, &g_sched.ctx);
#endif
  die("a finished fiber was resumed");
}

void fiber_abandon(Fiber* f) {
#if defined(KVI_SIM_ASAN)
  __asan_unpoison_memory_region(f->stack, kStackBytes);  // frames that never returned
#endif
  g_sched.pool.push_back(f);
}

#if defined(KVI_SIM_ASAN)
namespace {
std::mutex g_fake_stacks_mu;
int g_fake_stacks_off = 0;  // FakeStacksOff objects alive, on any host thread
int g_fake_stacks_saved = 0;
}  // namespace

FakeStacksOff::FakeStacksOff() {
  std::lock_guard lock(g_fake_stacks_mu);
  if (g_fake_stacks_off++ == 0) {
    g_fake_stacks_saved = __asan_option_detect_stack_use_after_return;
    __asan_option_detect_stack_use_after_return = 0;
  }
}
FakeStacksOff::~FakeStacksOff() {
  std::lock_guard lock(g_fake_stacks_mu);
  if (--g_fake_stacks_off == 0) __asan_option_detect_stack_use_after_return = g_fake_stacks_saved;
}
#else
FakeStacksOff::FakeStacksOff() = default;
FakeStacksOff::~FakeStacksOff() = default;
#endif

}  // namespace kvi_sim
