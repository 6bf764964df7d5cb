// What the simulation sees of each load and store a kernel makes. In a simulation build without
// sanitizers the kernels are compiled with -fsanitize=thread (sim/CMakeLists.txt), whose
// instrumentation calls __tsan_read4(p) and friends before every access; no ThreadSanitizer
// runtime is linked, these definitions take its place. Inside a kernel they
//   - fault on a misaligned access: a scalar or vector the compiler took to be aligned to its size
//     (float4, uint4, float2, ...) at an address that is not, which a GPU stops with
//     cudaErrorMisalignedAddress (outside the UBSan build the host would run on);
//   - note the bytes of static __shared__ arrays a block touches, so that interleaved blocks
//     each keep their own (swap_static_shared);
//   - under racecheck, keep a record of each shared-memory byte (block.h: Shadow) and fault when
//     two warps of the block write and read (or both write) it between the same two barriers.
#include <cxxabi.h>
#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "block.h"
#include "profile.h"

namespace kvi_sim {

namespace {

std::atomic<bool> g_instrumented{false};  // set by __tsan_init: instrumented objects are linked in

struct Range {
  uintptr_t lo, hi;
};
// This host thread's static TLS blocks (where static __shared__ arrays live, one per host thread),
// less the built-in variables, which kernels only read; and the racecheck records of the former.
thread_local std::vector<Range> t_tls;
thread_local std::vector<std::vector<Shadow>> t_tls_shadow;
thread_local Range t_builtins[4];
thread_local bool t_tls_known = false;
// The static __shared__ bytes the current launch touched (merged ranges); kept only when its
// blocks interleave.
thread_local bool t_track_static __attribute__((tls_model("initial-exec"))) = false;
thread_local std::vector<Range> t_static;

int add_tls(dl_phdr_info* info, size_t, void*) {
  for (int i = 0; i < info->dlpi_phnum; ++i)
    if (info->dlpi_phdr[i].p_type == PT_TLS && info->dlpi_tls_data != nullptr) {
      const auto lo = reinterpret_cast<uintptr_t>(info->dlpi_tls_data);
      t_tls.push_back({lo, lo + info->dlpi_phdr[i].p_memsz});
    }
  return 0;
}

void find_tls() {
  if (t_tls_known) return;
  dl_iterate_phdr(&add_tls, nullptr);
  t_tls_shadow.resize(t_tls.size());
  const auto range = [](const void* p, size_t n) {
    const auto a = reinterpret_cast<uintptr_t>(p);
    return Range{a, a + n};
  };
  t_builtins[0] = range(&threadIdx, sizeof threadIdx);
  t_builtins[1] = range(&blockIdx, sizeof blockIdx);
  t_builtins[2] = range(&blockDim, sizeof blockDim);
  t_builtins[3] = range(&gridDim, sizeof gridDim);
  t_tls_known = true;
}

// The static TLS block holding a, or -1.
int tls_block(uintptr_t a) {
  for (const Range& r : t_builtins)
    if (a >= r.lo && a < r.hi) return -1;
  for (size_t i = 0; i < t_tls.size(); ++i)
    if (a >= t_tls[i].lo && a < t_tls[i].hi) return static_cast<int>(i);
  return -1;
}

void note_static(uintptr_t a, size_t n) {
  for (Range& r : t_static)
    if (a <= r.hi && a + n >= r.lo) {  // overlaps or touches: grow it
      r.lo = std::min(r.lo, a);
      r.hi = std::max(r.hi, a + n);
      return;
    }
  t_static.push_back({a, a + n});
}

std::string who(const Block& b, unsigned thread, const void* pc) {
  return thread_name(b.threads[thread]) + " (warp " + std::to_string(thread / 32) + ") at " + code_site(pc);
}

[[noreturn]] void race(Block& b, const char* kind, const std::string& byte, const std::string& first,
                       const std::string& second) {
  thread_fault(b, [&] {
    return std::string("shared-memory race (racecheck, ") + kind + "): " + byte + ": " + first + ", then " + second +
           ", with no __syncthreads between them";
  });
}

void check_byte(Block& b, Shadow& s, unsigned t, bool write, const void* pc, const std::string& (*where)(size_t),
                size_t at) {
  const uint64_t e = b.epoch;
  const unsigned warp = t / 32;
  if (s.w_epoch == e && s.w_thread / 32u != warp)
    race(b, write ? "write after write" : "read after write", where(at), "written by " + who(b, s.w_thread, s.w_pc),
         (write ? "written by " : "read by ") + who(b, t, pc));
  if (write) {
    if (s.r_epoch == e) {
      if (s.r_thread / 32u != warp)
        race(b, "write after read", where(at), "read by " + who(b, s.r_thread, s.r_pc), "written by " + who(b, t, pc));
      if (s.r2)
        race(b, "write after read", where(at), "read by " + who(b, s.r2_thread, s.r2_pc), "written by " + who(b, t, pc));
    }
    s.w_epoch = e, s.w_thread = static_cast<uint16_t>(t), s.w_pc = pc;
    return;
  }
  if (s.r_epoch != e) {
    s.r_epoch = e, s.r_thread = static_cast<uint16_t>(t), s.r_pc = pc, s.r2 = false;
  } else if (!s.r2 && s.r_thread / 32u != warp) {
    s.r2 = true, s.r2_thread = static_cast<uint16_t>(t), s.r2_pc = pc;
  }
}

thread_local std::string t_where;
const std::string& dynamic_byte(size_t at) {
  return t_where = "byte " + std::to_string(at) + " of the dynamic shared memory";
}
const std::string& static_byte(size_t at) {
  return t_where = "byte " + std::to_string(at) + " of the host thread's static TLS (a static __shared__ array)";
}

void check_range(Block& b, std::vector<Shadow>& shadow, size_t at, size_t n, bool write, const void* pc,
                 const std::string& (*where)(size_t)) {
  const unsigned t = b.current->linear;
  for (size_t i = 0; i < n; ++i) check_byte(b, shadow[at + i], t, write, pc, where, at + i);
}

// One access of n bytes at p by the running thread; align: the alignment the compiler assumed
// (n for the aligned hooks, 1 for the others).
inline void access(const void* p, size_t n, size_t align, bool write, const void* pc) {
  Block* b = g_block;
  if (b == nullptr || b->current == nullptr) return;  // host code
  const auto a = reinterpret_cast<uintptr_t>(p);
  if (align > 1 && a % align != 0) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "misaligned address: a %zu-byte %s at %p (a multiple of %zu is required) by ", n,
                  write ? "store" : "load", p, align);
    thread_fault(
        *b, [&] { return buf + who(*b, b->current->linear, pc); }, cudaErrorMisalignedAddress);
  }
  if (t_profiling) {
    const auto base = reinterpret_cast<uintptr_t>(b->smem.get());
    if (a >= base && a < base + b->smem_bytes) profile_access(*b, a - base, n, write, true, pc);
    else profile_access(*b, a, n, write, tls_block(a) >= 0, pc);
  }
  if (!b->racecheck && !t_track_static) return;
  const auto smem = reinterpret_cast<uintptr_t>(b->smem.get());
  if (a >= smem && a < smem + b->smem_bytes) {
    if (b->racecheck) check_range(*b, b->shadow, a - smem, std::min(n, smem + b->smem_bytes - a), write, pc, dynamic_byte);
    return;
  }
  const int i = tls_block(a);
  if (i < 0) return;
  if (t_track_static) note_static(a, n);
  if (b->racecheck) {
    auto& shadow = t_tls_shadow[static_cast<size_t>(i)];
    const Range& r = t_tls[static_cast<size_t>(i)];
    if (shadow.empty()) shadow.resize(r.hi - r.lo);
    check_range(*b, shadow, a - r.lo, std::min(n, r.hi - a), write, pc, static_byte);
  }
}

}  // namespace

// addr2line -Cfe module 0x1234 names the line of "module+0x1234".
std::string code_site(const void* pc) {
  if (pc == nullptr) return "an async copy (__pipeline_memcpy_async) landing";
  Dl_info info{};
  if (dladdr(pc, &info) == 0) return "an unknown place";
  char buf[32];
  if (info.dli_sname != nullptr) {
    int status = 0;
    char* d = abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status);
    std::string name = status == 0 && d != nullptr ? d : info.dli_sname;
    std::free(d);
    std::snprintf(buf, sizeof buf, "+0x%zx", static_cast<size_t>(static_cast<const char*>(pc) -
                                                                   static_cast<const char*>(info.dli_saddr)));
    return name + buf;
  }
  std::snprintf(buf, sizeof buf, "+0x%zx",
                static_cast<size_t>(static_cast<const char*>(pc) - static_cast<const char*>(info.dli_fbase)));
  return std::string(info.dli_fname ? info.dli_fname : "?") + buf;
}

void misaligned_vector(const void* p, unsigned bytes, bool store) {
  Block* b = g_block;
  if (b == nullptr || b->current == nullptr) return;  // host code
  char buf[160];
  std::snprintf(buf, sizeof buf, "misaligned address: a %u-byte vector %s at %p (a multiple of %u is required) by ",
                bytes, store ? "store" : "load", p, bytes);
  thread_fault(
      *b, [&] { return buf + thread_name(*b->current); }, cudaErrorMisalignedAddress);
}

bool access_checks_compiled() { return g_instrumented.load(std::memory_order_relaxed); }

void begin_launch_static_shared(bool track) {
  find_tls();
  t_track_static = track;
  t_static.clear();
}

void swap_static_shared(Block* from, Block* to) {
  if (from != nullptr) {
    from->static_saved.clear();
    for (const Range& r : t_static) {
      const auto* p = reinterpret_cast<const unsigned char*>(r.lo);
      from->static_saved.emplace_back(r.lo, std::vector<unsigned char>(p, p + (r.hi - r.lo)));
    }
  }
  if (to != nullptr)
    for (const auto& [at, bytes] : to->static_saved) std::memcpy(reinterpret_cast<void*>(at), bytes.data(), bytes.size());
}

void shared_access(Block& b, const void* p, size_t bytes, bool write, const void* pc) {
  if (!b.racecheck) return;
  const auto a = reinterpret_cast<uintptr_t>(p), smem = reinterpret_cast<uintptr_t>(b.smem.get());
  if (a >= smem && a + bytes <= smem + b.smem_bytes) check_range(b, b.shadow, a - smem, bytes, write, pc, dynamic_byte);
}

}  // namespace kvi_sim

// ---- the hooks ------------------------------------------------------------------------------------
// Called by instrumented code (GCC's and clang's -fsanitize=thread ABI). Atomics are performed
// as asked (kvinfer's kernels use none; host code in the same objects may).
using kvi_sim::access;
#define KVI_RA __builtin_return_address(0)
#define KVI_HOOKS(N)                                                                              \
  extern "C" void __tsan_read##N(void* p) { access(p, N, N, false, KVI_RA); }                    \
  extern "C" void __tsan_write##N(void* p) { access(p, N, N, true, KVI_RA); }                    \
  extern "C" void __tsan_unaligned_read##N(void* p) { access(p, N, 1, false, KVI_RA); }          \
  extern "C" void __tsan_unaligned_write##N(void* p) { access(p, N, 1, true, KVI_RA); }          \
  extern "C" void __tsan_volatile_read##N(void* p) { access(p, N, N, false, KVI_RA); }           \
  extern "C" void __tsan_volatile_write##N(void* p) { access(p, N, N, true, KVI_RA); }
KVI_HOOKS(1)
KVI_HOOKS(2)
KVI_HOOKS(4)
KVI_HOOKS(8)
KVI_HOOKS(16)
#undef KVI_HOOKS

extern "C" {
void __tsan_init() { kvi_sim::g_instrumented.store(true, std::memory_order_relaxed); }
void __tsan_read_range(void* p, unsigned long n) { access(p, n, 1, false, KVI_RA); }
void __tsan_write_range(void* p, unsigned long n) { access(p, n, 1, true, KVI_RA); }
void __tsan_vptr_update(void** p, void*) { access(p, sizeof *p, 1, true, KVI_RA); }
void __tsan_vptr_read(void** p) { access(p, sizeof *p, 1, false, KVI_RA); }
void __tsan_func_entry(void*) {}
void __tsan_func_exit() {}
void* __tsan_memcpy(void* d, const void* s, unsigned long n) {
  access(s, n, 1, false, KVI_RA);
  access(d, n, 1, true, KVI_RA);
  return std::memcpy(d, s, n);
}
void* __tsan_memmove(void* d, const void* s, unsigned long n) {
  access(s, n, 1, false, KVI_RA);
  access(d, n, 1, true, KVI_RA);
  return std::memmove(d, s, n);
}
void* __tsan_memset(void* d, int v, unsigned long n) {
  access(d, n, 1, true, KVI_RA);
  return std::memset(d, v, n);
}
void __tsan_atomic_thread_fence(int) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
void __tsan_atomic_signal_fence(int) { __atomic_signal_fence(__ATOMIC_SEQ_CST); }
}

#define KVI_ATOMICS(N, T)                                                                                  \
  extern "C" T __tsan_atomic##N##_load(const volatile T* a, int) { return __atomic_load_n(a, __ATOMIC_SEQ_CST); } \
  extern "C" void __tsan_atomic##N##_store(volatile T* a, T v, int) { __atomic_store_n(a, v, __ATOMIC_SEQ_CST); } \
  extern "C" T __tsan_atomic##N##_exchange(volatile T* a, T v, int) {                                       \
    return __atomic_exchange_n(a, v, __ATOMIC_SEQ_CST);                                                      \
  }                                                                                                          \
  extern "C" T __tsan_atomic##N##_fetch_add(volatile T* a, T v, int) {                                      \
    return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST);                                                       \
  }                                                                                                          \
  extern "C" T __tsan_atomic##N##_fetch_sub(volatile T* a, T v, int) {                                      \
    return __atomic_fetch_sub(a, v, __ATOMIC_SEQ_CST);                                                       \
  }                                                                                                          \
  extern "C" T __tsan_atomic##N##_fetch_and(volatile T* a, T v, int) {                                      \
    return __atomic_fetch_and(a, v, __ATOMIC_SEQ_CST);                                                       \
  }                                                                                                          \
  extern "C" T __tsan_atomic##N##_fetch_or(volatile T* a, T v, int) {                                       \
    return __atomic_fetch_or(a, v, __ATOMIC_SEQ_CST);                                                        \
  }                                                                                                          \
  extern "C" T __tsan_atomic##N##_fetch_xor(volatile T* a, T v, int) {                                      \
    return __atomic_fetch_xor(a, v, __ATOMIC_SEQ_CST);                                                       \
  }                                                                                                          \
  extern "C" int __tsan_atomic##N##_compare_exchange_strong(volatile T* a, T* c, T v, int, int) {           \
    return __atomic_compare_exchange_n(a, c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                  \
  }                                                                                                          \
  extern "C" int __tsan_atomic##N##_compare_exchange_weak(volatile T* a, T* c, T v, int, int) {             \
    return __atomic_compare_exchange_n(a, c, v, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                   \
  }                                                                                                          \
  extern "C" T __tsan_atomic##N##_compare_exchange_val(volatile T* a, T c, T v, int, int) {                 \
    __atomic_compare_exchange_n(a, &c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                        \
    return c;                                                                                                \
  }
KVI_ATOMICS(8, unsigned char)
KVI_ATOMICS(16, unsigned short)
KVI_ATOMICS(32, unsigned int)
KVI_ATOMICS(64, unsigned long long)
#undef KVI_ATOMICS
