// Runs a grid's blocks, in order or in a seeded order, interleaving up to kResident blocks at
// their barriers where feasible. A block's threads are fibers; between synchronisation points
// they take turns by the launch's Schedule (kvi_sim.h: Checks). A barrier opens once every thread of the
// block (or warp) has reached the same one. Shared memory starts as poison (0xFF bytes: NaN in
// f32, f16 and bf16).
#include "block.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "core/convert.h"
#include "profile.h"

thread_local uint3 threadIdx;
thread_local uint3 blockIdx;
thread_local dim3 blockDim;
thread_local dim3 gridDim;

namespace kvi_sim {

thread_local Block* g_block __attribute__((tls_model("initial-exec"))) = nullptr;

namespace {

constexpr unsigned char kPoison = 0xFF;
constexpr unsigned kFullMask = 0xffffffffu;
// Blocks that take turns at their barriers when a launch's blocks are shuffled: enough to
// interleave a block's reads of shared results with another block's writes.
constexpr size_t kResident = 3;

thread_local uint64_t g_epochs = 0;

[[noreturn]] void outside_kernel(const char* what) {
  std::fprintf(stderr, "kvinfer CUDA simulation: %s called outside a kernel\n", what);
  std::abort();
}

Block& block(const char* what) {
  if (g_block == nullptr || g_block->current == nullptr) outside_kernel(what);
  return *g_block;
}

std::string site(const char* file, int line) { return std::string(file ? file : "?") + ":" + std::to_string(line); }

// The thread's fiber yields to the scheduler until the thread is runnable again.
void wait(Block& b, Thread& t) {
  while (t.state != State::Runnable) {
    fiber_yield(t.fiber);
    if (!b.fault.empty()) fiber_yield(t.fiber);  // never resumed: the scheduler abandons the block
  }
}

void thread_entry(void* arg) {
  auto* b = static_cast<Block*>(arg);
  Thread& t = *b->current;
  (*b->run)();
  t.state = State::Done;
  t.copies.clear();  // never waited for: they do not land
  --b->live;
  Fiber* f = t.fiber;
  t.fiber = nullptr;
  fiber_finish(f);
}

uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Fisher-Yates; a 32-bit draw scaled to [0, i) by a multiply (no division per element).
template <typename T>
void shuffle(std::vector<T>& v, uint64_t& rng) {
  for (size_t i = v.size(); i > 1; --i) {
    const uint64_t r = splitmix(rng) >> 32;
    std::swap(v[i - 1], v[(r * i) >> 32]);
  }
}

// All threads wait. A block barrier every live thread reached at the same place opens; anything
// else is a fault (a barrier in divergent code, a thread that exited before it, a deadlock
// between a warp exchange and a barrier).
bool release_barrier(Block& b) {
  const Thread* first = nullptr;
  for (const Thread& t : b.threads) {
    if (t.state == State::Done) continue;
    if (t.state != State::AtBarrier) {
      b.fault = thread_name(t) + " waits in " + t.what + " at " + site(t.file, t.line) +
                " while other threads of its warp never get there (they exited or wait at a __syncthreads)";
      return false;
    }
    if (first == nullptr) {
      first = &t;
    } else if (t.file != first->file || t.line != first->line) {
      b.fault = "__syncthreads divergence: " + thread_name(*first) + " waits at " + site(first->file, first->line) +
                ", " + thread_name(t) + " at " + site(t.file, t.line);
      return false;
    }
  }
  for (const Thread& t : b.threads)
    if (t.state == State::Done) {
      b.fault = thread_name(t) + " exited without reaching the __syncthreads at " + site(first->file, first->line) +
                " that the rest of the block waits at";
      return false;
    }
  for (Thread& t : b.threads) t.state = State::Runnable, t.sync = Sync::None;
  b.at_barrier = 0;
  b.epoch = next_epoch();
  return true;
}

// Resumes threads [first, last) of the block in shuffled rounds until none of them is runnable
// (each waits at a barrier or a warp exchange, or is done), or the block faults.
void run_rounds(Block& b, unsigned first, unsigned last, std::vector<Thread*>& order) {
  for (;;) {
    order.clear();
    for (unsigned i = first; i < last; ++i) {
      Thread& t = b.threads[i];
      if (t.state == State::NotStarted || t.state == State::Runnable) order.push_back(&t);
    }
    if (order.empty()) return;
    shuffle(order, b.rng);
    for (Thread* t : order) {
      b.current = t;
      threadIdx = t->idx;
      if (t->state == State::NotStarted) {
        t->state = State::Runnable;
        t->fiber = fiber_start(&thread_entry, &b);
      }
      fiber_resume(t->fiber);
      b.current = nullptr;
      if (!b.fault.empty()) return;
    }
  }
}

// Runs the block to its next barrier, which it then opens, or to its end. False on a fault.
bool run_phase(Block& b, Schedule schedule, std::vector<Thread*>& order) {
  g_block = &b;
  blockIdx = b.idx;
  const auto n = static_cast<unsigned>(b.threads.size());
  if (schedule == Schedule::Lockstep) {
    run_rounds(b, 0, n, order);
  } else {
    std::vector<unsigned> warps(b.warps.size());
    std::iota(warps.begin(), warps.end(), 0u);
    shuffle(warps, b.rng);
    for (unsigned w : warps) {
      run_rounds(b, 32 * w, std::min(n, 32 * w + 32), order);
      if (!b.fault.empty()) break;
    }
  }
  if (!b.fault.empty()) return false;
  return b.live == 0 || release_barrier(b);
}

void start_block(Block& b, const Grid& g, uint3 idx, uint64_t seed) {
  const unsigned n = g.block.x * g.block.y * g.block.z;
  b.idx = idx;
  b.run = &g.run;
  b.threads.resize(n);
  for (unsigned i = 0; i < n; ++i) {
    Thread& t = b.threads[i];
    t = Thread{};
    t.linear = i;
    t.idx = {i % g.block.x, (i / g.block.x) % g.block.y, i / (g.block.x * g.block.y)};
  }
  b.warps.resize((n + 31) / 32);
  for (unsigned w = 0; w < b.warps.size(); ++w) {
    b.warps[w] = Warp{};
    b.warps[w].lanes = std::min(32u, n - 32 * w);
  }
  // Exact size, so that AddressSanitizer sees a read past the launch's dynamic shared memory.
  b.smem_bytes = g.smem;
  b.smem.reset(new unsigned char[g.smem > 0 ? g.smem : 1]);
  std::memset(b.smem.get(), kPoison, g.smem);
  b.live = n;
  b.at_barrier = 0;
  b.current = nullptr;
  b.fault.clear();
  b.fault_error = cudaErrorLaunchFailure;
  b.rng = seed;
  b.epoch = next_epoch();
  b.racecheck = g.racecheck;
  b.static_saved.clear();
  if (g.racecheck && b.shadow.size() != g.smem) b.shadow.assign(g.smem, Shadow{});
}

uint3 block_index(const dim3& grid, uint64_t linear) {
  return {static_cast<unsigned>(linear % grid.x), static_cast<unsigned>(linear / grid.x % grid.y),
          static_cast<unsigned>(linear / (uint64_t{grid.x} * grid.y))};
}

}  // namespace

uint64_t next_epoch() { return ++g_epochs; }

std::string thread_name(const Thread& t) {
  return "thread (" + std::to_string(t.idx.x) + "," + std::to_string(t.idx.y) + "," + std::to_string(t.idx.z) + ")";
}

void note_fault(Block& b, std::string why, cudaError_t err) {
  if (b.fault.empty()) {
    b.fault = std::move(why);
    b.fault_error = err;
  }
}

void abandon_thread(Block& b) {
  fiber_yield(b.current->fiber);  // never resumed: the scheduler abandons the block
  std::abort();
}

bool run_grid(const Grid& g, std::string& fault, cudaError_t& err) {
  const FakeStacksOff fake_stacks_off;
  profile_begin_launch(g);
  const uint64_t count = uint64_t{g.grid.x} * g.grid.y * g.grid.z;
  Block* saved = g_block;
  gridDim = g.grid;
  blockDim = g.block;
  uint64_t rng = g.seed;
  // The order blocks start in: as numbered, or a seeded permutation.
  std::vector<uint64_t> order;
  if (g.shuffle_blocks) {
    order.resize(count);
    std::iota(order.begin(), order.end(), uint64_t{0});
    shuffle(order, rng);
  }
  const auto nth = [&](uint64_t i) { return g.shuffle_blocks ? order[i] : i; };
  // Shuffled blocks take turns at their barriers when the kernels are instrumented: static
  // __shared__ arrays are one per host thread, and only the access hooks know which bytes of
  // them a block holds (access.cpp swaps them); otherwise each block runs to its end. A grid of
  // one block has nothing to interleave: it runs untracked, since noting every static shared
  // access made top_k's one block (scattered 2-byte counters) 15 times slower.
  const size_t resident =
      g.shuffle_blocks && access_checks_compiled() && count > 1 ? static_cast<size_t>(std::min<uint64_t>(kResident, count)) : 1;
  begin_launch_static_shared(resident > 1);
  std::vector<std::unique_ptr<Block>> slots;
  std::vector<Block*> live;
  uint64_t next = 0;
  for (size_t s = 0; s < resident && next < count; ++s) {
    slots.push_back(std::make_unique<Block>());
    start_block(*slots[s], g, block_index(g.grid, nth(next++)), splitmix(rng));
    live.push_back(slots[s].get());
  }
  std::vector<Thread*> scratch;
  Block* last = nullptr;
  bool ok = true;
  while (ok && !live.empty()) {
    const size_t pick = live.size() == 1 ? 0 : static_cast<size_t>(((splitmix(rng) >> 32) * live.size()) >> 32);
    Block& b = *live[pick];
    if (last != &b && resident > 1) swap_static_shared(last, &b);
    last = &b;
    if (!run_phase(b, g.schedule, scratch)) {
      const uint3 i = b.idx;
      fault = "block (" + std::to_string(i.x) + "," + std::to_string(i.y) + "," + std::to_string(i.z) + "): " + b.fault;
      err = b.fault_error;
      ok = false;
    } else if (b.live == 0) {
      if (t_profiling) profile_block_end(b);
      if (next < count) {
        start_block(b, g, block_index(g.grid, nth(next++)), splitmix(rng));
      } else {
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(pick));
      }
    }
  }
  if (!ok)
    for (auto& s : slots)
      for (Thread& t : s->threads)
        if (t.fiber) fiber_abandon(t.fiber), t.fiber = nullptr;
  profile_end_launch(ok);
  g_block = saved;
  return ok;
}

// ---- intrinsics -----------------------------------------------------------------------------------

unsigned char* dynamic_shared_memory() { return block("dynamic shared memory").smem.get(); }

unsigned lane_id() { return block("a warp intrinsic").current->linear % 32; }

void sync_threads(const char* file, int line) {
  Block& b = block("__syncthreads");
  Thread& t = *b.current;
  t.state = State::AtBarrier, t.sync = Sync::Barrier, t.what = "__syncthreads", t.file = file, t.line = line;
  ++b.at_barrier;
  wait(b, t);
}

namespace {
// Lane t arrives at a warp exchange. The last lane to arrive checks that all 32 are at the same
// place and releases them.
void warp_arrive(Block& b, Thread& t, Sync kind, unsigned mask, const char* what, const char* file, int line) {
  Warp& w = b.warps[t.linear / 32];
  t.state = State::AtWarp, t.sync = kind, t.what = what, t.file = file, t.line = line;
  t.warp_gen = w.gen;
  if (mask != kFullMask)
    thread_fault(b, [&] {
      return thread_name(t) + ": " + what + " at " + site(file, line) +
             " with a partial mask; the simulation implements full-mask warp operations only";
    });
  if (w.lanes != 32)
    thread_fault(b, [&] {
      return thread_name(t) + ": full-mask " + what + " at " + site(file, line) + " in a warp of " +
             std::to_string(w.lanes) + " threads (the block size is not a multiple of 32)";
    });
  if (++w.arrived == 32) {
    const unsigned base = t.linear / 32 * 32;
    for (unsigned i = 0; i < 32; ++i) {
      Thread& o = b.threads[base + i];
      if (o.sync != kind || o.file != file || o.line != line)
        thread_fault(b, [&] {
          return "warp divergence: " + thread_name(t) + " is in " + what + " at " + site(file, line) + ", " +
                 thread_name(o) + " in " + (o.what ? o.what : "?") + " at " + site(o.file, o.line);
        });
    }
    for (unsigned i = 0; i < 32; ++i) b.threads[base + i].state = State::Runnable;
    w.arrived = 0;
    ++w.gen;
  }
  wait(b, t);
  t.sync = Sync::None;
}
}  // namespace

void sync_warp(unsigned mask, const char* file, int line) {
  Block& b = block("__syncwarp");
  warp_arrive(b, *b.current, Sync::SyncWarp, mask, "__syncwarp", file, line);
}

uint64_t warp_exchange(unsigned mask, uint64_t bits, int src_lane, const char* what, const char* file, int line) {
  Block& b = block(what);
  Thread& t = *b.current;
  if (src_lane < 0)
    thread_fault(b, [&] {
      return thread_name(t) + ": " + what + " at " + site(file, line) + " with a width other than 32 (not simulated)";
    });
  Warp& w = b.warps[t.linear / 32];
  const uint64_t gen = w.gen;
  w.buf[gen % 2][t.linear % 32] = bits;
  warp_arrive(b, t, Sync::Shuffle, mask, what, file, line);
  return w.buf[gen % 2][src_lane];
}

void pipeline_memcpy_async(void* dst, const void* src, size_t size, size_t zfill) {
  Block& b = block("__pipeline_memcpy_async");
  Thread& t = *b.current;
  const auto d = reinterpret_cast<uintptr_t>(dst), s = reinterpret_cast<uintptr_t>(src);
  std::string bad;
  if (size != 4 && size != 8 && size != 16) bad = "size " + std::to_string(size) + " (4, 8 or 16)";
  else if (d % size != 0 || s % size != 0)
    thread_fault(
        b,
        [&] {
          return "misaligned address: " + thread_name(t) + ": __pipeline_memcpy_async of " + std::to_string(size) +
                 " bytes from " + std::to_string(s % size) + " and to " + std::to_string(d % size) +
                 " bytes past a multiple of " + std::to_string(size);
        },
        cudaErrorMisalignedAddress);
  else if (zfill > size) bad = "zfill " + std::to_string(zfill) + " > size";
  else if (const auto base = reinterpret_cast<uintptr_t>(b.smem.get()); d < base || d + size > base + b.smem_bytes)
    bad = "a destination outside the block's dynamic shared memory";
  else if (!is_device_range(src, size - zfill)) bad = "a source outside device memory";
  if (!bad.empty()) thread_fault(b, [&] { return thread_name(t) + ": __pipeline_memcpy_async with " + bad; });
  if (t_profiling && size > zfill)  // the global read; its landing in shared memory is not counted
    profile_access(b, s, size - zfill, false, false, __builtin_return_address(0));
  t.copies.push_back({static_cast<unsigned char*>(dst), static_cast<const unsigned char*>(src), size, zfill});
}

void pipeline_commit() {
  Thread& t = *block("__pipeline_commit").current;
  t.batch_ends.push_back(t.copies.size());
}

// The copies of every committed batch but the newest n land now, and only now.
void pipeline_wait_prior(size_t n) {
  Block& b = block("__pipeline_wait_prior");
  Thread& t = *b.current;
  if (t.batch_ends.size() <= n) return;
  const size_t done = t.batch_ends[t.batch_ends.size() - 1 - n];
  for (size_t i = 0; i < done; ++i) {
    const Copy& c = t.copies[i];
    std::memcpy(c.dst, c.src, c.size - c.zfill);
    std::memset(c.dst + (c.size - c.zfill), 0, c.zfill);
    shared_access(b, c.dst, c.size, true, nullptr);  // the issuing thread writes them now
  }
  t.copies.erase(t.copies.begin(), t.copies.begin() + static_cast<std::ptrdiff_t>(done));
  const size_t keep = n;
  std::vector<size_t> ends(t.batch_ends.end() - static_cast<std::ptrdiff_t>(keep), t.batch_ends.end());
  for (size_t& e : ends) e -= done;
  t.batch_ends = std::move(ends);
}

// ---- tensor-core MMA ------------------------------------------------------------------------------
// mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32. Fragment layout: PTX ISA,
// "Matrix Fragments for mma.m16n8k16 with floating point type" (docs.nvidia.com/cuda/
// parallel-thread-execution, warp-level-matrix-fragment-mma-16816-float). With g = lane >> 2 and
// t = lane % 4, and element 2i in the low half of register i, 2i + 1 in its high half:
//   A (16 × 16, row-major), 4 registers = a0..a7:  row g for a0,a1,a4,a5, g + 8 for a2,a3,a6,a7;
//                                                   col 2t + (i & 1), + 8 for a4..a7
//   B (16 × 8, "col"), 2 registers = b0..b3:        row (k) 2t + (i & 1), + 8 for b2,b3; col (n) g
//   C, D (16 × 8), 4 f32:                           row g for c0,c1, g + 8 for c2,c3; col 2t + (i & 1)
namespace {
float mma_element(bool bf16, uint32_t reg, int half) {
  const auto h = static_cast<uint16_t>(half ? reg >> 16 : reg & 0xffffu);
  return bf16 ? kvinfer::core::bf16_to_f32(h) : kvinfer::core::f16_to_f32(h);
}
}  // namespace

void warp_mma_m16n8k16(bool bf16, float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], const float (&c)[4],
                       const char* file, int line) {
  Block& b_ = block("mma.sync");
  Thread& t = *b_.current;
  Warp& w = b_.warps[t.linear / 32];
  if (!w.mma) w.mma.reset(new Warp::MmaFrags[2]);
  const uint64_t gen = w.gen;
  Warp::MmaFrags& f = w.mma[gen % 2];
  const unsigned lane = t.linear % 32;
  f.done = false;  // every lane deposits before any computes: the first of them resets the flag
  std::memcpy(f.a[lane], a, sizeof a);
  std::memcpy(f.b[lane], b, sizeof b);
  std::memcpy(f.c[lane], c, sizeof c);
  warp_arrive(b_, t, Sync::Mma, kFullMask, "mma.sync (m16n8k16)", file, line);
  if (!f.done) {  // the first lane to run on computes the whole 16 × 8 D for the warp
    float am[16][16], bm[16][8], cm[16][8];
    for (int l = 0; l < 32; ++l) {
      const int g = l >> 2, tg = l % 4;
      for (int i = 0; i < 8; ++i) {  // a_i: register i / 2, half i % 2
        const int row = g + ((i / 2) % 2) * 8, col = 2 * tg + (i & 1) + (i >= 4 ? 8 : 0);
        am[row][col] = mma_element(bf16, f.a[l][i / 2], i % 2);
      }
      for (int i = 0; i < 4; ++i) bm[2 * tg + (i & 1) + (i >= 2 ? 8 : 0)][g] = mma_element(bf16, f.b[l][i / 2], i % 2);
      for (int i = 0; i < 4; ++i) cm[g + (i >= 2 ? 8 : 0)][2 * tg + (i & 1)] = f.c[l][i];
    }
    for (int l = 0; l < 32; ++l) {
      const int g = l >> 2, tg = l % 4;
      for (int i = 0; i < 4; ++i) {
        const int row = g + (i >= 2 ? 8 : 0), col = 2 * tg + (i & 1);
        float acc = 0.0f;  // 16-bit × 16-bit products are exact in f32
        for (int k = 0; k < 16; ++k) acc += am[row][k] * bm[k][col];
        f.d[l][i] = acc + cm[row][col];
      }
    }
    f.done = true;
  }
  std::memcpy(d, f.d[lane], sizeof d);
}

}  // namespace kvi_sim
