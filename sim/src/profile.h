#pragma once
// The profiler's side of a launch (profile.cpp; the public view is kvi_sim.h's LaunchProfile):
// run_grid brackets each launch and block, the access hooks report each access of a running thread.
#include <cstddef>
#include <cstdint>

#include "internal.h"

namespace kvi_sim {

struct Block;

// Whether the launch running on this host thread is profiled; read by the hooks on every access.
extern thread_local bool t_profiling __attribute__((tls_model("initial-exec")));

void profile_begin_launch(const Grid& g);
// One access of n bytes at address a by b's running thread, at code address pc; shared: inside the
// block's dynamic or a static __shared__ array (else it counts only if it is device memory).
void profile_access(Block& b, uintptr_t a, size_t n, bool write, bool shared, const void* pc);
// b has finished: its warp-level requests go into the launch's counts.
void profile_block_end(Block& b);
// ok: the launch ran to its end (a faulted launch is not recorded).
void profile_end_launch(bool ok);

}  // namespace kvi_sim
