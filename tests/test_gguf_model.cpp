// GGUF models made the way llama.cpp makes them (tools/make_gguf_model_fixtures.py; see
// tests/data/gguf/models/PROVENANCE.md): each loads with the HF fixture's config, matches HF's
// logits (the fixture's own reference when the conversion is lossless, HF on the dequantised
// weights otherwise), keeps cache-on == cache-off to the bit, and llama.cpp's permuted Q/K rows
// with interleaved rope equal HF's half-split rope. Hostile files each give a clear Error.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cache_invariance.h"
#include "cpu/cpu_ops.h"
#include "cpu/packed_rows.h"
#include "formats/gguf.h"
#include "kvinfer/kvinfer.h"
#include "models/load_common.h"
#include "models/model_internal.h"
#include "models/weights.h"
#include "reference.h"
#include "test_files.h"

namespace kvinfer {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;
using test::max_abs_diff;

const fs::path kGgufDir = fs::path(KVINFER_TEST_DATA) / "gguf" / "models";
constexpr float kTolerance = 1e-4f;  // test_hf_parity.cpp's bound: f32 math, summation order only

struct GgufFixture {
  const char* file;  // under tests/data/gguf/models
  const char* hf;    // the HF fixture it was converted from
  DType dtype;       // of the projection weights
  bool own_reference;  // lossy: <file minus .gguf>.reference.safetensors, HF on the dequantised weights
};
const GgufFixture kGgufFixtures[] = {
    {"llama_gqa4.f32.gguf", "llama_gqa4", DType::F32, false},
    {"llama_gqa4.q8_0.gguf", "llama_gqa4", DType::Q8_0, true},
    {"llama_mha.q8_0.gguf", "llama_mha", DType::Q8_0, true},
    {"qwen2_bias.f32.gguf", "qwen2_bias", DType::F32, false},
    {"qwen2_bias.q8_0.gguf", "qwen2_bias", DType::Q8_0, true},
    {"llama3_rope.f16.gguf", "llama3_rope", DType::F16, true},
    {"llama3_rope.q8_0.gguf", "llama3_rope", DType::Q8_0, true},
    {"llama_rope_linear.f16.gguf", "llama_rope_linear", DType::F16, true},
    {"llama_f16.f16.gguf", "llama_f16", DType::F16, false},
    {"gpt2_tiny.f32.gguf", "gpt2_tiny", DType::F32, false},
    {"gpt2_tiny.q8_0.gguf", "gpt2_tiny", DType::Q8_0, true},
    {"qwen3_tiny.f32.gguf", "qwen3_tiny", DType::F32, false},
    {"qwen3_tiny.q8_0.gguf", "qwen3_tiny", DType::Q8_0, true},
    // Gemma: the norms are stored + 1, so HF's reference on the file's weights ((w + 1) - 1 in
    // f32, within an ulp of w) is the file's own even in f32.
    {"gemma2_tiny.f32.gguf", "gemma2_tiny", DType::F32, true},
    {"gemma2_tiny.q8_0.gguf", "gemma2_tiny", DType::Q8_0, true},
    {"gemma3_tiny.f32.gguf", "gemma3_tiny", DType::F32, true},
    {"gemma3_tiny.q8_0.gguf", "gemma3_tiny", DType::Q8_0, true},
    {"mixtral_tiny.f32.gguf", "mixtral_tiny", DType::F32, false},
    {"mixtral_tiny.q8_0.gguf", "mixtral_tiny", DType::Q8_0, true},
    {"qwen2_moe_tiny.f32.gguf", "qwen2_moe_tiny", DType::F32, false},
    {"qwen2_moe_tiny.q8_0.gguf", "qwen2_moe_tiny", DType::Q8_0, true},
    {"qwen3_moe_tiny.f32.gguf", "qwen3_moe_tiny", DType::F32, false},
    {"qwen3_moe_tiny.q8_0.gguf", "qwen3_moe_tiny", DType::Q8_0, true},
    {"llama_yarn.f32.gguf", "llama_yarn", DType::F32, false},
    {"qwen2_yarn.f32.gguf", "qwen2_yarn", DType::F32, false},
    {"phi3_longrope.f32.gguf", "phi3_longrope", DType::F32, false},
    {"phi4_partial_rotary.f32.gguf", "phi4_partial_rotary", DType::F32, false},
    {"phi4_partial_rotary.q8_0.gguf", "phi4_partial_rotary", DType::Q8_0, true},
};

// reference.safetensors of tools/make_fixtures.py, from any path.
struct Reference {
  std::vector<int32_t> prompt_ids, greedy_ids;
  std::vector<float> prompt_logits, greedy_logits;
  explicit Reference(const fs::path& path) {
    SafetensorsFile f(path);
    read(f, "prompt_ids", prompt_ids);
    read(f, "prompt_logits", prompt_logits);
    read(f, "greedy_ids", greedy_ids);
    read(f, "greedy_logits", greedy_logits);
  }
  template <typename T>
  static void read(const SafetensorsFile& f, const std::string& name, std::vector<T>& out) {
    const TensorView& t = f.get(name);
    out.resize(t.bytes / sizeof(T));
    std::memcpy(out.data(), t.data, t.bytes);
  }
};

fs::path reference_path(const GgufFixture& g) {
  if (!g.own_reference) return test::model_dir(g.hf) / "reference.safetensors";
  std::string name = g.file;
  return kGgufDir / name.replace(name.size() - 5, 5, ".reference.safetensors");
}

std::span<const float> row(const std::vector<float>& m, size_t r, size_t width) { return {m.data() + r * width, width}; }

// The HF fixture's config, but for what GGUF says otherwise: llama.cpp permuted "llama" Q/K rows
// (interleaved rope), keeps llama3 scaling in the rope_freqs tensor, stores f32 hyper-parameters,
// and its converter drops an eos *list* (SpecialVocab takes single ids only).
void expect_config_of_hf_fixture(const ModelConfig& g, const ModelConfig& h) {
  EXPECT_EQ(g.arch, h.arch);
  EXPECT_EQ(g.vocab_size, h.vocab_size);
  EXPECT_EQ(g.hidden_size, h.hidden_size);
  EXPECT_EQ(g.intermediate_size, h.intermediate_size);
  EXPECT_EQ(g.num_layers, h.num_layers);
  EXPECT_EQ(g.num_heads, h.num_heads);
  EXPECT_EQ(g.num_kv_heads, h.num_kv_heads);
  EXPECT_EQ(g.head_dim, h.head_dim);
  EXPECT_EQ(g.norm_eps, static_cast<double>(static_cast<float>(h.norm_eps)));
  EXPECT_EQ(g.rope_theta, static_cast<double>(static_cast<float>(h.rope_theta)));
  if (h.rope_scaling.type == RopeScaling::Type::Llama3) {
    EXPECT_EQ(g.rope_scaling.type, RopeScaling::Type::None);
  } else {
    EXPECT_EQ(g.rope_scaling.type, h.rope_scaling.type);
    EXPECT_EQ(g.rope_scaling.factor, h.rope_scaling.factor);
  }
  // YaRN and LongRoPE: what llama.cpp's converter keeps (f32 in GGUF) and the factor tensors.
  EXPECT_EQ(static_cast<float>(g.rope_scaling.attention_factor), static_cast<float>(h.rope_scaling.attention_factor));
  if (h.rope_scaling.type == RopeScaling::Type::Yarn || h.rope_scaling.type == RopeScaling::Type::LongRope) {
    EXPECT_EQ(g.rope_scaling.original_max_position_embeddings, h.rope_scaling.original_max_position_embeddings);
  }
  EXPECT_EQ(g.rope_scaling.beta_fast, h.rope_scaling.beta_fast);
  EXPECT_EQ(g.rope_scaling.beta_slow, h.rope_scaling.beta_slow);
  EXPECT_EQ(g.rope_scaling.short_factor, h.rope_scaling.short_factor);
  EXPECT_EQ(g.rope_scaling.long_factor, h.rope_scaling.long_factor);
  EXPECT_EQ(g.rope_dim(), h.rope_dim());
  EXPECT_EQ(h.rope_layout, RopeLayout::HalfSplit);
  // "llama" files (Mixtral's too) hold permuted Q/K rows.
  EXPECT_EQ(g.rope_layout, g.arch == Architecture::Llama || g.arch == Architecture::Mixtral ? RopeLayout::Interleaved
                                                                                           : RopeLayout::HalfSplit);
  EXPECT_EQ(g.max_position_embeddings, h.max_position_embeddings);
  EXPECT_EQ(g.sliding_window, h.sliding_window);
  // llama.cpp's GPT-2 converter writes output.weight, a copy of token_embd.
  EXPECT_EQ(g.tie_word_embeddings, h.tie_word_embeddings && !h.is_gpt2());
  EXPECT_EQ(g.attention_bias, h.attention_bias);
  EXPECT_EQ(g.attention_out_bias, h.attention_out_bias);
  EXPECT_EQ(g.mlp_bias, h.mlp_bias);
  // Qwen3 and Gemma: what llama.cpp's loader derives (gemma2_tiny and gemma3_tiny have
  // query_pre_attn_scalar == head_dim and gemma3_tiny's file states its window period).
  EXPECT_EQ(g.qk_norm, h.qk_norm);
  EXPECT_EQ(g.query_pre_attn_scalar, h.query_pre_attn_scalar);
  EXPECT_EQ(g.attn_logit_softcapping, h.attn_logit_softcapping);
  EXPECT_EQ(g.final_logit_softcapping, h.final_logit_softcapping);
  EXPECT_EQ(g.rope_local_theta, h.rope_local_theta);
  EXPECT_EQ(g.sliding_layers, h.sliding_layers);
  EXPECT_EQ(g.bos_token_id, h.bos_token_id);
  EXPECT_EQ(g.num_experts, h.num_experts);
  EXPECT_EQ(g.num_experts_per_tok, h.num_experts_per_tok);
  EXPECT_EQ(g.moe_intermediate_size, h.moe_intermediate_size);
  EXPECT_EQ(g.shared_expert_intermediate_size, h.shared_expert_intermediate_size);
  EXPECT_EQ(g.norm_topk_prob, h.norm_topk_prob);
  EXPECT_EQ(g.dense_layers, h.dense_layers);
  if (h.eos_token_ids.size() <= 1)
    EXPECT_EQ(g.eos_token_ids, h.eos_token_ids);
  else
    EXPECT_TRUE(g.eos_token_ids.empty());
}

class GgufModel : public ::testing::TestWithParam<GgufFixture> {
 protected:
  void SetUp() override {
    model_ = Model::load(kGgufDir / GetParam().file, {.device = Device::CPU});
    ref_ = std::make_unique<Reference>(reference_path(GetParam()));
    vocab_ = static_cast<size_t>(model_->config().vocab_size);
  }
  std::shared_ptr<const Model> model_;
  std::unique_ptr<Reference> ref_;
  size_t vocab_ = 0;
};

// Loaded in its stored type: what the model holds is exactly the file's tensor bytes. By default
// on the CPU every matrix is a copy in the model's own memory (LoadOptions::weights_in_place: on
// huge pages) and the model keeps no mapping of the file; with weights_in_place, each points into
// the loader's own mapping of the file, which the model keeps.
TEST_P(GgufModel, LoadsTheFilesBytesWithTheHfFixturesConfig) {
  expect_config_of_hf_fixture(model_->config(), load_config(test::model_dir(GetParam().hf) / "config.json"));
  EXPECT_EQ(model_->weight_dtype(), GetParam().dtype);
  EXPECT_FALSE(model_->has_tokenizer());
  const GgufFile file(kGgufDir / GetParam().file);
  uint64_t bytes = 0;
  for (const GgufTensorInfo& t : file.tensors())
    if (t.name != "rope_freqs.weight" && t.name != "rope_factors_long.weight" && t.name != "rope_factors_short.weight")
      bytes += t.bytes;  // frequency factors become the rope frequencies
  EXPECT_EQ(model_->weight_bytes(), bytes);
  for (const bool in_place : {false, true}) {
    int packed = 0;  // matrices copied with at least one packed block
    uint64_t done = 0, total = 0;  // read (or copied) once up front, as HF checkpoints are
    const auto model = Model::load(kGgufDir / GetParam().file,
                                   {.device = Device::CPU,
                                    .on_progress = [&](uint64_t d, uint64_t t) { done = d, total = t; },
                                    .weights_in_place = in_place});
    EXPECT_EQ(done, total);
    EXPECT_GE(total, bytes);
    const auto& storage = *static_cast<const HostStorage*>(model_weights(*model).storage.get());
    const auto* mapped = static_cast<const GgufFile*>(storage.checkpoint.get());  // the model's, in place only
    ASSERT_EQ(mapped != nullptr, in_place);
    EXPECT_EQ(storage.mapped.empty(), !in_place);
    // m holds the bytes `skip` bytes into the file's tensor `tensor`: in place (in the model's
    // mapping), or copied (and packed where packs_rows says).
    auto expect_bytes = [&](const Matrix& m, const std::string& tensor, uint64_t skip, uint64_t size,
                            const std::string& name) {
      EXPECT_EQ(m.bytes(), size) << name;
      if (in_place) {
        EXPECT_EQ(m.data, mapped->tensor(tensor).data + skip) << name;
        EXPECT_FALSE(m.packed) << name;
        return;
      }
      const std::byte* at = file.tensor(tensor).data + skip;  // the test's own mapping
      EXPECT_EQ(reinterpret_cast<uintptr_t>(m.data) % 64, 0u) << name;
      EXPECT_EQ(m.packed, cpu::packs_rows(m.dtype, m.cols)) << name;
      std::vector<std::byte> rows(size);  // (rows, row_bytes) the copy, unpacked
      cpu::unpack_rows(m, 0, m.rows, rows.data());
      EXPECT_EQ(std::memcmp(rows.data(), at, size), 0) << name << ": the copy differs from the file";
      if (m.packed && m.rows >= cpu::kPackedRows) ++packed;
    };
    auto expect_tensor = [&](const Matrix& m, const std::string& name) {
      expect_bytes(m, name, 0, file.tensor(name).bytes, name);
    };
    const ModelWeights& w = model_weights(*model);
    expect_tensor(w.embed, "token_embd.weight");
    expect_tensor(w.lm_head.weight, model->config().tie_word_embeddings ? "token_embd.weight" : "output.weight");
    if (model->config().tie_word_embeddings) {
      EXPECT_EQ(w.lm_head.weight.data, w.embed.data) << "one copy, shared";
    }
    if (model->config().is_gpt2()) expect_tensor(w.pos_embed, "position_embd.weight");
    for (size_t l = 0; l < w.layers.size(); ++l) {
      const LayerWeights& L = w.layers[l];
      const std::string p = fmt::format("blk.{}.", l);
      if (model->config().is_gpt2()) {  // q, k, v: the three row blocks of the fused attn_qkv
        const std::string qkv_name = p + "attn_qkv.weight";
        const GgufTensorInfo& qkv = file.tensor(qkv_name);
        const uint64_t third = qkv.bytes / 3;
        expect_bytes(L.q.weight, qkv_name, 0, third, p + "attn_qkv q");
        expect_bytes(L.k.weight, qkv_name, third, third, p + "attn_qkv k");
        expect_bytes(L.v.weight, qkv_name, 2 * third, third, p + "attn_qkv v");
        EXPECT_EQ(3 * third, qkv.bytes);
        for (auto [m, name] : {std::pair{&L.o, "attn_output"}, {&L.up, "ffn_up"}, {&L.down, "ffn_down"}})
          expect_tensor(m->weight, p + name + ".weight");
        continue;
      }
      if (model->config().arch == Architecture::Phi3) {  // row blocks of attn_qkv and of ffn_up (gate, up)
        const std::string qkv = p + "attn_qkv.weight", gate_up = p + "ffn_up.weight";
        const uint64_t row = L.q.weight.row_bytes();
        const uint64_t q = row * static_cast<uint64_t>(L.q.weight.rows), kv = row * static_cast<uint64_t>(L.k.weight.rows);
        expect_bytes(L.q.weight, qkv, 0, q, p + "attn_qkv q");
        expect_bytes(L.k.weight, qkv, q, kv, p + "attn_qkv k");
        expect_bytes(L.v.weight, qkv, q + kv, kv, p + "attn_qkv v");
        EXPECT_EQ(q + 2 * kv, file.tensor(qkv).bytes);
        const uint64_t half = file.tensor(gate_up).bytes / 2;
        expect_bytes(L.gate.weight, gate_up, 0, half, p + "ffn_up gate");
        expect_bytes(L.up.weight, gate_up, half, half, p + "ffn_up up");
        for (auto [m, name] : {std::pair{&L.o, "attn_output"}, {&L.down, "ffn_down"}})
          expect_tensor(m->weight, p + name + ".weight");
        continue;
      }
      for (auto [m, name] : {std::pair{&L.q, "attn_q"}, {&L.k, "attn_k"}, {&L.v, "attn_v"}, {&L.o, "attn_output"}})
        expect_tensor(m->weight, p + name + ".weight");
      if (L.moe.empty()) {
        for (auto [m, name] : {std::pair{&L.gate, "ffn_gate"}, {&L.up, "ffn_up"}, {&L.down, "ffn_down"}})
          expect_tensor(m->weight, p + name + ".weight");
        continue;
      }
      // Experts: each one's matrices are its row block of the stacked tensor, in place or copied.
      expect_tensor(L.moe.router.weight, p + "ffn_gate_inp.weight");
      for (auto [experts, name] : {std::pair{&L.moe.gate, "ffn_gate_exps"}, {&L.moe.up, "ffn_up_exps"},
                                   {&L.moe.down, "ffn_down_exps"}}) {
        const std::string stacked = p + name + ".weight";
        const uint64_t each = file.tensor(stacked).bytes / experts->size();
        ASSERT_EQ(static_cast<int64_t>(experts->size()), model->config().num_experts);
        for (size_t e = 0; e < experts->size(); ++e)
          expect_bytes((*experts)[e].weight, stacked, e * each, each, fmt::format("{} expert {}", stacked, e));
      }
      if (model->config().shared_expert_intermediate_size > 0) {
        for (auto [m, name] : {std::pair{&L.gate, "ffn_gate_shexp"}, {&L.up, "ffn_up_shexp"},
                               {&L.down, "ffn_down_shexp"}, {&L.shared_expert_gate, "ffn_gate_inp_shexp"}})
          expect_tensor(m->weight, p + name + ".weight");
      }
    }
    // Where this CPU reads the type packed, the fixtures run the packed kernels.
    EXPECT_EQ(packed > 0, cpu::packs_rows(GetParam().dtype, model_->config().hidden_size) && !in_place);
  }
}

TEST_P(GgufModel, PrefillAndDecodeMatchHf) {
  const Reference& ref = *ref_;
  const size_t T = ref.prompt_ids.size();
  KvCache kv(*model_, static_cast<int64_t>(T + ref.greedy_ids.size()), DType::F32);
  Session s(model_);
  auto all = s.prefill(kv, ref.prompt_ids, Logits::All);
  ASSERT_EQ(all.size(), T * vocab_);
  for (size_t t = 0; t < T; ++t)
    EXPECT_LE(max_abs_diff(all.subspan(t * vocab_, vocab_), row(ref.prompt_logits, t, vocab_)), kTolerance)
        << "prompt position " << t;
  EXPECT_EQ(argmax(all.subspan((T - 1) * vocab_)), ref.greedy_ids[0]);
  for (size_t i = 1; i < ref.greedy_ids.size(); ++i) {
    auto logits = s.decode(kv, ref.greedy_ids[i - 1]);
    EXPECT_LE(max_abs_diff(logits, row(ref.greedy_logits, i, vocab_)), kTolerance) << "greedy step " << i;
    ASSERT_EQ(argmax(logits), ref.greedy_ids[i]) << "greedy step " << i;
  }
}

TEST_P(GgufModel, GreedyGenerationMatchesHf) {
  KvCache kv(*model_, 64, DType::F32);
  Session s(model_);
  GenerateOptions opt;
  opt.max_new_tokens = static_cast<int64_t>(ref_->greedy_ids.size());
  opt.ignore_eos = true;
  EXPECT_EQ(generate_greedy(s, kv, ref_->prompt_ids, opt).tokens, ref_->greedy_ids);
}

TEST_P(GgufModel, CacheOnEqualsCacheOffBitForBit) { test::expect_cache_on_equals_off(model_, ref_->prompt_ids); }

INSTANTIATE_TEST_SUITE_P(Fixtures, GgufModel, ::testing::ValuesIn(kGgufFixtures), [](const auto& p) {
  std::string name = p.param.file;
  for (char& c : name)
    if (c == '.') c = '_';
  return name.substr(0, name.size() - 5);
});

// ---- the rope layout: llama.cpp's permuted rows, rotated interleaved, equal HF's rows rotated half-split ----

// llama.cpp's Q/K permutation of one (n, heads, head_dim) activation: per head, the rows viewed
// as (2, head_dim/2) are transposed, so x[j·half + i] moves to 2i + j.
std::vector<float> permute_heads(const std::vector<float>& x, int64_t head_dim) {
  std::vector<float> y(x.size());
  const int64_t half = head_dim / 2;
  for (size_t b = 0; b < x.size(); b += static_cast<size_t>(head_dim))
    for (int64_t j = 0; j < 2; ++j)
      for (int64_t i = 0; i < half; ++i) y[b + static_cast<size_t>(2 * i + j)] = x[b + static_cast<size_t>(j * half + i)];
  return y;
}

TEST(GgufRope, InterleavedOnPermutedRowsEqualsHalfSplitBitForBit) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  const int64_t n = 3, heads = 5;
  for (int64_t hd : {2, 8, 64, 128})
    for (int64_t start : {0, 1000, 131000}) {
      std::vector<float> inv_freq(static_cast<size_t>(hd / 2));
      for (size_t i = 0; i < inv_freq.size(); ++i)
        inv_freq[i] = 1.0f / std::pow(10000.0f, static_cast<float>(2 * i) / static_cast<float>(hd));
      std::vector<float> x(static_cast<size_t>(n * heads * hd));
      for (float& v : x) v = normal(rng);
      std::vector<float> half_split = x, interleaved = permute_heads(x, hd);
      cpu::rope(half_split.data(), n, heads, hd, start, inv_freq.data(), RopeLayout::HalfSplit);
      cpu::rope(interleaved.data(), n, heads, hd, start, inv_freq.data(), RopeLayout::Interleaved);
      ASSERT_NE(half_split, x);
      EXPECT_EQ(permute_heads(half_split, hd), interleaved) << "head_dim " << hd << " start " << start;
    }
}

std::vector<float> all_logits(const std::shared_ptr<const Model>& m, std::span<const int32_t> ids) {
  KvCache kv(*m, static_cast<int64_t>(ids.size()), DType::F32);
  Session s(m);
  auto l = s.prefill(kv, ids, Logits::All);
  return {l.begin(), l.end()};
}

// LoadOptions::activations = Int8 on Q8_0 models: the logits move (the activations are rounded to
// 8 bits) but stay close to the exact ones, and cache-on == cache-off still holds bit for bit.
TEST(GgufInt8Activations, CloseToExactAndCacheOnEqualsCacheOff) {
  const std::vector<int32_t> seq = {1, 5, 9, 3, 7, 2, 8, 4};
  for (const char* file : {"llama_gqa4.q8_0.gguf", "qwen2_bias.q8_0.gguf", "gpt2_tiny.q8_0.gguf"}) {
    SCOPED_TRACE(file);
    const auto exact = Model::load(kGgufDir / file, {.device = Device::CPU});
    const auto fast = Model::load(kGgufDir / file, {.device = Device::CPU, .activations = ActivationMode::Int8});
    ASSERT_EQ(fast->activations(), ActivationMode::Int8);
    const auto want = all_logits(exact, seq), got = all_logits(fast, seq);
    float scale = 0.0f;
    for (float v : want) scale = std::max(scale, std::fabs(v));
    const float diff = max_abs_diff(got, want);
    EXPECT_GT(diff, 0.0f);  // the option is in effect
    EXPECT_LT(diff, 0.05f * scale);  // measured: 2.5 % to 3 % of the largest logit on these tiny models
    test::expect_cache_on_equals_off(fast, seq, 8);
  }
}

// The GGUF holds the HF fixture's Q/K rows permuted; rotated interleaved it gives HF's logits.
// Only the order of the q·k sums over head_dim differs, so the two agree to float rounding.
// Rotated half-split instead, the same weights are far off: the layout is what makes them agree.
TEST(GgufRope, PermutedInterleavedModelEqualsUnpermutedHalfSplitModel) {
  const auto hf = Model::load(test::model_dir("llama_gqa4"), {.device = Device::CPU});
  const auto gguf = Model::load(kGgufDir / "llama_gqa4.f32.gguf", {.device = Device::CPU});
  const ModelConfig& c = hf->config();
  const Matrix &hq = model_weights(*hf).layers[1].q.weight, &gq = model_weights(*gguf).layers[1].q.weight;
  const auto row_bytes = static_cast<size_t>(hq.row_bytes());
  for (int64_t r = 0; r < hq.rows; ++r) {  // GGUF row h·hd + 2i + j is HF row h·hd + j·hd/2 + i
    const int64_t h = r / c.head_dim, i = r % c.head_dim / 2, j = r % 2;
    const int64_t hf_row = h * c.head_dim + j * c.head_dim / 2 + i;
    ASSERT_EQ(0, std::memcmp(gq.data + static_cast<size_t>(r) * row_bytes,
                             hq.data + static_cast<size_t>(hf_row) * row_bytes, row_bytes)) << "row " << r;
  }

  test::Reference ref("llama_gqa4");
  std::vector<int32_t> seq = ref.prompt_ids;
  seq.insert(seq.end(), ref.greedy_ids.begin(), ref.greedy_ids.end());
  const auto want = all_logits(hf, seq), got = all_logits(gguf, seq);
  const float diff = max_abs_diff(got, want);
  RecordProperty("max_abs_diff_permuted_interleaved_vs_half_split", std::to_string(diff));
  std::printf("permuted+interleaved vs unpermuted half-split: max |Δlogit| = %g over %zu positions\n", diff,
              seq.size());
  EXPECT_LE(diff, 1e-5f);

  ModelConfig wrong = gguf->config();
  wrong.rope_layout = RopeLayout::HalfSplit;
  const auto misread = make_model(
      {.config = wrong, .weights = std::make_unique<ModelWeights>(model_weights(*gguf)), .device = Device::CPU});
  EXPECT_GT(max_abs_diff(all_logits(misread, seq), want), 1e-2f);
}

// Qwen2 is not permuted: same weights, same layout, same code, so the same bits.
TEST(GgufRope, UnpermutedQwen2EqualsHfBitForBit) {
  const auto hf = Model::load(test::model_dir("qwen2_bias"), {.device = Device::CPU});
  const auto gguf = Model::load(kGgufDir / "qwen2_bias.f32.gguf", {.device = Device::CPU});
  test::Reference ref("qwen2_bias");
  std::vector<int32_t> seq = ref.prompt_ids;
  seq.insert(seq.end(), ref.greedy_ids.begin(), ref.greedy_ids.end());
  EXPECT_EQ(all_logits(gguf, seq), all_logits(hf, seq));
}

// ---- chatml_tiny: the tokenizer as tokenizer.ggml.* metadata, text in, text out ----

class GgufChatml : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    gguf_ = Model::load(kGgufDir / "chatml_tiny.f32.gguf", {.device = Device::CPU});
    hf_ = Model::load(test::model_dir("chatml_tiny"), {.device = Device::CPU});
    std::ifstream in(test::model_dir("chatml_tiny") / "text_reference.json");
    ref_ = nlohmann::json::parse(in);
  }
  static void TearDownTestSuite() { gguf_.reset(), hf_.reset(); }
  static inline std::shared_ptr<const Model> gguf_, hf_;
  static inline nlohmann::json ref_;
};

TEST_F(GgufChatml, TokenizerEncodesAndDecodesLikeTokenizerJson) {
  ASSERT_TRUE(gguf_->has_tokenizer());
  const Tokenizer &g = gguf_->tokenizer(), &h = hf_->tokenizer();
  ASSERT_EQ(g.vocab_size(), h.vocab_size());
  for (int32_t id = 0; id < g.vocab_size(); ++id) {
    ASSERT_EQ(g.token_bytes(id), h.token_bytes(id)) << "id " << id;
    ASSERT_EQ(g.is_special(id), h.is_special(id)) << "id " << id;
  }
  EXPECT_EQ(g.bos_id(), h.bos_id());
  EXPECT_EQ(g.eos_ids(), h.eos_ids());
  EXPECT_EQ(gguf_->eos_ids(), hf_->eos_ids());
  EXPECT_EQ(g.chat_template(), h.chat_template());
  std::vector<std::string> texts = {"", " ", "  leading and trailing  ", "tabs\tand\nnewlines\r\n\n",
                                    "Grüße, 日本語, emoji 🦙🦙 and numbers 1234567",
                                    "<|im_start|>user\nHi<|im_end|>\n<|endoftext|>", "don't we'll they've",
                                    std::string("invalid \xff\xfe bytes")};
  for (const auto& p : ref_["prompts"]) texts.push_back(p["text"]);
  for (const auto& turn : ref_["chat"]) texts.push_back(turn["rendered"]);
  for (const std::string& text : texts)
    for (bool parse_special : {true, false}) {
      const EncodeOptions o{.add_special = true, .parse_special = parse_special};
      const auto ids = g.encode(text, o);
      ASSERT_EQ(ids, h.encode(text, o)) << text;
      EXPECT_EQ(g.decode(ids), h.decode(ids)) << text;
      EXPECT_EQ(g.decode(ids, true), h.decode(ids, true)) << text;
    }
  for (const auto& p : ref_["prompts"]) EXPECT_EQ(g.encode(p["text"].get<std::string>()), p["ids"]);
}

TEST_F(GgufChatml, GenerateGivesTheSafetensorsModelsText) {
  const Tokenizer& tok = gguf_->tokenizer();
  const ChatTemplate chat(tok.chat_template(), tok.bos_text(), tok.eos_text());
  const std::vector<ChatMessage> turn = {{"user", ref_["chat"][0]["user"]}};
  std::vector<std::string> prompts = {chat.render(turn, true)};
  EXPECT_EQ(prompts[0], ref_["chat"][0]["rendered"]);
  for (const auto& p : ref_["prompts"]) prompts.push_back(p["text"]);
  for (const std::string& prompt : prompts) {
    SCOPED_TRACE(prompt);
    GenerateResult r[2];
    for (int i = 0; i < 2; ++i) {
      const auto& m = i == 0 ? gguf_ : hf_;
      KvCache kv(*m, 256);
      Session s(m);
      GenerateOptions o;
      o.max_new_tokens = ref_["max_new_tokens"];
      o.ignore_eos = true;
      r[i] = generate(s, kv, m->tokenizer(), m->tokenizer().encode(prompt), o);
    }
    EXPECT_EQ(r[0].tokens, r[1].tokens);
    EXPECT_EQ(r[0].text, r[1].text);
    EXPECT_EQ(r[0].tokens.size(), ref_["max_new_tokens"].get<size_t>());
  }
}

// ---- hostile files: a small valid model built byte by byte, then broken one way at a time ----

class TinyGguf {
 public:
  static constexpr uint32_t kU32 = 4, kF32 = 6, kString = 8, kTypeF32 = 0, kTypeI32 = 26;

  // A 1-layer "llama": hidden 8, 2 heads of 4, 1 KV head, ffn 16, vocab 10 (token_embd's rows).
  TinyGguf() {
    set_string("general.architecture", "llama");
    for (auto [key, v] : {std::pair{"block_count", 1u}, {"context_length", 16u}, {"embedding_length", 8u},
                          {"feed_forward_length", 16u}, {"attention.head_count", 2u}, {"attention.head_count_kv", 1u}})
      set_u32(std::string("llama.") + key, v);
    set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
    tensor("token_embd.weight", {8, 10});
    tensor("output_norm.weight", {8});
    layer(0);
  }

  // The tensors of layer `l`.
  void layer(int l) {
    for (auto [name, dims] : {std::pair{"attn_norm", std::vector<uint64_t>{8}}, {"attn_q", {8, 8}}, {"attn_k", {8, 4}},
                              {"attn_v", {8, 4}}, {"attn_output", {8, 8}}, {"ffn_norm", {8}}, {"ffn_gate", {8, 16}},
                              {"ffn_up", {8, 16}}, {"ffn_down", {16, 8}}})
      tensor(fmt::format("blk.{}.{}.weight", l, name), dims);
  }

  // Another family's file: general.architecture and the "llama." keys renamed to "<arch>.".
  void set_architecture(const std::string& arch) {
    for (Kv& e : kv_)
      if (e.key.starts_with("llama.")) e.key = arch + e.key.substr(5);
    set_string("general.architecture", arch);
  }

  void set_u32(const std::string& key, uint32_t v) { set(key, kU32, pod(v)); }
  void set_f32(const std::string& key, float v) { set(key, kF32, pod(v)); }
  void set_string(const std::string& key, const std::string& v) { set(key, kString, pod(uint64_t{v.size()}) + v); }
  void erase_key(const std::string& key) { std::erase_if(kv_, [&](const auto& e) { return e.key == key; }); }
  void tensor(const std::string& name, std::vector<uint64_t> dims, uint32_t type = kTypeF32, float fill = 0.5f) {
    erase_tensor(name);
    tensors_.push_back({name, std::move(dims), type, fill});
  }
  void erase_tensor(const std::string& name) { std::erase_if(tensors_, [&](const auto& t) { return t.name == name; }); }

  // GGUF v3, alignment 32; every tensor's elements are 4 bytes (f32 or i32) holding `fill`.
  fs::path write(const test::TempDir& tmp, const std::string& file = "model.gguf") const {
    std::string out = std::string("GGUF").append(pod(uint32_t{3})).append(pod(uint64_t{tensors_.size()}));
    out += pod(uint64_t{kv_.size()});
    for (const Kv& e : kv_) out += str(e.key) + pod(e.type) + e.value;
    std::string data;
    for (const Tensor& t : tensors_) {
      data.resize((data.size() + 31) / 32 * 32, '\0');
      out += str(t.name) + pod(static_cast<uint32_t>(t.dims.size()));
      uint64_t n = 1;
      for (uint64_t d : t.dims) out += pod(d), n *= d;
      out += pod(t.type) + pod(uint64_t{data.size()});
      for (uint64_t i = 0; i < n; ++i) data += pod(t.fill);
    }
    out.resize((out.size() + 31) / 32 * 32, '\0');
    test::write_bytes(tmp / file, out + data);
    return tmp / file;
  }

 private:
  struct Kv {
    std::string key;
    uint32_t type;
    std::string value;
  };
  struct Tensor {
    std::string name;
    std::vector<uint64_t> dims;
    uint32_t type;
    float fill;
  };
  template <typename T>
  static std::string pod(T v) {
    std::string b(sizeof(T), '\0');
    std::memcpy(b.data(), &v, sizeof(T));
    return b;
  }
  static std::string str(const std::string& s) { return pod(uint64_t{s.size()}) + s; }
  void set(const std::string& key, uint32_t type, std::string value) {
    erase_key(key);
    kv_.push_back({key, type, std::move(value)});
  }
  std::vector<Kv> kv_;
  std::vector<Tensor> tensors_;
};

std::string load_error(const fs::path& path) {
  return test::error_of([&] { Model::load(path, {.device = Device::CPU}); });
}

TEST(GgufModelErrors, TheUnbrokenTinyModelLoadsWhateverItsName) {
  test::TempDir tmp;
  TinyGguf g;
  const auto m = Model::load(g.write(tmp, "weights.bin"), {.device = Device::CPU});  // known by its magic
  EXPECT_EQ(m->config().vocab_size, 10);
  EXPECT_EQ(m->config().head_dim, 4);
  EXPECT_TRUE(m->config().tie_word_embeddings);
  EXPECT_FALSE(m->has_tokenizer());
  EXPECT_THAT(test::error_of([&] { m->tokenizer(); }), HasSubstr("no tokenizer"));
  test::write_bytes(tmp / "fake.gguf", "GGUX and then some");
  EXPECT_THAT(load_error(tmp / "fake.gguf"), AllOf(HasSubstr("fake.gguf"), HasSubstr("not a GGUF file")));
}

TEST(GgufModelErrors, MissingTensor) {
  test::TempDir tmp;
  TinyGguf g;
  g.erase_tensor("blk.0.attn_v.weight");
  EXPECT_THAT(load_error(g.write(tmp)), AllOf(HasSubstr("model.gguf"), HasSubstr("'blk.0.attn_v.weight'"),
                                             HasSubstr("missing"), HasSubstr("[8, 4]")));
}

TEST(GgufModelErrors, TensorDimsDisagreeWithTheMetadata) {
  test::TempDir tmp;
  TinyGguf g;
  g.tensor("blk.0.attn_k.weight", {4, 8});  // transposed: same element count
  EXPECT_THAT(load_error(g.write(tmp)),
              AllOf(HasSubstr("'blk.0.attn_k.weight'"), HasSubstr("has dims [4, 8]"), HasSubstr("implies [8, 4]")));
}

TEST(GgufModelErrors, UnsupportedTensorType) {
  test::TempDir tmp;
  TinyGguf g;
  g.tensor("blk.0.ffn_norm.weight", {8}, TinyGguf::kTypeI32);
  EXPECT_THAT(load_error(g.write(tmp)),
              AllOf(HasSubstr("'blk.0.ffn_norm.weight'"), HasSubstr("type i32"), HasSubstr("q8_0")));
}

TEST(GgufModelErrors, TensorTheModelDoesNotUse) {
  test::TempDir tmp;
  TinyGguf g;
  g.tensor("blk.0.attn_q.bias", {8});  // llama.cpp's "llama" may carry biases; kvinfer's does not
  EXPECT_THAT(load_error(g.write(tmp)), AllOf(HasSubstr("'blk.0.attn_q.bias'"), HasSubstr("not part of a llama")));
}

// A name read from the file is escaped in the message itself (what the C API and a library user
// see, not only the tools' printable line): a NUL does not end it, a TAB or ESC is not raw.
TEST(GgufModelErrors, NamesWithControlBytesAreEscapedInTheMessage) {
  test::TempDir tmp;
  TinyGguf g;
  g.tensor(std::string("blk.0.\tq\0x\x1b[2J", 14), {8});
  const std::string e = load_error(g.write(tmp));
  EXPECT_THAT(e, HasSubstr("tensor 'blk.0.\\tq\\x00x\\x1b[2J' is not part of a llama model"));
  for (const char c : e) EXPECT_GE(static_cast<unsigned char>(c), 0x20u) << "a raw control byte in: " << e;
}

TEST(GgufModelErrors, LayerBeyondTheBlockCount) {  // would run with the extra layer ignored
  test::TempDir tmp;
  TinyGguf g;
  g.layer(1);
  EXPECT_THAT(load_error(g.write(tmp)),
              AllOf(HasSubstr("model.gguf"),
                    HasSubstr("tensor 'blk.1.attn_norm.weight' is for layer 1, but key 'llama.block_count' is 1")));
  g.set_u32("llama.block_count", 2);
  EXPECT_EQ(Model::load(g.write(tmp), {.device = Device::CPU})->config().num_layers, 2);
}

TEST(GgufModelErrors, UnsupportedArchitecture) {
  test::TempDir tmp;
  TinyGguf g;
  g.set_string("general.architecture", "falcon");
  EXPECT_THAT(load_error(g.write(tmp)), AllOf(HasSubstr("general.architecture"), HasSubstr("'falcon'")));
}

// "qwen3moe": its expert keys are required and named when missing; the k weights are renormalised
// by default (llama.cpp's qwen3moe graph always does); a layer without ffn_gate_inp is dense.
TEST(GgufModelErrors, Qwen3MoeExpertKeys) {
  test::TempDir tmp;
  TinyGguf g;
  g.set_string("general.architecture", "qwen3moe");
  for (auto [key, v] : {std::pair{"block_count", 1u}, {"context_length", 16u}, {"embedding_length", 8u},
                        {"feed_forward_length", 16u}, {"attention.head_count", 2u}, {"attention.head_count_kv", 1u}}) {
    g.erase_key(std::string("llama.") + key);
    g.set_u32(std::string("qwen3moe.") + key, v);
  }
  g.erase_key("llama.attention.layer_norm_rms_epsilon");
  g.set_f32("qwen3moe.attention.layer_norm_rms_epsilon", 1e-5f);
  g.tensor("blk.0.attn_q_norm.weight", {4});
  g.tensor("blk.0.attn_k_norm.weight", {4});
  EXPECT_THAT(load_error(g.write(tmp)), AllOf(HasSubstr("'qwen3moe.expert_count'"), HasSubstr("is missing")));
  g.set_u32("qwen3moe.expert_count", 2);
  g.set_u32("qwen3moe.expert_used_count", 1);
  EXPECT_THAT(load_error(g.write(tmp)),
              AllOf(HasSubstr("'qwen3moe.expert_feed_forward_length'"), HasSubstr("is missing")));
  g.set_u32("qwen3moe.expert_feed_forward_length", 4);
  {
    const ModelConfig c = Model::load(g.write(tmp), {.device = Device::CPU})->config();
    EXPECT_EQ(c.arch, Architecture::Qwen3Moe);
    EXPECT_TRUE(c.qk_norm);
    EXPECT_TRUE(c.norm_topk_prob);
    EXPECT_EQ(c.shared_expert_intermediate_size, 0);
    EXPECT_FALSE(c.is_moe_layer(0));  // no ffn_gate_inp: dense
  }
  for (const char* dense : {"blk.0.ffn_gate.weight", "blk.0.ffn_up.weight", "blk.0.ffn_down.weight"}) g.erase_tensor(dense);
  g.tensor("blk.0.ffn_gate_inp.weight", {8, 2});
  g.tensor("blk.0.ffn_gate_exps.weight", {8, 4, 2});
  g.tensor("blk.0.ffn_up_exps.weight", {8, 4, 2});
  g.tensor("blk.0.ffn_down_exps.weight", {4, 8, 2});
  EXPECT_TRUE(Model::load(g.write(tmp), {.device = Device::CPU})->config().is_moe_layer(0));
  g.set_u32("qwen3moe.expert_gating_func", 2);  // sigmoid
  EXPECT_THAT(load_error(g.write(tmp)), AllOf(HasSubstr("'qwen3moe.expert_gating_func'"), HasSubstr("softmax")));
}

TEST(GgufModelErrors, BadRopeScaling) {
  test::TempDir tmp;
  TinyGguf g;
  g.set_string("llama.rope.scaling.type", "dynamic");  // not a llama.cpp type
  g.set_f32("llama.rope.scaling.factor", 4.0f);
  EXPECT_THAT(load_error(g.write(tmp)), AllOf(HasSubstr("'llama.rope.scaling.type'"), HasSubstr("'dynamic'")));
  // YaRN as HF computes it: llama.cpp's other extrapolation factors and DeepSeek's log multiplier
  // are refused, naming the key.
  g.set_string("llama.rope.scaling.type", "yarn");
  g.set_f32("llama.rope.scaling.yarn_ext_factor", 0.5f);
  EXPECT_THAT(load_error(g.write(tmp)), AllOf(HasSubstr("'llama.rope.scaling.yarn_ext_factor'"), HasSubstr("0.5")));
  g.erase_key("llama.rope.scaling.yarn_ext_factor");
  g.set_f32("llama.rope.scaling.yarn_log_multiplier", 0.1f);
  EXPECT_THAT(load_error(g.write(tmp)), HasSubstr("'llama.rope.scaling.yarn_log_multiplier'"));
  g.erase_key("llama.rope.scaling.yarn_log_multiplier");
  {
    const RopeScaling s = Model::load(g.write(tmp), {.device = Device::CPU})->config().rope_scaling;
    EXPECT_EQ(s.type, RopeScaling::Type::Yarn);
    EXPECT_DOUBLE_EQ(s.attention_factor, 0.1 * std::log(4.0) + 1.0);  // HF's default
  }
  g.set_string("llama.rope.scaling.type", "linear");
  g.set_f32("llama.rope.scaling.factor", 0.5f);
  EXPECT_THAT(load_error(g.write(tmp)), AllOf(HasSubstr("'llama.rope.scaling.factor'"), HasSubstr(">= 1")));
  g.erase_key("llama.rope.scaling.factor");
  EXPECT_THAT(load_error(g.write(tmp)), AllOf(HasSubstr("'llama.rope.scaling.factor'"), HasSubstr("missing")));
  g.set_string("llama.rope.scaling.type", "none");
  g.set_f32("llama.rope.scaling.factor", 2.0f);
  EXPECT_THAT(load_error(g.write(tmp)), AllOf(HasSubstr("'llama.rope.scaling.type'"), HasSubstr("is 'none'")));
  g.erase_key("llama.rope.scaling.type");  // a factor alone is linear scaling, as in llama.cpp
  EXPECT_EQ(Model::load(g.write(tmp), {.device = Device::CPU})->config().rope_scaling.type, RopeScaling::Type::Linear);
  g.erase_key("llama.rope.scaling.factor");
  g.tensor("rope_freqs.weight", {2}, TinyGguf::kTypeF32, 0.0f);
  EXPECT_THAT(load_error(g.write(tmp)), AllOf(HasSubstr("'rope_freqs.weight'"), HasSubstr("positive")));
  g.tensor("rope_freqs.weight", {3});
  EXPECT_THAT(load_error(g.write(tmp)), AllOf(HasSubstr("'rope_freqs.weight'"), HasSubstr("[3]")));
}

TEST(GgufModelErrors, MixtureOfExpertsKeysAndTensors) {
  test::TempDir tmp;
  TinyGguf g;
  g.set_u32("llama.expert_count", 4);
  g.set_u32("llama.expert_used_count", 5);
  EXPECT_THAT(load_error(g.write(tmp)), AllOf(HasSubstr("'llama.expert_used_count'"), HasSubstr("(5) exceeds expert_count (4)")));
  g.set_u32("llama.expert_used_count", 2);
  g.set_u32("llama.expert_gating_func", 2);  // sigmoid (DeepSeek-V3)
  EXPECT_THAT(load_error(g.write(tmp)), AllOf(HasSubstr("'llama.expert_gating_func'"), HasSubstr("only softmax")));
  g.erase_key("llama.expert_gating_func");
  g.set_f32("llama.expert_weights_scale", 2.5f);
  EXPECT_THAT(load_error(g.write(tmp)), AllOf(HasSubstr("'llama.expert_weights_scale'"), HasSubstr("2.5")));
  g.erase_key("llama.expert_weights_scale");
  g.set_u32("llama.expert_count", 1u << 20);
  EXPECT_THAT(load_error(g.write(tmp)), AllOf(HasSubstr("'llama.expert_count'"), HasSubstr("at most")));
  g.set_u32("llama.expert_count", 4);
  // A router makes the layer sparse: its stacked experts must then be there, with their shapes.
  g.tensor("blk.0.ffn_gate_inp.weight", {8, 4});
  EXPECT_THAT(load_error(g.write(tmp)), AllOf(HasSubstr("'blk.0.ffn_gate_exps.weight'"), HasSubstr("missing")));
  for (const char* name : {"ffn_gate", "ffn_up", "ffn_down"}) g.erase_tensor(fmt::format("blk.0.{}.weight", name));
  g.tensor("blk.0.ffn_gate_exps.weight", {8, 16, 4});
  g.tensor("blk.0.ffn_up_exps.weight", {8, 16, 4});
  g.tensor("blk.0.ffn_down_exps.weight", {16, 8, 3});  // one expert short
  EXPECT_THAT(load_error(g.write(tmp)), HasSubstr("'blk.0.ffn_down_exps.weight'"));
  g.tensor("blk.0.ffn_down_exps.weight", {16, 8, 4});
  EXPECT_EQ(Model::load(g.write(tmp), {.device = Device::CPU})->config().num_experts, 4);
  // qwen2moe: the experts' width is its own key.
  TinyGguf q;
  q.set_architecture("qwen2moe");
  q.set_u32("qwen2moe.expert_count", 4);
  q.set_u32("qwen2moe.expert_used_count", 2);
  EXPECT_THAT(load_error(q.write(tmp)), AllOf(HasSubstr("'qwen2moe.expert_feed_forward_length'"), HasSubstr("missing")));
}

TEST(GgufModelErrors, Qwen3GemmaAndPhi3KeysAndTensors) {
  test::TempDir tmp;
  {
    TinyGguf g;
    g.set_architecture("qwen3");
    EXPECT_THAT(load_error(g.write(tmp)), AllOf(HasSubstr("'blk.0.attn_q_norm.weight'"), HasSubstr("missing")));
    g.tensor("blk.0.attn_q_norm.weight", {4});
    g.tensor("blk.0.attn_k_norm.weight", {3});
    EXPECT_THAT(load_error(g.write(tmp)), AllOf(HasSubstr("'blk.0.attn_k_norm.weight'"), HasSubstr("[4]")));
    g.tensor("blk.0.attn_k_norm.weight", {4});
    EXPECT_TRUE(Model::load(g.write(tmp), {.device = Device::CPU})->config().qk_norm);
  }
  for (const std::string arch : {"gemma2", "gemma3"}) {
    SCOPED_TRACE(arch);
    TinyGguf g;
    g.set_architecture(arch);
    if (arch == "gemma3") {
      g.tensor("blk.0.attn_q_norm.weight", {4});
      g.tensor("blk.0.attn_k_norm.weight", {4});
    }
    EXPECT_THAT(load_error(g.write(tmp)), AllOf(HasSubstr("post_attention_norm.weight'"), HasSubstr("missing")));
    g.tensor("blk.0.post_attention_norm.weight", {8});
    g.tensor("blk.0.post_ffw_norm.weight", {8});
    g.set_f32(arch + ".attn_logit_softcapping", -1.0f);
    EXPECT_THAT(load_error(g.write(tmp)), AllOf(HasSubstr(fmt::format("'{}.attn_logit_softcapping'", arch)), HasSubstr("positive")));
    g.set_f32(arch + ".attn_logit_softcapping", 50.0f);
    g.set_u32(arch + ".attention.sliding_window", 4);
    g.set_u32(arch + ".attention.sliding_window_pattern", 0);
    EXPECT_THAT(load_error(g.write(tmp)), AllOf(HasSubstr(fmt::format("'{}.attention.sliding_window_pattern'", arch)),
                                               HasSubstr("must be in [1,")));
    g.set_u32(arch + ".attention.sliding_window_pattern", 2);
    if (arch == "gemma3") {
      g.set_f32("gemma3.rope.freq_base_swa", 0.0f);
      EXPECT_THAT(load_error(g.write(tmp)), AllOf(HasSubstr("'gemma3.rope.freq_base_swa'"), HasSubstr("positive")));
      g.erase_key("gemma3.rope.freq_base_swa");
    }
    const auto m = Model::load(g.write(tmp), {.device = Device::CPU});
    EXPECT_EQ(m->config().sliding_window, 4);
    EXPECT_EQ(m->config().attn_logit_softcapping, 50.0);
  }
  {
    TinyGguf g;
    g.set_architecture("phi3");
    g.set_u32("phi3.attention.sliding_window", 1u << 31);
    EXPECT_THAT(load_error(g.write(tmp)), AllOf(HasSubstr("'phi3.attention.sliding_window'"), HasSubstr("must be in [0,")));
  }
}

TEST(GgufModelErrors, KeyOfTheWrongType) {
  test::TempDir tmp;
  TinyGguf g;
  g.set_string("llama.block_count", "1");
  EXPECT_THAT(load_error(g.write(tmp)), AllOf(HasSubstr("'llama.block_count'"), HasSubstr("stored string")));
  g = TinyGguf();
  g.set_u32("general.architecture", 1);
  EXPECT_THAT(load_error(g.write(tmp)), AllOf(HasSubstr("'general.architecture'"), HasSubstr("wanted string")));
}

TEST(GgufModelErrors, ValuesOutOfRange) {
  const std::pair<std::string, std::string> cases[] = {
      {"llama.block_count", "must be in [1,"},                // 0
      {"llama.attention.head_count_kv", "must divide"},       // 3 of 2 heads
      {"llama.attention.key_length", "must be even"},         // 5
      {"llama.rope.dimension_count", "partial rotary"},       // 2 of head_dim 4
      {"llama.embedding_length", "must be in [1,"},           // 2^31
      {"llama.attention.layer_norm_rms_epsilon", "positive"}  // -1
  };
  const uint32_t values[] = {0, 3, 5, 2, 1u << 31};
  for (size_t i = 0; i < std::size(cases); ++i) {
    SCOPED_TRACE(cases[i].first);
    test::TempDir tmp;
    TinyGguf g;
    if (i < std::size(values))
      g.set_u32(cases[i].first, values[i]);
    else
      g.set_f32(cases[i].first, -1.0f);
    EXPECT_THAT(load_error(g.write(tmp)), AllOf(HasSubstr(fmt::format("'{}'", cases[i].first)), HasSubstr(cases[i].second)));
  }
  test::TempDir tmp;
  TinyGguf g;
  g.set_u32("tokenizer.ggml.eos_token_id", 10);
  EXPECT_THAT(load_error(g.write(tmp)), AllOf(HasSubstr("'tokenizer.ggml.eos_token_id'"), HasSubstr("outside")));
}

}  // namespace
}  // namespace kvinfer
