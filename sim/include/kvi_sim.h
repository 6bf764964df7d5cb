#pragma once
// The CUDA simulation (sim/, -DKVINFER_CUDA_SIM=ON): the subset of the CUDA runtime, device
// built-ins and intrinsics that kvinfer's kernels and backend use, implemented on the CPU so that
// the unchanged kernel sources (kernels/*.cu) compile with the host compiler and run. Each block's
// threads run as fibers on the calling thread, in an order shuffled by a seed between
// synchronisation points. What it proves and does not: docs/cuda.md.
//
// Included through the usual names (<cuda_runtime.h>, <cuda_runtime_api.h>, <cuda_pipeline.h>);
// <cublas_v2.h> is the cuBLAS stand-in.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

// ---- qualifiers ---------------------------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __align__(n) alignas(n)
// Static __shared__ arrays: one per host thread, shared by the fibers of the block it runs.
#define __shared__ static thread_local

// ---- vector types -------------------------------------------------------------------------------
struct uint3 {
  unsigned x, y, z;
};
struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
};
// The vector types: a whole-vector copy is a vector load or store on a GPU (ld/st.v2, .v4),
// which faults unless its address is a multiple of the vector's size: the copy constructor and
// assignment check the source and the destination (kvi_sim::check_vector). A member access
// (p->x) is a scalar access, as on a GPU, and is not checked here.
namespace kvi_sim {
// A kernel fault (cudaErrorMisalignedAddress) when p is not a multiple of `bytes` inside a kernel.
void misaligned_vector(const void* p, unsigned bytes, bool store);
template <unsigned kBytes>
inline void check_vector(const void* p, bool store) {
  if (reinterpret_cast<uintptr_t>(p) % kBytes != 0) misaligned_vector(p, kBytes, store);
}
}  // namespace kvi_sim
#define KVI_SIM_VECTOR(V, T, N, ...)                                                                     \
  struct alignas(sizeof(T) * N) V {                                                                      \
    T __VA_ARGS__;                                                                                       \
    V() = default;                                                                                       \
    V(const V& o) { copy(o); }                                                                           \
    V& operator=(const V& o) {                                                                           \
      kvi_sim::check_vector<sizeof(T) * N>(this, true);                                                  \
      copy(o);                                                                                           \
      return *this;                                                                                      \
    }                                                                                                    \
                                                                                                         \
   private:                                                                                              \
    void copy(const V& o) {                                                                              \
      kvi_sim::check_vector<sizeof(T) * N>(&o, false);                                                   \
      std::memcpy(static_cast<void*>(this), static_cast<const void*>(&o), sizeof(T) * N);                \
    }                                                                                                    \
  };
KVI_SIM_VECTOR(float2, float, 2, x, y)
KVI_SIM_VECTOR(float4, float, 4, x, y, z, w)
KVI_SIM_VECTOR(uint4, unsigned, 4, x, y, z, w)
KVI_SIM_VECTOR(int4, int, 4, x, y, z, w)
#undef KVI_SIM_VECTOR
inline float2 make_float2(float x, float y) {
  float2 v;
  v.x = x, v.y = y;
  return v;
}
inline float4 make_float4(float x, float y, float z, float w) {
  float4 v;
  v.x = x, v.y = y, v.z = z, v.w = w;
  return v;
}
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) {
  uint4 v;
  v.x = x, v.y = y, v.z = z, v.w = w;
  return v;
}
inline int4 make_int4(int x, int y, int z, int w) {
  int4 v;
  v.x = x, v.y = y, v.z = z, v.w = w;
  return v;
}

// ---- built-in variables: set by the simulator before each simulated thread runs ------------------
extern thread_local uint3 threadIdx;
extern thread_local uint3 blockIdx;
extern thread_local dim3 blockDim;
extern thread_local dim3 gridDim;
constexpr int warpSize = 32;

// ---- runtime types ------------------------------------------------------------------------------
enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInitializationError = 3,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidMemcpyDirection = 21,
  cudaErrorInvalidDeviceFunction = 98,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorIllegalState = 401,
  cudaErrorNotReady = 600,
  cudaErrorIllegalAddress = 700,
  cudaErrorMisalignedAddress = 716,
  cudaErrorLaunchFailure = 719,
  cudaErrorStreamCaptureUnsupported = 900,
  cudaErrorStreamCaptureInvalidated = 901,
  cudaErrorStreamCaptureImplicit = 906,
};
using cudaError = cudaError_t;

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};

enum cudaDeviceAttr {
  cudaDevAttrMaxThreadsPerBlock = 1,
  cudaDevAttrMaxBlockDimX = 2,
  cudaDevAttrMaxBlockDimY = 3,
  cudaDevAttrMaxBlockDimZ = 4,
  cudaDevAttrMaxGridDimX = 5,
  cudaDevAttrMaxGridDimY = 6,
  cudaDevAttrMaxGridDimZ = 7,
  cudaDevAttrMaxSharedMemoryPerBlock = 8,
  cudaDevAttrWarpSize = 10,
  cudaDevAttrMultiProcessorCount = 16,
  cudaDevAttrL2CacheSize = 38,
  cudaDevAttrComputeCapabilityMajor = 75,
  cudaDevAttrComputeCapabilityMinor = 76,
  cudaDevAttrMaxSharedMemoryPerMultiprocessor = 81,
  cudaDevAttrMaxSharedMemoryPerBlockOptin = 97,
};

enum cudaFuncAttribute {
  cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
  cudaFuncAttributePreferredSharedMemoryCarveout = 9,
};

struct CUstream_st;
struct CUevent_st;
struct CUgraph_st;
struct CUgraphExec_st;
using cudaStream_t = CUstream_st*;
using cudaEvent_t = CUevent_st*;
using cudaGraph_t = CUgraph_st*;
using cudaGraphExec_t = CUgraphExec_st*;
constexpr unsigned cudaEventDefault = 0x0;
constexpr unsigned cudaEventDisableTiming = 0x2;
constexpr unsigned cudaStreamDefault = 0x0;
constexpr unsigned cudaStreamNonBlocking = 0x1;

enum cudaStreamCaptureMode {
  cudaStreamCaptureModeGlobal = 0,
  cudaStreamCaptureModeThreadLocal = 1,
  cudaStreamCaptureModeRelaxed = 2,
};
enum cudaStreamCaptureStatus {
  cudaStreamCaptureStatusNone = 0,
  cudaStreamCaptureStatusActive = 1,
  cudaStreamCaptureStatusInvalidated = 2,
};

struct cudaDeviceProp {
  char name[256];
  size_t totalGlobalMem;
  size_t sharedMemPerBlock;
  size_t sharedMemPerBlockOptin;
  size_t sharedMemPerMultiprocessor;
  int regsPerBlock;
  int warpSize;
  int maxThreadsPerBlock;
  int maxThreadsDim[3];
  int maxGridSize[3];
  int major;
  int minor;
  int multiProcessorCount;
  int l2CacheSize;
  int memoryBusWidth;
  int memoryClockRate;
};

enum cudaMemoryType {
  cudaMemoryTypeUnregistered = 0,
  cudaMemoryTypeHost = 1,
  cudaMemoryTypeDevice = 2,
  cudaMemoryTypeManaged = 3,
};
struct cudaPointerAttributes {
  cudaMemoryType type = cudaMemoryTypeUnregistered;
  int device = 0;
  void* devicePointer = nullptr;
  void* hostPointer = nullptr;
};

struct cudaLaunchConfig_t {
  dim3 gridDim;
  dim3 blockDim;
  size_t dynamicSmemBytes = 0;
  cudaStream_t stream = nullptr;
  void* attrs = nullptr;
  unsigned numAttrs = 0;
};

// ---- runtime API --------------------------------------------------------------------------------
const char* cudaGetErrorName(cudaError_t err);
const char* cudaGetErrorString(cudaError_t err);
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();
cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaMalloc(void** ptr, size_t bytes);
template <typename T>
cudaError_t cudaMalloc(T** ptr, size_t bytes) {
  return cudaMalloc(reinterpret_cast<void**>(ptr), bytes);
}
cudaError_t cudaFree(void* ptr);
// Pinned host memory: an asynchronous copy from it reads the bytes when it runs (a DMA), not when
// it is enqueued, and a graph may hold such a copy.
cudaError_t cudaMallocHost(void** ptr, size_t bytes);
cudaError_t cudaFreeHost(void* ptr);
cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attr, const void* ptr);
cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes);
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream = nullptr);
cudaError_t cudaMemset(void* dst, int value, size_t bytes);
cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t stream = nullptr);
cudaError_t cudaStreamCreate(cudaStream_t* stream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaEventCreate(cudaEvent_t* event);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = nullptr);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end);
// Stream capture and graphs: the work a capturing stream is given is recorded, not run; a graph
// launch enqueues the recorded work again, with the arguments it was captured with.
cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph);
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long flags = 0);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);

namespace kvi_sim {
// Validates the launch against the simulated device's rules and enqueues `run` (which runs one
// simulated thread: the kernel with its arguments) for every thread of every block. pointers:
// the kernel's pointer arguments (null for the others); one into another device's memory faults.
cudaError_t launch(const cudaLaunchConfig_t& config, const void* kernel, std::function<void()> run,
                   std::vector<const void*> pointers = {});
// The name the next launch on this host thread goes by in profiles (kvinfer::cuda::launch's).
void name_next_launch(const char* name);
// Asynchronous copies from pageable host memory so far (tests: which copies are pinned).
uint64_t pageable_copies();

// What the simulation checks and how it schedules, read from the environment once:
//   schedule        $KVINFER_SIM_SCHEDULE: lockstep (default: every runnable thread once a round,
//                   shuffled; warps move nearly together) or runahead (the warps one at a time in
//                   a shuffled order, each to its next block barrier or its end before the next);
//   shuffle_blocks  $KVINFER_SIM_BLOCK_ORDER=shuffled: a launch's blocks start in a seeded order,
//                   interleaved at their barriers (up to 3 at a time) when access checks are
//                   compiled in; default ordered: one after another, as numbered;
//   racecheck       $KVINFER_SIM_RACECHECK=1: two warps of a block touching a shared-memory byte
//                   between the same two barriers, one of them writing, is a kernel fault.
// Misaligned accesses are faults whenever access checks are compiled in.
enum class Schedule : uint8_t { Lockstep, RunAhead };
struct Checks {
  Schedule schedule = Schedule::Lockstep;
  bool shuffle_blocks = false;
  bool racecheck = false;
};
Checks checks();
void set_checks(const Checks& c);  // for later launches (tests)
// Whether the kernels were compiled with the access hooks (sim/src/access.cpp): racecheck,
// misaligned accesses and interleaved blocks need them (not in the sanitizer builds).
bool access_checks_compiled();

// ---- the profiler ---------------------------------------------------------------------------------
// What each launch's threads did to memory, counted by the access hooks (so only where
// access_checks_compiled()). A warp-level request is the accesses of one load or store site by a
// warp's lanes, the n-th execution of the site by each lane grouped together, as a converged warp
// issues them. Global: accesses to device allocations, cp.async sources included; a sector is an
// aligned 32 bytes, the unit DRAM and L2 move. Shared: dynamic and static __shared__ arrays; a
// request's wavefronts are the most distinct 4-byte words any of the 32 banks holds (the passes
// it takes; a word that several lanes read is one broadcast), its ideal ceil(distinct words / 32).
// Not counted: kernel parameters, local memory, cp.async's landing in shared memory, cuBLAS.
struct SiteProfile {
  std::string where;  // the instruction: "function+0xNN" (addr2line -Cfe BINARY names the line)
  bool shared = false, store = false;
  uint64_t requests = 0, bytes = 0;
  uint64_t sectors = 0, used = 0;       // global: 32-byte sectors the requests touched; their bytes a lane asked for
  uint64_t wavefronts = 0, ideal = 0;   // shared: bank passes, and without conflicts
};
struct LaunchProfile {
  std::string kernel;  // kvinfer::cuda::launch's name, else code_site's "function+0x0" or "module+0x…"
  dim3 grid, block;
  size_t dynamic_smem = 0;
  // Global memory: bytes the threads asked for, warp-level requests, the sectors those touched and
  // the bytes of them some lane asked for (sector efficiency: used / (32 × sectors), as a
  // profiler's per-request view: L1 may serve a sector twice, DRAM moves it once), and the
  // distinct bytes the launch read and wrote.
  uint64_t load_bytes = 0, load_requests = 0, load_sectors = 0, load_used = 0;
  uint64_t store_bytes = 0, store_requests = 0, store_sectors = 0, store_used = 0;
  uint64_t unique_read_bytes = 0, unique_written_bytes = 0;
  // Shared memory: warp-level requests and their bank passes, actual and without conflicts.
  uint64_t shared_requests = 0, shared_wavefronts = 0, shared_ideal_wavefronts = 0;
  std::vector<SiteProfile> sites;  // by first execution
};
// From profile_start() on (process-wide), every launch that runs is recorded; profile_stop()
// returns them in the order they ran and stops. $KVINFER_SIM_PROFILE=1 records from the start and
// prints each launch's line on stderr, and a table by kernel at exit.
void profile_start();
std::vector<LaunchProfile> profile_stop();
// The device whose memory holds p, or -1.
int pointer_device(const void* p);
cudaError_t func_set_attribute(const void* kernel, cudaFuncAttribute attr, int value);
// The running block's dynamic shared memory.
unsigned char* dynamic_shared_memory();
// Warp exchange: deposits `bits`, waits for the warp's 32 lanes, returns lane src_lane's bits.
uint64_t warp_exchange(unsigned mask, uint64_t bits, int src_lane, const char* what, const char* file, int line);
unsigned lane_id();
void sync_threads(const char* file, int line);
void sync_warp(unsigned mask, const char* file, int line);
void pipeline_memcpy_async(void* dst, const void* src, size_t size, size_t zfill);
void pipeline_commit();
void pipeline_wait_prior(size_t n);

template <typename T>
const void* pointer_arg(const T& v) {
  if constexpr (std::is_pointer_v<T>) {
    return static_cast<const void*>(v);
  } else {
    return nullptr;
  }
}

template <typename T>
uint64_t to_bits(T v) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "shuffles move at most 8 bytes");
  uint64_t b = 0;
  std::memcpy(&b, &v, sizeof(T));
  return b;
}
template <typename T>
T from_bits(uint64_t b) {
  T v;
  std::memcpy(&v, &b, sizeof(T));
  return v;
}
}  // namespace kvi_sim

template <typename... Params, typename... Args>
cudaError_t cudaLaunchKernelEx(const cudaLaunchConfig_t* config, void (*kernel)(Params...), Args&&... args) {
  if (config == nullptr || kernel == nullptr) return kvi_sim::launch(cudaLaunchConfig_t{}, nullptr, {});
  // The arguments converted to the kernel's parameter types once, as a launch copies them.
  std::tuple<std::decay_t<Params>...> params(std::forward<Args>(args)...);
  std::vector<const void*> pointers;
  std::apply([&pointers](const auto&... p) { (pointers.push_back(kvi_sim::pointer_arg(p)), ...); }, params);
  return kvi_sim::launch(*config, reinterpret_cast<const void*>(kernel),
                         [kernel, params] { std::apply(kernel, params); }, std::move(pointers));
}

template <typename T>
cudaError_t cudaFuncSetAttribute(T* kernel, cudaFuncAttribute attr, int value) {
  return kvi_sim::func_set_attribute(reinterpret_cast<const void*>(kernel), attr, value);
}

// ---- device intrinsics --------------------------------------------------------------------------
// Barriers and shuffles name their call site, so that a block whose threads wait at different
// barriers is reported with both places.
inline void __syncthreads(const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  kvi_sim::sync_threads(file, line);
}
inline void __syncwarp(unsigned mask = 0xffffffffu, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  kvi_sim::sync_warp(mask, file, line);
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32, const char* file = __builtin_FILE(),
                  int line = __builtin_LINE()) {
  const int lane = static_cast<int>(kvi_sim::lane_id());
  const int src = width == 32 ? (lane ^ lane_mask) & 31 : -1;  // other widths: reported as unsupported
  return kvi_sim::from_bits<T>(kvi_sim::warp_exchange(mask, kvi_sim::to_bits(v), src, "__shfl_xor_sync", file, line));
}
template <typename T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32, const char* file = __builtin_FILE(),
                   int line = __builtin_LINE()) {
  const int lane = static_cast<int>(kvi_sim::lane_id());
  const int src = width != 32 ? -1 : lane + static_cast<int>(delta) < 32 ? lane + static_cast<int>(delta) : lane;
  return kvi_sim::from_bits<T>(kvi_sim::warp_exchange(mask, kvi_sim::to_bits(v), src, "__shfl_down_sync", file, line));
}

// Exactly rounded single-precision arithmetic (the host's IEEE operations; the simulation's
// sources are compiled with -ffp-contract=off, so nothing is fused unless fmaf says so).
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }

// ---- tensor-core MMA (kernels/mma.h) --------------------------------------------------------------
// mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32, warp-collective: all 32 lanes
// meet at one call site (full mask, as the shuffles), each deposits its fragments in the PTX ISA's
// layout ("Matrix Fragments for mma.m16n8k16 with floating point type"; kernels/mma.h spells it
// out), and each gets back its own fragment of D = A·B + C. Products are exact in f32, summed in
// k order from 0 in f32, then C is added: one fixed order; real tensor cores round differently.
namespace kvi_sim {
void warp_mma_m16n8k16(bool bf16, float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], const float (&c)[4],
                       const char* file, int line);
}  // namespace kvi_sim
