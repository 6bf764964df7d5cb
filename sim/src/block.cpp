// Runs a grid block by block. A block's threads are fibers; the scheduler runs every runnable
// thread in a shuffled order until it reaches a barrier, a warp synchronisation or its end, then
// releases the barrier once every thread of the block (or warp) has reached the same one.
// Shared memory starts as poison (0xFF bytes: NaN in f32, f16 and bf16).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/convert.h"
#include "fiber.h"
#include "internal.h"

thread_local uint3 threadIdx;
thread_local uint3 blockIdx;
thread_local dim3 blockDim;
thread_local dim3 gridDim;

namespace kvi_sim {

namespace {

constexpr unsigned char kPoison = 0xFF;
constexpr unsigned kFullMask = 0xffffffffu;

enum class State : uint8_t { NotStarted, Runnable, AtBarrier, AtWarp, Done };
enum class Sync : uint8_t { None, Barrier, Shuffle, SyncWarp, Mma };

struct Copy {
  unsigned char* dst;
  const unsigned char* src;
  size_t size, zfill;
};

struct Thread {
  uint3 idx{};
  unsigned linear = 0;
  State state = State::NotStarted;
  Sync sync = Sync::None;
  const char* what = nullptr;  // the intrinsic it waits in
  const char* file = nullptr;
  int line = 0;
  Fiber* fiber = nullptr;
  uint64_t warp_gen = 0;  // generation of the warp exchange it waits in
  std::vector<Copy> copies;        // issued, not yet completed
  std::vector<size_t> batch_ends;  // committed batches: copies[..batch_ends[i]]
};

struct Warp {
  unsigned lanes = 0;    // threads in this warp (32 but for a partial last warp)
  unsigned arrived = 0;  // lanes waiting in the current exchange
  uint64_t gen = 0;
  uint64_t buf[2][32] = {};
  struct MmaFrags {  // one mma.sync's operands as the lanes deposit them, and its result
    uint32_t a[32][4], b[32][2];
    float c[32][4], d[32][4];
    bool done;
  };
  std::unique_ptr<MmaFrags[]> mma;  // [2], by generation as buf; allocated at a warp's first mma
};

struct Block {
  std::vector<Thread> threads;
  std::vector<Warp> warps;
  std::unique_ptr<unsigned char[]> smem;
  size_t smem_bytes = 0;
  const std::function<void()>* run = nullptr;
  unsigned live = 0, at_barrier = 0;
  Thread* current = nullptr;
  std::string fault;
};

thread_local Block* g_block = nullptr;

[[noreturn]] void outside_kernel(const char* what) {
  std::fprintf(stderr, "kvinfer CUDA simulation: %s called outside a kernel\n", what);
  std::abort();
}

Block& block(const char* what) {
  if (g_block == nullptr || g_block->current == nullptr) outside_kernel(what);
  return *g_block;
}

std::string site(const char* file, int line) { return std::string(file ? file : "?") + ":" + std::to_string(line); }

std::string thread_name(const Thread& t) {
  return "thread (" + std::to_string(t.idx.x) + "," + std::to_string(t.idx.y) + "," + std::to_string(t.idx.z) + ")";
}

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
  return true;
}

void run_block(Block& b, uint64_t seed) {
  std::vector<Thread*> order;
  order.reserve(b.threads.size());
  uint64_t rng = seed;
  while (b.live > 0) {
    order.clear();
    for (Thread& t : b.threads)
      if (t.state == State::NotStarted || t.state == State::Runnable) order.push_back(&t);
    if (order.empty()) {
      if (!release_barrier(b)) return;
      continue;
    }
    // Fisher-Yates; a 32-bit draw scaled to [0, i) by a multiply (no division per element).
    for (size_t i = order.size(); i > 1; --i) {
      const uint64_t r = splitmix(rng) >> 32;
      std::swap(order[i - 1], order[(r * i) >> 32]);
    }
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

}  // namespace

bool run_grid(const Grid& g, std::string& fault) {
  const unsigned n = g.block.x * g.block.y * g.block.z;
  Block b;
  b.run = &g.run;
  b.threads.resize(n);
  b.warps.resize((n + 31) / 32);
  b.smem_bytes = g.smem;
  Block* saved = g_block;
  g_block = &b;
  gridDim = g.grid;
  blockDim = g.block;
  uint64_t seed = g.seed;
  bool ok = true;
  for (unsigned z = 0; z < g.grid.z && ok; ++z)
    for (unsigned y = 0; y < g.grid.y && ok; ++y)
      for (unsigned x = 0; x < g.grid.x && ok; ++x) {
        blockIdx = {x, y, z};
        for (unsigned i = 0; i < n; ++i) {
          Thread& t = b.threads[i];
          t = Thread{};
          t.linear = i;
          t.idx = {i % g.block.x, (i / g.block.x) % g.block.y, i / (g.block.x * g.block.y)};
        }
        for (unsigned w = 0; w < b.warps.size(); ++w) {
          b.warps[w] = Warp{};
          b.warps[w].lanes = std::min(32u, n - 32 * w);
        }
        // Exact size, so that AddressSanitizer sees a read past the launch's dynamic shared memory.
        b.smem.reset(new unsigned char[g.smem > 0 ? g.smem : 1]);
        std::memset(b.smem.get(), kPoison, g.smem);
        b.live = n;
        b.at_barrier = 0;
        b.fault.clear();
        run_block(b, splitmix(seed));
        if (!b.fault.empty()) {
          fault = "block (" + std::to_string(x) + "," + std::to_string(y) + "," + std::to_string(z) + "): " + b.fault;
          for (Thread& t : b.threads)
            if (t.fiber) fiber_abandon(t.fiber);
          ok = false;
        }
      }
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
  if (mask != kFullMask) {
    b.fault = thread_name(t) + ": " + what + " at " + site(file, line) +
              " with a partial mask; the simulation implements full-mask warp operations only";
    fiber_yield(t.fiber);
  }
  if (w.lanes != 32) {
    b.fault = thread_name(t) + ": full-mask " + what + " at " + site(file, line) + " in a warp of " +
              std::to_string(w.lanes) + " threads (the block size is not a multiple of 32)";
    fiber_yield(t.fiber);
  }
  if (++w.arrived == 32) {
    const unsigned base = t.linear / 32 * 32;
    for (unsigned i = 0; i < 32; ++i) {
      Thread& o = b.threads[base + i];
      if (o.sync != kind || o.file != file || o.line != line) {
        b.fault = "warp divergence: " + thread_name(t) + " is in " + what + " at " + site(file, line) + ", " +
                  thread_name(o) + " in " + (o.what ? o.what : "?") + " at " + site(o.file, o.line);
        fiber_yield(t.fiber);
      }
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
  if (src_lane < 0) {
    b.fault = thread_name(t) + ": " + what + " at " + site(file, line) + " with a width other than 32 (not simulated)";
    fiber_yield(t.fiber);
  }
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
  else if (d % size != 0 || s % size != 0) bad = "addresses not aligned to the size " + std::to_string(size);
  else if (zfill > size) bad = "zfill " + std::to_string(zfill) + " > size";
  else if (const auto base = reinterpret_cast<uintptr_t>(b.smem.get()); d < base || d + size > base + b.smem_bytes)
    bad = "a destination outside the block's dynamic shared memory";
  else if (!is_device_range(src, size - zfill)) bad = "a source outside device memory";
  if (!bad.empty()) {
    b.fault = thread_name(t) + ": __pipeline_memcpy_async with " + bad;
    fiber_yield(t.fiber);
  }
  t.copies.push_back({static_cast<unsigned char*>(dst), static_cast<const unsigned char*>(src), size, zfill});
}

void pipeline_commit() {
  Thread& t = *block("__pipeline_commit").current;
  t.batch_ends.push_back(t.copies.size());
}

// The copies of every committed batch but the newest n land now, and only now.
void pipeline_wait_prior(size_t n) {
  Thread& t = *block("__pipeline_wait_prior").current;
  if (t.batch_ends.size() <= n) return;
  const size_t done = t.batch_ends[t.batch_ends.size() - 1 - n];
  for (size_t i = 0; i < done; ++i) {
    const Copy& c = t.copies[i];
    std::memcpy(c.dst, c.src, c.size - c.zfill);
    std::memset(c.dst + (c.size - c.zfill), 0, c.zfill);
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
