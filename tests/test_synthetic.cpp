// Synthetic models (kvinfer/synthetic.h): named shapes and random weights built in memory, what
// kvinfer-bench runs without a checkpoint.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "cache_invariance.h"
#include "cpu/cpu_ops.h"
#include "kvinfer/kvinfer.h"
#include "models/weights.h"
#include "test_files.h"

namespace kvinfer {
namespace {

using test::error_of;

// A small model of each family, fast to build.
ModelConfig tiny(Architecture arch) {
  ModelConfig c = synthetic_config(arch == Architecture::GPT2 ? "gpt2" : "smollm2-135m");
  c.vocab_size = 300;
  c.hidden_size = 96;
  c.intermediate_size = 160;
  c.num_layers = 2;
  c.num_heads = 6;
  c.num_kv_heads = arch == Architecture::GPT2 ? 6 : 2;
  c.head_dim = 16;
  c.max_position_embeddings = 64;
  return c;
}

std::vector<float> widen(const Matrix& m) {
  std::vector<float> v(static_cast<size_t>(m.rows * m.cols));
  cpu::to_f32(m.dtype, m.data, v.data(), m.rows * m.cols);
  return v;
}

TEST(SyntheticShapes, EveryShapeIsAValidConfigWithAUniqueName) {
  std::set<std::string> names;
  for (const SyntheticShape& s : synthetic_shapes()) {
    SCOPED_TRACE(s.name);
    EXPECT_TRUE(names.insert(s.name).second);
    EXPECT_FALSE(s.description.empty());
    const ModelConfig& c = s.config;
    EXPECT_GT(c.vocab_size, 0);
    EXPECT_EQ(c.num_heads % c.num_kv_heads, 0);
    EXPECT_EQ(c.is_gpt2(), s.name.starts_with("gpt2"));
    if (c.is_gpt2()) {
      EXPECT_EQ(c.num_heads * c.head_dim, c.hidden_size);
    }
  }
  for (const char* name : {"gpt2", "gpt2-medium", "llama-1b"}) EXPECT_TRUE(names.contains(name)) << name;
  // Llama-3.2-1B: 32 query heads share 8 KV heads.
  const ModelConfig l = synthetic_config("llama-1b");
  EXPECT_EQ(l.group_size(), 4);
}

TEST(SyntheticShapes, UnknownNameListsTheKnownOnes) {
  const std::string e = error_of([] { synthetic_config("gpt3"); });
  EXPECT_NE(e.find("unknown model shape 'gpt3'"), std::string::npos) << e;
  EXPECT_NE(e.find("gpt2-medium"), std::string::npos) << e;
}

// The parameter count HF reports for gpt2 (124,439,808): a random gpt2 has every tensor.
TEST(RandomModel, Gpt2HasTheRealParameterCount) {
  auto m = random_model(synthetic_config("gpt2"), {.weight_dtype = DType::F16, .device = Device::CPU});
  const ModelWeights& w = m->weights();
  // Matrices are f16, vectors f32: count elements, not bytes. The tied LM head counts once.
  uint64_t params = 0;
  std::set<const void*> seen;
  for_each_tensor(w, [&](const auto& t) {
    using T = std::remove_cvref_t<decltype(t)>;
    if (!t.data || !seen.insert(t.data).second) return;
    if constexpr (std::is_same_v<T, Matrix>)
      params += static_cast<uint64_t>(t.rows * t.cols);
    else
      params += static_cast<uint64_t>(t.n);
  });
  EXPECT_EQ(params, 124439808u);
  EXPECT_EQ(m->weight_dtype(), DType::F16);
}

TEST(RandomModel, SameSeedSameBytesWhateverTheThreadCount) {
  const ModelConfig c = tiny(Architecture::Llama);
#if defined(_OPENMP)
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
#endif
  auto a = random_model(c, {.seed = 7, .device = Device::CPU});
#if defined(_OPENMP)
  omp_set_num_threads(std::max(2, threads));
#endif
  auto b = random_model(c, {.seed = 7, .device = Device::CPU});
  auto d = random_model(c, {.seed = 8, .device = Device::CPU});
#if defined(_OPENMP)
  omp_set_num_threads(threads);
#endif
  EXPECT_EQ(widen(a->weights().layers[1].down.weight), widen(b->weights().layers[1].down.weight));
  EXPECT_EQ(widen(a->weights().embed), widen(b->weights().embed));
  EXPECT_NE(widen(a->weights().embed), widen(d->weights().embed));
}

// Weights look like HF's initialisation: mean 0, standard deviation 0.02, no two tensors alike.
TEST(RandomModel, WeightsHaveTheIntendedStatistics) {
  ModelConfig c = tiny(Architecture::Llama);
  c.hidden_size = 256;
  c.intermediate_size = 1024;  // up: 262,144 values, sd known to about 0.15 %
  auto m = random_model(c, {.seed = 1, .device = Device::CPU});
  const std::vector<float> v = widen(m->weights().layers[1].up.weight);
  double sum = 0, sq = 0;
  for (float x : v) {
    sum += x;
    sq += static_cast<double>(x) * x;
  }
  const double n = static_cast<double>(v.size()), mean = sum / n, sd = std::sqrt(sq / n - mean * mean);
  EXPECT_NEAR(mean, 0.0, 1e-4);
  EXPECT_NEAR(sd, 0.02, 2e-4);
  EXPECT_NE(widen(m->weights().layers[1].up.weight), widen(m->weights().layers[1].gate.weight));
}

TEST(RandomModel, InvalidDtypeAndShapeAreErrors) {
  EXPECT_NE(error_of([] { random_model(tiny(Architecture::Llama), {.weight_dtype = DType::Q4_0}); })
                .find("weight dtype q4_0 is not supported"),
            std::string::npos);
  ModelConfig bad = tiny(Architecture::Llama);
  bad.num_kv_heads = 4;  // does not divide 6 heads
  EXPECT_NE(error_of([&] { random_model(bad, {.device = Device::CPU}); }).find("invalid shape"), std::string::npos);
}

// A random model runs like a loaded one, and keeps the central invariant.
TEST(RandomModel, CacheOnEqualsCacheOffForBothFamilies) {
  for (Architecture arch : {Architecture::Llama, Architecture::GPT2}) {
    SCOPED_TRACE(std::string(architecture_name(arch)));
    auto m = random_model(tiny(arch), {.weight_dtype = DType::BF16, .seed = 3, .device = Device::CPU});
    const std::vector<int32_t> prompt = {5, 17, 250, 3, 99};
    test::expect_cache_on_equals_off(m, prompt, 12);
  }
}

}  // namespace
}  // namespace kvinfer
