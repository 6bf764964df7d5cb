#pragma once
// A running block as the scheduler (block.cpp) and the access checks (access.cpp) see it: its
// simulated threads, warps, dynamic shared memory and, under racecheck, the shadow of each byte.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "fiber.h"
#include "internal.h"

namespace kvi_sim {

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

// Racecheck's record of one byte of shared memory: the last write and the reads since, each
// with the barrier interval (epoch) it happened in. Epochs are never reused on a host thread, so
// a record from an earlier interval or block never matches and nothing is reset between blocks.
struct Shadow {
  uint64_t w_epoch = 0, r_epoch = 0;
  const void* w_pc = nullptr;   // where the write happened (null: an async copy landing)
  const void* r_pc = nullptr;   // where the first read of r_epoch happened
  const void* r2_pc = nullptr;  // where the first read by another warp happened
  uint16_t w_thread = 0, r_thread = 0, r2_thread = 0;  // linear thread ids in the block
  bool r2 = false;  // r2_thread is set: reads of r_epoch came from two warps or more
};

struct Block {
  uint3 idx{};
  std::vector<Thread> threads;
  std::vector<Warp> warps;
  std::unique_ptr<unsigned char[]> smem;
  size_t smem_bytes = 0;
  const std::function<void()>* run = nullptr;
  unsigned live = 0, at_barrier = 0;
  Thread* current = nullptr;
  std::string fault;
  cudaError_t fault_error = cudaErrorLaunchFailure;
  uint64_t rng = 0;     // the block's scheduling draws
  uint64_t epoch = 0;   // its current barrier interval (racecheck)
  bool racecheck = false;
  std::vector<Shadow> shadow;  // racecheck: one record per byte of smem
  // Interleaved blocks: this block's bytes of the static __shared__ arrays while another runs
  // (address, bytes), as swap_static_shared saved them.
  std::vector<std::pair<uintptr_t, std::vector<unsigned char>>> static_saved;
};

// The block whose threads run on this host thread now (null outside a kernel). initial-exec:
// the access hooks read it on every instrumented load and store.
extern thread_local Block* g_block __attribute__((tls_model("initial-exec")));
// Records the block's first fault (the launch then fails with err).
void note_fault(Block& b, std::string why, cudaError_t err);
// Stops the running thread for good: its fiber is never resumed.
[[noreturn]] void abandon_thread(Block& b);
// Stops the running thread for good with a fault of the block (the launch then fails with err).
// why() builds the message: its temporaries must end before the fiber is abandoned, or they leak.
template <typename Why>
[[noreturn]] void thread_fault(Block& b, Why&& why, cudaError_t err = cudaErrorLaunchFailure) {
  note_fault(b, std::forward<Why>(why)(), err);
  abandon_thread(b);
}
// "thread (x,y,z)".
std::string thread_name(const Thread& t);
// A fresh barrier interval for racecheck.
uint64_t next_epoch();

// Static __shared__ arrays (access.cpp): a launch starts with no byte of them known; when `track`
// (its blocks interleave) the hooks note the ranges its threads touch; switching from block `from` (null: none) to `to` saves
// from's bytes of those ranges and puts back to's.
void begin_launch_static_shared(bool track);
void swap_static_shared(Block* from, Block* to);

// Racecheck (access.cpp): records an access of `bytes` bytes at p by the running thread, and
// faults when another warp wrote or read them in the same barrier interval. pc: the access's
// code address (null for an async copy's landing).
void shared_access(Block& b, const void* p, size_t bytes, bool write, const void* pc);


}  // namespace kvi_sim
