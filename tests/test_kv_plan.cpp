// KV-cache memory planning: plan_kv_bytes / kv_bytes_per_token / KvCache::bytes().
//
//   bytes = 2 (K and V) × layers × kv_heads × head_dim × tokens × bytes_per_element
//
// The numbers asserted here are the ones quoted in docs/kv-cache.md; keep the two in step.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>

#include "core/kv_cache_access.h"
#include "kvinfer/kvinfer.h"

namespace {

using kvinfer::DType;
using kvinfer::KvCache;
using kvinfer::KvCacheAccess;
using kvinfer::ModelConfig;
using kvinfer::kv_bytes_per_token;
using kvinfer::format_bytes;
using kvinfer::plan_kv_bytes;

constexpr uint64_t KiB = uint64_t{1} << 10;
constexpr uint64_t MiB = uint64_t{1} << 20;
constexpr uint64_t GiB = uint64_t{1} << 30;

std::filesystem::path config_path(const std::string& name) {
  return std::filesystem::path(KVINFER_TEST_DATA) / "configs" / name;
}

// A Llama-3-8B-shaped config (32 layers, 32 query heads, head_dim 128) with a chosen number of
// KV heads: 32 = MHA, 8 = GQA, 1 = MQA.
ModelConfig llama_shaped(int64_t num_kv_heads) {
  ModelConfig c;
  c.arch = kvinfer::Architecture::Llama;
  c.vocab_size = 128256;
  c.hidden_size = 4096;
  c.intermediate_size = 14336;
  c.num_layers = 32;
  c.num_heads = 32;
  c.num_kv_heads = num_kv_heads;
  c.head_dim = 128;
  c.max_position_embeddings = 8192;
  return c;
}

// Small enough to allocate in any test environment.
ModelConfig tiny(int64_t layers, int64_t heads, int64_t kv_heads, int64_t head_dim) {
  ModelConfig c;
  c.arch = kvinfer::Architecture::Llama;
  c.vocab_size = 16;
  c.hidden_size = heads * head_dim;
  c.intermediate_size = 2 * heads * head_dim;
  c.num_layers = layers;
  c.num_heads = heads;
  c.num_kv_heads = kv_heads;
  c.head_dim = head_dim;
  c.max_position_embeddings = 64;
  return c;
}

// ---------------------------------------------------------------------------------------------
// (a) The worked example of docs/kv-cache.md.

TEST(KvPlan, WorkedExampleIsExactlyOneGiB) {
  // 2 × 32 layers × 8 KV heads × 128 head_dim × 8192 tokens × 2 bytes (f16) = 2^30.
  const ModelConfig cfg = llama_shaped(8);
  EXPECT_EQ(plan_kv_bytes(cfg, 8192, DType::F16), uint64_t{1'073'741'824});
  EXPECT_EQ(plan_kv_bytes(cfg, 8192, DType::F16), GiB);
  EXPECT_EQ(kv_bytes_per_token(cfg, DType::F16), uint64_t{131'072});  // 128 KiB
}

TEST(KvPlan, WorkedExampleScalesWithDtype) {
  const ModelConfig cfg = llama_shaped(8);
  EXPECT_EQ(plan_kv_bytes(cfg, 8192, DType::F32), 2 * GiB);
  EXPECT_EQ(plan_kv_bytes(cfg, 8192, DType::BF16), GiB);
  EXPECT_EQ(plan_kv_bytes(cfg, 8192, DType::F16), plan_kv_bytes(cfg, 8192, DType::BF16));
}

TEST(KvPlan, IsLinearInTokens) {
  const ModelConfig cfg = llama_shaped(8);
  EXPECT_EQ(plan_kv_bytes(cfg, 0, DType::F16), uint64_t{0});
  EXPECT_EQ(plan_kv_bytes(cfg, 1, DType::F16), kv_bytes_per_token(cfg, DType::F16));
  for (int64_t n : {1, 7, 4096, 100'003}) {
    EXPECT_EQ(plan_kv_bytes(cfg, n, DType::F16),
              static_cast<uint64_t>(n) * kv_bytes_per_token(cfg, DType::F16))
        << "tokens=" << n;
  }
}

// Gemma 3 270M's shape (18 layers, every 6th global, the other 15 windowed to 512 positions; 1 KV
// head of 256; f16) at its 32,768-token context: the global layers hold every position, each
// windowed one a ring of 512 + 512 − 1 rows. docs/kv-cache.md quotes the figure.
TEST(KvPlan, Gemma3ShapedRingsAt32kTokens) {
  ModelConfig c = tiny(18, 4, 1, 256);
  c.max_position_embeddings = 32768;
  c.sliding_window = 512;
  c.sliding_layers.assign(18, true);
  for (size_t l = 5; l < 18; l += 6) c.sliding_layers[l] = false;
  const uint64_t f16_row = 2 * 1 * 256 * 2;        // one layer's K and V of a position
  const uint64_t i8_row = 2 * 1 * (256 * 1 + 4);   // int8: the codes and an f32 scale each
  EXPECT_EQ(plan_kv_bytes(c, 32768, DType::F16), 3 * 32768 * f16_row + 15 * 1023 * f16_row);
  EXPECT_EQ(plan_kv_bytes(c, 32768, DType::F16), uint64_t{116'376'576});  // 111.0 MiB, not 576 MiB
  EXPECT_EQ(plan_kv_bytes(c, 32768, DType::I8), 3 * 32768 * i8_row + 15 * 1023 * i8_row);
  // Below the ring every layer holds every position: linear in tokens up to 1,023.
  EXPECT_EQ(plan_kv_bytes(c, 700, DType::F16), 18 * 700 * f16_row);
  EXPECT_EQ(plan_kv_bytes(c, 1023, DType::F16), 18 * 1023 * f16_row);
  EXPECT_EQ(plan_kv_bytes(c, 1024, DType::F16), 3 * 1024 * f16_row + 15 * 1023 * f16_row);
  EXPECT_EQ(format_bytes(plan_kv_bytes(c, 32768, DType::F16)), "111.0 MiB");
}

TEST(KvPlan, MatchesTheFormulaTermByTerm) {
  // Every factor of the formula counts, and nothing else does (query heads, hidden size, vocab).
  const ModelConfig cfg = tiny(3, 6, 2, 16);
  EXPECT_EQ(kv_bytes_per_token(cfg, DType::F32), uint64_t{2 * 3 * 2 * 16 * 4});
  EXPECT_EQ(plan_kv_bytes(cfg, 5, DType::F16), uint64_t{2 * 3 * 2 * 16 * 5 * 2});

  ModelConfig more_query_heads = cfg;
  more_query_heads.num_heads = 12;
  more_query_heads.hidden_size = 12 * 16;
  more_query_heads.vocab_size = 1000;
  EXPECT_EQ(kv_bytes_per_token(more_query_heads, DType::F32), kv_bytes_per_token(cfg, DType::F32));
}

// ---------------------------------------------------------------------------------------------
// (b) Real configs, as published on the Hugging Face Hub (tests/data/configs/PROVENANCE.md).

struct RealConfig {
  const char* file;
  int64_t layers, heads, kv_heads, head_dim;
  uint64_t per_token_f16;  // bytes; f32 is twice this, bf16 equal to it
  int64_t max_context;     // max_position_embeddings
  int64_t window = 0;      // sliding_window on every layer (Mistral), 0: none
};

// per_token_f16 = 2 × layers × kv_heads × head_dim × 2
constexpr RealConfig kRealConfigs[] = {
    {"llama-2-7b.json", 32, 32, 32, 128, 524'288, 4096},                 // 512 KiB, MHA
    {"mistral-7b-v0.1.json", 32, 32, 8, 128, 131'072, 32768, 4096},      // 128 KiB, window 4096
    {"llama-3-8b.json", 32, 32, 8, 128, 131'072, 8192},                  // 128 KiB
    {"llama-3.1-8b-instruct.json", 32, 32, 8, 128, 131'072, 131072},     // 128 KiB
    {"qwen2.5-0.5b-instruct.json", 24, 14, 2, 64, 12'288, 32768},        // 12 KiB
    {"smollm2-135m-instruct.json", 30, 9, 3, 64, 23'040, 8192},          // 22.5 KiB
};

TEST(KvPlan, RealConfigsPerTokenBytes) {
  for (const RealConfig& r : kRealConfigs) {
    SCOPED_TRACE(r.file);
    const ModelConfig cfg = kvinfer::load_config(config_path(r.file));
    // The shape that determines the cache (head_dim is derived as hidden/heads where absent).
    EXPECT_EQ(cfg.num_layers, r.layers);
    EXPECT_EQ(cfg.num_heads, r.heads);
    EXPECT_EQ(cfg.num_kv_heads, r.kv_heads);
    EXPECT_EQ(cfg.head_dim, r.head_dim);
    EXPECT_EQ(cfg.max_position_embeddings, r.max_context);

    const uint64_t formula = 2 * static_cast<uint64_t>(r.layers) *
                             static_cast<uint64_t>(r.kv_heads) *
                             static_cast<uint64_t>(r.head_dim) * 2;
    ASSERT_EQ(formula, r.per_token_f16) << "the table itself is wrong";

    EXPECT_EQ(kv_bytes_per_token(cfg, DType::F16), r.per_token_f16);
    EXPECT_EQ(kv_bytes_per_token(cfg, DType::BF16), r.per_token_f16);
    EXPECT_EQ(kv_bytes_per_token(cfg, DType::F32), 2 * r.per_token_f16);

    // A windowed layer holds a ring of window + min(window, 512) − 1 rows once n is beyond it.
    const int64_t ring = r.window > 0 ? r.window + std::min<int64_t>(r.window, 512) - 1 : INT64_MAX;
    for (int64_t n : {4096, 32768, 131072}) {
      EXPECT_EQ(plan_kv_bytes(cfg, n, DType::F16), static_cast<uint64_t>(std::min(n, ring)) * r.per_token_f16)
          << "tokens=" << n;
    }
  }
}

TEST(KvPlan, Llama2MhaVsMistralGqaAt4096) {
  const ModelConfig llama2 = kvinfer::load_config(config_path("llama-2-7b.json"));
  const ModelConfig mistral = kvinfer::load_config(config_path("mistral-7b-v0.1.json"));
  EXPECT_EQ(plan_kv_bytes(llama2, 4096, DType::F16), 2 * GiB);
  EXPECT_EQ(plan_kv_bytes(mistral, 4096, DType::F16), 512 * MiB);
  // Same layers and head_dim; 32 vs 8 KV heads.
  EXPECT_EQ(plan_kv_bytes(llama2, 4096, DType::F16), 4 * plan_kv_bytes(mistral, 4096, DType::F16));
}

// docs/kv-cache.md's Mistral row: a ring of 4,607 rows per layer from 4,607 tokens on.
TEST(KvPlan, MistralRingsAt32kTokens) {
  const ModelConfig mistral = kvinfer::load_config(config_path("mistral-7b-v0.1.json"));
  EXPECT_EQ(plan_kv_bytes(mistral, 32768, DType::F16), uint64_t{603'848'704});  // 32 × 4,607 × 4 KiB
  EXPECT_EQ(format_bytes(plan_kv_bytes(mistral, 32768, DType::F16)), "575.9 MiB");
  EXPECT_EQ(plan_kv_bytes(mistral, 131072, DType::F16), plan_kv_bytes(mistral, 32768, DType::F16));
}

TEST(KvPlan, Llama3At128kTokens) {
  const ModelConfig llama3 = kvinfer::load_config(config_path("llama-3-8b.json"));
  EXPECT_EQ(plan_kv_bytes(llama3, 131072, DType::F16), 16 * GiB);
  EXPECT_EQ(plan_kv_bytes(llama3, 131072, DType::F32), 32 * GiB);

  // Llama 3.1 changes RoPE scaling and context length, not the cache shape.
  const ModelConfig llama31 = kvinfer::load_config(config_path("llama-3.1-8b-instruct.json"));
  EXPECT_EQ(plan_kv_bytes(llama31, 131072, DType::F16), 16 * GiB);
  EXPECT_EQ(plan_kv_bytes(llama31, llama31.max_position_embeddings, DType::BF16), 16 * GiB);
}

TEST(KvPlan, SmallModelsAt4096) {
  const ModelConfig qwen = kvinfer::load_config(config_path("qwen2.5-0.5b-instruct.json"));
  const ModelConfig smol = kvinfer::load_config(config_path("smollm2-135m-instruct.json"));
  EXPECT_EQ(plan_kv_bytes(qwen, 4096, DType::F16), 48 * MiB);
  EXPECT_EQ(plan_kv_bytes(smol, 4096, DType::F16), 90 * MiB);
  EXPECT_EQ(plan_kv_bytes(qwen, 32768, DType::F16), 384 * MiB);
  EXPECT_EQ(plan_kv_bytes(smol, 8192, DType::F16), 180 * MiB);
  EXPECT_EQ(kv_bytes_per_token(smol, DType::F16), 22 * KiB + 512);
}

// ---------------------------------------------------------------------------------------------
// (c) KvCache reports exactly the planned size.

TEST(KvPlan, KvCacheFromConfigMatchesPlan) {
  const ModelConfig smol = kvinfer::load_config(config_path("smollm2-135m-instruct.json"));
  for (DType dt : {DType::F32, DType::F16, DType::BF16, DType::I8, DType::FP8}) {
    SCOPED_TRACE(std::string(kvinfer::dtype_name(dt)));
    const KvCache cache(smol, 1000, dt);
    EXPECT_EQ(cache.bytes(), plan_kv_bytes(smol, 1000, dt));
    EXPECT_EQ(cache.size(), 0);
    EXPECT_EQ(cache.capacity(), 1000);
    EXPECT_EQ(cache.remaining(), 1000);
    EXPECT_EQ(cache.dtype(), dt);
    EXPECT_EQ(cache.num_layers(), 30);
    EXPECT_EQ(cache.num_kv_heads(), 3);  // KV heads, not the 9 query heads
    EXPECT_EQ(cache.head_dim(), 64);
  }

  const ModelConfig t = tiny(2, 4, 2, 8);
  const KvCache cache(t, 16, DType::F32);
  EXPECT_EQ(cache.bytes(), uint64_t{2 * 2 * 2 * 8 * 16 * 4});
  EXPECT_EQ(cache.bytes(), plan_kv_bytes(t, 16, DType::F32));
  EXPECT_EQ(cache.capacity(), 16);
  EXPECT_EQ(cache.size(), 0);
}

// Mixture-of-experts models: the cache is the attention's, whatever the experts (Mixtral, with
// Mistral's attention; Qwen2-MoE, with a dense layer among its MoE ones; Qwen3-MoE, whose
// head_dim 32 is not hidden / heads).
TEST(KvPlan, MixtureOfExpertsPlansTheAttentionsCache) {
  for (const char* name : {"mixtral_tiny", "qwen2_moe_tiny", "qwen3_moe_tiny"}) {
    SCOPED_TRACE(name);
    const ModelConfig c =
        kvinfer::load_config(std::filesystem::path(KVINFER_TEST_DATA) / "models" / name / "config.json");
    ASSERT_GT(c.num_experts, 0);
    const uint64_t per_token = 2 * static_cast<uint64_t>(c.num_layers * c.num_kv_heads * c.head_dim) * 4;
    EXPECT_EQ(kv_bytes_per_token(c, DType::F32), per_token);
    EXPECT_EQ(plan_kv_bytes(c, 100, DType::F32), 100 * per_token);
    const KvCache cache(c, 100, DType::F16);
    EXPECT_EQ(cache.bytes(), 100 * per_token / 2);
  }
}

TEST(KvPlan, KvCacheLayoutIsOneContiguousBlock) {
  // (layer, {K, V}, kv_head, position < capacity, head_dim), row-major.
  constexpr int64_t L = 3, H = 2, D = 8, C = 5;
  const ModelConfig t = tiny(L, 4, H, D);
  KvCache cache(t, C, DType::F16);
  const std::ptrdiff_t head = C * D * 2;  // bytes of one (capacity, head_dim) block

  const std::byte* base = kv_k(cache, 0, 0);
  for (int64_t l = 0; l < L; ++l) {
    for (int64_t h = 0; h < H; ++h) {
      SCOPED_TRACE("layer " + std::to_string(l) + " kv_head " + std::to_string(h));
      EXPECT_EQ(kv_k(cache, l, h) - base, ((l * 2 + 0) * H + h) * head);
      EXPECT_EQ(kv_v(cache, l, h) - base, ((l * 2 + 1) * H + h) * head);
    }
  }
  // The last block ends exactly at bytes().
  EXPECT_EQ(static_cast<uint64_t>(kv_v(cache, L - 1, H - 1) + head - base), cache.bytes());

  // The const accessors see the same memory.
  const KvCache& ccache = cache;
  EXPECT_EQ(kv_k(ccache, 1, 1), kv_k(cache, 1, 1));
  EXPECT_EQ(kv_v(ccache, 2, 0), kv_v(cache, 2, 0));
}

TEST(KvPlan, KvCacheCommitTruncateClear) {
  const ModelConfig t = tiny(2, 4, 2, 8);
  KvCache cache(t, 10, DType::F32);
  const uint64_t bytes = cache.bytes();
  const auto commit = [&](int64_t n) {
    const std::vector<int32_t> ids(static_cast<size_t>(n), 7);
    KvCacheAccess::commit(cache, ids);
  };

  commit(4);
  EXPECT_EQ(cache.size(), 4);
  EXPECT_EQ(cache.remaining(), 6);
  commit(6);
  EXPECT_EQ(cache.size(), 10);
  EXPECT_EQ(cache.remaining(), 0);

  cache.truncate(3);  // rewind
  EXPECT_EQ(cache.size(), 3);
  EXPECT_EQ(cache.tokens().size(), 3u);
  cache.truncate(3);  // no-op
  EXPECT_EQ(cache.size(), 3);
  EXPECT_THROW(cache.truncate(4), kvinfer::Error);   // beyond size()
  EXPECT_THROW(cache.truncate(-1), kvinfer::Error);  // negative
  EXPECT_EQ(cache.size(), 3);

  cache.clear();
  EXPECT_EQ(cache.size(), 0);
  // Capacity and storage are fixed at creation.
  EXPECT_EQ(cache.capacity(), 10);
  EXPECT_EQ(cache.bytes(), bytes);

  commit(10);
  EXPECT_THROW(commit(1), kvinfer::Error);  // past capacity
  EXPECT_EQ(cache.size(), 10);
}

// ---------------------------------------------------------------------------------------------
// (d) Bad token counts.

TEST(KvPlan, NegativeTokensThrow) {
  const ModelConfig cfg = llama_shaped(8);
  EXPECT_THROW(plan_kv_bytes(cfg, -1, DType::F16), kvinfer::Error);
  EXPECT_THROW(plan_kv_bytes(cfg, std::numeric_limits<int64_t>::min(), DType::F32),
               kvinfer::Error);
  EXPECT_THROW({ KvCache cache(cfg, -1, DType::F16); }, kvinfer::Error);
}

TEST(KvPlan, OverflowThrows) {
  const ModelConfig cfg = llama_shaped(8);  // 2^18 bytes per token in f32
  ASSERT_EQ(kv_bytes_per_token(cfg, DType::F32), uint64_t{1} << 18);

  EXPECT_THROW(plan_kv_bytes(cfg, std::numeric_limits<int64_t>::max(), DType::F32),
               kvinfer::Error);
  EXPECT_THROW(plan_kv_bytes(cfg, int64_t{1} << 46, DType::F32), kvinfer::Error);  // = 2^64

  // The largest counts that still fit in 64 bits are exact, not rejected.
  EXPECT_EQ(plan_kv_bytes(cfg, int64_t{1} << 45, DType::F32), uint64_t{1} << 63);
  EXPECT_EQ(plan_kv_bytes(cfg, (int64_t{1} << 46) - 1, DType::F32),
            std::numeric_limits<uint64_t>::max() - ((uint64_t{1} << 18) - 1));

  // A cache whose size overflows must fail before allocating anything.
  EXPECT_THROW({ KvCache cache(cfg, std::numeric_limits<int64_t>::max(), DType::F32); },
               kvinfer::Error);
}

// ---------------------------------------------------------------------------------------------
// (e) MHA / GQA / MQA: the cache scales with KV heads, not query heads.

TEST(KvPlan, KvHeadsSetTheRatioMhaGqaMqa) {
  const ModelConfig mha = llama_shaped(32);
  const ModelConfig gqa = llama_shaped(8);
  const ModelConfig mqa = llama_shaped(1);
  EXPECT_EQ(mha.group_size(), 1);
  EXPECT_EQ(gqa.group_size(), 4);
  EXPECT_EQ(mqa.group_size(), 32);

  for (DType dt : {DType::F32, DType::F16, DType::BF16, DType::I8, DType::FP8}) {
    SCOPED_TRACE(std::string(kvinfer::dtype_name(dt)));
    const uint64_t b_mha = plan_kv_bytes(mha, 8192, dt);
    const uint64_t b_gqa = plan_kv_bytes(gqa, 8192, dt);
    const uint64_t b_mqa = plan_kv_bytes(mqa, 8192, dt);
    // 32 : 8 : 1
    EXPECT_EQ(b_mha, 32 * b_mqa);
    EXPECT_EQ(b_gqa, 8 * b_mqa);
    EXPECT_EQ(b_mha, 4 * b_gqa);
    // The saving over MHA is num_heads / num_kv_heads = group_size().
    EXPECT_EQ(b_mha / b_gqa, static_cast<uint64_t>(gqa.group_size()));
    EXPECT_EQ(b_mha / b_mqa, static_cast<uint64_t>(mqa.group_size()));
  }
  EXPECT_EQ(plan_kv_bytes(mha, 8192, DType::F16), 4 * GiB);
  EXPECT_EQ(plan_kv_bytes(gqa, 8192, DType::F16), GiB);
  EXPECT_EQ(plan_kv_bytes(mqa, 8192, DType::F16), 128 * MiB);
}

// Phi-3 / Phi-4-mini (fused projections, partial rotary, a window on Phi-3): the cache has the
// Llama family's shape, and a loaded model's caches are exactly the plan, from safetensors and
// from GGUF. Phi-4-mini's shape (32 layers, 8 KV heads, head_dim 128): 128 KiB a token in f16.
TEST(KvPlan, Phi3CachesAreExactlyThePlan) {
  const std::filesystem::path data(KVINFER_TEST_DATA);
  for (const auto& path : {data / "models" / "phi3_longrope", data / "models" / "phi4_partial_rotary",
                           data / "gguf" / "models" / "phi3_longrope.f32.gguf",
                           data / "gguf" / "models" / "phi4_partial_rotary.q8_0.gguf"}) {
    SCOPED_TRACE(path.string());
    const auto model = kvinfer::Model::load(path, {.device = kvinfer::Device::CPU});
    const ModelConfig& c = model->config();
    EXPECT_EQ(c.arch, kvinfer::Architecture::Phi3);
    for (DType dt : {DType::F32, DType::F16, DType::I8}) {
      const KvCache kv(*model, 40, dt);
      EXPECT_EQ(kv.bytes(), plan_kv_bytes(c, 40, dt));
    }
    // Every layer holds the 40 positions, or a windowed one its ring when that is fewer.
    uint64_t rows = 0;
    for (int64_t l = 0; l < c.num_layers; ++l) {
      const int64_t w = c.layer_window(l);
      rows += static_cast<uint64_t>(w > 0 ? std::min<int64_t>(40, w + std::min<int64_t>(w, 512) - 1) : 40);
    }
    EXPECT_EQ(plan_kv_bytes(c, 40, DType::F32), static_cast<uint64_t>(2 * c.num_kv_heads * c.head_dim * 4) * rows);
  }
  ModelConfig phi4 = tiny(32, 24, 8, 128);
  phi4.arch = kvinfer::Architecture::Phi3;
  phi4.rotary_dim = 96;  // partial rotary changes no cache byte
  EXPECT_EQ(kv_bytes_per_token(phi4, DType::F16), 128 * KiB);
  EXPECT_EQ(plan_kv_bytes(phi4, 131072, DType::F16), 16 * GiB);
}

TEST(FormatBytes, BinaryUnitsAtEveryBoundary) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(1023), "1023 B");
  EXPECT_EQ(format_bytes(1024), "1.0 KiB");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_bytes(MiB), "1.0 MiB");
  EXPECT_EQ(format_bytes(GiB - 1), "1024.0 MiB");
  EXPECT_EQ(format_bytes(GiB), "1.00 GiB");
  EXPECT_EQ(format_bytes(3 * GiB / 2), "1.50 GiB");
}

}  // namespace
