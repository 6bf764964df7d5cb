// KV cache state: save/restore (kvinfer/kv_state.h), copy (fork), truncate and tokens(), on the
// CPU. Every continuation is compared bit for bit (memcmp of the logits) with an uninterrupted run.
// Hostile state files: every corruption is one kvinfer::Error of the right kind naming the field.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/hash.h"
#include "core/kv_cache_access.h"
#include "core/kv_state_format.h"
#include "kv_state_util.h"
#include "kvinfer/kvinfer.h"
#include "models/model_internal.h"
#include "models/synthetic.h"
#include "reference.h"
#include "test_files.h"

namespace kvinfer {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;
using test::fresh_run;
using test::prefill;
using test::run_steps;
using test::same_bits;
using test::Trace;

constexpr int kSteps = 10;  // decode steps of a run
constexpr int kSplit = 4;   // where a run is saved, forked or cut
constexpr int64_t kCapacity = 32;

std::vector<int32_t> prompt_of(const std::string& fixture) { return test::Reference(fixture).prompt_ids; }

std::shared_ptr<const Model> load_cpu(const fs::path& path) { return Model::load(path, {.device = Device::CPU}); }

std::vector<int32_t> ids_of(const Trace& t, const std::vector<int32_t>& prompt) {
  std::vector<int32_t> ids = prompt;
  ids.insert(ids.end(), t.fed.begin(), t.fed.end());
  return ids;
}

// Save after kSplit steps, restore into fresh caches (the same capacity, and larger), continue:
// the same ids and logit bits as the run never interrupted.
void check_save_restore(const std::shared_ptr<const Model>& model, const std::vector<int32_t>& prompt,
                        int steps = kSteps, int split = kSplit) {
  const Trace full = fresh_run(model, prompt, steps, {}, kCapacity);
  test::TempDir dir;
  const fs::path file = dir.path() / "state.kvs";
  Session s(model);
  KvCache kv(*model, kCapacity);
  Trace a;
  auto last = prefill(s, kv, prompt, a);
  run_steps(s, kv, last, 0, split, {}, a);
  EXPECT_EQ(std::vector<int32_t>(kv.tokens().begin(), kv.tokens().end()), ids_of(a, prompt));
  save_kv_state(kv, *model, file);
  for (std::optional<int64_t> capacity : {std::optional<int64_t>{}, std::optional<int64_t>{kCapacity + 16}}) {
    KvCache restored = load_kv_state(*model, file, capacity);
    EXPECT_EQ(restored.capacity(), capacity.value_or(kCapacity));
    EXPECT_EQ(restored.size(), kv.size());
    EXPECT_EQ(restored.dtype(), kv.dtype());
    ASSERT_TRUE(std::ranges::equal(restored.tokens(), kv.tokens()));
    Session s2(model);
    Trace b = a;
    auto last2 = last;
    run_steps(s2, restored, last2, split, steps, {}, b);
    EXPECT_EQ(b.fed, full.fed) << "capacity " << restored.capacity();
    EXPECT_TRUE(same_bits(b.logits, full.logits)) << "capacity " << restored.capacity();
    EXPECT_EQ(std::vector<int32_t>(restored.tokens().begin(), restored.tokens().end()), ids_of(full, prompt));
  }
}

// Fork after kSplit steps: the original continues greedily, the copy from another token; each is
// its own uninterrupted run.
void check_fork(const std::shared_ptr<const Model>& model, const std::vector<int32_t>& prompt) {
  const Trace greedy = fresh_run(model, prompt, kSteps, {}, kCapacity);
  const int32_t other = (greedy.fed[kSplit] + 1) % static_cast<int32_t>(model->config().vocab_size);
  const Trace forked = fresh_run(model, prompt, kSteps, {{kSplit, other}}, kCapacity);

  Session s(model);
  KvCache kv(*model, kCapacity);
  Trace a;
  auto last = prefill(s, kv, prompt, a);
  run_steps(s, kv, last, 0, kSplit, {}, a);
  for (std::optional<int64_t> capacity : {std::optional<int64_t>{}, std::optional<int64_t>{kCapacity + 8}}) {
    KvCache fork = kv.copy(capacity);
    EXPECT_EQ(fork.capacity(), capacity.value_or(kCapacity));
    EXPECT_TRUE(std::ranges::equal(fork.tokens(), kv.tokens()));
    Trace b = a;
    auto last2 = last;
    Session s2(model);
    run_steps(s2, fork, last2, kSplit, kSteps, {{kSplit, other}}, b);
    EXPECT_EQ(b.fed, forked.fed);
    EXPECT_TRUE(same_bits(b.logits, forked.logits));
  }
  run_steps(s, kv, last, kSplit, kSteps, {}, a);  // the original, after its forks grew
  EXPECT_EQ(a.fed, greedy.fed);
  EXPECT_TRUE(same_bits(a.logits, greedy.logits));
}

// Cut back to prompt + 2 after kSteps (a sliding-window ring: as far back as it allows, kSteps
// less min(window, 512)), then continue from another token: a fresh run of that prefix (the
// prompt prefilled, the kept ids decoded) continued the same way.
void check_truncate(const std::shared_ptr<const Model>& model, const std::vector<int32_t>& prompt) {
  int keep = 2;
  const ModelConfig& c = model->config();
  for (int64_t l = 0; l < c.num_layers; ++l)
    if (c.layer_window(l) > 0 && kv_layer_rows(c, l, kCapacity) < kCapacity)
      keep = std::max(keep, kSteps - static_cast<int>(kv_ring_piece(c.layer_window(l))));
  const Trace greedy = fresh_run(model, prompt, kSteps, {}, kCapacity);
  const int32_t other = (greedy.fed[keep] + 3) % static_cast<int32_t>(model->config().vocab_size);
  const Trace expected = fresh_run(model, prompt, kSteps, {{keep, other}}, kCapacity);

  Session s(model);
  KvCache kv(*model, kCapacity);
  Trace a;
  auto last = prefill(s, kv, prompt, a);
  run_steps(s, kv, last, 0, kSteps, {}, a);
  kv.truncate(static_cast<int64_t>(prompt.size()) + keep);
  const std::vector<int32_t> all = ids_of(a, prompt);
  EXPECT_TRUE(std::ranges::equal(kv.tokens(), std::span(all).first(prompt.size() + keep)));
  Trace b;
  b.fed.assign(a.fed.begin(), a.fed.begin() + keep);
  b.logits.assign(a.logits.begin(), a.logits.begin() + (keep + 1) * model->config().vocab_size);
  run_steps(s, kv, last, keep, kSteps, {{keep, other}}, b);
  EXPECT_EQ(b.fed, expected.fed);
  EXPECT_TRUE(same_bits(b.logits, expected.logits));
  kv.clear();
  EXPECT_TRUE(kv.tokens().empty());
}

class KvStateFixture : public ::testing::TestWithParam<const char*> {};

TEST_P(KvStateFixture, SaveRestoreContinuesBitIdentically) {
  check_save_restore(load_cpu(test::model_dir(GetParam())), prompt_of(GetParam()));
}
TEST_P(KvStateFixture, ForkContinuesEachWayBitIdentically) {
  check_fork(load_cpu(test::model_dir(GetParam())), prompt_of(GetParam()));
}
TEST_P(KvStateFixture, TruncateThenContinueIsAFreshRunOfThePrefix) {
  check_truncate(load_cpu(test::model_dir(GetParam())), prompt_of(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, KvStateFixture,
                         ::testing::Values("llama_gqa4", "llama_mqa", "llama_bf16", "mistral_window", "qwen2_bias",
                                           "gpt2_tiny", "gpt2_untied_f16"));

// ---- sliding-window rings ----

// The windowed layers' window of a model (one for all of them).
int64_t window_of(const Model& m) {
  for (int64_t l = 0; l < m.config().num_layers; ++l)
    if (m.config().layer_window(l) > 0) return m.config().layer_window(l);
  return 0;
}

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// The run of `steps` decode steps whose every fed id is `full`'s: its logits are full's.
std::map<int, int32_t> forced_as(const Trace& full) {
  std::map<int, int32_t> f;
  for (size_t i = 0; i < full.fed.size(); ++i) f[static_cast<int>(i)] = full.fed[i];
  return f;
}

class KvStateRing : public ::testing::TestWithParam<const char*> {
 protected:
  static constexpr int kRingSteps = 24, kRingSplit = 16;
  static constexpr int64_t kRingCapacity = 48;
  void SetUp() override {
    model = load_cpu(test::model_dir(GetParam()));
    prompt = prompt_of(GetParam());
    window = window_of(*model);
    ASSERT_GT(window, 0);
    full = fresh_run(model, prompt, kRingSteps, {}, kRingCapacity);
  }
  // A cache after the prompt and kRingSplit steps: longer than its rings.
  KvCache split_cache() {
    Session s(model);
    KvCache kv(*model, kRingCapacity);
    Trace a;
    prefill(s, kv, prompt, a);
    run_steps(s, kv, scratch, 0, kRingSplit, forced_as(full), a);
    return kv;
  }
  // Continues `kv` (holding the prompt and `done` steps of `full`) to kRingSteps: full's logits.
  void expect_continues(KvCache& kv, int done, const std::string& what) {
    Session s(model);
    Trace b;
    b.fed.assign(full.fed.begin(), full.fed.begin() + done);
    const auto vocab = static_cast<size_t>(model->config().vocab_size);
    b.logits.assign(full.logits.begin(), full.logits.begin() + static_cast<std::ptrdiff_t>((done + 1) * vocab));
    run_steps(s, kv, scratch, done, kRingSteps, forced_as(full), b);
    EXPECT_EQ(b.fed, full.fed) << what;
    EXPECT_TRUE(same_bits(b.logits, full.logits)) << what;
  }

  std::shared_ptr<const Model> model;
  std::vector<int32_t> prompt;
  int64_t window = 0;
  Trace full;
  std::vector<float> scratch;
  test::TempDir dir;
};

// The file holds each windowed layer's ring (its positions from held_from on) and every position
// of the other layers; the restored cache rewinds exactly as far as the saved one, and continues
// bit for bit, at the saved capacity, a larger one and the fewest positions the rest of the run needs.
TEST_P(KvStateRing, SaveRestoreAfterTheRingWrapped) {
  KvCache kv = split_cache();
  const int64_t n = kv.size();
  ASSERT_GT(kv.earliest_rewind(), 0) << "the ring did not wrap: a longer run is needed";
  const fs::path file = dir.path() / "ring.kvs";
  save_kv_state(kv, *model, file);

  const ModelConfig& c = model->config();
  const int64_t held = kv.earliest_rewind() - window + 1;
  uint64_t rows = 0;
  for (int64_t l = 0; l < c.num_layers; ++l) rows += static_cast<uint64_t>(c.layer_window(l) > 0 ? n - held : n);
  const uint64_t row_bytes = static_cast<uint64_t>(c.head_dim) * dtype_size(kv.dtype()) + kv_scale_bytes(kv.dtype());
  EXPECT_EQ(fs::file_size(file), kv_state::kHeaderBytes + 4 * static_cast<uint64_t>(n) +
                                     rows * 2 * static_cast<uint64_t>(c.num_kv_heads) * row_bytes);

  for (std::optional<int64_t> capacity : {std::optional<int64_t>{}, std::optional<int64_t>{kRingCapacity + 16},
                                          std::optional<int64_t>{n + kRingSteps - kRingSplit}}) {
    KvCache restored = load_kv_state(*model, file, capacity);
    const std::string what = fmt::format("capacity {}", restored.capacity());
    EXPECT_EQ(restored.size(), n) << what;
    EXPECT_EQ(restored.earliest_rewind(), kv.earliest_rewind()) << what;
    ASSERT_TRUE(std::ranges::equal(restored.tokens(), kv.tokens())) << what;
    expect_continues(restored, kRingSplit, what);
  }
  // Rewound as far as it allows, then the same ids again: the same logits.
  KvCache restored = load_kv_state(*model, file);
  const int64_t e = restored.earliest_rewind();
  EXPECT_THAT(test::error_of([&] { restored.truncate(e - 1); }), HasSubstr(fmt::format("truncate({})", e - 1)));
  restored.truncate(e);
  // Saved there, its rings hold less than their rows (positions before e + window − 1 − rows were
  // overwritten by the ones cut off): the restored cache knows it, and continues.
  const fs::path cut = dir.path() / "cut.kvs";
  save_kv_state(restored, *model, cut);
  KvCache again = load_kv_state(*model, cut);
  EXPECT_EQ(again.earliest_rewind(), e);
  EXPECT_THAT(test::error_of([&] { again.truncate(e - 1); }), HasSubstr(fmt::format("truncate({})", e - 1)));
  expect_continues(restored, static_cast<int>(e - static_cast<int64_t>(prompt.size())), "rewound");
  expect_continues(again, static_cast<int>(e - static_cast<int64_t>(prompt.size())), "rewound, saved and restored");
}

// A version 1 file held every position of every layer: it still loads, each windowed layer
// keeping its ring's last rows (the earlier rows are read for the checksum and dropped).
TEST_P(KvStateRing, Version1FilesStillLoad) {
  KvCache kv = split_cache();
  const int64_t n = kv.size();
  const fs::path v2 = dir.path() / "v2.kvs", v1 = dir.path() / "v1.kvs";
  save_kv_state(kv, *model, v2);
  const std::string b = read_all(v2);
  kv_state::Bytes head{};
  std::memcpy(head.data(), b.data(), head.size());
  kv_state::Header h = kv_state::decode(head);
  ASSERT_GT(h.held_from, 0u);
  // Version 1's blocks: the windowed layers' missing rows first (any bytes: they are never read).
  const ModelConfig& c = model->config();
  const size_t row = static_cast<size_t>(c.head_dim) * dtype_size(kv.dtype()), scale = kv_scale_bytes(kv.dtype());
  std::string payload = b.substr(kv_state::kHeaderBytes, 4 * static_cast<size_t>(n));
  uint64_t sum = hash64(payload.data(), payload.size());
  size_t at = kv_state::kHeaderBytes + payload.size();
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const size_t held = c.layer_window(l) > 0 ? static_cast<size_t>(h.held_from) : 0, kept = static_cast<size_t>(n) - held;
    for (int block = 0; block < 2 * c.num_kv_heads; ++block)
      for (const size_t bytes : {row, scale}) {
        if (bytes == 0) continue;
        std::string part(held * bytes, '\x5a');
        part += b.substr(at, kept * bytes);
        at += kept * bytes;
        sum = hash64(part.data(), part.size(), sum);
        payload += part;
      }
  }
  ASSERT_EQ(at, b.size());
  kv_state::Header old = h;
  old.version = kv_state::kVersion1;
  old.header_bytes = kv_state::kHeaderBytes1;
  old.payload_checksum = sum;
  const kv_state::Bytes e = kv_state::encode(old);
  std::ofstream(v1, std::ios::binary) << std::string(reinterpret_cast<const char*>(e.data()), kv_state::kHeaderBytes1)
                                      << payload;
  KvCache restored = load_kv_state(*model, v1);
  EXPECT_EQ(restored.size(), n);
  EXPECT_EQ(restored.earliest_rewind(), kv.earliest_rewind());  // the same rings' rows
  expect_continues(restored, kRingSplit, "version 1");
}

// The header's window fields are checked against the file's size and then the model.
TEST_P(KvStateRing, WindowFieldsAreChecked) {
  KvCache kv = split_cache();
  const fs::path good = dir.path() / "good.kvs";
  save_kv_state(kv, *model, good);
  const std::string b = read_all(good);
  kv_state::Bytes head{};
  std::memcpy(head.data(), b.data(), head.size());
  const kv_state::Header g = kv_state::decode(head);
  auto error = [&](const kv_state::Header& h) {
    const kv_state::Bytes e = kv_state::encode(h);
    std::string bytes = b;
    std::memcpy(bytes.data(), e.data(), e.size());
    const fs::path p = dir.path() / "bad.kvs";
    std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
    return test::error_of([&] { (void)load_kv_state(*model, p); });
  };
  kv_state::Header h = g;
  h.held_from = g.tokens + 1;
  EXPECT_THAT(error(h), HasSubstr("'held_from'"));
  h = g;
  h.held_from = g.tokens - static_cast<uint64_t>(window) + 2;  // the window before the last position is gone
  EXPECT_THAT(error(h), HasSubstr("'held_from'"));
  h = g;
  h.held_from -= 1;  // one row more per windowed block than the file has
  EXPECT_THAT(error(h), AllOf(HasSubstr("'tokens'"), HasSubstr("truncated")));
  h = g;
  h.window = 0;
  EXPECT_THAT(error(h), HasSubstr("'window'"));
  h = g;
  h.windowed_layers = g.layers + 1;
  EXPECT_THAT(error(h), HasSubstr("'windowed_layers'"));
  h = g;
  h.window = g.window + 1;  // the same sizes, another model's window
  EXPECT_THAT(error(h), HasSubstr("'windowed_layers'"));
  EXPECT_NO_THROW(load_kv_state(*model, good));
}

// A prefill cancelled after its chunks wrote further than the rings can rewind (7 positions, a
// piece being min(window, 512) <= 6 here): the cache is as it was, its positions computed again
// from their ids, and continues bit for bit.
TEST_P(KvStateRing, CancelledPrefillRestoresTheRings) {
  KvCache kv = split_cache();
  const int64_t n = kv.size(), e = kv.earliest_rewind();
  const std::vector<int32_t> before(kv.tokens().begin(), kv.tokens().end());
  Session s(model, {.prefill_chunk_tokens = 1});
  const std::vector<int32_t> more(full.fed.begin() + kRingSplit, full.fed.begin() + kRingSplit + 8);
  int asked = 0;
  try {
    s.prefill(kv, more, Logits::Last, [&] { return ++asked >= 7; });
    ADD_FAILURE() << "not cancelled";
  } catch (const Error& err) {
    EXPECT_EQ(err.kind(), ErrorKind::Cancelled) << err.what();
  }
  EXPECT_EQ(kv.size(), n);
  EXPECT_EQ(kv.earliest_rewind(), e);
  EXPECT_TRUE(std::ranges::equal(kv.tokens(), before));
  expect_continues(kv, kRingSplit, "after a cancelled prefill");
}

// A cache whose rings were written past its last position (a pass that failed before its commit,
// as will_write marks it) no longer holds the window its next position needs: not saved.
TEST_P(KvStateRing, SaveRefusesRingsThatLostTheWindow) {
  KvCache kv = split_cache();
  KvCacheAccess::will_write(kv, kv.size() + kRingSteps);
  ASSERT_GT(kv.earliest_rewind(), kv.size());
  EXPECT_THAT(test::error_of([&] { save_kv_state(kv, *model, dir.path() / "lost.kvs"); }),
              AllOf(HasSubstr("save_kv_state"), HasSubstr(fmt::format("window before position {}", kv.size()))));
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

INSTANTIATE_TEST_SUITE_P(Windowed, KvStateRing, ::testing::Values("mistral_window", "qwen2_window", "gemma3_tiny"));

// The default model (tools/fetch_model.sh; $KVINFER_MODEL overrides), skipped when absent.
fs::path default_model() {
  const char* env = std::getenv("KVINFER_MODEL");
  return env != nullptr && *env != '\0' ? fs::path(env) : fs::path(KVINFER_DEFAULT_MODEL);
}

TEST(KvStateDefaultModel, SaveRestoreForkTruncate) {
  const fs::path file = default_model();
  if (!fs::exists(file)) GTEST_SKIP() << file << " is absent (tools/fetch_model.sh fetches it)";
  const auto model = load_cpu(file);
  const std::vector<int32_t> prompt = model->tokenizer().encode("The capital of France is");
  check_save_restore(model, prompt, 6, 3);
  check_fork(model, prompt);
  check_truncate(model, prompt);
}

TEST(KvState, FingerprintFollowsConfigAndWeights) {
  const auto gqa = load_cpu(test::model_dir("llama_gqa4"));
  EXPECT_EQ(ModelAccess::fingerprint(*gqa), ModelAccess::fingerprint(*load_cpu(test::model_dir("llama_gqa4"))));
  EXPECT_NE(ModelAccess::fingerprint(*gqa), ModelAccess::fingerprint(*load_cpu(test::model_dir("llama_mha"))));
  ModelConfig c = gqa->config();
  const auto r0 = random_model(c, {.seed = 1, .device = Device::CPU});
  const auto r1 = random_model(c, {.seed = 2, .device = Device::CPU});
  EXPECT_EQ(ModelAccess::fingerprint(*r0), ModelAccess::fingerprint(*random_model(c, {.seed = 1, .device = Device::CPU})));
  EXPECT_NE(ModelAccess::fingerprint(*r0), ModelAccess::fingerprint(*r1));
  c.rope_theta *= 2;
  EXPECT_NE(ModelAccess::fingerprint(*r0), ModelAccess::fingerprint(*random_model(c, {.seed = 1, .device = Device::CPU})));
}

TEST(KvState, CopyIsCheckedLikeANewCache) {
  const auto model = load_cpu(test::model_dir("llama_gqa4"));
  Session s(model);
  KvCache kv(*model, 16);
  const std::vector<int32_t> ids = {1, 2, 3, 4, 5};
  s.prefill(kv, ids);
  EXPECT_EQ(test::error_of([&] { (void)kv.copy(4); }).find("capacity of 4") != std::string::npos, true);
  try {
    (void)kv.copy(model->context_length() + 1);
    ADD_FAILURE() << "a copy beyond the context length was made";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::ContextFull);
  }
  // Against the model's memory: room for one 16-token cache and not two.
  const uint64_t cache = kv.bytes();
  const auto tight = Model::load(test::model_dir("llama_gqa4"),
                                 {.device = Device::CPU, .memory_limit = model->weight_bytes() + cache + cache / 2});
  KvCache one(*tight, 16);
  EXPECT_THAT(test::error_of([&] { (void)one.copy(); }), HasSubstr("KV cache of 16 tokens"));
  // A copy of an empty cache, and of a config's cache (no model).
  KvCache empty(*model, 8);
  EXPECT_EQ(empty.copy().size(), 0);
  KvCache plain(model->config(), 8, DType::F32);
  EXPECT_EQ(plain.copy(100).capacity(), 100);
}

TEST(KvState, SaveRefusesACacheOfAnotherShape) {
  const auto gqa = load_cpu(test::model_dir("llama_gqa4"));
  const auto mha = load_cpu(test::model_dir("llama_mha"));
  test::TempDir dir;
  KvCache kv(*mha, 8);
  try {
    save_kv_state(kv, *gqa, dir.path() / "x.kvs");
    ADD_FAILURE() << "saved";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
  }
  EXPECT_TRUE(fs::is_empty(dir.path()));  // nothing left behind
  EXPECT_EQ(test::error_of([&] { save_kv_state(KvCache(*gqa, 8), *gqa, dir.path() / "no" / "such" / "dir.kvs"); })
                .find("cannot create a temporary file") != std::string::npos,
            true);
}

// ---- hostile files ----

struct Hostile : ::testing::Test {
  void SetUp() override {
    model = load_cpu(test::model_dir("llama_gqa4"));
    Session s(model);
    KvCache kv(*model, 16, DType::F16);
    s.prefill(kv, std::vector<int32_t>{3, 1, 4, 1, 5});
    save_kv_state(kv, *model, good_path());
    std::ifstream in(good_path(), std::ios::binary);
    good.assign(std::istreambuf_iterator<char>(in), {});
    ASSERT_EQ(good.size(), kv_state::kHeaderBytes + 5 * 4 +
                               static_cast<size_t>(model->config().num_layers * 2 * model->config().num_kv_heads * 5 *
                                                   model->config().head_dim * 2));
    ASSERT_NO_THROW(load_kv_state(*model, good_path()));
  }
  fs::path good_path() const { return dir.path() / "good.kvs"; }

  // The error of loading `bytes`: its kind must be `kind` and its message name the file.
  std::string load_error(const std::string& bytes, ErrorKind kind = ErrorKind::BadFile) {
    const fs::path p = dir.path() / "bad.kvs";
    {
      std::ofstream out(p, std::ios::binary | std::ios::trunc);
      out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    }
    try {
      (void)load_kv_state(*model, p);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), kind) << e.what();
      EXPECT_THAT(e.what(), HasSubstr(p.string()));
      return e.what();
    }
    ADD_FAILURE() << "loaded";
    return "";
  }
  kv_state::Header header(const std::string& b) const {
    kv_state::Bytes h{};
    std::memcpy(h.data(), b.data(), h.size());
    return kv_state::decode(h);
  }
  // `b` with header `h` (its checksum recomputed): a crafted file rather than a damaged one.
  static std::string with_header(std::string b, const kv_state::Header& h) {
    const auto e = kv_state::encode(h);
    std::memcpy(b.data(), e.data(), e.size());
    return b;
  }
  // `b` with its payload checksum recomputed (5 tokens).
  std::string resealed(std::string b) const {
    kv_state::Header h = header(b);
    const size_t ids = 5 * 4, blocks = static_cast<size_t>(h.layers) * 2 * h.kv_heads;
    const size_t block = (b.size() - kv_state::kHeaderBytes - ids) / blocks;
    uint64_t sum = hash64(b.data() + kv_state::kHeaderBytes, ids);
    for (size_t i = 0; i < blocks; ++i) sum = hash64(b.data() + kv_state::kHeaderBytes + ids + i * block, block, sum);
    h.payload_checksum = sum;
    return with_header(b, h);
  }

  test::TempDir dir;
  std::shared_ptr<const Model> model;
  std::string good;
};

TEST_F(Hostile, Magic) {
  std::string b = good;
  b[0] = 'X';
  EXPECT_THAT(load_error(b), HasSubstr("'magic'"));
  EXPECT_THAT(load_error("GGUF and something else entirely, long enough to hold a header........................"),
              HasSubstr("'magic'"));
}

TEST_F(Hostile, Version) {
  kv_state::Header h = header(good);
  h.version = 3;
  EXPECT_THAT(load_error(with_header(good, h)), HasSubstr("'version'"));
  std::string b = good;
  b[8] = 9;  // damaged, not resealed: still the version that is named
  EXPECT_THAT(load_error(b), HasSubstr("'version'"));
  h = header(good);
  h.header_bytes = 80;
  EXPECT_THAT(load_error(with_header(good, h)), HasSubstr("'header_bytes'"));
}

TEST_F(Hostile, DamagedHeaderFieldsFailTheHeaderChecksum) {
  for (size_t at : {16u, 24u, 28u, 32u, 36u, 40u, 48u, 56u, 64u, 68u, 72u, 80u}) {
    std::string b = good;
    b[at] = static_cast<char>(b[at] ^ 0x10);
    EXPECT_THAT(load_error(b), HasSubstr("'header_checksum'")) << "byte " << at;
  }
}

TEST_F(Hostile, Dimensions) {
  const kv_state::Header g = header(good);
  kv_state::Header h = g;
  h.layers = 0;
  EXPECT_THAT(load_error(with_header(good, h)), HasSubstr("'layers'"));
  h = g;
  h.head_dim = 1u << 24;
  EXPECT_THAT(load_error(with_header(good, h)), HasSubstr("'head_dim'"));
  h = g;
  h.kv_heads = 0xFFFFFFFFu;
  EXPECT_THAT(load_error(with_header(good, h)), HasSubstr("'kv_heads'"));
  // The same total size in another split: the file's own model has another shape.
  h = g;
  h.kv_heads = g.kv_heads * 2;
  h.head_dim = g.head_dim / 2;
  EXPECT_THAT(load_error(with_header(good, h)), HasSubstr("'kv_heads'"));
  h = g;
  h.layers = g.layers + 1;  // more rows than the file has
  EXPECT_THAT(load_error(with_header(good, h)), HasSubstr("truncated"));
}

TEST_F(Hostile, Dtype) {
  kv_state::Header h = header(good);
  h.dtype = 7;
  EXPECT_THAT(load_error(with_header(good, h)), HasSubstr("'dtype'"));
  for (uint32_t unrotated : {kv_state::kUnrotatedI8, kv_state::kUnrotatedFP8}) {  // keys of another meaning
    h.dtype = unrotated;
    EXPECT_THAT(load_error(with_header(good, h)), AllOf(HasSubstr("'dtype'"), HasSubstr("rotated")));
  }
  h.dtype = kv_state::kF32;  // f32 rows would need twice the bytes
  EXPECT_THAT(load_error(with_header(good, h)), HasSubstr("truncated"));
  h.dtype = kv_state::kBF16;  // the same size, other bits: the payload still checks, and loads as bf16
  KvCache kv = [&] {
    const fs::path p = dir.path() / "bf16.kvs";
    std::ofstream(p, std::ios::binary) << with_header(good, h);
    return load_kv_state(*model, p);
  }();
  EXPECT_EQ(kv.dtype(), DType::BF16);
}

TEST_F(Hostile, CountsBeyondTheFile) {
  const kv_state::Header g = header(good);
  kv_state::Header h = g;
  h.tokens = 6;
  EXPECT_THAT(load_error(with_header(good, h)), HasSubstr("'tokens'"));
  h.tokens = g.capacity + 1;
  EXPECT_THAT(load_error(with_header(good, h)), HasSubstr("'tokens'"));
  h.capacity = uint64_t{1} << 40;
  h.tokens = h.capacity;  // 2^40 positions: refused from the header, nothing allocated
  EXPECT_THAT(load_error(with_header(good, h)), HasSubstr("'tokens'"));
  h.capacity = uint64_t{1} << 41;
  EXPECT_THAT(load_error(with_header(good, h)), HasSubstr("'capacity'"));
  h = g;
  h.capacity = 0;
  EXPECT_THAT(load_error(with_header(good, h)), HasSubstr("'capacity'"));
  // A capacity beyond the model's context: a clean error from the cache, not an allocation.
  h = g;
  h.capacity = static_cast<uint64_t>(model->context_length()) + 1;
  EXPECT_THAT(test::error_of([&] {
                const fs::path p = dir.path() / "long.kvs";
                std::ofstream(p, std::ios::binary) << with_header(good, h);
                (void)load_kv_state(*model, p);
              }),
              HasSubstr("context length"));
}

TEST_F(Hostile, Truncated) {
  for (size_t n : {size_t{0}, size_t{10}, kv_state::kHeaderBytes - 1}) {
    EXPECT_THAT(load_error(good.substr(0, n)), HasSubstr("'header'")) << n;
  }
  for (size_t n : {kv_state::kHeaderBytes, kv_state::kHeaderBytes + 3, kv_state::kHeaderBytes + 20, good.size() / 2,
                   good.size() - 1}) {
    EXPECT_THAT(load_error(good.substr(0, n)), AllOf(HasSubstr("'tokens'"), HasSubstr("truncated"))) << n;
  }
  EXPECT_THAT(load_error(good + "x"), HasSubstr("trailing bytes"));
}

TEST_F(Hostile, TokenIdOutOfRange) {
  const size_t at = kv_state::kHeaderBytes + 2 * 4;
  for (int32_t id : {-1, static_cast<int32_t>(model->config().vocab_size), 0x7FFFFFFF}) {
    std::string b = good;
    std::memcpy(b.data() + at, &id, 4);
    EXPECT_THAT(load_error(b), HasSubstr("'token ids'")) << id;               // damaged
    EXPECT_THAT(load_error(resealed(b)), HasSubstr("'token ids'")) << id;     // crafted
  }
}

TEST_F(Hostile, PayloadChecksum) {
  for (size_t at : {kv_state::kHeaderBytes, kv_state::kHeaderBytes + 20, good.size() / 2, good.size() - 1}) {
    std::string b = good;
    b[at] = static_cast<char>(b[at] ^ 0x01);
    EXPECT_THAT(load_error(b), HasSubstr("'payload_checksum'")) << at;
  }
  EXPECT_NO_THROW(load_kv_state(*model, good_path()));
}

TEST_F(Hostile, NotAFile) {
  EXPECT_THAT(load_error(""), HasSubstr("'header'"));
  try {
    (void)load_kv_state(*model, dir.path());
    ADD_FAILURE() << "loaded a directory";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadFile);
  }
  try {
    (void)load_kv_state(*model, dir.path() / "missing.kvs");
    ADD_FAILURE() << "loaded a missing file";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadFile);
    EXPECT_THAT(e.what(), HasSubstr("missing.kvs"));
  }
}

TEST_F(Hostile, AnotherModelsFile) {
  const auto mha = load_cpu(test::model_dir("llama_mha"));
  std::string message;
  try {
    (void)load_kv_state(*mha, good_path());
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
    message = e.what();
  }
  EXPECT_THAT(message, HasSubstr("another model"));
  // The same shape, other weights.
  const auto other = random_model(model->config(), {.seed = 5, .device = Device::CPU});
  try {
    (void)load_kv_state(*other, good_path());
    ADD_FAILURE() << "loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
    EXPECT_THAT(e.what(), HasSubstr("same shape"));
  }
}

TEST_F(Hostile, SaveReplacesAtomically) {
  // Saving over an existing file replaces it whole, and leaves no temporary file behind.
  Session s(model);
  KvCache kv(*model, 16);
  s.prefill(kv, std::vector<int32_t>{7});
  save_kv_state(kv, *model, good_path());
  EXPECT_EQ(load_kv_state(*model, good_path()).size(), 1);
  int files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path())) ++files;
  EXPECT_EQ(files, 1);
}

}  // namespace
}  // namespace kvinfer
