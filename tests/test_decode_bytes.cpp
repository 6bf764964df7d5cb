// decode_step_bytes (src/models/decode_bytes.h): the bytes one batch-1 decode step must move,
// against numbers worked out by hand for small synthetic models, and TinyLlama-1.1B's figures
// (docs/benchmarks.md, "The decode floor").
#include <gtest/gtest.h>

#include <memory>

#include "kvinfer/kvinfer.h"
#include "models/decode_bytes.h"
#include "models/model_internal.h"
#include "models/synthetic.h"
#include "models/weights.h"
#include "test_files.h"

namespace kvinfer {
namespace {

using test::error_of;

// A Llama of 2 layers, hidden 96 (6 heads / 2 KV heads of 16), intermediate 160, vocab 300.
ModelConfig small_llama(bool tied) {
  ModelConfig c = synthetic_config("smollm2-135m");
  c.vocab_size = 300;
  c.hidden_size = 96;
  c.intermediate_size = 160;
  c.num_layers = 2;
  c.num_heads = 6;
  c.num_kv_heads = 2;
  c.head_dim = 16;
  c.max_position_embeddings = 64;
  c.tie_word_embeddings = tied;
  return c;
}

TEST(DecodeStepBytes, SmallLlamaF32ByHand) {
  auto m = random_model(small_llama(false), {.device = Device::CPU});
  const DecodeStepBytes b = decode_step_bytes(*m, 10, DType::F16);
  // Per layer, f32: q 96×96 + k 32×96 + v 32×96 + o 96×96 + gate, up 160×96 + down 96×160
  // = 70,656 values = 282,624 bytes; 2 layers.
  EXPECT_EQ(b.layer_matrices, 565'248u);
  // RMSNorm weights: 2 a layer and the final one, 96 f32 each: 5 × 384. No biases.
  EXPECT_EQ(b.norms_biases, 1'920u);
  EXPECT_EQ(b.lm_head, 115'200u);      // 300 × 96 × 4
  EXPECT_EQ(b.embedding_rows, 384u);   // one row of 96 f32
  EXPECT_EQ(b.positions_read, 10);
  EXPECT_EQ(b.kv_read, 2'560u);        // 2 (K, V) × 2 layers × 2 KV heads × 16 × 2 bytes × 10
  EXPECT_EQ(b.kv_write, 256u);         // one position
  EXPECT_EQ(b.weights(), 682'752u);
  EXPECT_EQ(b.total(), 685'568u);
  EXPECT_EQ(b.weights(), m->step_weight_bytes());
}

// Q8_0: a row of 96 values is 3 blocks of 34 bytes, a row of 160 five. Tied: the LM head is the
// embedding, read once as the head (plus the one row the lookup reads).
TEST(DecodeStepBytes, SmallLlamaQ8_0TiedByHand) {
  auto m = random_model(small_llama(true), {.weight_dtype = DType::Q8_0, .device = Device::CPU});
  const DecodeStepBytes b = decode_step_bytes(*m, 1, DType::F16);
  // q 96 × 102 + k, v 32 × 102 + o 96 × 102 + gate, up 160 × 102 + down 96 × 170 = 75,072; × 2.
  EXPECT_EQ(b.layer_matrices, 150'144u);
  EXPECT_EQ(b.norms_biases, 1'920u);
  EXPECT_EQ(b.lm_head, 30'600u);  // 300 × 102, once
  EXPECT_EQ(b.embedding_rows, 102u);
  EXPECT_EQ(b.kv_read, 256u);  // context 1: the new position itself
  EXPECT_EQ(b.kv_write, 256u);
  EXPECT_EQ(b.total(), 182'766u + 512u);
  EXPECT_EQ(b.weights(), m->step_weight_bytes());
  // The whole model is the head (= embedding) once, the layers and the norms.
  EXPECT_EQ(m->weight_bytes(), 150'144u + 1'920u + 30'600u);
}

// GPT-2: LayerNorm biases, projection biases, a learned position row; tied; an f32 cache.
TEST(DecodeStepBytes, SmallGpt2ByHand) {
  ModelConfig c = synthetic_config("gpt2");
  c.vocab_size = 300;
  c.hidden_size = 96;
  c.intermediate_size = 160;
  c.num_layers = 2;
  c.num_heads = c.num_kv_heads = 6;
  c.head_dim = 16;
  c.max_position_embeddings = 64;
  auto m = random_model(c, {.device = Device::CPU});
  const DecodeStepBytes b = decode_step_bytes(*m, 5, DType::F32);
  // Per layer: q, k, v, o 96×96 + up 160×96 + down 96×160 = 67,584 values × 4; 2 layers.
  EXPECT_EQ(b.layer_matrices, 540'672u);
  // Per layer 1,024 f32: 2 LayerNorms (weight + bias) 384, q/k/v biases 288, o 96, up 160,
  // down 96; then the final LayerNorm 192: (2 × 1,024 + 192) × 4.
  EXPECT_EQ(b.norms_biases, 8'960u);
  EXPECT_EQ(b.lm_head, 115'200u);
  EXPECT_EQ(b.embedding_rows, 768u);  // a token row and a position row
  EXPECT_EQ(b.kv_read, 7'680u);       // 2 × 2 × 6 × 16 × 4 × 5
  EXPECT_EQ(b.kv_write, 1'536u);
  EXPECT_EQ(b.total(), 674'816u);
  EXPECT_EQ(b.weights(), m->step_weight_bytes());
}

TEST(DecodeStepBytes, SlidingWindowBoundsTheKvRead) {
  ModelConfig c = small_llama(false);
  c.sliding_window = 4;
  auto m = random_model(c, {.device = Device::CPU});
  const DecodeStepBytes at3 = decode_step_bytes(*m, 3, DType::BF16), at10 = decode_step_bytes(*m, 10, DType::BF16);
  EXPECT_EQ(at3.positions_read, 3);
  EXPECT_EQ(at3.kv_read, 768u);
  EXPECT_EQ(at10.positions_read, 4);
  EXPECT_EQ(at10.kv_read, 1'024u);
  EXPECT_EQ(at10.kv_write, 256u);
}

// Sliding and global layers (Gemma, Qwen2's use_sliding_window): each layer reads its own span.
TEST(DecodeStepBytes, PerLayerWindowsReadEachLayersSpan) {
  ModelConfig c = small_llama(false);
  c.sliding_window = 4;
  c.sliding_layers = {true, false};
  auto m = random_model(c, {.device = Device::CPU});
  const DecodeStepBytes at10 = decode_step_bytes(*m, 10, DType::BF16);
  EXPECT_EQ(at10.positions_read, 10);      // the global layer's
  EXPECT_EQ(at10.kv_read, 128u * (4 + 10));  // a layer's K and V row: 2 × 2 × 16 × 2 bytes
  EXPECT_EQ(at10.kv_write, 256u);
}

// Gemma 3's mix (every third layer global here) with an int8 cache: each layer reads its own
// span, not the rows its cache keeps (a windowed layer's ring holds more than its window).
TEST(DecodeStepBytes, MixedWindowsReadTheirWindowNotTheirRing) {
  ModelConfig c = small_llama(false);
  c.num_layers = 6;
  c.sliding_window = 5;
  c.sliding_layers = {true, true, false, true, true, false};
  auto m = random_model(c, {.device = Device::CPU});
  const uint64_t row = 2 * 2 * (16 * 1 + 4);  // one layer's K and V of a position: 2 KV heads of 16 codes + a scale
  for (int64_t context : {1, 3, 5, 9, 40}) {
    const DecodeStepBytes b = decode_step_bytes(*m, context, DType::I8);
    const uint64_t windowed = static_cast<uint64_t>(std::min<int64_t>(context, 5)), global = static_cast<uint64_t>(context);
    EXPECT_EQ(b.kv_read, row * (4 * windowed + 2 * global)) << "context " << context;
    EXPECT_EQ(b.positions_read, context) << "context " << context;
    EXPECT_EQ(b.kv_write, row * 6);
  }
}

TEST(DecodeStepBytes, BadContextAndCacheDtypeAreErrors) {
  auto m = random_model(small_llama(false), {.device = Device::CPU});
  EXPECT_NE(error_of([&] { decode_step_bytes(*m, 0, DType::F16); }).find("context 0"), std::string::npos);
  EXPECT_NE(error_of([&] { decode_step_bytes(*m, 4, DType::Q8_0); }).find("q8_0"), std::string::npos);
}

// A model of `config`'s shape whose matrices have sizes and no bytes: decode_step_bytes reads
// the sizes only, so TinyLlama's figures need no 2 GB of weights.
std::shared_ptr<const Model> shape_only(const ModelConfig& c, DType dt) {
  auto w = std::make_unique<ModelWeights>();
  const auto mat = [&](int64_t rows, int64_t cols) { return Matrix{dt, nullptr, rows, cols}; };
  const auto vec = [](int64_t n) { return Vector{nullptr, n}; };
  const int64_t h = c.hidden_size, q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim,
                f = c.intermediate_size;
  w->embed = mat(c.vocab_size, h);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    LayerWeights L;
    L.attn_norm = L.ffn_norm = vec(h);
    L.q.weight = mat(q, h);
    L.k.weight = L.v.weight = mat(kv, h);
    L.o.weight = mat(h, q);
    L.gate.weight = L.up.weight = mat(f, h);
    L.down.weight = mat(h, f);
    w->layers.push_back(L);
  }
  w->final_norm = vec(h);
  w->lm_head.weight = mat(c.vocab_size, h);
  return make_model({.config = c, .weights = std::move(w), .device = Device::CPU});
}

// TinyLlama-1.1B (22 layers, hidden 2048, 4 KV heads of 64, intermediate 5632, vocab 32000,
// untied), the gpu_check table's model, in the cache dtype kvinfer picks (bf16 for bf16 weights,
// f16 for quantised ones). Worked out by hand: a layer is 44,040,192 values (q, o 2048²; k, v
// 256 × 2048; gate, up, down 5632 × 2048); the head 32000 × 2048; 45 RMSNorms of 2048 f32
// (368,640 bytes); a KV position 2 × 22 × 4 × 64 × 2 = 22,528 bytes.
TEST(DecodeStepBytes, TinyLlamaFigures) {
  const ModelConfig c = synthetic_config("tinyllama-1.1b");
  struct Case {
    DType weights;
    uint64_t matrices, head, row, at1, at8192;
  };
  const Case cases[] = {
      // bf16: 2 bytes a value.
      {DType::BF16, 1'937'768'448, 131'072'000, 4'096, 2'069'258'240, 2'253'785'088},
      // Q8_0: 34 bytes per 32 values.
      {DType::Q8_0, 1'029'439'488, 69'632'000, 2'176, 1'099'487'360, 1'284'014'208},
      // Q4_K: 144 bytes per 256 values.
      {DType::Q4_K, 544'997'376, 36'864'000, 1'152, 582'276'224, 766'803'072},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(std::string(dtype_name(k.weights)));
    const auto m = shape_only(c, k.weights);
    const DType kv = default_kv_dtype(k.weights);
    const DecodeStepBytes at1 = decode_step_bytes(*m, 1, kv), at8192 = decode_step_bytes(*m, 8192, kv);
    EXPECT_EQ(at1.layer_matrices, k.matrices);
    EXPECT_EQ(at1.norms_biases, 368'640u);
    EXPECT_EQ(at1.lm_head, k.head);
    EXPECT_EQ(at1.embedding_rows, k.row);
    EXPECT_EQ(at1.kv_write, 22'528u);
    EXPECT_EQ(at1.total(), k.at1);
    EXPECT_EQ(at8192.kv_read, 22'528u * 8192);
    EXPECT_EQ(at8192.total(), k.at8192);
    EXPECT_EQ(at1.weights(), m->step_weight_bytes());
  }
}

}  // namespace
}  // namespace kvinfer
