// Synthetic models (kvinfer/synthetic.h): named shapes and random weights built in memory, what
// kvinfer-bench runs without a checkpoint.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <utility>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "cache_invariance.h"
#include "cpu/cpu_ops.h"
#include "cpu/packed_rows.h"
#include "kvinfer/kvinfer.h"
#include "models/model_internal.h"
#include "models/synthetic.h"
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

// m's values, row-major, whichever order a CPU model stores its rows in (cpu/packed_rows.h).
std::vector<float> widen(const Matrix& m) {
  std::vector<std::byte> rows(m.bytes());
  cpu::unpack_rows(m, 0, m.rows, rows.data());
  std::vector<float> v(static_cast<size_t>(m.rows * m.cols));
  cpu::to_f32(m.dtype, rows.data(), v.data(), m.rows * m.cols);
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
  const ModelWeights& w = model_weights(*m);
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

// Matrices made at load start at a cache line (HostStorage), whatever malloc would give blocks of
// this size (16 bytes past a page): the AVX-512 prefill tiles read f32 rows 32 bytes at a time.
// They follow each other in one buffer, as place_weights copies a checkpoint's: a buffer each left
// every matrix under 2 MiB, and every matrix's last part, off the huge pages.
TEST(RandomModel, MatricesLieInOneBufferEachAtACacheLine) {
  ModelConfig c = tiny(Architecture::Llama);
  c.hidden_size = 512;  // 1 MiB and 2 MiB f32 matrices: malloc maps blocks this large on their own
  c.intermediate_size = 1024;
  c.num_heads = 8;
  c.head_dim = 64;
  auto m = random_model(c, {.weight_dtype = DType::F32, .device = Device::CPU});
  int matrices = 0;
  std::map<const std::byte*, uint64_t> spans;  // start → bytes of each distinct matrix
  for_each_tensor(model_weights(*m), [&](const auto& t) {
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(t)>, Matrix>) {
      if (!t.data) return;
      EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % 64, 0u) << t.rows << " × " << t.cols;
      ++matrices;
      spans[t.data] = t.bytes();
    }
  });
  EXPECT_EQ(matrices, 2 + 2 * 7);  // the embedding, the LM head (tied: the same), 7 per layer
  ASSERT_EQ(spans.size(), 1u + 2 * 7);
  for (auto it = spans.begin(), next = std::next(it); next != spans.end(); ++it, ++next)
    EXPECT_EQ(next->first, it->first + (it->second + 63) / 64 * 64) << "a gap after a matrix of " << it->second
                                                                    << " bytes";
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
  EXPECT_EQ(widen(model_weights(*a).layers[1].down.weight), widen(model_weights(*b).layers[1].down.weight));
  EXPECT_EQ(widen(model_weights(*a).embed), widen(model_weights(*b).embed));
  EXPECT_NE(widen(model_weights(*a).embed), widen(model_weights(*d).embed));
}

// Weights look like HF's initialisation: mean 0, standard deviation 0.02, no two tensors alike.
TEST(RandomModel, WeightsHaveTheIntendedStatistics) {
  ModelConfig c = tiny(Architecture::Llama);
  c.hidden_size = 256;
  c.intermediate_size = 1024;  // up: 262,144 values, sd known to about 0.15 %
  auto m = random_model(c, {.seed = 1, .device = Device::CPU});
  const std::vector<float> v = widen(model_weights(*m).layers[1].up.weight);
  double sum = 0, sq = 0;
  for (float x : v) {
    sum += x;
    sq += static_cast<double>(x) * x;
  }
  const double n = static_cast<double>(v.size()), mean = sum / n, sd = std::sqrt(sq / n - mean * mean);
  EXPECT_NEAR(mean, 0.0, 1e-4);
  EXPECT_NEAR(sd, 0.02, 2e-4);
  EXPECT_NE(widen(model_weights(*m).layers[1].up.weight), widen(model_weights(*m).layers[1].gate.weight));
}

TEST(RandomModel, InvalidDtypeAndShapeAreErrors) {
  const std::string e =
      error_of([] { random_model(tiny(Architecture::Llama), {.weight_dtype = DType::Q5_0, .device = Device::CPU}); });
  EXPECT_NE(e.find("weight dtype q5_0 is not supported"), std::string::npos) << e;
  EXPECT_NE(e.find("q8_0, q4_0, q4_1, q4_k, q5_k or q6_k"), std::string::npos) << e;
  ModelConfig bad = tiny(Architecture::Llama);
  bad.num_kv_heads = 4;  // does not divide 6 heads
  EXPECT_NE(error_of([&] { random_model(bad, {.device = Device::CPU}); }).find("invalid shape"), std::string::npos);
}

// A small model in each quantised type: hidden 64, and an embedding of 2100 × 64 values, three
// 65,536-value chunks of the parallel build.
ModelConfig tiny_quantised(Architecture arch) {
  ModelConfig c = tiny(arch);
  c.vocab_size = 2100;
  c.hidden_size = 64;
  c.intermediate_size = 128;
  c.num_heads = 4;
  c.num_kv_heads = arch == Architecture::GPT2 ? 4 : 2;
  c.head_dim = 16;
  return c;
}

constexpr DType kQuantisedWeights[] = {DType::Q8_0, DType::Q4_0, DType::Q4_1};

std::vector<std::byte> raw(const Matrix& m) { return std::vector<std::byte>(m.data, m.data + m.bytes()); }

TEST(RandomModel, QuantisedSameBytesWhateverTheThreadCount) {
  for (Architecture arch : {Architecture::Llama, Architecture::GPT2})
    for (DType t : kQuantisedWeights) {
      SCOPED_TRACE(std::string(architecture_name(arch)) + " " + std::string(dtype_name(t)));
      const ModelConfig c = tiny_quantised(arch);
      uint64_t done = 0, total = 0;
      const RandomModelOptions o{
          .weight_dtype = t, .seed = 7, .device = Device::CPU, .on_progress = [&](uint64_t d, uint64_t n) {
            done = d;
            total = n;
          }};
#if defined(_OPENMP)
      const int threads = omp_get_max_threads();
      omp_set_num_threads(1);
#endif
      auto a = random_model(c, o);
#if defined(_OPENMP)
      omp_set_num_threads(2);
#endif
      auto b = random_model(c, o);
#if defined(_OPENMP)
      omp_set_num_threads(threads);
#endif
      EXPECT_EQ(a->weight_dtype(), t);
      const ModelWeights &wa = model_weights(*a), &wb = model_weights(*b);
      EXPECT_EQ(wa.embed.dtype, t);
      EXPECT_EQ(wa.embed.bytes(), dtype_row_bytes(t, c.hidden_size) * static_cast<uint64_t>(c.vocab_size));
      EXPECT_TRUE(raw(wa.embed) == raw(wb.embed));
      EXPECT_TRUE(raw(wa.layers[1].down.weight) == raw(wb.layers[1].down.weight));
      EXPECT_TRUE(raw(wa.layers[0].q.weight) == raw(wb.layers[0].q.weight));
      if (arch == Architecture::GPT2) {
        EXPECT_TRUE(raw(wa.pos_embed) == raw(wb.pos_embed));
      }
      // Progress counts the quantised bytes, and ends at its total.
      EXPECT_GT(total, 0u);
      EXPECT_EQ(done, total);
      EXPECT_LT(total, random_model(c, {.seed = 7, .device = Device::CPU})->weight_bytes() / 3);
    }
}

// The quantised weights are the f32 weights of the same seed, quantised: within a step of them.
TEST(RandomModel, QuantisedWeightsAreTheF32WeightsQuantised) {
  const ModelConfig c = tiny_quantised(Architecture::Llama);
  auto f = random_model(c, {.seed = 5, .device = Device::CPU});
  const std::vector<float> ref = widen(model_weights(*f).layers[0].up.weight);
  // U(-√3·0.02, √3·0.02): |x| < 0.035, so a Q8_0 step is under 0.035 / 127, a Q4_0 step under
  // 0.035 / 8 (a whole step where the code is clipped), a Q4_1 half step under 0.07 / 30.
  // (Plus what rounding the scales to f16 adds.)
  const std::pair<DType, double> cases[] = {{DType::Q8_0, 1.7e-4}, {DType::Q4_0, 4.5e-3}, {DType::Q4_1, 2.5e-3}};
  for (const auto& [t, bound] : cases) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    auto q = random_model(c, {.weight_dtype = t, .seed = 5, .device = Device::CPU});
    const std::vector<float> got = widen(model_weights(*q).layers[0].up.weight);
    ASSERT_EQ(got.size(), ref.size());
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - ref[i]));
    EXPECT_LT(worst, bound);
    EXPECT_GT(worst, 0.0);
  }
}

TEST(RandomModel, QuantisedModelsRunWithFiniteLogits) {
  for (Architecture arch : {Architecture::Llama, Architecture::GPT2})
    for (DType t : kQuantisedWeights) {
      SCOPED_TRACE(std::string(architecture_name(arch)) + " " + std::string(dtype_name(t)));
      const ModelConfig c = tiny_quantised(arch);
      auto m = random_model(c, {.weight_dtype = t, .seed = 3, .device = Device::CPU});
      KvCache kv(*m, 16);
      EXPECT_EQ(kv.dtype(), DType::F16);  // the default for quantised weights
      Session s(m);
      const std::vector<int32_t> prompt = {5, 17, 2099, 3, 99};
      std::vector<float> logits;
      for (int step = 0; step < 2; ++step) {
        const std::span<const float> l = step == 0 ? s.prefill(kv, prompt) : s.decode(kv, 42);
        ASSERT_EQ(l.size(), static_cast<size_t>(c.vocab_size));
        for (float x : l) ASSERT_TRUE(std::isfinite(x));
        EXPECT_NE(*std::min_element(l.begin(), l.end()), *std::max_element(l.begin(), l.end()));
      }
    }
  // And the central invariant holds on quantised weights.
  auto m = random_model(tiny_quantised(Architecture::Llama), {.weight_dtype = DType::Q4_1, .seed = 3,
                                                              .device = Device::CPU});
  const std::vector<int32_t> prompt = {5, 17, 250, 3, 99};
  test::expect_cache_on_equals_off(m, prompt, 6);
  // With 8-bit activations too: prefill's tiles (cpu/int8_prepared.h) and decode's one-row
  // kernels give every row the same bits.
  for (DType t : {DType::Q8_0, DType::Q4_0, DType::Q4_1}) {
    SCOPED_TRACE(std::string(dtype_name(t)) + ", 8-bit activations");
    auto m8 = random_model(tiny_quantised(Architecture::Llama),
                           {.weight_dtype = t, .seed = 4, .device = Device::CPU, .activations = ActivationMode::Int8});
    ASSERT_EQ(m8->activations(), ActivationMode::Int8);
    test::expect_cache_on_equals_off(m8, prompt, 6);
  }
}

// 15-bit activations (cpu/linear_int15.h) on a whole model: cache on equals cache off bit for bit,
// and the logits move from the exact ones, far less than with 8-bit activations.
TEST(RandomModel, FifteenBitActivationsKeepTheInvariantAndStayCloseToExact) {
  const std::vector<int32_t> prompt = {5, 17, 250, 3, 99};
  for (DType t : {DType::Q8_0, DType::Q4_0, DType::Q4_1}) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    std::vector<float> logits[3];  // exact, 15-bit, 8-bit
    const ActivationMode modes[3] = {ActivationMode::Exact, ActivationMode::Int15, ActivationMode::Int8};
    for (int i = 0; i < 3; ++i) {
      auto m = random_model(tiny_quantised(Architecture::Llama),
                            {.weight_dtype = t, .seed = 4, .device = Device::CPU, .activations = modes[i]});
      ASSERT_EQ(m->activations(), modes[i]);
      KvCache kv(*m, 16);
      Session s(m);
      const std::span<const float> l = s.prefill(kv, prompt);
      logits[i].assign(l.begin(), l.end());
      if (modes[i] == ActivationMode::Int15) test::expect_cache_on_equals_off(m, prompt, 6);
    }
    float scale = 0, diff15 = 0, diff8 = 0;
    for (size_t i = 0; i < logits[0].size(); ++i) {
      scale = std::max(scale, std::fabs(logits[0][i]));
      diff15 = std::max(diff15, std::fabs(logits[1][i] - logits[0][i]));
      diff8 = std::max(diff8, std::fabs(logits[2][i] - logits[0][i]));
    }
    EXPECT_GT(diff15, 0.0f);  // the mode is in effect
    EXPECT_LT(diff15, 1e-3f * scale);
    EXPECT_LT(diff15, diff8 / 20) << "8-bit: " << diff8;
  }
}

// The K-quants (256-value super-blocks): a Llama whose every matrix has rows of whole
// super-blocks (hidden 256, 4 heads of 64, intermediate 512), 2 layers.
ModelConfig tiny_k() {
  ModelConfig c = tiny(Architecture::Llama);
  c.vocab_size = 300;
  c.hidden_size = 256;
  c.intermediate_size = 512;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 64;
  return c;
}

TEST(RandomModel, KQuantModelsAreTheF32WeightsQuantisedAndRun) {
  const ModelConfig c = tiny_k();
  auto f = random_model(c, {.seed = 5, .device = Device::CPU});
  const std::vector<float> ref = widen(model_weights(*f).layers[0].up.weight);
  // U(-√3·0.02, √3·0.02): a sub-block spans under 0.07, so a Q4_K step is about 0.07 / 15, a
  // Q5_K step 0.07 / 31 and a Q6_K step 0.035 / 32; values within a step of the f32 ones
  // (clipping included).
  const std::pair<DType, double> cases[] = {
      {DType::Q4_K, 0.07 / 15}, {DType::Q5_K, 0.07 / 31}, {DType::Q6_K, 0.035 / 32}};
  for (const auto& [t, bound] : cases) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    auto q = random_model(c, {.weight_dtype = t, .seed = 5, .device = Device::CPU});
    EXPECT_EQ(q->weight_dtype(), t);
    EXPECT_EQ(model_weights(*q).embed.dtype, t);
    EXPECT_EQ(model_weights(*q).embed.bytes(), dtype_row_bytes(t, 256) * 300);  // 144, 176 or 210 bytes a row
    const std::vector<float> got = widen(model_weights(*q).layers[0].up.weight);
    ASSERT_EQ(got.size(), ref.size());
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - ref[i]));
    EXPECT_LT(worst, bound);
    EXPECT_GT(worst, 0.0);
    // The same bytes whatever the thread count (blocks are independent).
#if defined(_OPENMP)
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
#endif
    auto again = random_model(c, {.weight_dtype = t, .seed = 5, .device = Device::CPU});
#if defined(_OPENMP)
    omp_set_num_threads(threads);
#endif
    EXPECT_TRUE(raw(model_weights(*q).layers[1].down.weight) == raw(model_weights(*again).layers[1].down.weight));
    // It runs: finite logits, and cache on equals cache off.
    KvCache kv(*q, 16);
    Session s(q);
    const std::vector<int32_t> prompt = {5, 17, 299, 3};
    const std::span<const float> l = s.prefill(kv, prompt);
    ASSERT_EQ(l.size(), 300u);
    for (float x : l) ASSERT_TRUE(std::isfinite(x));
    test::expect_cache_on_equals_off(q, prompt, 4);
    // With 8-bit activations: close to the exact products, not equal to them, and the invariant
    // holds too.
    auto q8 = random_model(c, {.weight_dtype = t, .seed = 5, .device = Device::CPU, .activations = ActivationMode::Int8});
    KvCache kv8(*q8, 16);
    Session s8(q8);
    const std::vector<float> exact(l.begin(), l.end());
    const std::span<const float> l8 = s8.prefill(kv8, prompt);
    float scale = 0, diff = 0;
    for (size_t i = 0; i < l8.size(); ++i) {
      scale = std::max(scale, std::fabs(exact[i]));
      diff = std::max(diff, std::fabs(l8[i] - exact[i]));
    }
    EXPECT_GT(diff, 0.0f);  // the option is in effect
    EXPECT_LT(diff, 0.05f * scale);
    test::expect_cache_on_equals_off(q8, prompt, 4);
  }
  // A hidden size that is not whole super-blocks is refused, naming the block size.
  ModelConfig bad = tiny_quantised(Architecture::Llama);  // hidden 64
  const std::string e = error_of([&] { random_model(bad, {.weight_dtype = DType::Q4_K, .device = Device::CPU}); });
  EXPECT_NE(e.find("256-value q4_k blocks"), std::string::npos) << e;
}

// A quantised matrix needs whole 32-value blocks per row: the error names the matrix.
TEST(RandomModel, QuantisedColumnsMustBeWholeBlocks) {
  ModelConfig c = tiny_quantised(Architecture::Llama);
  c.intermediate_size = 100;
  const std::string e = error_of([&] { random_model(c, {.weight_dtype = DType::Q8_0, .device = Device::CPU}); });
  EXPECT_NE(e.find("MLP down projection (intermediate_size): 100 columns"), std::string::npos) << e;
  EXPECT_NE(e.find("32-value q8_0 blocks"), std::string::npos) << e;
  c = tiny_quantised(Architecture::Llama);
  c.hidden_size = c.num_heads * c.head_dim + 8;  // 72
  EXPECT_NE(error_of([&] { random_model(c, {.weight_dtype = DType::Q4_0, .device = Device::CPU}); })
                .find("(hidden_size): 72 columns"),
            std::string::npos);
  // f16 takes any column count.
  EXPECT_NO_THROW(random_model(c, {.weight_dtype = DType::F16, .device = Device::CPU}));
  // Every named shape's matrices are whole blocks.
  for (const SyntheticShape& s : synthetic_shapes()) {
    SCOPED_TRACE(s.name);
    EXPECT_EQ(s.config.hidden_size % 32, 0);
    EXPECT_EQ(s.config.num_heads * s.config.head_dim % 32, 0);
    EXPECT_EQ(s.config.intermediate_size % 32, 0);
  }
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

// Mixture-of-experts shapes: every expert made (and counted), the model runs and keeps cache-on ==
// cache-off; a Qwen2-MoE-style one with a shared expert and a dense layer too.
TEST(RandomModel, MixtureOfExpertsShapesRunAndKeepTheInvariant) {
  ModelConfig c = tiny(Architecture::Llama);
  c.arch = Architecture::Mixtral;
  c.num_experts = 4;
  c.num_experts_per_tok = 2;
  c.moe_intermediate_size = 64;
  ModelConfig q = c;
  q.arch = Architecture::Qwen2Moe;
  q.shared_expert_intermediate_size = 32;
  q.norm_topk_prob = false;
  q.dense_layers = {1};
  for (const ModelConfig& cfg : {c, q}) {
    SCOPED_TRACE(std::string(architecture_name(cfg.arch)));
    auto m = random_model(cfg, {.weight_dtype = DType::F32, .seed = 5, .device = Device::CPU});
    const ModelWeights& w = model_weights(*m);
    const uint64_t expert = 3 * 96 * 64 * 4;
    EXPECT_EQ(w.layers[0].moe.experts(), 4);
    EXPECT_EQ(w.layers[1].moe.empty(), cfg.arch == Architecture::Qwen2Moe);
    // A step reads all but the 2 unchosen experts of each MoE layer, plus one row of the (tied) embedding.
    const uint64_t moe_layers = cfg.arch == Architecture::Qwen2Moe ? 1 : 2;
    EXPECT_EQ(m->weight_bytes() + 96 * 4, m->step_weight_bytes() + moe_layers * 2 * expert);
    test::expect_cache_on_equals_off(m, std::vector<int32_t>{5, 17, 250, 3, 99}, 12);
  }
  const ModelConfig moe = synthetic_config("moe-8x2"), dense = synthetic_config("moe-8x2-dense");
  EXPECT_EQ(moe.num_experts_per_tok * moe.moe_intermediate_size, dense.intermediate_size);
}

}  // namespace
}  // namespace kvinfer
