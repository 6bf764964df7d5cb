// Limits checked before anything is allocated: sizes a file states (config.json's dimensions, a
// safetensors header's length), and the memory a model and its KV caches need against the memory
// available (LoadOptions::memory_limit, $KVINFER_MEMORY_LIMIT, MemAvailable). Every refusal is a
// kvinfer::Error naming the file, key or allocation at fault, with the bytes needed and available.
// (GGUF's counts, string and array lengths and dimension products are tested in test_gguf.cpp;
// safetensors' offsets and shape products in test_safetensors.cpp; a prompt beyond the cache's
// capacity in test_errors.cpp, RunErrors.)
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include <fmt/format.h>

#include "core/memory.h"
#include "formats/safetensors.h"
#include "kvinfer/kvinfer.h"
#include "models/synthetic.h"
#include "test_files.h"

namespace kvinfer {
namespace {

namespace fs = std::filesystem;
using test::copy_fixture;
using test::edit_json_file;
using test::error_of;
using test::ScopedEnv;
using test::TempDir;
using ::testing::AllOf;
using ::testing::HasSubstr;
using json = nlohmann::json;

// llama_gqa4: f32, tied, 2 layers × 2 KV heads × head_dim 8 (256 bytes of f32 K/V per token).
const std::string kFixture = "llama_gqa4";

fs::path gguf_fixture(const std::string& name) { return fs::path(KVINFER_TEST_DATA) / "gguf" / "models" / name; }

// ---- sizes a file states ----

TEST(FileLimits, ConfigSizeBeyondInt32IsRefusedNamingTheKey) {
  TempDir tmp;
  const fs::path dir = copy_fixture(kFixture, tmp);
  edit_json_file(dir / "config.json", [](json& c) { c["vocab_size"] = int64_t{1} << 40; });
  EXPECT_THAT(error_of([&] { Model::load(dir, {.device = Device::CPU}); }),
              AllOf(HasSubstr((dir / "config.json").string()), HasSubstr("'vocab_size' is 1099511627776, beyond the "
                                                                         "limit of 2147483647 for a size")));
}

TEST(FileLimits, Gpt2WidthWhoseMlpSizeWouldOverflowIsRefused) {
  // n_inner defaults to 4 × n_embd: with n_embd 2^62 that product overflowed int64 (undefined
  // behaviour) before the cap.
  TempDir tmp;
  const fs::path dir = copy_fixture("gpt2_tiny", tmp);
  edit_json_file(dir / "config.json", [](json& c) {
    c["n_embd"] = int64_t{1} << 62;
    c.erase("n_inner");
  });
  EXPECT_THAT(error_of([&] { Model::load(dir, {.device = Device::CPU}); }),
              AllOf(HasSubstr((dir / "config.json").string()), HasSubstr("'n_embd' is 4611686018427387904, beyond")));
}

TEST(FileLimits, SafetensorsHeaderBeyondTheLimitIsRefusedBeforeParsing) {
  // A header length inside the file but above the reference implementation's 100 MB: refused
  // before the JSON is parsed. The file is sparse: 100 MB of holes.
  TempDir tmp;
  const fs::path path = tmp / "big_header.safetensors";
  const uint64_t header = 100'000'001;
  std::string bytes(8, '\0');
  for (size_t i = 0; i < 8; ++i) bytes[i] = static_cast<char>((header >> (8 * i)) & 0xff);
  test::write_bytes(path, bytes);
  fs::resize_file(path, 8 + header);
  EXPECT_THAT(error_of([&] { SafetensorsFile f(path); }),
              AllOf(HasSubstr(path.string()), HasSubstr("header length 100000001 exceeds the 100000000-byte limit")));
}

// ---- memory: byte counts and the available figure ----

TEST(MemoryFigure, ParsesByteCounts) {
  EXPECT_EQ(parse_byte_count("123", "x"), 123u);
  EXPECT_EQ(parse_byte_count("64K", "x"), 64u << 10);
  EXPECT_EQ(parse_byte_count("512M", "x"), 512u << 20);
  EXPECT_EQ(parse_byte_count("8G", "x"), uint64_t{8} << 30);
  EXPECT_EQ(parse_byte_count("2GiB", "x"), uint64_t{2} << 30);
  EXPECT_EQ(parse_byte_count("3kB", "x"), 3u << 10);
  EXPECT_EQ(parse_byte_count("1T", "x"), uint64_t{1} << 40);
  EXPECT_EQ(parse_byte_count("77B", "x"), 77u);
  for (const char* bad : {"", "G", "12X", "1.5G", "-3", "12 G", "8Gb", "99999999999999999999", "16777216T"})
    EXPECT_THAT(error_of([&] { parse_byte_count(bad, "$VAR"); }), AllOf(HasSubstr("$VAR"), HasSubstr(bad)))
        << "'" << bad << "'";
}

// MemAvailable from /proc/meminfo, in bytes, read independently of the library.
std::optional<uint64_t> mem_available() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string key;
    uint64_t kb = 0;
    if (f >> key >> kb && key == "MemAvailable:") return kb * 1024;
  }
  return std::nullopt;
}

TEST(MemoryFigure, DetectsMemAvailableOnTheCpu) {
  ScopedEnv no_limit(kMemoryLimitEnv, std::nullopt);
  const auto expected = mem_available();
  if (!expected) GTEST_SKIP() << "no MemAvailable in /proc/meminfo here";
  const MemoryBudget b = memory_budget(Device::CPU);
  const auto cgroup = cgroup_memory_left("/proc/self/cgroup", "/sys/fs/cgroup");
  if (cgroup && cgroup->bytes < *expected / 2) {  // a container's limit is the figure
    EXPECT_THAT(b.source, HasSubstr("cgroup limit"));
    return;
  }
  EXPECT_THAT(b.source, testing::AnyOf(testing::Eq("MemAvailable in /proc/meminfo"), HasSubstr("cgroup limit")));
  // Memory moves between the two reads: the same figure within a factor of two, in bytes.
  EXPECT_GT(b.bytes, *expected / 2);
  EXPECT_LT(b.bytes, *expected * 2);
}

// A container's memory limit, read as the kernel states it: cgroup v2 (memory.max, "max" for none)
// and v1 (memory.limit_in_bytes, a huge number for none), at every level up; the tightest wins, and
// reclaimable page cache counts as free.
TEST(MemoryFigure, CgroupLimitsAtEveryLevelTheTightestWins) {
  const TempDir tmp;
  const fs::path root = tmp.path() / "sys_fs_cgroup";
  const auto put = [](const fs::path& file, const std::string& text) {
    fs::create_directories(file.parent_path());
    std::ofstream(file) << text;
  };
  // v2: /a/b with 1 GiB at b (800 MiB used, 300 MiB of it reclaimable) and 600 MiB at a (100 MiB used).
  put(tmp.path() / "cgroup_v2", "0::/a/b\n");
  put(root / "a" / "b" / "memory.max", "1073741824\n");
  put(root / "a" / "b" / "memory.current", "838860800\n");
  put(root / "a" / "b" / "memory.stat", "anon 1\ninactive_file 314572800\nactive_file 5\n");
  put(root / "a" / "memory.max", "629145600\n");
  put(root / "a" / "memory.current", "104857600\n");
  put(root / "memory.max", "max\n");  // (the root has none; "max" is no limit)
  auto left = cgroup_memory_left(tmp.path() / "cgroup_v2", root);
  ASSERT_TRUE(left.has_value());
  EXPECT_EQ(left->bytes, uint64_t{500} << 20);  // a: 600 − 100 MiB; b: 1024 − (800 − 300) = 524 MiB
  EXPECT_THAT(left->limit_file, HasSubstr("a/memory.max"));

  // v1: the memory controller's own hierarchy; 2^63-ish means none.
  put(tmp.path() / "cgroup_v1", "9:cpu,cpuacct:/x\n4:memory:/svc/job\n0::/\n");
  put(root / "memory" / "svc" / "job" / "memory.limit_in_bytes", "9223372036854771712\n");
  put(root / "memory" / "svc" / "job" / "memory.usage_in_bytes", "5\n");
  put(root / "memory" / "svc" / "memory.limit_in_bytes", "268435456\n");
  put(root / "memory" / "svc" / "memory.usage_in_bytes", "201326592\n");
  put(root / "memory" / "svc" / "memory.stat", "cache 1\ntotal_inactive_file 67108864\n");
  left = cgroup_memory_left(tmp.path() / "cgroup_v1", root);
  ASSERT_TRUE(left.has_value());
  EXPECT_EQ(left->bytes, uint64_t{128} << 20);  // 256 − (192 − 64) MiB

  // No limit anywhere, or no cgroup file: no figure.
  put(tmp.path() / "cgroup_none", "0::/free\n");
  put(root / "free" / "memory.max", "max\n");
  put(root / "free" / "memory.current", "123\n");
  EXPECT_FALSE(cgroup_memory_left(tmp.path() / "cgroup_none", root).has_value());
  EXPECT_FALSE(cgroup_memory_left(tmp.path() / "no_such_file", root).has_value());
  // Used beyond the limit (it can be, briefly): nothing is left, not a wrapped huge number.
  put(tmp.path() / "cgroup_over", "0::/over\n");
  put(root / "over" / "memory.max", "1000\n");
  put(root / "over" / "memory.current", "5000\n");
  EXPECT_EQ(cgroup_memory_left(tmp.path() / "cgroup_over", root)->bytes, 0u);
}

TEST(MemoryFigure, ExplicitLimitThenEnvironmentReplaceTheDetectedFigure) {
  ScopedEnv env(kMemoryLimitEnv, "3M");
  EXPECT_EQ(memory_budget(Device::CPU).bytes, 3u << 20);
  EXPECT_EQ(memory_budget(Device::CPU).source, "$KVINFER_MEMORY_LIMIT");
  EXPECT_EQ(memory_budget(Device::CPU, 1000).bytes, 1000u);
  EXPECT_EQ(memory_budget(Device::CPU, 1000).source, "LoadOptions::memory_limit");
  ScopedEnv bad(kMemoryLimitEnv, "lots");
  EXPECT_THAT(error_of([] { memory_budget(Device::CPU); }), AllOf(HasSubstr("$KVINFER_MEMORY_LIMIT"),
                                                                   HasSubstr("'lots'")));
}

// ---- memory: the model's weights (and planned KV cache) at load ----

uint64_t fixture_weight_bytes(const fs::path& path) {
  return Model::load(path, {.device = Device::CPU})->weight_bytes();
}

TEST(MemoryLimits, WeightsBeyondTheLimitFailBeforeAnyIsRead) {
  const fs::path dir = test::fixture_dir(kFixture);
  const uint64_t weights = fixture_weight_bytes(dir);
  int progress_calls = 0;
  LoadOptions o;
  o.device = Device::CPU;
  o.on_progress = [&](uint64_t, uint64_t) { ++progress_calls; };
  o.memory_limit = weights - 1;
  EXPECT_THAT(error_of(ErrorKind::OutOfMemory, [&] { Model::load(dir, o); }),
              AllOf(HasSubstr(dir.string()), HasSubstr("not enough cpu memory for the model"),
                    HasSubstr(fmt::format("it needs {} ({} of weights)", bytes_text(weights), bytes_text(weights))),
                    HasSubstr(fmt::format("only {} is available (LoadOptions::memory_limit)",
                                          bytes_text(weights - 1)))));
  EXPECT_EQ(progress_calls, 0) << "weights were read before the check";

  o.memory_limit = weights;  // exactly enough
  EXPECT_NO_THROW(Model::load(dir, o));
  EXPECT_GT(progress_calls, 0);
}

TEST(MemoryLimits, WeightsPlusThePlannedKvCacheMustFit) {
  const fs::path dir = test::fixture_dir(kFixture);
  const uint64_t weights = fixture_weight_bytes(dir);
  const ModelConfig c = load_config(dir / "config.json");
  const uint64_t kv = plan_kv_bytes(c, 100, DType::F32);  // the default for f32 weights
  ASSERT_EQ(kv, 100u * 256u);
  LoadOptions o;
  o.device = Device::CPU;
  o.kv_tokens = 100;
  o.memory_limit = weights + kv - 1;
  EXPECT_THAT(error_of([&] { Model::load(dir, o); }),
              AllOf(HasSubstr(fmt::format("it needs {} ({} of weights + {} for a KV cache of 100 tokens (f32))",
                                          bytes_text(weights + kv), bytes_text(weights), bytes_text(kv))),
                    HasSubstr(bytes_text(weights + kv - 1))));
  o.memory_limit = weights + kv;
  EXPECT_NO_THROW(Model::load(dir, o));
  // An f16 cache plans half the bytes.
  o.memory_limit = weights + kv / 2;
  o.kv_dtype = DType::F16;
  EXPECT_NO_THROW(Model::load(dir, o));
  o.kv_tokens = -1;
  EXPECT_THAT(error_of(ErrorKind::InvalidArgument, [&] { Model::load(dir, o); }), HasSubstr("LoadOptions::kv_tokens is -1"));
}

TEST(MemoryLimits, GgufAndGpt2LoadsAreCheckedToo) {
  // The GGUF loader, and HF GPT-2 whose Conv1D projections are transposed into new memory: that
  // copy is made only after the check (a refused load leaves no progress call either).
  for (const fs::path& path : {gguf_fixture("llama_gqa4.q8_0.gguf"), test::fixture_dir("gpt2_tiny")}) {
    SCOPED_TRACE(path.string());
    const uint64_t weights = fixture_weight_bytes(path);
    LoadOptions o;
    o.device = Device::CPU;
    int progress_calls = 0;
    o.on_progress = [&](uint64_t, uint64_t) { ++progress_calls; };
    o.memory_limit = weights - 1;
    EXPECT_THAT(error_of([&] { Model::load(path, o); }),
                AllOf(HasSubstr(path.string()), HasSubstr(fmt::format("it needs {}", bytes_text(weights)))));
    EXPECT_EQ(progress_calls, 0);
    o.memory_limit = weights;
    EXPECT_NO_THROW(Model::load(path, o));
  }
}

TEST(MemoryLimits, EnvironmentLimitAppliesToLoadsAndToModellessCaches) {
  const fs::path dir = test::fixture_dir(kFixture);
  {
    ScopedEnv env(kMemoryLimitEnv, "1K");
    EXPECT_THAT(error_of([&] { Model::load(dir, {.device = Device::CPU}); }),
                AllOf(HasSubstr(dir.string()),
                      HasSubstr("only 1.0 KiB (1024 bytes) is available ($KVINFER_MEMORY_LIMIT)")));
    // The option wins over the variable.
    EXPECT_NO_THROW(Model::load(dir, {.device = Device::CPU, .memory_limit = uint64_t{1} << 30}));
    const ModelConfig c = load_config(dir / "config.json");
    EXPECT_NO_THROW(KvCache(c, 4, DType::F32));  // 1024 bytes: fits exactly
    EXPECT_THAT(error_of([&] { KvCache(c, 5, DType::F32); }),
                HasSubstr("KV cache of 5 tokens (f32) needs 1.2 KiB (1280 bytes) but only 1.0 KiB (1024 bytes) of cpu "
                          "memory is available ($KVINFER_MEMORY_LIMIT)"));
  }
  ScopedEnv bad(kMemoryLimitEnv, "12X");
  EXPECT_THAT(error_of([&] { Model::load(dir, {.device = Device::CPU}); }),
              AllOf(HasSubstr("$KVINFER_MEMORY_LIMIT"), HasSubstr("'12X'")));
}

// ---- memory: KV caches against what the weights left ----

TEST(MemoryLimits, KvCacheMustFitWhatTheWeightsAndOtherCachesLeave) {
  const fs::path dir = test::fixture_dir(kFixture);
  const uint64_t weights = fixture_weight_bytes(dir);
  constexpr uint64_t kPerToken = 256;  // 2 (K, V) × 2 layers × 2 KV heads × 8 × 4 bytes
  LoadOptions o{.device = Device::CPU, .memory_limit = weights + 100 * kPerToken};
  o.context_length = 256;  // the f16 cache below is longer than the fixture's 128 positions
  auto model = Model::load(dir, o);
  auto a = std::make_optional<KvCache>(*model, 60);
  EXPECT_THAT(error_of(ErrorKind::OutOfMemory, [&] { KvCache(*model, 41); }),
              AllOf(HasSubstr(fmt::format("KV cache of 41 tokens (f32) needs {} but only {} of cpu memory is available",
                                          bytes_text(41 * kPerToken), bytes_text(40 * kPerToken))),
                    HasSubstr(fmt::format("{} (LoadOptions::memory_limit) less the model's weights ({}) and its other "
                                          "KV caches ({})",
                                          bytes_text(weights + 100 * kPerToken), bytes_text(weights),
                                          bytes_text(60 * kPerToken)))));
  // A refused cache takes nothing: exactly what is left still fits, and then nothing does.
  {
    KvCache b(*model, 40);
    EXPECT_THAT(error_of(ErrorKind::OutOfMemory, [&] { KvCache(*model, 1); }), HasSubstr("only 0 B of cpu memory is available"));
  }
  // Caches give their bytes back when they go, moved or not.
  KvCache moved = std::move(*a);
  a.reset();
  EXPECT_THAT(error_of([&] { KvCache(*model, 41); }), HasSubstr("other KV caches (15.0 KiB (15360 bytes))"));
  { KvCache gone = std::move(moved); }
  EXPECT_NO_THROW(KvCache(*model, 100));
  // f16 halves the bytes: 200 tokens fit where 100 f32 ones did.
  EXPECT_NO_THROW(KvCache(*model, 200, DType::F16));
}

TEST(MemoryLimits, ACacheBeyondTheMachineFailsUpFrontWithTheDetectedFigure) {
  // 2^40 tokens × 256 bytes = 256 TiB: more than any machine this runs on. Without the check the
  // lazy host allocation could succeed and the process be killed when the pages are touched.
  ScopedEnv no_limit(kMemoryLimitEnv, std::nullopt);
  if (!mem_available()) GTEST_SKIP() << "no MemAvailable in /proc/meminfo here";
  const int64_t tokens = int64_t{1} << 40;
  LoadOptions o{.device = Device::CPU};
  o.context_length = tokens;  // the memory check is what must refuse it, not the context
  auto model = Model::load(test::fixture_dir(kFixture), o);
  EXPECT_THAT(error_of([&] { KvCache(*model, tokens); }),
              AllOf(HasSubstr("KV cache of 1099511627776 tokens (f32) needs 262144.00 GiB (281474976710656 bytes)"),
                    HasSubstr("(MemAvailable in /proc/meminfo) less the model's weights")));
  EXPECT_THAT(error_of([&] { KvCache(model->config(), tokens, DType::F32); }),
              HasSubstr("of cpu memory is available (MemAvailable in /proc/meminfo)"));
}

TEST(MemoryLimits, RandomModelsAreCheckedBeforeTheirWeightsAreMade) {
  ScopedEnv env(kMemoryLimitEnv, "1M");
  int progress_calls = 0;
  RandomModelOptions o{.device = Device::CPU};
  o.on_progress = [&](uint64_t, uint64_t) { ++progress_calls; };
  // gpt2: 124M parameters, about 475 MiB of f32 matrices.
  EXPECT_THAT(error_of([&] { random_model(synthetic_config("gpt2"), o); }),
              AllOf(HasSubstr("random_model: not enough cpu memory to make the weights"),
                    HasSubstr("only 1.0 MiB (1048576 bytes) is available ($KVINFER_MEMORY_LIMIT)")));
  EXPECT_EQ(progress_calls, 0);
  ModelConfig huge = synthetic_config("llama-1b");
  huge.vocab_size = int64_t{1} << 60;
  EXPECT_THAT(error_of([&] { random_model(huge, o); }), HasSubstr("overflow 64 bits of bytes"));
}

}  // namespace
}  // namespace kvinfer
