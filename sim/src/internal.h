#pragma once
// What the parts of the simulation share: the simulated device, the grid runner (block.cpp), and
// stream order (runtime.cpp) for the cuBLAS stand-in.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "kvi_sim.h"

namespace kvi_sim {

// A simulated device: one of those $KVINFER_SIM_DEVICE names (a comma-separated list).
struct DeviceSpec {
  const char* id;    // "sm_90"
  const char* name;  // cudaDeviceProp::name
  int major, minor, sms;
  int smem_per_block;        // without opt-in (48 KiB)
  int smem_per_block_optin;  // the most a kernel may opt in to
  int smem_per_sm;
  size_t memory;             // simulated global memory
  int l2_bytes;
};
// The calling host thread's current device (cudaSetDevice); null when there is none.
const DeviceSpec* device();

struct Grid {
  std::string name;             // launch()'s name of the kernel (kernels/launch.h), or empty
  const void* kernel = nullptr;
  dim3 grid, block;
  size_t smem = 0;
  std::function<void()> run;  // one simulated thread
  uint64_t seed = 0;
  Schedule schedule = Schedule::Lockstep;
  bool shuffle_blocks = false;  // blocks in a seeded order, interleaved where feasible
  bool racecheck = false;       // shared-memory races are faults (access.cpp)
};
// Runs every block; on a fault returns false and sets `fault` to a description and `err` to the
// error the launch reports (cudaErrorLaunchFailure, cudaErrorMisalignedAddress).
bool run_grid(const Grid& g, std::string& fault, cudaError_t& err);

// Enqueues `op` on `stream` in CUDA's order (legacy stream rules included); it runs when the
// stream is synchronised. Returns the stream's error (invalid handle) or the sticky error.
cudaError_t enqueue(cudaStream_t stream, std::function<void()> op);
// Whether [p, p + bytes) lies inside one live device allocation.
bool is_device_range(const void* p, size_t bytes);
// The live device allocation [lo, hi) that holds p; false if none does.
bool device_allocation(const void* p, uintptr_t& lo, uintptr_t& hi);
// "function+0x1c" (demangled) or "module+0x1234" for a code address (access.cpp).
std::string code_site(const void* pc);
// Marks the device faulted (a sticky error, as a GPU's kernel fault is) and says why on stderr.
void device_fault(cudaError_t err, const std::string& why);

}  // namespace kvi_sim
