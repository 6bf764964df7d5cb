// The simulated CUDA runtime: one or more devices ($KVINFER_SIM_DEVICE=sm_90,sm_86), each host
// thread with its current one (cudaSetDevice); device memory as exact-size host allocations
// filled with poison, pinned host memory read when its copies run; streams of a device whose
// work runs when they are synchronised (in CUDA's order, each device's legacy default stream
// included), events, stream capture into graphs, device attributes, and launches checked against
// the real launch rules (a kernel runs on its stream's device, which must be the current one).
#include <algorithm>
#include <atomic>
#include <initializer_list>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "internal.h"

// A captured graph, and its executable form: the stream operations in capture order (one
// stream's capture is a chain, which is all kvinfer records).
struct CUgraph_st {
  std::vector<std::function<void()>> ops;
};
struct CUgraphExec_st {
  std::vector<std::function<void()>> ops;
};

struct CUstream_st {
  bool legacy = false;
  unsigned flags = 0;
  int device = 0;
  std::deque<std::function<void()>> queue;
  // While capturing, work given to the stream is recorded into `capture` instead of queued.
  CUgraph_st* capture = nullptr;
  bool capture_invalidated = false;
  cudaStreamCaptureMode capture_mode = cudaStreamCaptureModeGlobal;
  std::thread::id capturer;
};

struct CUevent_st {
  int device = 0;  // the current device when it was created
  CUstream_st* stream = nullptr;
  bool recorded = false, complete = false;
  std::chrono::steady_clock::time_point at;
};

namespace kvi_sim {

namespace {

constexpr unsigned char kPoison = 0xFF;  // NaN in f32, f16 and bf16
constexpr int kDefaultDynamicSmem = 48 * 1024;
std::atomic<uint64_t> g_pageable_copies{0};  // asynchronous copies from pageable host memory

const DeviceSpec kDevices[] = {
    {"sm_90", "kvinfer simulated sm_90 (H100/H200-like)", 9, 0, 132, 48 * 1024, 227 * 1024, 228 * 1024,
     size_t{8} << 30, 50 << 20},
    {"sm_86", "kvinfer simulated sm_86 (RTX 30-like)", 8, 6, 82, 48 * 1024, 99 * 1024, 100 * 1024, size_t{8} << 30,
     6 << 20},
};

// $KVINFER_SIM_DEVICE: a comma-separated list of simulated devices, numbered from 0.
std::vector<const DeviceSpec*> find_devices() {
  const char* v = std::getenv("KVINFER_SIM_DEVICE");
  std::vector<const DeviceSpec*> found;
  if (v == nullptr || *v == '\0') return found;
  std::string_view list(v);
  for (size_t at = 0; at <= list.size();) {
    const size_t comma = std::min(list.find(',', at), list.size());
    const std::string_view id = list.substr(at, comma - at);
    const DeviceSpec* d = nullptr;
    for (const DeviceSpec& spec : kDevices)
      if (id == spec.id) d = &spec;
    if (d == nullptr) {
      std::fprintf(stderr,
                   "kvinfer CUDA simulation: KVINFER_SIM_DEVICE=%s: '%.*s' is not a simulated device (sm_90 or "
                   "sm_86, comma-separated)\n",
                   v, static_cast<int>(id.size()), id.data());
      return {};
    }
    found.push_back(d);
    at = comma + 1;
  }
  return found;
}

// $name: one of `values` (an empty or unset variable is the first); -1, said on stderr, if not.
int env_choice(const char* name, std::initializer_list<const char*> values) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return 0;
  int i = 0;
  std::string accepted;
  for (const char* value : values) {
    if (std::string_view(v) == value) return i;
    accepted += (i++ ? " or " : "") + std::string(value);
  }
  std::fprintf(stderr, "kvinfer CUDA simulation: %s=%s is not %s (no device is simulated)\n", name, v,
               accepted.c_str());
  return -1;
}

uint64_t seed_from_env() {
  const char* v = std::getenv("KVINFER_SIM_SEED");
  return v != nullptr ? std::strtoull(v, nullptr, 0) : 0x6b76696e666572ull;
}

// One simulated device: its memory use, legacy default stream, kernels' attributes and sticky error.
struct DeviceState {
  const DeviceSpec* spec = nullptr;
  size_t allocated = 0;
  CUstream_st legacy;
  std::map<const void*, int> max_dynamic_smem;  // kernel → cudaFuncAttributeMaxDynamicSharedMemorySize
  cudaError_t sticky = cudaSuccess;
};

// One lock for the whole runtime: host threads that share the simulated devices take turns, and
// a stream's work runs on the host thread that synchronises it (so one kernel runs at a time).
struct Runtime {
  std::recursive_mutex mu;
  std::vector<std::unique_ptr<DeviceState>> devices;
  std::map<uintptr_t, std::pair<size_t, int>> allocations;  // base → (bytes, device)
  std::map<uintptr_t, size_t> pinned;                       // cudaMallocHost: base → bytes
  std::set<CUstream_st*> streams;
  uint64_t seed = seed_from_env();
  uint64_t launches = 0;
  Checks checks;  // $KVINFER_SIM_SCHEDULE, $KVINFER_SIM_BLOCK_ORDER, $KVINFER_SIM_RACECHECK
  Runtime() {
    const int sched = env_choice("KVINFER_SIM_SCHEDULE", {"lockstep", "runahead"});
    const int order = env_choice("KVINFER_SIM_BLOCK_ORDER", {"ordered", "shuffled"});
    const int race = env_choice("KVINFER_SIM_RACECHECK", {"0", "1"});
    if (sched < 0 || order < 0 || race < 0) return;  // a bad setting: no device, said on stderr
    checks.schedule = sched == 1 ? Schedule::RunAhead : Schedule::Lockstep;
    checks.shuffle_blocks = order == 1;
    checks.racecheck = race == 1;
    for (const DeviceSpec* spec : find_devices()) {
      auto d = std::make_unique<DeviceState>();
      d->spec = spec;
      d->legacy.legacy = true;
      d->legacy.device = static_cast<int>(devices.size());
      devices.push_back(std::move(d));
    }
  }
};

Runtime& rt() {
  static Runtime* r = new Runtime;  // never destroyed: streams may be synchronised at exit
  return *r;
}

thread_local int t_device = 0;  // cudaSetDevice's, per host thread as in CUDA

// The current device's state, or null when no device is simulated.
DeviceState* current(Runtime& r) {
  return r.devices.empty() ? nullptr : r.devices[static_cast<size_t>(t_device)].get();
}

DeviceState& device_of(Runtime& r, const CUstream_st* s) { return *r.devices[static_cast<size_t>(s->device)]; }

// Not destroyed: a device's legacy stream, or one cudaStreamCreate made and cudaStreamDestroy has
// not freed. (An event may outlive the stream it was recorded on.)
// Compared by address only: a destroyed one must not be read.
bool alive(const Runtime& r, CUstream_st* s) {
  if (r.streams.count(s) > 0) return true;
  for (const auto& d : r.devices)
    if (s == &d->legacy) return true;
  return false;
}

thread_local cudaError_t t_last_error = cudaSuccess;

cudaError_t ret(cudaError_t err) {
  if (err != cudaSuccess) t_last_error = err;
  return err;
}

// Most calls need a device and fail with its sticky error once a kernel has faulted on it.
cudaError_t check_ready(Runtime& r) {
  const DeviceState* d = current(r);
  if (d == nullptr) return cudaErrorNoDevice;
  return d->sticky;
}

// A stream handle: null is the current device's legacy stream.
CUstream_st* resolve(Runtime& r, cudaStream_t s) {
  if (s == nullptr) return r.devices.empty() ? nullptr : &current(r)->legacy;
  return r.streams.count(s) ? s : nullptr;
}

// CUDA's rule for "potentially unsafe" calls (synchronisation, allocation, synchronous copies)
// during stream capture: the calling thread may not make them while it captures in Global or
// ThreadLocal mode, nor while another thread captures in Global mode. Such a call fails with
// cudaErrorStreamCaptureUnsupported and invalidates the captures it conflicts with.
cudaError_t capture_forbids(Runtime& r) {
  bool forbidden = false;
  const std::thread::id me = std::this_thread::get_id();
  for (CUstream_st* s : r.streams) {
    if (s->capture == nullptr) continue;
    const bool conflicts = s->capturer == me ? s->capture_mode != cudaStreamCaptureModeRelaxed
                                             : s->capture_mode == cudaStreamCaptureModeGlobal;
    if (conflicts) s->capture_invalidated = forbidden = true;
  }
  return forbidden ? cudaErrorStreamCaptureUnsupported : cudaSuccess;
}

// A call that a capturing stream cannot record (a host copy, a synchronisation) invalidates
// the capture.
cudaError_t refuse_in_capture(CUstream_st* s) {
  s->capture_invalidated = true;
  return cudaErrorStreamCaptureUnsupported;
}

void drain(Runtime& r, CUstream_st* s) {
  const int saved = t_device;
  t_device = s->device;  // the work runs on its stream's device
  while (!s->queue.empty()) {
    auto op = std::move(s->queue.front());
    s->queue.pop_front();
    if (device_of(r, s).sticky == cudaSuccess) op();  // after a fault nothing more runs
  }
  t_device = saved;
}

// Every stream of the current device.
void drain_device(Runtime& r) {
  DeviceState& d = *current(r);
  drain(r, &d.legacy);
  for (CUstream_st* s : r.streams)
    if (s->device == d.legacy.device) drain(r, s);
}

bool any_capture(Runtime& r) {
  for (CUstream_st* s : r.streams)
    if (s->capture != nullptr) return true;
  return false;
}

cudaError_t enqueue_locked(Runtime& r, cudaStream_t stream, std::function<void()> op) {
  CUstream_st* s = resolve(r, stream);
  if (s == nullptr) return cudaErrorInvalidResourceHandle;
  const cudaError_t sticky = device_of(r, s).sticky;
  if (s->capture != nullptr) {
    if (s->capture_invalidated) return cudaErrorStreamCaptureInvalidated;
    s->capture->ops.push_back(std::move(op));
    return sticky;
  }
  if (s->legacy && any_capture(r)) {
    // The legacy stream would join the capturing streams' work: CUDA refuses and invalidates.
    for (CUstream_st* o : r.streams)
      if (o->capture != nullptr) o->capture_invalidated = true;
    return cudaErrorStreamCaptureImplicit;
  }
  if (s->legacy) {
    // The legacy stream waits for the work of every blocking stream of its device before its own.
    for (CUstream_st* o : r.streams)
      if (o->device == s->device && !(o->flags & cudaStreamNonBlocking)) drain(r, o);
  } else if (!(s->flags & cudaStreamNonBlocking)) {
    drain(r, &device_of(r, s).legacy);  // a blocking stream waits for its legacy stream's earlier work
  }
  s->queue.push_back(std::move(op));
  return sticky;
}

// The device whose allocation holds [p, p + bytes), or -1.
int allocation_device(Runtime& r, const void* p, size_t bytes) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  auto it = r.allocations.upper_bound(a);
  if (it == r.allocations.begin()) return -1;
  --it;
  const size_t size = it->second.first;
  return a >= it->first && a - it->first <= size && bytes <= size - (a - it->first) ? it->second.second : -1;
}

bool device_range_locked(Runtime& r, const void* p, size_t bytes) { return allocation_device(r, p, bytes) >= 0; }

bool pinned_range_locked(Runtime& r, const void* p, size_t bytes) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  auto it = r.pinned.upper_bound(a);
  if (it == r.pinned.begin()) return false;
  --it;
  return a - it->first <= it->second && bytes <= it->second - (a - it->first);
}

// Checks a copy's direction against where its pointers live; cudaMemcpyDefault is inferred.
cudaError_t resolve_kind(Runtime& r, void* dst, const void* src, size_t bytes, cudaMemcpyKind& kind) {
  const bool d_dev = device_range_locked(r, dst, bytes), s_dev = device_range_locked(r, src, bytes);
  if (kind == cudaMemcpyDefault)
    kind = d_dev ? (s_dev ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                 : (s_dev ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
  const bool want_d = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool want_s = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (kind > cudaMemcpyDefault) return cudaErrorInvalidMemcpyDirection;
  if (want_d != d_dev || want_s != s_dev) return cudaErrorInvalidValue;
  return cudaSuccess;
}

// A copy as a stream operation. Pageable host sources are staged at once (the caller may reuse
// its buffer when the call returns); pinned ones are read when the copy runs, as a DMA does, so a
// buffer rewritten before then sends its new bytes. The destination is written when it runs.
std::function<void()> copy_op(Runtime& r, void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (kind == cudaMemcpyHostToDevice && !pinned_range_locked(r, src, bytes)) {
    ++g_pageable_copies;
    auto staged = std::make_shared<std::vector<unsigned char>>(static_cast<const unsigned char*>(src),
                                                               static_cast<const unsigned char*>(src) + bytes);
    return [dst, staged] { std::memcpy(dst, staged->data(), staged->size()); };
  }
  return [dst, src, bytes] { std::memmove(dst, src, bytes); };
}

}  // namespace

const DeviceSpec* device() {
  const DeviceState* d = current(rt());
  return d != nullptr ? d->spec : nullptr;
}

uint64_t pageable_copies() { return g_pageable_copies.load(); }

Checks checks() {
  Runtime& r = rt();
  std::lock_guard lock(r.mu);
  return r.checks;
}

void set_checks(const Checks& c) {
  Runtime& r = rt();
  std::lock_guard lock(r.mu);
  r.checks = c;
}

cudaError_t enqueue(cudaStream_t stream, std::function<void()> op) {
  Runtime& r = rt();
  std::lock_guard lock(r.mu);
  if (cudaError_t e = check_ready(r)) return e;
  return enqueue_locked(r, stream, std::move(op));
}

bool is_device_range(const void* p, size_t bytes) {
  Runtime& r = rt();
  std::lock_guard lock(r.mu);
  return device_range_locked(r, p, bytes);
}

bool device_allocation(const void* p, uintptr_t& lo, uintptr_t& hi) {
  Runtime& r = rt();
  std::lock_guard lock(r.mu);
  const auto a = reinterpret_cast<uintptr_t>(p);
  auto it = r.allocations.upper_bound(a);
  if (it == r.allocations.begin()) return false;
  --it;
  if (a - it->first >= it->second.first) return false;
  lo = it->first, hi = it->first + it->second.first;
  return true;
}

namespace {
thread_local const char* t_next_name = nullptr;
}  // namespace

void name_next_launch(const char* name) { t_next_name = name; }

void device_fault(cudaError_t err, const std::string& why) {
  Runtime& r = rt();
  std::lock_guard lock(r.mu);
  std::fprintf(stderr, "kvinfer CUDA simulation: kernel fault: %s\n", why.c_str());
  DeviceState& d = *current(r);  // drain() made the faulting work's device current
  if (d.sticky == cudaSuccess) d.sticky = err;
}

int pointer_device(const void* p) {
  Runtime& r = rt();
  std::lock_guard lock(r.mu);
  return allocation_device(r, p, 1);
}

int current_device() { return t_device; }

cudaError_t launch(const cudaLaunchConfig_t& c, const void* kernel, std::function<void()> run,
                   std::vector<const void*> pointers) {
  const char* name = std::exchange(t_next_name, nullptr);
  Runtime& r = rt();
  std::lock_guard lock(r.mu);
  if (cudaError_t e = check_ready(r)) return ret(e);
  if (kernel == nullptr) return ret(cudaErrorInvalidDeviceFunction);
  const dim3 g = c.gridDim, b = c.blockDim;
  // The launch rules of every current NVIDIA GPU.
  const uint64_t threads = uint64_t{b.x} * b.y * b.z;
  if (b.x == 0 || b.y == 0 || b.z == 0 || b.x > 1024 || b.y > 1024 || b.z > 64 || threads > 1024)
    return ret(cudaErrorInvalidConfiguration);
  if (g.x == 0 || g.y == 0 || g.z == 0 || g.x > 0x7fffffffu || g.y > 65535 || g.z > 65535)
    return ret(cudaErrorInvalidConfiguration);
  DeviceState& d = *current(r);
  auto attr = d.max_dynamic_smem.find(kernel);
  const int allowed = attr != d.max_dynamic_smem.end() ? attr->second : kDefaultDynamicSmem;
  if (c.dynamicSmemBytes > static_cast<size_t>(std::min(allowed, d.spec->smem_per_block_optin)))
    return ret(cudaErrorInvalidValue);
  // A kernel launch goes to a stream of the current device (CUDA refuses others).
  const CUstream_st* s = resolve(r, c.stream);
  if (s == nullptr || s->device != t_device) return ret(cudaErrorInvalidResourceHandle);
  Grid grid{name ? name : "", kernel, g, b, c.dynamicSmemBytes, std::move(run),
            r.seed ^ (0x9e3779b97f4a7c15ull * ++r.launches), r.checks.schedule, r.checks.shuffle_blocks,
            r.checks.racecheck};
  std::string foreign;  // a pointer argument into another device's memory: the kernel faults there
  for (size_t i = 0; i < pointers.size(); ++i) {
    const int owner = allocation_device(r, pointers[i], 1);
    if (owner >= 0 && owner != t_device && foreign.empty())
      foreign = "argument " + std::to_string(i) + " points into device " + std::to_string(owner) +
                "'s memory, but the kernel runs on device " + std::to_string(t_device) + " (no peer access)";
  }
  auto op = [grid = std::move(grid), foreign] {
    if (!foreign.empty()) return device_fault(cudaErrorIllegalAddress, foreign);
    std::string fault;
    cudaError_t err = cudaErrorLaunchFailure;
    if (!run_grid(grid, fault, err)) device_fault(err, fault);
  };
  return ret(enqueue_locked(r, c.stream, std::move(op)));
}

cudaError_t func_set_attribute(const void* kernel, cudaFuncAttribute attr, int value) {
  Runtime& r = rt();
  std::lock_guard lock(r.mu);
  if (cudaError_t e = check_ready(r)) return ret(e);
  if (kernel == nullptr) return ret(cudaErrorInvalidDeviceFunction);
  if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {  // for the current device only
    DeviceState& d = *current(r);
    if (value < 0 || value > d.spec->smem_per_block_optin) return ret(cudaErrorInvalidValue);
    d.max_dynamic_smem[kernel] = value;
    return cudaSuccess;
  }
  if (attr == cudaFuncAttributePreferredSharedMemoryCarveout)
    return value >= -1 && value <= 100 ? cudaSuccess : ret(cudaErrorInvalidValue);
  return ret(cudaErrorInvalidValue);
}

}  // namespace kvi_sim

using kvi_sim::ret;
using kvi_sim::rt;
using kvi_sim::Runtime;

const char* cudaGetErrorName(cudaError_t err) {
  switch (err) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInitializationError: return "cudaErrorInitializationError";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidMemcpyDirection: return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorInvalidDeviceFunction: return "cudaErrorInvalidDeviceFunction";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorIllegalState: return "cudaErrorIllegalState";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorStreamCaptureImplicit: return "cudaErrorStreamCaptureImplicit";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    case cudaErrorMisalignedAddress: return "cudaErrorMisalignedAddress";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
  }
  return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t err) {
  switch (err) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInitializationError: return "initialization error";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorInvalidDeviceFunction: return "invalid device function";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorIllegalState: return "the operation cannot be performed in the present state";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    case cudaErrorStreamCaptureImplicit:
      return "operation would make the legacy stream depend on a capturing blocking stream";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorMisalignedAddress: return "misaligned address";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
  }
  return "unknown error";
}

// The current device's sticky error first, as a GPU reports a fault of the context.
cudaError_t cudaGetLastError() {
  Runtime& r = rt();
  std::lock_guard lock(r.mu);
  const cudaError_t sticky = kvi_sim::check_ready(r) == cudaErrorNoDevice ? cudaSuccess : kvi_sim::current(r)->sticky;
  const cudaError_t e = sticky != cudaSuccess ? sticky : kvi_sim::t_last_error;
  kvi_sim::t_last_error = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError() {
  Runtime& r = rt();
  std::lock_guard lock(r.mu);
  const cudaError_t sticky = kvi_sim::check_ready(r) == cudaErrorNoDevice ? cudaSuccess : kvi_sim::current(r)->sticky;
  return sticky != cudaSuccess ? sticky : kvi_sim::t_last_error;
}

cudaError_t cudaGetDeviceCount(int* count) {
  if (count == nullptr) return ret(cudaErrorInvalidValue);
  *count = static_cast<int>(rt().devices.size());
  return *count > 0 ? cudaSuccess : ret(cudaErrorNoDevice);
}

cudaError_t cudaGetDevice(int* device) {
  if (device == nullptr) return ret(cudaErrorInvalidValue);
  *device = kvi_sim::t_device;
  return rt().devices.empty() ? ret(cudaErrorNoDevice) : cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  Runtime& r = rt();
  if (r.devices.empty()) return ret(cudaErrorNoDevice);
  if (device < 0 || static_cast<size_t>(device) >= r.devices.size()) return ret(cudaErrorInvalidDevice);
  kvi_sim::t_device = device;
  return cudaSuccess;
}

namespace {
// The spec of device `device`, or null (and `err` says why).
const kvi_sim::DeviceSpec* spec_of(int device, cudaError_t& err) {
  Runtime& r = rt();
  if (r.devices.empty()) {
    err = cudaErrorNoDevice;
    return nullptr;
  }
  if (device < 0 || static_cast<size_t>(device) >= r.devices.size()) {
    err = cudaErrorInvalidDevice;
    return nullptr;
  }
  return r.devices[static_cast<size_t>(device)]->spec;
}
}  // namespace

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  cudaError_t err = cudaSuccess;
  const kvi_sim::DeviceSpec* d = spec_of(device, err);
  if (d == nullptr) return ret(err);
  if (value == nullptr) return ret(cudaErrorInvalidValue);
  switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: *value = 1024; break;
    case cudaDevAttrMaxBlockDimX: case cudaDevAttrMaxBlockDimY: *value = 1024; break;
    case cudaDevAttrMaxBlockDimZ: *value = 64; break;
    case cudaDevAttrMaxGridDimX: *value = 0x7fffffff; break;
    case cudaDevAttrMaxGridDimY: case cudaDevAttrMaxGridDimZ: *value = 65535; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = d->smem_per_block; break;
    case cudaDevAttrWarpSize: *value = 32; break;
    case cudaDevAttrMultiProcessorCount: *value = d->sms; break;
    case cudaDevAttrL2CacheSize: *value = d->l2_bytes; break;
    case cudaDevAttrComputeCapabilityMajor: *value = d->major; break;
    case cudaDevAttrComputeCapabilityMinor: *value = d->minor; break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor: *value = d->smem_per_sm; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = d->smem_per_block_optin; break;
    default: return ret(cudaErrorInvalidValue);
  }
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  cudaError_t err = cudaSuccess;
  const kvi_sim::DeviceSpec* d = spec_of(device, err);
  if (d == nullptr) return ret(err);
  if (prop == nullptr) return ret(cudaErrorInvalidValue);
  *prop = cudaDeviceProp{};
  std::snprintf(prop->name, sizeof prop->name, "%s", d->name);
  prop->totalGlobalMem = d->memory;
  prop->sharedMemPerBlock = static_cast<size_t>(d->smem_per_block);
  prop->sharedMemPerBlockOptin = static_cast<size_t>(d->smem_per_block_optin);
  prop->sharedMemPerMultiprocessor = static_cast<size_t>(d->smem_per_sm);
  prop->regsPerBlock = 65536;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->maxThreadsDim[0] = prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 0x7fffffff;
  prop->maxGridSize[1] = prop->maxGridSize[2] = 65535;
  prop->major = d->major;
  prop->minor = d->minor;
  prop->multiProcessorCount = d->sms;
  prop->l2CacheSize = d->l2_bytes;
  return cudaSuccess;
}

// Waits for the current device's streams only.
cudaError_t cudaDeviceSynchronize() {
  Runtime& r = rt();
  std::lock_guard lock(r.mu);
  if (r.devices.empty()) return ret(cudaErrorNoDevice);
  if (cudaError_t e = kvi_sim::capture_forbids(r)) return ret(e);
  kvi_sim::drain_device(r);
  return ret(kvi_sim::current(r)->sticky);
}

cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  Runtime& r = rt();
  std::lock_guard lock(r.mu);
  if (ptr == nullptr) return ret(cudaErrorInvalidValue);
  *ptr = nullptr;
  if (cudaError_t e = kvi_sim::check_ready(r)) return ret(e);
  if (cudaError_t e = kvi_sim::capture_forbids(r)) return ret(e);
  if (bytes == 0) return cudaSuccess;
  kvi_sim::DeviceState& d = *kvi_sim::current(r);
  if (bytes > d.spec->memory - d.allocated) return ret(cudaErrorMemoryAllocation);
  // Exact size (256-byte aligned as cudaMalloc's), so that AddressSanitizer sees an access past the end.
  void* p = nullptr;
  if (posix_memalign(&p, 256, bytes) != 0) return ret(cudaErrorMemoryAllocation);
  std::memset(p, kvi_sim::kPoison, bytes);
  r.allocations[reinterpret_cast<uintptr_t>(p)] = {bytes, kvi_sim::t_device};
  d.allocated += bytes;
  *ptr = p;
  return cudaSuccess;
}

// Frees memory of any device; waits for that device's work first, as on a GPU.
cudaError_t cudaFree(void* ptr) {
  Runtime& r = rt();
  std::lock_guard lock(r.mu);
  if (ptr == nullptr) return cudaSuccess;
  if (r.devices.empty()) return ret(cudaErrorNoDevice);
  auto it = r.allocations.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == r.allocations.end()) return ret(cudaErrorInvalidValue);
  if (cudaError_t e = kvi_sim::capture_forbids(r)) return ret(e);
  const int saved = kvi_sim::t_device;
  kvi_sim::t_device = it->second.second;
  kvi_sim::drain_device(r);
  kvi_sim::current(r)->allocated -= it->second.first;
  kvi_sim::t_device = saved;
  r.allocations.erase(it);
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void** ptr, size_t bytes) {
  Runtime& r = rt();
  std::lock_guard lock(r.mu);
  if (ptr == nullptr) return ret(cudaErrorInvalidValue);
  *ptr = nullptr;
  if (cudaError_t e = kvi_sim::check_ready(r)) return ret(e);
  if (cudaError_t e = kvi_sim::capture_forbids(r)) return ret(e);
  void* p = nullptr;
  if (posix_memalign(&p, 4096, bytes > 0 ? bytes : 1) != 0) return ret(cudaErrorMemoryAllocation);
  r.pinned[reinterpret_cast<uintptr_t>(p)] = bytes;
  *ptr = p;
  return cudaSuccess;
}

cudaError_t cudaFreeHost(void* ptr) {
  Runtime& r = rt();
  std::lock_guard lock(r.mu);
  if (ptr == nullptr) return cudaSuccess;
  auto it = r.pinned.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == r.pinned.end()) return ret(cudaErrorInvalidValue);
  if (cudaError_t e = kvi_sim::capture_forbids(r)) return ret(e);
  for (auto& d : r.devices) {  // a copy still pending may read it
    const int saved = kvi_sim::t_device;
    kvi_sim::t_device = d->legacy.device;
    kvi_sim::drain_device(r);
    kvi_sim::t_device = saved;
  }
  r.pinned.erase(it);
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attr, const void* ptr) {
  Runtime& r = rt();
  std::lock_guard lock(r.mu);
  if (attr == nullptr) return ret(cudaErrorInvalidValue);
  *attr = cudaPointerAttributes{};
  attr->device = -2;
  if (const int d = kvi_sim::allocation_device(r, ptr, 1); d >= 0) {
    attr->type = cudaMemoryTypeDevice;
    attr->device = d;
    attr->devicePointer = const_cast<void*>(ptr);
  } else if (kvi_sim::pinned_range_locked(r, ptr, 1)) {
    attr->type = cudaMemoryTypeHost;
    attr->hostPointer = const_cast<void*>(ptr);
  }
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  Runtime& r = rt();
  std::lock_guard lock(r.mu);
  if (free_bytes == nullptr || total_bytes == nullptr) return ret(cudaErrorInvalidValue);
  if (cudaError_t e = kvi_sim::check_ready(r)) return ret(e);
  const kvi_sim::DeviceState& d = *kvi_sim::current(r);
  *free_bytes = d.spec->memory - d.allocated;
  *total_bytes = d.spec->memory;
  return cudaSuccess;
}

// cudaMemcpy runs in the current device's legacy stream order. Host to device returns once the
// source is staged (the device copy lands with the legacy stream's next synchronisation, as a DMA
// from pageable memory may); device to host returns when the bytes are there.
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  Runtime& r = rt();
  std::lock_guard lock(r.mu);
  if (cudaError_t e = kvi_sim::check_ready(r)) return ret(e);
  if (bytes == 0) return cudaSuccess;
  if (cudaError_t e = kvi_sim::resolve_kind(r, dst, src, bytes, kind)) return ret(e);
  if (cudaError_t e = kvi_sim::capture_forbids(r)) return ret(e);
  if (kind == cudaMemcpyHostToHost) {
    std::memmove(dst, src, bytes);
    return cudaSuccess;
  }
  if (cudaError_t e = kvi_sim::enqueue_locked(r, nullptr, kvi_sim::copy_op(r, dst, src, bytes, kind))) return ret(e);
  if (kind == cudaMemcpyDeviceToHost) kvi_sim::drain(r, &kvi_sim::current(r)->legacy);
  return ret(kvi_sim::current(r)->sticky);
}

// Any stream, of any device (CUDA allows copies on a stream that is not the current device's).
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
  Runtime& r = rt();
  std::lock_guard lock(r.mu);
  if (cudaError_t e = kvi_sim::check_ready(r)) return ret(e);
  if (bytes == 0) return cudaSuccess;
  if (cudaError_t e = kvi_sim::resolve_kind(r, dst, src, bytes, kind)) return ret(e);
  // A graph reads host memory when it runs, which only pinned memory allows: a capture takes
  // device-to-device copies and copies from pinned memory.
  CUstream_st* s = kvi_sim::resolve(r, stream);
  if (s != nullptr && s->capture != nullptr && kind != cudaMemcpyDeviceToDevice &&
      !(kind == cudaMemcpyHostToDevice && kvi_sim::pinned_range_locked(r, src, bytes)))
    return ret(kvi_sim::refuse_in_capture(s));
  return ret(kvi_sim::enqueue_locked(r, stream, kvi_sim::copy_op(r, dst, src, bytes, kind)));
}

cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t stream) {
  Runtime& r = rt();
  std::lock_guard lock(r.mu);
  if (cudaError_t e = kvi_sim::check_ready(r)) return ret(e);
  if (bytes == 0) return cudaSuccess;
  if (!kvi_sim::device_range_locked(r, dst, bytes)) return ret(cudaErrorInvalidValue);
  return ret(kvi_sim::enqueue_locked(r, stream, [dst, value, bytes] { std::memset(dst, value, bytes); }));
}

// Asynchronous with respect to the host, on the legacy stream (as documented for device memory).
cudaError_t cudaMemset(void* dst, int value, size_t bytes) { return cudaMemsetAsync(dst, value, bytes, nullptr); }

cudaError_t cudaStreamCreate(cudaStream_t* stream) { return cudaStreamCreateWithFlags(stream, cudaStreamDefault); }

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags) {
  Runtime& r = rt();
  std::lock_guard lock(r.mu);
  if (stream == nullptr || flags > cudaStreamNonBlocking) return ret(cudaErrorInvalidValue);
  if (cudaError_t e = kvi_sim::check_ready(r)) return ret(e);
  auto* s = new CUstream_st;
  s->flags = flags;
  s->device = kvi_sim::t_device;  // a stream belongs to the device current at its creation
  r.streams.insert(s);
  *stream = s;
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  Runtime& r = rt();
  std::lock_guard lock(r.mu);
  if (stream == nullptr || !r.streams.count(stream)) return ret(cudaErrorInvalidResourceHandle);
  delete stream->capture;     // a capture still open is abandoned
  kvi_sim::drain(r, stream);  // work already enqueued still completes
  r.streams.erase(stream);
  delete stream;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  Runtime& r = rt();
  std::lock_guard lock(r.mu);
  if (r.devices.empty()) return ret(cudaErrorNoDevice);
  CUstream_st* s = kvi_sim::resolve(r, stream);
  if (s == nullptr) return ret(cudaErrorInvalidResourceHandle);
  if (s->capture != nullptr) return ret(kvi_sim::refuse_in_capture(s));
  if (cudaError_t e = kvi_sim::capture_forbids(r)) return ret(e);
  kvi_sim::drain(r, s);
  return ret(kvi_sim::device_of(r, s).sticky);
}

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  if (event == nullptr) return ret(cudaErrorInvalidValue);
  *event = new CUevent_st;
  (*event)->device = kvi_sim::t_device;
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags) {
  if (flags & ~(cudaEventDefault | cudaEventDisableTiming)) return ret(cudaErrorInvalidValue);
  return cudaEventCreate(event);
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (event == nullptr) return ret(cudaErrorInvalidResourceHandle);
  Runtime& r = rt();
  std::lock_guard lock(r.mu);
  // A pending record may still name it: drain its stream, unless that stream was destroyed (its
  // work ran then; CUDA lets an event outlive the stream it was recorded on).
  if (event->stream != nullptr && kvi_sim::alive(r, event->stream)) kvi_sim::drain(r, event->stream);
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  Runtime& r = rt();
  std::lock_guard lock(r.mu);
  if (event == nullptr) return ret(cudaErrorInvalidResourceHandle);
  if (cudaError_t e = kvi_sim::check_ready(r)) return ret(e);
  CUstream_st* s = kvi_sim::resolve(r, stream);
  if (s == nullptr) return ret(cudaErrorInvalidResourceHandle);
  if (s->capture != nullptr) return ret(kvi_sim::refuse_in_capture(s));  // event nodes: not simulated
  if (s->device != event->device) return ret(cudaErrorInvalidResourceHandle);  // as CUDA: one device
  event->stream = s;
  event->recorded = true;
  event->complete = false;
  return ret(kvi_sim::enqueue_locked(r, stream, [event] {
    event->complete = true;
    event->at = std::chrono::steady_clock::now();
  }));
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  Runtime& r = rt();
  std::lock_guard lock(r.mu);
  if (event == nullptr) return ret(cudaErrorInvalidResourceHandle);
  if (cudaError_t e = kvi_sim::capture_forbids(r)) return ret(e);
  // A destroyed stream ran its work first: its record is complete.
  if (event->recorded && !event->complete && kvi_sim::alive(r, event->stream)) kvi_sim::drain(r, event->stream);
  // Recorded only on a stream of the event's own device (cudaEventRecord).
  return ret(event->stream != nullptr ? r.devices[static_cast<size_t>(event->device)]->sticky : cudaSuccess);
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  Runtime& r = rt();
  std::lock_guard lock(r.mu);
  if (ms == nullptr) return ret(cudaErrorInvalidValue);
  if (start == nullptr || end == nullptr) return ret(cudaErrorInvalidResourceHandle);
  if (!start->complete || !end->complete) return ret(cudaErrorNotReady);
  *ms = std::chrono::duration<float, std::milli>(end->at - start->at).count();
  return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  Runtime& r = rt();
  std::lock_guard lock(r.mu);
  if (cudaError_t e = kvi_sim::check_ready(r)) return ret(e);
  if (mode > cudaStreamCaptureModeRelaxed) return ret(cudaErrorInvalidValue);
  CUstream_st* s = kvi_sim::resolve(r, stream);
  if (s == nullptr) return ret(cudaErrorInvalidResourceHandle);
  if (s->legacy) return ret(cudaErrorStreamCaptureUnsupported);  // the legacy stream cannot be captured
  if (s->capture != nullptr) return ret(cudaErrorIllegalState);
  kvi_sim::drain(r, s);  // earlier work is not part of the graph (the simulation runs it now)
  s->capture = new CUgraph_st;
  s->capture_invalidated = false;
  s->capture_mode = mode;
  s->capturer = std::this_thread::get_id();
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  Runtime& r = rt();
  std::lock_guard lock(r.mu);
  if (graph == nullptr) return ret(cudaErrorInvalidValue);
  *graph = nullptr;
  CUstream_st* s = kvi_sim::resolve(r, stream);
  if (s == nullptr) return ret(cudaErrorInvalidResourceHandle);
  if (s->capture == nullptr) return ret(cudaErrorIllegalState);
  if (s->capturer != std::this_thread::get_id() && s->capture_mode != cudaStreamCaptureModeRelaxed)
    return ret(cudaErrorIllegalState);  // CUDA: cudaErrorStreamCaptureWrongThread
  CUgraph_st* g = s->capture;
  s->capture = nullptr;
  if (s->capture_invalidated) {
    delete g;
    return ret(cudaErrorStreamCaptureInvalidated);
  }
  *graph = g;
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  Runtime& r = rt();
  std::lock_guard lock(r.mu);
  if (status == nullptr) return ret(cudaErrorInvalidValue);
  CUstream_st* s = kvi_sim::resolve(r, stream);
  if (s == nullptr) return ret(cudaErrorInvalidResourceHandle);
  *status = s->capture == nullptr ? cudaStreamCaptureStatusNone
            : s->capture_invalidated ? cudaStreamCaptureStatusInvalidated
                                     : cudaStreamCaptureStatusActive;
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long flags) {
  if (exec == nullptr || graph == nullptr || flags != 0) return ret(cudaErrorInvalidValue);
  *exec = new CUgraphExec_st{graph->ops};
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  Runtime& r = rt();
  std::lock_guard lock(r.mu);
  if (exec == nullptr) return ret(cudaErrorInvalidResourceHandle);
  if (cudaError_t e = kvi_sim::check_ready(r)) return ret(e);
  // The graph's operations run in their captured order, as one piece of the stream's work.
  return ret(kvi_sim::enqueue_locked(r, stream, [ops = exec->ops] {
    for (const auto& op : ops) {
      if (kvi_sim::current(rt())->sticky != cudaSuccess) return;
      op();
    }
  }));
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  if (exec == nullptr) return ret(cudaErrorInvalidResourceHandle);
  delete exec;  // a launch still pending holds its own copy of the operations
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  if (graph == nullptr) return ret(cudaErrorInvalidResourceHandle);
  delete graph;
  return cudaSuccess;
}
