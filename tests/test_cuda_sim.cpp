// The CUDA simulation itself (sim/, -DKVINFER_CUDA_SIM=ON): small kernels written here, as a
// kernel author would get them wrong, and the launch, stream and cuBLAS rules. Built in the
// simulation build only, where test files are host C++ that may hold __global__ functions.
// Faults are sticky for the process, as on a GPU: those tests run in a child process.
#include <cublas_v2.h>
#include <cuda_pipeline.h>
#include <cuda_runtime.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "kvinfer/error.h"
#include "core/convert.h"
#include "launch.h"
#include "mma.h"

namespace {

using ::testing::HasSubstr;

constexpr int kThreads = 128;

template <typename T>
struct Dev {
  T* p = nullptr;
  size_t n;
  explicit Dev(size_t count) : n(count) { EXPECT_EQ(cudaMalloc(&p, n * sizeof(T)), cudaSuccess); }
  ~Dev() { cudaFree(p); }
  std::vector<T> host() const {
    std::vector<T> h(n);
    EXPECT_EQ(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }
};

// Each thread writes its slot, then reads its neighbour's: right only with the barrier.
template <bool kBarrier>
__global__ void neighbour_kernel(float* out) {
  __shared__ float s[kThreads];
  s[threadIdx.x] = static_cast<float>(threadIdx.x);
  if (kBarrier) __syncthreads();
  out[threadIdx.x] = s[(threadIdx.x + 1) % kThreads];
}

// Threads below 64 wait at one barrier, the others at another.
__global__ void divergent_barrier_kernel(float* out) {
  if (threadIdx.x < 64) {
    __syncthreads();
  } else {
    __syncthreads();
  }
  out[threadIdx.x] = 1.0f;
}

// Half the block returns before the barrier the other half waits at.
__global__ void early_exit_kernel(float* out) {
  if (threadIdx.x % 2 == 1) return;
  __syncthreads();
  out[threadIdx.x] = 1.0f;
}

// Copies 4 floats a thread into shared memory asynchronously; waits only if kWait.
template <bool kWait>
__global__ void pipeline_kernel(const float* in, float* out) {
  float* s = kvinfer::cuda::dynamic_shared<float>();
  __pipeline_memcpy_async(s + 4 * threadIdx.x, in + 4 * threadIdx.x, 16);
  __pipeline_commit();
  if (kWait) __pipeline_wait_prior(0);
  __syncthreads();
  out[threadIdx.x] = s[4 * ((threadIdx.x + 1) % kThreads)];
}

__global__ void shuffle_kernel(int* xor_out, int* down_out) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  xor_out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, lane * 10, 5);
  down_out[threadIdx.x] = __shfl_down_sync(0xffffffffu, lane * 10, 3);
}

// One warp: A (16 × 16) and B (16 × 8, [k][n]) of 16-bit bits, C and D (16 × 8) f32, all
// row-major, moved between memory and fragments by the PTX ISA's layout for mma.m16n8k16
// (kernels/mma.h). kWrongLayout swaps the roles of a[1] and a[2] (rows + 8 and columns + 8).
template <kvinfer::DType T, bool kWrongLayout>
__global__ void mma_kernel(const uint16_t* a, const uint16_t* b, const float* c, float* d) {
  const int lane = static_cast<int>(threadIdx.x % 32), g = lane >> 2, t = lane % 4;
  const auto pair = [](const uint16_t* p) { return p[0] | static_cast<uint32_t>(p[1]) << 16; };
  const int r1 = kWrongLayout ? 0 : 8, c1 = kWrongLayout ? 8 : 0;  // a[1]: rows + 8 (PTX)
  uint32_t af[4] = {pair(a + g * 16 + 2 * t), pair(a + (g + r1) * 16 + 2 * t + c1),
                    pair(a + (g + c1) * 16 + 2 * t + r1), pair(a + (g + 8) * 16 + 2 * t + 8)};
  uint32_t bf[2] = {b[(2 * t) * 8 + g] | static_cast<uint32_t>(b[(2 * t + 1) * 8 + g]) << 16,
                    b[(2 * t + 8) * 8 + g] | static_cast<uint32_t>(b[(2 * t + 9) * 8 + g]) << 16};
  const float cf[4] = {c[g * 8 + 2 * t], c[g * 8 + 2 * t + 1], c[(g + 8) * 8 + 2 * t], c[(g + 8) * 8 + 2 * t + 1]};
  float df[4];
  kvinfer::cuda::mma_m16n8k16<T>(df, af, bf, cf);
  d[g * 8 + 2 * t] = df[0], d[g * 8 + 2 * t + 1] = df[1];
  d[(g + 8) * 8 + 2 * t] = df[2], d[(g + 8) * 8 + 2 * t + 1] = df[3];
}

// Lanes 0-15 reach the mma at one place, lanes 16-31 at another.
__global__ void divergent_mma_kernel(float* out) {
  const uint32_t a[4] = {}, b[2] = {};
  const float c[4] = {};
  float d[4];
  if (threadIdx.x < 16) {
    kvinfer::cuda::mma_m16n8k16<kvinfer::DType::F16>(d, a, b, c);
  } else {
    kvinfer::cuda::mma_m16n8k16<kvinfer::DType::F16>(d, a, b, c);
  }
  out[threadIdx.x] = d[0];
}

// Sum over the block, as kernels/elementwise.cu's block_sum: `scratch` holds a float per warp,
// written by lane 0 of each warp, read by every lane after the barrier.
__device__ float block_sum(float v, float* scratch) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < static_cast<int>(blockDim.x) / 32 ? scratch[lane] : 0.0f;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Two block sums in a row over one scratch, as layer_norm's mean and variance. Without the
// barrier between them a warp that runs ahead rewrites scratch while others still read the first.
template <bool kBarrier>
__global__ void two_sums_kernel(const float* x, float* out) {
  __shared__ float scratch[32];
  const float v = x[threadIdx.x];
  const float s1 = block_sum(v, scratch);
  if (kBarrier) __syncthreads();
  const float s2 = block_sum(v * v, scratch);
  out[threadIdx.x] = s1;
  out[blockDim.x + threadIdx.x] = s2;
}

// The neighbour exchange through dynamic shared memory.
template <bool kBarrier>
__global__ void dynamic_neighbour_kernel(float* out) {
  float* s = kvinfer::cuda::dynamic_shared<float>();
  s[threadIdx.x] = static_cast<float>(threadIdx.x);
  if (kBarrier) __syncthreads();
  out[threadIdx.x] = s[(threadIdx.x + 1) % blockDim.x];
}

// Block b > 0 continues block b - 1's result: right only if the blocks run in order, which a
// launch never promises.
__global__ void chain_kernel(float* v) {
  if (threadIdx.x != 0) return;
  v[blockIdx.x] = blockIdx.x == 0 ? 0.0f : v[blockIdx.x - 1] + 1.0f;
}

// Block b takes the next ticket when it runs: a plain counter, since the simulation runs one block
// at a time and one without a barrier runs whole, so the tickets are the order blocks ran in.
__global__ void ticket_kernel(int* next, int* ticket) {
  if (threadIdx.x == 0) ticket[blockIdx.x] = (*next)++;
}

#if defined(KVINFER_SIM_ACCESS_CHECKS)  // the kernels of the access-checks tests only
// Each block raises its flag, passes a barrier, then counts the other blocks that have raised
// theirs and not yet finished: never any when blocks run one after another.
__global__ void in_flight_kernel(int* flag, int* done, int* seen, int blocks) {
  if (threadIdx.x == 0) flag[blockIdx.x] = 1;
  __syncthreads();
  if (threadIdx.x == 0) {
    int others = 0;
    for (int b = 0; b < blocks; ++b) others += b != static_cast<int>(blockIdx.x) && flag[b] == 1 && done[b] != 1;
    seen[blockIdx.x] = others;
    done[blockIdx.x] = 1;
  }
}

// A static __shared__ array holds each block's own values across a barrier.
__global__ void private_static_kernel(float* out) {
  __shared__ float s[64];
  s[threadIdx.x] = static_cast<float>(blockIdx.x * 1000 + threadIdx.x);
  __syncthreads();
  out[blockIdx.x * 64 + threadIdx.x] = s[(threadIdx.x + 1) % 64];
}
#endif

#if !defined(KVINFER_TEST_UBSAN)  // UBSan stops at the misaligned load first
// A float4 load from one float past a 16-byte boundary.
__global__ void misaligned_float4_kernel(const float* in, float* out) {
  const float4 v = *reinterpret_cast<const float4*>(in + 1 + 4 * threadIdx.x);
  out[threadIdx.x] = v.x + v.y + v.z + v.w;
}
#endif

#if defined(KVINFER_SIM_ACCESS_CHECKS)
// A 4-byte load from 2 bytes past a multiple of 4 (a 16-bit row read 32 bits at a time).
__global__ void misaligned_word_kernel(const uint16_t* in, uint32_t* out) {
  out[threadIdx.x] = *reinterpret_cast<const uint32_t*>(in + 1 + 2 * threadIdx.x);
}
#endif

// An async copy of 16 bytes from 8 bytes past a 16-byte boundary.
__global__ void misaligned_pipeline_kernel(const float* in, float* out) {
  float* s = kvinfer::cuda::dynamic_shared<float>();
  __pipeline_memcpy_async(s + 4 * threadIdx.x, in + 2 + 4 * threadIdx.x, 16);
  __pipeline_commit();
  __pipeline_wait_prior(0);
  out[threadIdx.x] = s[4 * threadIdx.x];
}

__global__ void read_kernel(const float* in, float* out) { out[threadIdx.x] = in[threadIdx.x]; }

__global__ void add_one_kernel(float* x) { x[threadIdx.x] += 1.0f; }

__global__ void smem_kernel(float* out) { out[0] = kvinfer::cuda::dynamic_shared<float>()[0]; }

cudaError_t run_and_sync(void (*kernel)(float*), float* out) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(2);
  cfg.blockDim = dim3(kThreads);
  const cudaError_t e = cudaLaunchKernelEx(&cfg, kernel, out);
  return e != cudaSuccess ? e : cudaDeviceSynchronize();
}

// The simulation's checks for a scope (kvi_sim::set_checks), then those before: a test of one
// mode runs the same whatever mode ctest gave the process.
struct ScopedChecks {
  kvi_sim::Checks before = kvi_sim::checks();
  explicit ScopedChecks(kvi_sim::Checks c) { kvi_sim::set_checks(c); }
  ~ScopedChecks() { kvi_sim::set_checks(before); }
  ScopedChecks(const ScopedChecks&) = delete;
  ScopedChecks& operator=(const ScopedChecks&) = delete;
};
constexpr kvi_sim::Checks kLockstep{kvi_sim::Schedule::Lockstep, false, false};
constexpr kvi_sim::Checks kRunAhead{kvi_sim::Schedule::RunAhead, false, false};
constexpr kvi_sim::Checks kShuffled{kvi_sim::Schedule::Lockstep, true, false};
#if defined(KVINFER_SIM_ACCESS_CHECKS)
constexpr kvi_sim::Checks kRacecheck{kvi_sim::Schedule::Lockstep, false, true};
#endif

class CudaSim : public ::testing::Test {
 protected:
  void SetUp() override {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0)
      GTEST_SKIP() << "no simulated device: set KVINFER_SIM_DEVICE=sm_90 or sm_86 (ctest does)";
    GTEST_FLAG_SET(death_test_style, "threadsafe");
  }
};

TEST_F(CudaSim, FreshDeviceMemoryIsPoison) {
  Dev<uint32_t> d(1000);
  for (uint32_t v : d.host()) ASSERT_EQ(v, 0xffffffffu);
}

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KVINFER_TEST_ASAN 1
#endif
#endif
#if defined(KVINFER_TEST_ASAN)
extern "C" int __asan_option_detect_stack_use_after_return;  // the ASan runtime's switch

__global__ void read_use_after_return_switch(int* out) {
  out[threadIdx.x] = __asan_option_detect_stack_use_after_return;
}

// The fibers of a launch run without fake stacks (sim/src/fiber.h: FakeStacksOff); host code
// keeps ASAN_OPTIONS' detect_stack_use_after_return before and after it.
TEST_F(CudaSim, KernelsRunWithoutFakeStacksAndHostCodeKeepsThem) {
  const int host = __asan_option_detect_stack_use_after_return;
  ASSERT_EQ(host, 1) << "run with ASAN_OPTIONS=detect_stack_use_after_return=1 (tools/sanitize.sh does)";
  Dev<int> d(kThreads);
  kvinfer::cuda::launch("read_use_after_return_switch", read_use_after_return_switch, 1, kThreads, 0, nullptr, d.p);
  for (int v : d.host()) ASSERT_EQ(v, 0);
  EXPECT_EQ(__asan_option_detect_stack_use_after_return, host);
}
#endif

TEST_F(CudaSim, AMissingBarrierChangesTheResult) {
  const ScopedChecks mode(kLockstep);
  Dev<float> with(kThreads), without(kThreads);
  kvinfer::cuda::launch("neighbour", neighbour_kernel<true>, 1, kThreads, 0, nullptr, with.p);
  kvinfer::cuda::launch("neighbour", neighbour_kernel<false>, 1, kThreads, 0, nullptr, without.p);
  const auto a = with.host(), b = without.host();
  int wrong = 0;
  for (int i = 0; i < kThreads; ++i) {
    ASSERT_EQ(a[i], static_cast<float>((i + 1) % kThreads));
    wrong += b[i] != static_cast<float>((i + 1) % kThreads);
  }
  // Threads run in a shuffled order: about half read their neighbour's slot before it is written.
  EXPECT_GT(wrong, kThreads / 8) << "the order of the block's threads is not shuffled";
}

// layer_norm's pattern (two block sums over one scratch, elementwise.cu): in lockstep the warps
// read the first sum before any can write the second, so a missing barrier between them goes
// unseen; a warp that runs ahead to its next barrier rewrites scratch under the others.
TEST_F(CudaSim, AWarpThatRunsAheadExposesAMissingBarrierBetweenReductions) {
  std::vector<float> x(kThreads);
  double sum = 0, sum_sq = 0;
  for (int i = 0; i < kThreads; ++i) {
    x[static_cast<size_t>(i)] = static_cast<float>(i % 7) - 2.0f;
    sum += x[static_cast<size_t>(i)], sum_sq += x[static_cast<size_t>(i)] * x[static_cast<size_t>(i)];
  }
  Dev<float> dx(kThreads);
  ASSERT_EQ(cudaMemcpy(dx.p, x.data(), kThreads * 4, cudaMemcpyHostToDevice), cudaSuccess);
  const auto wrong_sums = [&](kvi_sim::Checks mode, bool barrier) {
    const ScopedChecks scoped(mode);
    Dev<float> out(2 * kThreads);
    if (barrier)
      kvinfer::cuda::launch("two_sums", two_sums_kernel<true>, 1, kThreads, 0, nullptr, dx.p, out.p);
    else
      kvinfer::cuda::launch("two_sums", two_sums_kernel<false>, 1, kThreads, 0, nullptr, dx.p, out.p);
    const auto got = out.host();
    int wrong = 0;
    for (int i = 0; i < kThreads; ++i)
      wrong += got[static_cast<size_t>(i)] != sum || got[static_cast<size_t>(kThreads + i)] != sum_sq;
    return wrong;
  };
  EXPECT_EQ(wrong_sums(kLockstep, false), 0) << "lockstep was meant to miss it (else this test shows nothing)";
  EXPECT_GE(wrong_sums(kRunAhead, false), kThreads / 2) << "every warp but the first to run reads a rewritten scratch";
  EXPECT_EQ(wrong_sums(kRunAhead, true), 0);
}

// With their order shuffled, a block that reads what an earlier-numbered block of the same launch
// wrote gets poison or a stale value.
TEST_F(CudaSim, ShuffledBlocksExposeAReadOfAnotherBlocksResult) {
  constexpr int kBlocks = 64;
  const auto chain = [&](kvi_sim::Checks mode) {
    const ScopedChecks scoped(mode);
    Dev<float> v(kBlocks);
    kvinfer::cuda::launch("chain", chain_kernel, kBlocks, 32, 0, nullptr, v.p);
    const auto got = v.host();
    int wrong = 0;
    for (int b = 0; b < kBlocks; ++b) wrong += got[static_cast<size_t>(b)] != static_cast<float>(b);
    return wrong;
  };
  EXPECT_EQ(chain(kLockstep), 0);
  EXPECT_GT(chain(kShuffled), kBlocks / 4);
}

// The order itself is shuffled, not only blocks taking turns: three resident blocks started in
// numbered order (interleaving alone) would run nearly every block within a few places of its
// number, and the chain above would still break. A random order moves about 3/4 of 64 blocks
// more than 8 places.
TEST_F(CudaSim, ShuffledBlocksStartInASeededOrder) {
  constexpr int kBlocks = 64;
  const auto moved_far = [&](kvi_sim::Checks mode) {
    const ScopedChecks scoped(mode);
    Dev<int> next(1), ticket(kBlocks);
    EXPECT_EQ(cudaMemset(next.p, 0, 4), cudaSuccess);
    kvinfer::cuda::launch("ticket", ticket_kernel, kBlocks, 32, 0, nullptr, next.p, ticket.p);
    const auto got = ticket.host();
    std::vector<int> sorted(got.begin(), got.end());
    std::sort(sorted.begin(), sorted.end());
    for (int b = 0; b < kBlocks; ++b) EXPECT_EQ(sorted[static_cast<size_t>(b)], b) << "every block ran once";
    int far = 0;
    for (int b = 0; b < kBlocks; ++b) far += std::abs(got[static_cast<size_t>(b)] - b) > 8;
    return far;
  };
  EXPECT_EQ(moved_far(kLockstep), 0);
  EXPECT_GT(moved_far(kShuffled), kBlocks / 4);
}

#if defined(KVINFER_SIM_ACCESS_CHECKS)
// Shuffled blocks also take turns at their barriers (a few resident at once): a block then sees
// another that has started and not finished, which blocks run one after another never show.
// Static __shared__ arrays stay each block's own meanwhile.
TEST_F(CudaSim, ShuffledBlocksInterleaveAtTheirBarriersAndKeepTheirSharedMemory) {
  ASSERT_TRUE(kvi_sim::access_checks_compiled());
  constexpr int kBlocks = 32;
  const auto most_in_flight = [&](kvi_sim::Checks mode) {
    const ScopedChecks scoped(mode);
    Dev<int> flag(kBlocks), done(kBlocks), seen(kBlocks);
    EXPECT_EQ(cudaMemset(flag.p, 0, kBlocks * 4), cudaSuccess);
    EXPECT_EQ(cudaMemset(done.p, 0, kBlocks * 4), cudaSuccess);
    kvinfer::cuda::launch("in_flight", in_flight_kernel, kBlocks, 64, 0, nullptr, flag.p, done.p, seen.p, kBlocks);
    const auto s = seen.host();
    return *std::max_element(s.begin(), s.end());
  };
  EXPECT_EQ(most_in_flight(kLockstep), 0);
  EXPECT_GT(most_in_flight(kShuffled), 0);
  const ScopedChecks scoped(kShuffled);
  Dev<float> out(kBlocks * 64);
  kvinfer::cuda::launch("private_static", private_static_kernel, kBlocks, 64, 0, nullptr, out.p);
  const auto got = out.host();
  for (int b = 0; b < kBlocks; ++b)
    for (int t = 0; t < 64; ++t)
      ASSERT_EQ(got[static_cast<size_t>(b * 64 + t)], static_cast<float>(b * 1000 + (t + 1) % 64)) << b << "," << t;
}

// Racecheck: a byte of shared memory that two warps touch between the same two barriers, one of
// them writing, is a fault naming both threads and where each touched it; the same kernels with
// their barriers pass.
TEST_F(CudaSim, RacecheckNamesTheWriterAndTheReaderOfASharedByte) {
  std::vector<float> x(kThreads, 1.0f);
  Dev<float> dx(kThreads), out(2 * kThreads);
  ASSERT_EQ(cudaMemcpy(dx.p, x.data(), kThreads * 4, cudaMemcpyHostToDevice), cudaSuccess);
  {
    const ScopedChecks scoped(kRacecheck);
    kvinfer::cuda::launch("two_sums", two_sums_kernel<true>, 1, kThreads, 0, nullptr, dx.p, out.p);
    kvinfer::cuda::launch("neighbour", dynamic_neighbour_kernel<true>, 1, kThreads, kThreads * 4, nullptr, out.p);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  EXPECT_EXIT(
      {
        kvi_sim::set_checks(kRacecheck);
        kvinfer::cuda::launch("two_sums", two_sums_kernel<false>, 1, kThreads, 0, nullptr, dx.p, out.p);
        std::exit(cudaDeviceSynchronize() == cudaErrorLaunchFailure ? 0 : 1);
      },
      ::testing::ExitedWithCode(0),
      "shared-memory race \\(racecheck, write after read\\): byte [0-9]+ of .*static __shared__.*: read by thread "
      "\\([0-9]+,0,0\\) \\(warp [0-9]\\) at .*, then written by thread \\([0-9]+,0,0\\) \\(warp [0-9]\\) at .*, with no "
      "__syncthreads between them");
  EXPECT_EXIT(
      {
        kvi_sim::set_checks(kRacecheck);
        kvinfer::cuda::launch("neighbour", dynamic_neighbour_kernel<false>, 1, kThreads, kThreads * 4, nullptr, out.p);
        std::exit(cudaDeviceSynchronize() == cudaErrorLaunchFailure ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "shared-memory race \\(racecheck, .*\\): byte [0-9]+ of the dynamic shared memory");
}

// A 4-byte load at an address that is not a multiple of 4 stops the kernel with
// cudaErrorMisalignedAddress, as on a GPU (seen by the access hooks).
TEST_F(CudaSim, AMisalignedWordIsAFault) {
  EXPECT_EXIT(
      {
        Dev<uint16_t> in(4 * kThreads);
        Dev<uint32_t> out(kThreads);
        kvinfer::cuda::launch("mis_word", misaligned_word_kernel, 1, kThreads, 0, nullptr, in.p, out.p);
        std::exit(cudaDeviceSynchronize() == cudaErrorMisalignedAddress ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "misaligned address: a 4-byte load at 0x[0-9a-f]+ \\(a multiple of 4");
}

// ---- the profiler: kernels whose counts are known -----------------------------------------------

// Thread t loads in[t * stride + offset] and stores it at out[t].
__global__ void strided_copy_kernel(const float* in, float* out, int stride, int offset) {
  out[blockIdx.x * blockDim.x + threadIdx.x] = in[(blockIdx.x * blockDim.x + threadIdx.x) * stride + offset];
}

// One warp fills a static and a dynamic shared array (lane i: word i + 32k, conflict-free), then
// lane t reads word t * stride of each.
constexpr int kSharedWords = 32 * 33;
__global__ void shared_stride_kernel(int stride, float* out) {
  __shared__ float s[kSharedWords];
  float* d = kvinfer::cuda::dynamic_shared<float>();
  for (int i = static_cast<int>(threadIdx.x); i < kSharedWords; i += 32) s[i] = d[i] = static_cast<float>(i);
  __syncthreads();
  const int w = static_cast<int>(threadIdx.x) * stride % kSharedWords;
  out[threadIdx.x] = s[w] + d[w];
}

class CudaSimProfile : public CudaSim {};

kvi_sim::LaunchProfile profile_one(const std::function<void()>& run) {
  kvi_sim::profile_start();
  run();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<kvi_sim::LaunchProfile> launches = kvi_sim::profile_stop();
  EXPECT_EQ(launches.size(), 1u);
  return launches.empty() ? kvi_sim::LaunchProfile{} : launches[0];
}

const kvi_sim::SiteProfile* only_site(const kvi_sim::LaunchProfile& p, bool shared, bool store) {
  const kvi_sim::SiteProfile* found = nullptr;
  for (const auto& s : p.sites)
    if (s.shared == shared && s.store == store) {
      EXPECT_EQ(found, nullptr) << "a second site: " << s.where;
      found = &s;
    }
  EXPECT_NE(found, nullptr);
  return found;
}

// 6 blocks of 2 warps copy 4-byte floats: each warp-level request is 128 bytes, whose sectors
// depend on the stride and alignment of the 32 lanes' addresses.
TEST_F(CudaSimProfile, GlobalRequestsCountTheSectorsTheirLanesTouch) {
  constexpr int kBlocks = 6, kBlock = 64, kN = kBlocks * kBlock;
  Dev<float> in(kN * 8 + 1), out(kN);
  struct Case {
    int stride, offset;
    uint64_t sectors_per_request, used_per_request, unique_read;
  };
  // Contiguous and aligned: 4 sectors; 32-byte stride: one sector a lane, 4 of its bytes used;
  // 4 bytes off: 5 sectors; every lane the same word: 1 sector, 4 bytes used, 4 distinct bytes.
  for (const Case c : {Case{1, 0, 4, 128, 4 * kN}, Case{8, 0, 32, 128, 4 * kN}, Case{1, 1, 5, 128, 4 * kN},
                       Case{0, 3, 1, 4, 4}}) {
    SCOPED_TRACE("stride " + std::to_string(c.stride) + ", offset " + std::to_string(c.offset));
    const auto p = profile_one([&] {
      kvinfer::cuda::launch("strided_copy", strided_copy_kernel, kBlocks, kBlock, 0, nullptr, in.p, out.p, c.stride,
                            c.offset);
    });
    EXPECT_EQ(p.kernel, "strided_copy");
    EXPECT_EQ(p.grid.x * p.grid.y * p.grid.z, 6u);
    EXPECT_EQ(p.block.x, 64u);
    const uint64_t requests = kN / 32;
    EXPECT_EQ(p.load_requests, requests);
    EXPECT_EQ(p.load_bytes, 4u * kN);
    EXPECT_EQ(p.load_sectors, requests * c.sectors_per_request);
    EXPECT_EQ(p.load_used, requests * c.used_per_request);
    EXPECT_EQ(p.unique_read_bytes, c.unique_read);
    EXPECT_EQ(p.store_requests, requests);  // out[t]: always 4 aligned sectors
    EXPECT_EQ(p.store_bytes, 4u * kN);
    EXPECT_EQ(p.store_sectors, 4 * requests);
    EXPECT_EQ(p.store_used, 4u * kN);
    EXPECT_EQ(p.unique_written_bytes, 4u * kN);
    EXPECT_EQ(p.shared_requests, 0u);
    const auto* load = only_site(p, false, false);
    ASSERT_NE(load, nullptr);
    EXPECT_EQ(load->sectors, p.load_sectors);
    EXPECT_EQ(load->used, p.load_used);
    EXPECT_THAT(load->where, ::testing::HasSubstr("+0x"));  // addr2line -Cfe names its line
  }
}

// Words a bank holds twice take two passes: stride 2 puts 2 of the warp's words in each of 16
// banks, stride 32 all 32 in one bank; stride 33 spreads them over all 32, stride 0 is a broadcast.
TEST_F(CudaSimProfile, SharedRequestsCountTheirBankConflicts) {
  Dev<float> out(32);
  for (const auto& [stride, ways] : {std::pair{1, 1}, {2, 2}, {4, 4}, {32, 32}, {33, 1}, {0, 1}}) {
    SCOPED_TRACE("stride " + std::to_string(stride));
    const auto p = profile_one([&] {
      kvinfer::cuda::launch("shared_stride", shared_stride_kernel, 1, 32, kSharedWords * sizeof(float), nullptr,
                            stride, out.p);
    });
    // Per array: 33 conflict-free stores and the read.
    EXPECT_EQ(p.shared_requests, 2u * 34);
    EXPECT_EQ(p.shared_ideal_wavefronts, 2u * 34);
    EXPECT_EQ(p.shared_wavefronts, 2u * (33 + ways));
    int reads = 0;
    for (const auto& s : p.sites)
      if (s.shared && !s.store) {
        ++reads;
        EXPECT_EQ(s.requests, 1u);
        EXPECT_EQ(s.wavefronts, static_cast<uint64_t>(ways)) << s.where;
        EXPECT_EQ(s.ideal, 1u);
      }
    EXPECT_EQ(reads, 2) << "one read site per array";
    EXPECT_EQ(p.store_sectors, 4u);
  }
}

// Launches are recorded only between profile_start and profile_stop, in the order they ran.
TEST_F(CudaSimProfile, RecordsOnlyWhileStarted) {
  Dev<float> in(64), out(64);
  kvinfer::cuda::launch("before", strided_copy_kernel, 1, 32, 0, nullptr, in.p, out.p, 1, 0);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  kvi_sim::profile_start();
  kvinfer::cuda::launch("first", strided_copy_kernel, 2, 32, 0, nullptr, in.p, out.p, 1, 0);
  kvinfer::cuda::launch("second", strided_copy_kernel, 1, 32, 0, nullptr, in.p, out.p, 1, 0);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto launches = kvi_sim::profile_stop();
  kvinfer::cuda::launch("after", strided_copy_kernel, 1, 32, 0, nullptr, in.p, out.p, 1, 0);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_EQ(launches.size(), 2u);
  EXPECT_EQ(launches[0].kernel, "first");
  EXPECT_EQ(launches[0].grid.x, 2u);
  EXPECT_EQ(launches[0].load_requests, 2u);
  EXPECT_EQ(launches[1].kernel, "second");
  EXPECT_TRUE(kvi_sim::profile_stop().empty());
}
#endif  // KVINFER_SIM_ACCESS_CHECKS

// A vector load, or an async copy, at an address that is not a multiple of its size stops the
// kernel with cudaErrorMisalignedAddress, as on a GPU.
// (UBSan builds stop at the float4 dereference before the simulation can: their report is the check there.)
TEST_F(CudaSim, MisalignedVectorAndAsyncCopyAccessesAreFaults) {
#if !defined(KVINFER_TEST_UBSAN)
  EXPECT_EXIT(
      {
        Dev<float> in(8 * kThreads);
        Dev<float> out(kThreads);
        kvinfer::cuda::launch("mis4", misaligned_float4_kernel, 1, kThreads, 0, nullptr, in.p, out.p);
        std::exit(cudaDeviceSynchronize() == cudaErrorMisalignedAddress ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "misaligned address: a 16-byte vector load at 0x[0-9a-f]+ \\(a multiple of 16");
#endif
  EXPECT_EXIT(
      {
        Dev<float> in(8 * kThreads);
        Dev<float> out(kThreads);
        kvinfer::cuda::launch("mis_async", misaligned_pipeline_kernel, 1, kThreads, 16 * kThreads, nullptr, in.p,
                              out.p);
        std::exit(cudaDeviceSynchronize() == cudaErrorMisalignedAddress ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "misaligned address: thread .*__pipeline_memcpy_async of 16 bytes from 8");
}

TEST_F(CudaSim, DivergentBarriersAreAFaultNamingBothPlaces) {
  EXPECT_EXIT(
      {
        Dev<float> out(kThreads);
        std::exit(run_and_sync(divergent_barrier_kernel, out.p) == cudaErrorLaunchFailure ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "__syncthreads divergence: .*test_cuda_sim.cpp:[0-9]+.*test_cuda_sim.cpp:[0-9]+");
}

TEST_F(CudaSim, AThreadThatExitsBeforeABarrierIsAFault) {
  EXPECT_EXIT(
      {
        Dev<float> out(kThreads);
        std::exit(run_and_sync(early_exit_kernel, out.p) == cudaErrorLaunchFailure ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "exited without reaching the __syncthreads");
}

TEST_F(CudaSim, AsyncCopiesLandOnlyAtTheirWait) {
  std::vector<float> in(4 * kThreads);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i);
  Dev<float> d_in(in.size()), waited(kThreads), unwaited(kThreads);
  ASSERT_EQ(cudaMemcpy(d_in.p, in.data(), in.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  const size_t smem = in.size() * 4;
  kvinfer::cuda::launch("pipeline", pipeline_kernel<true>, 1, kThreads, smem, nullptr, d_in.p, waited.p);
  kvinfer::cuda::launch("pipeline", pipeline_kernel<false>, 1, kThreads, smem, nullptr, d_in.p, unwaited.p);
  const auto a = waited.host(), b = unwaited.host();
  for (int i = 0; i < kThreads; ++i) {
    ASSERT_EQ(a[i], in[4 * ((i + 1) % kThreads)]) << i;
    ASSERT_TRUE(std::isnan(b[i])) << "an unwaited copy landed, thread " << i;  // shared memory's poison
  }
}

TEST_F(CudaSim, FullMaskShufflesMoveLanes) {
  Dev<int> x(64), d(64);
  kvinfer::cuda::launch("shuffle", shuffle_kernel, 1, 64, 0, nullptr, x.p, d.p);
  const auto xs = x.host(), ds = d.host();
  for (int t = 0; t < 64; ++t) {
    const int lane = t % 32;
    EXPECT_EQ(xs[t], (lane ^ 5) * 10) << t;
    EXPECT_EQ(ds[t], (lane + 3 < 32 ? lane + 3 : lane) * 10) << t;
  }
}

// mma.sync m16n8k16 (f16 and bf16): fragments loaded by the PTX ISA's layout give D = A·B + C
// exactly for operands whose products and sums are exact in f32 (multiples of 1/4 below 8); the
// same kernel with two A registers swapped does not.
template <kvinfer::DType T, bool kWrongLayout>
int mma_mismatches() {
  std::mt19937 rng(T == kvinfer::DType::F16 ? 11 : 12);
  std::uniform_int_distribution<int> u(-32, 32);
  const auto narrow = [](float x) {
    return T == kvinfer::DType::F16 ? kvinfer::core::f32_to_f16(x) : kvinfer::core::f32_to_bf16(x);
  };
  std::vector<float> a(16 * 16), b(16 * 8), c(16 * 8);
  std::vector<uint16_t> a16(a.size()), b16(b.size());
  for (size_t i = 0; i < a.size(); ++i) a16[i] = narrow(a[i] = static_cast<float>(u(rng)) / 4);
  for (size_t i = 0; i < b.size(); ++i) b16[i] = narrow(b[i] = static_cast<float>(u(rng)) / 4);
  for (float& x : c) x = static_cast<float>(u(rng));
  Dev<uint16_t> da(a.size()), db(b.size());
  Dev<float> dc(c.size()), dd(c.size());
  EXPECT_EQ(cudaMemcpy(da.p, a16.data(), a16.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(db.p, b16.data(), b16.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(dc.p, c.data(), c.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  kvinfer::cuda::launch("mma", mma_kernel<T, kWrongLayout>, 1, 32, 0, nullptr, da.p, db.p, dc.p, dd.p);
  const auto d = dd.host();
  int wrong = 0;
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 8; ++j) {
      double want = c[static_cast<size_t>(i * 8 + j)];
      for (int k = 0; k < 16; ++k) want += static_cast<double>(a[static_cast<size_t>(i * 16 + k)]) * b[static_cast<size_t>(k * 8 + j)];
      wrong += d[static_cast<size_t>(i * 8 + j)] != want;
    }
  return wrong;
}

TEST_F(CudaSim, MmaM16n8k16FollowsThePtxFragmentLayout) {
  EXPECT_EQ((mma_mismatches<kvinfer::DType::F16, false>()), 0);
  EXPECT_EQ((mma_mismatches<kvinfer::DType::BF16, false>()), 0);
  // A layout with rows and columns + 8 confused computes another product: most of D differs.
  EXPECT_GT((mma_mismatches<kvinfer::DType::F16, true>()), 64);
  EXPECT_GT((mma_mismatches<kvinfer::DType::BF16, true>()), 64);
}

TEST_F(CudaSim, AnMmaThatPartOfTheWarpReachesIsAFault) {
  EXPECT_EXIT(
      {
        Dev<float> out(kThreads);
        std::exit(run_and_sync(divergent_mma_kernel, out.p) == cudaErrorLaunchFailure ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "warp divergence: .*mma.sync");
}

TEST_F(CudaSim, LaunchRulesAreTheGpusRules) {
  Dev<float> out(1);
  const auto error_of = [&](dim3 grid, dim3 block, size_t smem) {
    try {
      kvinfer::cuda::launch("smem", smem_kernel, grid, block, smem, nullptr, out.p);
      cudaDeviceSynchronize();
    } catch (const kvinfer::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(error_of(1, 1025, 0), HasSubstr("cudaErrorInvalidConfiguration"));
  EXPECT_THAT(error_of(dim3(1, 65536), 32, 0), HasSubstr("cudaErrorInvalidConfiguration"));
  EXPECT_EQ(error_of(dim3(1, 65535), 32, 16), "no error");
  // Dynamic shared memory above 48 KiB needs the opt-in, and never exceeds the device's limit.
  EXPECT_THAT(error_of(1, 32, 48 * 1024 + 4), HasSubstr("cudaErrorInvalidValue"));
  int limit = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0), cudaSuccess);
  EXPECT_EQ(cudaFuncSetAttribute(smem_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, limit + 4),
            cudaErrorInvalidValue);
  cudaGetLastError();
  ASSERT_EQ(cudaFuncSetAttribute(smem_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, limit), cudaSuccess);
  EXPECT_EQ(error_of(1, 32, static_cast<size_t>(limit)), "no error");
  EXPECT_THAT(error_of(1, 32, static_cast<size_t>(limit) + 4), HasSubstr("cudaErrorInvalidValue"));
}

// The legacy stream does not order a non-blocking stream: data copied with cudaMemcpy is not
// there for a kernel on such a stream until the legacy stream is synchronised.
TEST_F(CudaSim, NonBlockingStreamsAreNotOrderedAfterTheLegacyStream) {
  std::vector<float> host(kThreads, 3.0f);
  for (bool sync : {false, true}) {
    Dev<float> in(kThreads), out(kThreads);
    cudaStream_t s = nullptr;
    ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(in.p, host.data(), kThreads * 4, cudaMemcpyHostToDevice), cudaSuccess);
    if (sync) {
      ASSERT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
    }
    kvinfer::cuda::launch("read", read_kernel, 1, kThreads, 0, s, in.p, out.p);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    const auto got = out.host();
    if (sync) {
      EXPECT_EQ(got, host);
    } else {
      EXPECT_TRUE(std::isnan(got[0])) << "the copy was ordered before the non-blocking stream's kernel";
    }
    cudaStreamDestroy(s);
  }
}

// With KVINFER_CUDA_SYNC=1 a fault is reported by the launch that caused it, naming the kernel.
TEST_F(CudaSim, SyncAfterLaunchNamesTheFaultingKernel) {
  EXPECT_EXIT(
      {
        setenv("KVINFER_CUDA_SYNC", "1", 1);
        Dev<float> out(kThreads);
        try {
          kvinfer::cuda::launch("divergent_barrier_kernel", divergent_barrier_kernel, 2, kThreads, 0, nullptr, out.p);
        } catch (const kvinfer::Error& e) {
          std::fprintf(stderr, "caught: %s\n", e.what());
          std::exit(0);
        }
        std::exit(1);
      },
      ::testing::ExitedWithCode(0),
      "caught: divergent_barrier_kernel \\(grid 2.*, block 128.*, 0 B dynamic shared memory\\): "
      "run \\(KVINFER_CUDA_SYNC=1\\) failed: cudaErrorLaunchFailure");
}

// cublasGemmEx: column-major C = op(A) op(B) against a double-precision loop, every transpose
// pair, leading dimensions larger than the rows; then the argument rules.
TEST_F(CudaSim, CublasGemmExFollowsCublasSemantics) {
  cublasHandle_t h = nullptr;
  ASSERT_EQ(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
  const int m = 7, n = 5, k = 11, pad = 3;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (auto ta : {CUBLAS_OP_N, CUBLAS_OP_T})
    for (auto tb : {CUBLAS_OP_N, CUBLAS_OP_T}) {
      const int a_rows = ta == CUBLAS_OP_N ? m : k, a_cols = ta == CUBLAS_OP_N ? k : m;
      const int b_rows = tb == CUBLAS_OP_N ? k : n, b_cols = tb == CUBLAS_OP_N ? n : k;
      const int lda = a_rows + pad, ldb = b_rows + pad, ldc = m + pad;
      std::vector<float> a(static_cast<size_t>(lda * a_cols)), b(static_cast<size_t>(ldb * b_cols));
      for (float& x : a) x = u(rng);
      for (float& x : b) x = u(rng);
      Dev<float> da(a.size()), db(b.size()), dc(static_cast<size_t>(ldc * n));
      cudaMemcpy(da.p, a.data(), a.size() * 4, cudaMemcpyHostToDevice);
      cudaMemcpy(db.p, b.data(), b.size() * 4, cudaMemcpyHostToDevice);
      const float alpha = 1.0f, beta = 0.0f;  // beta 0: C's poison is not read
      ASSERT_EQ(cublasGemmEx(h, ta, tb, m, n, k, &alpha, da.p, CUDA_R_32F, lda, db.p, CUDA_R_32F, ldb, &beta, dc.p,
                             CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                CUBLAS_STATUS_SUCCESS);
      const auto c = dc.host();
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) {
          double want = 0;
          for (int p = 0; p < k; ++p) {
            const size_t ai = static_cast<size_t>(ta == CUBLAS_OP_N ? p * lda + i : i * lda + p);
            const size_t bi = static_cast<size_t>(tb == CUBLAS_OP_N ? j * ldb + p : p * ldb + j);
            const double x = a[ai], y = b[bi];
            want += x * y;
          }
          ASSERT_NEAR(c[static_cast<size_t>(j * ldc + i)], want, 1e-5) << ta << tb << " " << i << "," << j;
        }
    }
  Dev<float> d(1000);
  const float one = 1.0f, zero = 0.0f;
  // lda below max(1, rows of A as stored): what cuBLAS refuses.
  EXPECT_EQ(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, 8, 2, 16, &one, d.p, CUDA_R_32F, 15, d.p, CUDA_R_32F, 16, &zero,
                         d.p, CUDA_R_32F, 8, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, -1, 2, 16, &one, d.p, CUDA_R_32F, 16, d.p, CUDA_R_32F, 16, &zero,
                         d.p, CUDA_R_32F, 8, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_INVALID_VALUE);
  // f16 inputs with an f32 compute type and a bf16 output: no such combination.
  EXPECT_EQ(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, 8, 2, 16, &one, d.p, CUDA_R_16F, 16, d.p, CUDA_R_16F, 16, &zero,
                         d.p, CUDA_R_16BF, 8, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_NOT_SUPPORTED);
  // A leading dimension that is legal but walks past the operand's allocation.
  EXPECT_EQ(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, 100, 2, 16, &one, d.p, CUDA_R_32F, 17, d.p, CUDA_R_32F, 16,
                         &zero, d.p, CUDA_R_32F, 100, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_EXECUTION_FAILED);
  EXPECT_EQ(cublasGemmEx(nullptr, CUBLAS_OP_T, CUBLAS_OP_N, 8, 2, 16, &one, d.p, CUDA_R_32F, 16, d.p, CUDA_R_32F, 16,
                         &zero, d.p, CUDA_R_32F, 8, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_NOT_INITIALIZED);
  cublasDestroy(h);
}

// A capture records work without running it; each launch of the graph runs it again, in order.
TEST_F(CudaSim, StreamCaptureRecordsAndAGraphReplays) {
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  Dev<float> a(kThreads), b(kThreads);
  ASSERT_EQ(cudaMemsetAsync(a.p, 0, kThreads * sizeof(float), s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  cudaStreamCaptureStatus status{};
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  ASSERT_EQ(cudaStreamIsCapturing(s, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusActive);
  kvinfer::cuda::launch("add_one", add_one_kernel, 1, kThreads, 0, s, a.p);
  ASSERT_EQ(cudaMemcpyAsync(b.p, a.p, kThreads * sizeof(float), cudaMemcpyDeviceToDevice, s), cudaSuccess);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  for (float v : a.host()) ASSERT_EQ(v, 0.0f) << "captured work ran during the capture";
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  for (float v : a.host()) ASSERT_EQ(v, 3.0f);
  for (float v : b.host()) ASSERT_EQ(v, 3.0f);
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  cudaStreamDestroy(s);
}

// An async copy from pinned memory reads its source when it runs, as a DMA does: a buffer
// rewritten before the stream gets there sends the new bytes. From pageable memory the bytes are
// staged when the call returns (and counted: tests see which copies are pinned).
TEST_F(CudaSim, PinnedCopiesReadTheirSourceWhenTheyRun) {
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  int* pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&pinned), sizeof(int)), cudaSuccess);
  int pageable = 1;
  Dev<int> from_pinned(1), from_pageable(1);
  *pinned = 1;
  const uint64_t staged = kvi_sim::pageable_copies();
  ASSERT_EQ(cudaMemcpyAsync(from_pinned.p, pinned, sizeof(int), cudaMemcpyHostToDevice, s), cudaSuccess);
  EXPECT_EQ(kvi_sim::pageable_copies(), staged);
  ASSERT_EQ(cudaMemcpyAsync(from_pageable.p, &pageable, sizeof(int), cudaMemcpyHostToDevice, s), cudaSuccess);
  EXPECT_EQ(kvi_sim::pageable_copies(), staged + 1);
  *pinned = 2, pageable = 2;  // before the stream ran either copy
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(from_pinned.host()[0], 2);
  EXPECT_EQ(from_pageable.host()[0], 1);
  cudaPointerAttributes a{};
  ASSERT_EQ(cudaPointerGetAttributes(&a, pinned), cudaSuccess);
  EXPECT_EQ(a.type, cudaMemoryTypeHost);
  ASSERT_EQ(cudaPointerGetAttributes(&a, from_pinned.p), cudaSuccess);
  EXPECT_EQ(a.type, cudaMemoryTypeDevice);
  EXPECT_EQ(a.device, 0);
  EXPECT_EQ(cudaFreeHost(pinned), cudaSuccess);
  cudaStreamDestroy(s);
}

// What a capture cannot hold fails and invalidates it: a synchronisation, a copy from host
// memory, an allocation on the capturing thread (another thread may allocate in ThreadLocal mode).
TEST_F(CudaSim, StreamCaptureRefusesWhatAGraphCannotHold) {
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  Dev<float> a(kThreads);
  std::vector<float> host(kThreads, 1.0f);
  cudaGraph_t graph = nullptr;
  const auto refused = [&](const std::function<cudaError_t()>& call) {
    EXPECT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    EXPECT_EQ(call(), cudaErrorStreamCaptureUnsupported);
    cudaStreamCaptureStatus status{};
    EXPECT_EQ(cudaStreamIsCapturing(s, &status), cudaSuccess);
    EXPECT_EQ(status, cudaStreamCaptureStatusInvalidated);
    EXPECT_EQ(cudaStreamEndCapture(s, &graph), cudaErrorStreamCaptureInvalidated);
    EXPECT_EQ(graph, nullptr);
    cudaGetLastError();
  };
  refused([&] { return cudaStreamSynchronize(s); });
  refused([&] { return cudaMemcpyAsync(a.p, host.data(), kThreads * sizeof(float), cudaMemcpyHostToDevice, s); });
  refused([&] {
    void* p = nullptr;
    return cudaMalloc(&p, 64);
  });
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  cudaError_t other = cudaErrorInvalidValue;
  std::thread([&] {
    void* p = nullptr;
    other = cudaMalloc(&p, 64);
    cudaFree(p);
  }).join();
  EXPECT_EQ(other, cudaSuccess);
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  cudaStreamDestroy(s);
}

// CUDA lets an event outlive the stream it was recorded on (a session's context destroys its
// stream before its events): destroying it then must not touch the stream (ASan's build sees it).
TEST_F(CudaSim, AnEventOutlivesTheStreamItWasRecordedOn) {
  cudaStream_t s = nullptr;
  cudaEvent_t e = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(e, s), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
  EXPECT_EQ(cudaEventSynchronize(e), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(e), cudaSuccess);
}

TEST(CudaSimDevice, TheSimulatedDevicesAreTheOnesAsked) {
  const char* want = std::getenv("KVINFER_SIM_DEVICE");
  int n = 0;
  if (want == nullptr) {
    EXPECT_EQ(cudaGetDeviceCount(&n), cudaErrorNoDevice);
    EXPECT_EQ(n, 0);
    return;
  }
  std::vector<std::string> ids;  // $KVINFER_SIM_DEVICE: sm_90, or a list such as sm_90,sm_86
  for (std::string rest = want;;) {
    const size_t comma = rest.find(',');
    ids.push_back(rest.substr(0, comma));
    if (comma == std::string::npos) break;
    rest = rest.substr(comma + 1);
  }
  ASSERT_EQ(cudaGetDeviceCount(&n), cudaSuccess);
  ASSERT_EQ(n, static_cast<int>(ids.size()));
  for (int d = 0; d < n; ++d) {
    cudaDeviceProp prop{};
    ASSERT_EQ(cudaGetDeviceProperties(&prop, d), cudaSuccess);
    const std::string id = "sm_" + std::to_string(prop.major) + std::to_string(prop.minor);
    EXPECT_EQ(id, ids[static_cast<size_t>(d)]);
    EXPECT_EQ(prop.sharedMemPerBlockOptin, id == "sm_90" ? 227u * 1024 : 99u * 1024);
    EXPECT_EQ(prop.multiProcessorCount, id == "sm_90" ? 132 : 82);
  }
  cudaDeviceProp beyond{};
  EXPECT_EQ(cudaGetDeviceProperties(&beyond, n), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaSetDevice(n), cudaErrorInvalidDevice);
  cudaGetLastError();
}

}  // namespace
