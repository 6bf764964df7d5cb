// The whole model on the CUDA device against the CPU backend and HF's references, on every
// fixture (the Llama family and GPT-2). Skips with a message where no CUDA device exists (the
// tests are built regardless).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string_view>

#include "kvinfer/kvinfer.h"
#include "reference.h"

namespace kvinfer {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using test::max_abs_diff;

#define SKIP_WITHOUT_DEVICE()                                                       \
  do {                                                                              \
    if (cuda_device_count() == 0) {                                                 \
      GTEST_SKIP() << "no CUDA device: the GPU end-to-end tests need one";          \
    }                                                                               \
  } while (0)

// A fixture listed in test::kFixtures but absent from tests/data/models fails here, naming the
// directory, on every machine (with or without a device), rather than deep inside Model::load.
#define REQUIRE_FIXTURE(name)                                                                     \
  do {                                                                                            \
    const auto dir_ = test::model_dir(name);                                                      \
    ASSERT_TRUE(std::filesystem::is_directory(dir_))                                              \
        << "fixture directory " << dir_ << " is missing (tools/make_fixtures.sh makes it; "       \
        << "tests/data/models/PROVENANCE.md)";                                                    \
    ASSERT_TRUE(std::filesystem::is_regular_file(dir_ / "reference.safetensors"))                 \
        << "fixture " << dir_ << " has no reference.safetensors";                                 \
  } while (0)

// f32 weights: cuBLAS runs true f32 (CUBLAS_COMPUTE_32F, no TF32) and the attention kernels
// accumulate in f32, so the GPU is held to the CPU's bound against HF: 1e-4. f16/bf16 weights:
// the GPU narrows GEMM inputs to the weights' dtype (HF's native behaviour), so it is held to
// the bounds of tests/test_hf_parity.cpp's native comparison (2× HF's own native distance).
float tolerance(DType weights) {
  switch (weights) {
    case DType::F32: return 1e-4f;
    case DType::F16: return 0.015f;
    case DType::BF16: return 0.12f;
    default: break;
  }
  return 0;
}

class CudaEndToEnd : public ::testing::TestWithParam<const char*> {};

// GPU logits at every prompt position and every greedy decode step against HF's f32 references;
// greedy tokens identical to HF's.
TEST_P(CudaEndToEnd, LogitsMatchCpuAndHf) {
  REQUIRE_FIXTURE(GetParam());
  SKIP_WITHOUT_DEVICE();
  auto gpu = Model::load(test::model_dir(GetParam()), {.device = Device::CUDA});
  ASSERT_EQ(gpu->device(), Device::CUDA);
  test::Reference ref(GetParam());
  const size_t vocab = static_cast<size_t>(gpu->config().vocab_size), T = ref.prompt_ids.size();
  const float tol = tolerance(gpu->weight_dtype());
  KvCache kv(*gpu, static_cast<int64_t>(T + 32), DType::F32);
  Session s(gpu);
  auto all = s.prefill(kv, ref.prompt_ids, Logits::All);
  for (size_t t = 0; t < T; ++t)
    EXPECT_LE(max_abs_diff(all.subspan(t * vocab, vocab), {ref.prompt_logits.data() + t * vocab, vocab}), tol)
        << "prompt position " << t;
  for (size_t i = 1; i < ref.greedy_ids.size(); ++i) {
    auto logits = s.decode(kv, ref.greedy_ids[i - 1]);
    EXPECT_LE(max_abs_diff(logits, {ref.greedy_logits.data() + i * vocab, vocab}), tol) << "step " << i;
    if (gpu->weight_dtype() == DType::F32) {
      ASSERT_EQ(argmax(logits), ref.greedy_ids[i]) << "step " << i;
    }
  }
}

// On the GPU, prefill (tiled kernel) and decode (split-K kernel) differ in summation order, so
// cache-on and cache-off are compared by their greedy tokens, for every KV dtype.
TEST_P(CudaEndToEnd, CacheOnAndCacheOffGiveTheSameTokens) {
  REQUIRE_FIXTURE(GetParam());
  SKIP_WITHOUT_DEVICE();
  auto gpu = Model::load(test::model_dir(GetParam()), {.device = Device::CUDA});
  test::Reference ref(GetParam());
  for (DType dtype : {DType::F32, DType::F16, DType::BF16}) {
    std::vector<int32_t> tokens[2];
    for (int cached = 0; cached < 2; ++cached) {
      KvCache kv(*gpu, 64, dtype);
      Session s(gpu);
      GenerateOptions opt;
      opt.max_new_tokens = 32;
      opt.ignore_eos = true;
      opt.use_kv_cache = cached == 1;
      tokens[cached] = generate_greedy(s, kv, ref.prompt_ids, opt).tokens;
    }
    EXPECT_EQ(tokens[0], tokens[1]) << dtype_name(dtype);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaEndToEnd, ::testing::ValuesIn(test::kFixtures),
                         [](const auto& p) { return std::string(p.param); });

// GPT-2 (LayerNorm with bias, gelu_new in place, learned positions, fused c_attn) is the only
// model that runs the GPU's layer_norm and gelu_tanh end to end: its fixture must stay listed.
TEST(CudaEndToEndFixtures, IncludeGpt2Tiny) {
  const std::string_view name = "gpt2_tiny";
  EXPECT_TRUE(std::any_of(std::begin(test::kFixtures), std::end(test::kFixtures),
                          [&](const char* f) { return name == f; }))
      << name << " is not in test::kFixtures (tests/reference.h)";
}

TEST(CudaKvCache, LargerThanFreeMemoryFailsWithBytesNeededAndFree) {
  SKIP_WITHOUT_DEVICE();
  ModelConfig cfg;
  cfg.num_layers = 80;
  cfg.num_heads = 64;
  cfg.num_kv_heads = 64;
  cfg.head_dim = 128;
  const int64_t tokens = 1 << 22;  // 80 × 64 × 128 × 2 × 2 bytes × 4M tokens = 10 TiB
  const uint64_t need = plan_kv_bytes(cfg, tokens, DType::F16);
  try {
    KvCache kv(cfg, tokens, DType::F16, Device::CUDA);
    FAIL() << "a " << need << "-byte cache should not fit";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr(std::to_string(need)), HasSubstr("free")));
  }
}

TEST(CudaKvCache, BytesAreExactlyThePlan) {
  SKIP_WITHOUT_DEVICE();
  auto gpu = Model::load(test::model_dir("llama_gqa4"), {.device = Device::CUDA});
  KvCache kv(*gpu, 1000, DType::BF16);
  EXPECT_EQ(kv.device(), Device::CUDA);
  EXPECT_EQ(kv.bytes(), plan_kv_bytes(gpu->config(), 1000, DType::BF16));
}

}  // namespace
}  // namespace kvinfer
