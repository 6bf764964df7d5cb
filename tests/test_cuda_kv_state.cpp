// KV cache state on CUDA (a real device, or the simulation's with $KVINFER_SIM_DEVICE): save and
// restore, fork and truncate of device caches continue bit for bit; a state saved on one device
// restores on the other (the fingerprint is of the stored weights, the rows' layout the same).
// Each with the model's default cache dtype and with the 8-bit ones (int8, fp8), whose row scales
// must travel with their codes (save/load, the fork's device prefix copy). Skips without a device.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "kv_state_util.h"
#include "kvinfer/kvinfer.h"
#include "models/model_internal.h"
#include "reference.h"
#include "test_files.h"

namespace kvinfer {
namespace {

namespace fs = std::filesystem;
using test::prefill;
using test::run_steps;
using test::same_bits;
using test::Trace;

#define SKIP_WITHOUT_DEVICE()                                             \
  do {                                                                    \
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";       \
  } while (0)

constexpr int kSteps = 6, kSplit = 2;
constexpr int64_t kCapacity = 24;

std::string bytes_of(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// test::fresh_run in a cache of `dtype` (the model's default when unset).
Trace fresh_run(const std::shared_ptr<const Model>& model, std::span<const int32_t> prompt, int steps,
                const std::map<int, int32_t>& forced, int64_t capacity, std::optional<DType> dtype) {
  Session s(model);
  KvCache kv(*model, capacity, dtype);
  Trace t;
  auto last = prefill(s, kv, prompt, t);
  run_steps(s, kv, last, 0, steps, forced, t);
  return t;
}

// The default dtype (the model's: f32), int8 and fp8.
class CudaKvState : public ::testing::TestWithParam<std::optional<DType>> {};

std::string dtype_label(const ::testing::TestParamInfo<std::optional<DType>>& info) {
  return info.param ? std::string(dtype_name(*info.param)) : std::string("default");
}

TEST_P(CudaKvState, SaveRestoreForkTruncateOnTheDevice) {
  SKIP_WITHOUT_DEVICE();
  const std::optional<DType> dtype = GetParam();
  const auto model = Model::load(test::model_dir("llama_gqa4"), {.device = Device::CUDA});
  ASSERT_EQ(model->device(), Device::CUDA);
  const std::vector<int32_t> prompt = test::Reference("llama_gqa4").prompt_ids;
  const Trace full = fresh_run(model, prompt, kSteps, {}, kCapacity, dtype);
  const int32_t other = (full.fed[kSplit] + 1) % static_cast<int32_t>(model->config().vocab_size);
  const Trace forked = fresh_run(model, prompt, kSteps, {{kSplit, other}}, kCapacity, dtype);

  test::TempDir dir;
  const fs::path file = dir.path() / "gpu.kvs";
  Session s(model);
  KvCache kv(*model, kCapacity, dtype);
  ASSERT_EQ(kv.device(), Device::CUDA);
  if (dtype) {
    ASSERT_EQ(kv.dtype(), *dtype);
  }
  Trace a;
  auto last = prefill(s, kv, prompt, a);
  run_steps(s, kv, last, 0, kSplit, {}, a);
  save_kv_state(kv, *model, file);

  // Restored (the same and a larger capacity): the uninterrupted run.
  for (int64_t capacity : {kCapacity, kCapacity + 8}) {
    KvCache r = load_kv_state(*model, file, capacity);
    EXPECT_EQ(r.device(), Device::CUDA);
    EXPECT_EQ(r.dtype(), kv.dtype());
    EXPECT_TRUE(std::ranges::equal(r.tokens(), kv.tokens()));
    Session s2(model);
    Trace b = a;
    auto l = last;
    run_steps(s2, r, l, kSplit, kSteps, {}, b);
    EXPECT_EQ(b.fed, full.fed);
    EXPECT_TRUE(same_bits(b.logits, full.logits)) << capacity;
  }
  // Forked on the device, the fork from another token.
  {
    KvCache fork = kv.copy(kCapacity + 4);
    EXPECT_EQ(fork.device(), Device::CUDA);
    Session s2(model);
    Trace b = a;
    auto l = last;
    run_steps(s2, fork, l, kSplit, kSteps, {{kSplit, other}}, b);
    EXPECT_EQ(b.fed, forked.fed);
    EXPECT_TRUE(same_bits(b.logits, forked.logits));
  }
  // The original after its fork, then cut back to the split and continued the forked way.
  run_steps(s, kv, last, kSplit, kSteps, {}, a);
  EXPECT_TRUE(same_bits(a.logits, full.logits));
  kv.truncate(static_cast<int64_t>(prompt.size()) + kSplit);
  Trace c;
  c.fed.assign(a.fed.begin(), a.fed.begin() + kSplit);
  c.logits.assign(a.logits.begin(), a.logits.begin() + (kSplit + 1) * model->config().vocab_size);
  run_steps(s, kv, last, kSplit, kSteps, {{kSplit, other}}, c);
  EXPECT_EQ(c.fed, forked.fed);
  EXPECT_TRUE(same_bits(c.logits, forked.logits));
}

TEST_P(CudaKvState, StatesMoveBetweenDevices) {
  SKIP_WITHOUT_DEVICE();
  const std::optional<DType> dtype = GetParam();
  const fs::path dir_model = test::model_dir("llama_gqa4");
  const auto gpu = Model::load(dir_model, {.device = Device::CUDA});
  const auto cpu = Model::load(dir_model, {.device = Device::CPU});
  EXPECT_EQ(ModelAccess::fingerprint(*gpu), ModelAccess::fingerprint(*cpu));
  const std::vector<int32_t> prompt = test::Reference("llama_gqa4").prompt_ids;

  test::TempDir dir;
  for (const auto& [from, to] : {std::pair{gpu, cpu}, std::pair{cpu, gpu}}) {
    Session s(from);
    KvCache kv(*from, kCapacity, dtype);
    s.prefill(kv, prompt);
    s.decode(kv, 5);
    const fs::path saved = dir.path() / "a.kvs", again = dir.path() / "b.kvs";
    save_kv_state(kv, *from, saved);
    KvCache moved = load_kv_state(*to, saved);
    EXPECT_EQ(moved.device(), to->device());
    EXPECT_EQ(moved.dtype(), kv.dtype());
    EXPECT_TRUE(std::ranges::equal(moved.tokens(), kv.tokens()));
    save_kv_state(moved, *to, again);  // the same rows, bit for bit
    EXPECT_EQ(bytes_of(saved), bytes_of(again));
    // And it runs on: the next step's logits within the devices' usual distance.
    Session s2(to);
    const auto l = s2.decode(moved, 7);
    const auto ref = s.decode(kv, 7);
    EXPECT_LT(test::max_abs_diff(l, ref), 1e-3f);
  }
}

// A sliding-window model on the device (mistral_window: window 6, rings of 11 rows) after more
// positions than a ring holds: restored on the device its rings rewind as far as before and it
// continues bit for bit; restored on the CPU and saved again, the file is the same bytes.
TEST_P(CudaKvState, RingsSaveRestoreAndMoveBetweenDevices) {
  SKIP_WITHOUT_DEVICE();
  const std::optional<DType> dtype = GetParam();
  const fs::path dir_model = test::model_dir("mistral_window");
  const auto gpu = Model::load(dir_model, {.device = Device::CUDA});
  const auto cpu = Model::load(dir_model, {.device = Device::CPU});
  const std::vector<int32_t> prompt = test::Reference("mistral_window").prompt_ids;
  constexpr int steps = 20, split = 14;
  constexpr int64_t capacity = 48;
  const Trace full = fresh_run(gpu, prompt, steps, {}, capacity, dtype);
  Session s(gpu);
  KvCache kv(*gpu, capacity, dtype);
  Trace a;
  auto last = prefill(s, kv, prompt, a);
  run_steps(s, kv, last, 0, split, {}, a);
  ASSERT_GT(kv.earliest_rewind(), 0) << "the rings did not wrap";

  test::TempDir dir;
  const fs::path saved = dir.path() / "ring.kvs", again = dir.path() / "again.kvs";
  save_kv_state(kv, *gpu, saved);
  KvCache r = load_kv_state(*gpu, saved);
  EXPECT_EQ(r.device(), Device::CUDA);
  EXPECT_EQ(r.earliest_rewind(), kv.earliest_rewind());
  Session s2(gpu);
  Trace b = a;
  auto l = last;
  run_steps(s2, r, l, split, steps, {}, b);
  EXPECT_EQ(b.fed, full.fed);
  EXPECT_TRUE(same_bits(b.logits, full.logits));

  KvCache moved = load_kv_state(*cpu, saved);
  EXPECT_EQ(moved.earliest_rewind(), kv.earliest_rewind());
  save_kv_state(moved, *cpu, again);
  EXPECT_EQ(bytes_of(saved), bytes_of(again));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaKvState,
                         ::testing::Values(std::nullopt, std::optional<DType>(DType::I8),
                                           std::optional<DType>(DType::FP8)),
                         dtype_label);

}  // namespace
}  // namespace kvinfer
