// Bounded, typed reads (src/core/input_file.h): every file the library reads whole is a regular
// file under a stated size, checked before a byte is read; mapped model files are regular files;
// and the model's context length bounds every KV cache made for it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>

#include "core/input_file.h"
#include "kvinfer/kvinfer.h"
#include "test_files.h"

namespace kvinfer {
namespace {

namespace fs = std::filesystem;
using test::error_of;
using test::TempDir;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr InputLimit kSmall{"a test file", 1000};

void write(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

TEST(InputFiles, AFileUpToTheLimitIsReadWholeOneByteMoreIsRefused) {
  TempDir dir;
  write(dir.path() / "ok", std::string(1000, 'a'));
  EXPECT_EQ(read_input_file(dir.path() / "ok", kSmall), std::string(1000, 'a'));
  write(dir.path() / "big", std::string(1001, 'a'));
  EXPECT_THAT(error_of([&] { read_input_file(dir.path() / "big", kSmall); }),
              AllOf(HasSubstr("big\": 1001 B, more than the 1000 B a test file may be")));
}

TEST(InputFiles, ASparseFileOfGigabytesIsRefusedBeforeAByteIsRead) {
  TempDir dir;
  const fs::path p = dir.path() / "config.json";
  std::ofstream(p).close();
  fs::resize_file(p, uint64_t{2} << 30);  // holes: no disk, and no memory unless read
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THAT(error_of([&] { read_input_file(p, kJsonSettingsLimit); }),
              HasSubstr("config.json\": 2.00 GiB, more than the 16.0 MiB a JSON settings file may be"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));  // not read: refused by its size
}

TEST(InputFiles, FifosAndDevicesAreRefusedWithoutWaitingOrReading) {
  TempDir dir;
  const fs::path fifo = dir.path() / "config.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Opening a FIFO for reading waits for a writer: this must return at once.
  EXPECT_THAT(error_of([&] { read_input_file(fifo, kJsonSettingsLimit); }),
              HasSubstr("config.json\": not a regular file (a FIFO)"));
  EXPECT_THAT(error_of([&] { check_input_file(fifo, kMappedModelLimit); }), HasSubstr("a FIFO"));
  EXPECT_THAT(error_of([&] { read_input_file("/dev/zero", kTokenizerJsonLimit); }),
              HasSubstr("\"/dev/zero\": not a regular file (a character device); a tokenizer.json must be one"));
  fs::create_symlink("/dev/zero", dir.path() / "tokenizer.json");
  EXPECT_THAT(error_of([&] { read_input_file(dir.path() / "tokenizer.json", kTokenizerJsonLimit); }),
              HasSubstr("a character device"));
  EXPECT_THAT(error_of([&] { read_input_file(dir.path(), kSmall); }), HasSubstr("not a regular file (a directory)"));
}

TEST(InputFiles, AnEndlessStreamIsCutAtTheLimit) {
  const int fd = ::open("/dev/zero", O_RDONLY);
  ASSERT_GE(fd, 0);
  EXPECT_THAT(error_of([&] { read_input_fd(fd, "stdin", kSmall); }),
              HasSubstr("stdin: longer than the 1000 B a test file may be"));
  ::close(fd);
}

TEST(InputFiles, MissingFilesAndModelPathsAreWordedAsTheToolsWordThem) {
  EXPECT_THAT(error_of([&] { read_input_file("/no/such/file", kSmall); }),
              HasSubstr("\"/no/such/file\": no such file or directory"));
  EXPECT_THAT(error_of([&] { model_path_kind("/no/such/model"); }),
              HasSubstr("\"/no/such/model\": no such file or directory"));
  EXPECT_THAT(error_of([&] { model_path_kind("/dev/null"); }), HasSubstr("not a model (a character device)"));
  EXPECT_THAT(error_of([&] { model_path_kind(""); }), HasSubstr("the model path is empty"));
  EXPECT_FALSE(input_exists("/no/such/file"));
  EXPECT_TRUE(input_exists("/dev/null"));
  EXPECT_THAT(error_of([&] { Model::load("/no/such/model", {.device = Device::CPU}); }),
              HasSubstr("no such file or directory"));
}

TEST(InputFiles, ModelLoadsRefuseAFifoOrADeviceWhereAFileShouldBe) {
  TempDir dir;
  const fs::path model = test::copy_fixture("chatml_tiny", dir);
  fs::remove(model / "config.json");
  ASSERT_EQ(::mkfifo((model / "config.json").c_str(), 0600), 0);
  EXPECT_THAT(error_of([&] { Model::load(model, {.device = Device::CPU}); }),
              HasSubstr("config.json\": not a regular file (a FIFO)"));
  const fs::path model2 = test::copy_fixture("chatml_tiny", dir, "second");
  fs::remove(model2 / "tokenizer_config.json");
  fs::create_symlink("/dev/zero", model2 / "tokenizer_config.json");  // optional, present: read, so checked
  EXPECT_THAT(error_of([&] { Model::load(model2, {.device = Device::CPU}); }),
              HasSubstr("tokenizer_config.json\": not a regular file (a character device)"));
  const fs::path gguf = dir.path() / "x.gguf";
  ASSERT_EQ(::mkfifo(gguf.c_str(), 0600), 0);
  EXPECT_THAT(error_of([&] { Model::load(gguf, {.device = Device::CPU}); }), HasSubstr("not a model (a FIFO)"));
}

// ---- the context length ----

TEST(ContextLength, NoKvCacheIsLongerThanTheModelsContext) {
  const auto model = Model::load(test::fixture_dir("chatml_tiny"), {.device = Device::CPU});  // 256 positions
  ASSERT_EQ(model->context_length(), 256);
  EXPECT_NO_THROW(KvCache(*model, 256));
  EXPECT_THAT(error_of(ErrorKind::ContextFull, [&] { KvCache(*model, 257); }),
              HasSubstr("a KV cache of 257 tokens is beyond the model's context length of 256 tokens"));
  LoadOptions o{.device = Device::CPU};
  o.kv_tokens = 300;
  EXPECT_THAT(error_of(ErrorKind::ContextFull, [&] { Model::load(test::fixture_dir("chatml_tiny"), o); }),
              HasSubstr("a KV cache of 300 tokens (LoadOptions::kv_tokens) is beyond the model's context length of "
                        "256 tokens"));
}

TEST(ContextLength, RotaryModelsMayBeExtendedOnRequestLearnedPositionsMayNot) {
  LoadOptions o{.device = Device::CPU};
  o.context_length = 300;
  o.kv_tokens = 300;
  const auto model = Model::load(test::fixture_dir("chatml_tiny"), o);
  EXPECT_EQ(model->context_length(), 300);
  EXPECT_EQ(model->config().max_position_embeddings, 256);  // what it was trained on, still reported
  EXPECT_NO_THROW(KvCache(*model, 300));
  EXPECT_THROW(KvCache(*model, 301), Error);
  EXPECT_THAT(error_of([&] { Model::load(test::fixture_dir("gpt2_tiny"), o); }),
              HasSubstr("a context of 300 tokens is beyond GPT-2's 128 learned positions"));
  o.context_length = -1;
  EXPECT_THAT(error_of([&] { Model::load(test::fixture_dir("chatml_tiny"), o); }),
              HasSubstr("LoadOptions::context_length is -1"));
}

TEST(ContextLength, GenerationThatReachesTheContextStopsWithContextFull) {
  const auto model = Model::load(test::fixture_dir("gpt2_tiny"), {.device = Device::CPU});  // 128 positions
  KvCache kv(*model, model->context_length());
  Session session(model);
  GenerateOptions options;
  options.max_new_tokens = 500;
  options.ignore_eos = true;
  options.sampling = SamplingParams::greedy();
  const std::vector<int32_t> prompt = {1, 2, 3};
  const GenerateResult r = generate_tokens(session, kv, prompt, options);
  EXPECT_EQ(r.stop, StopReason::ContextFull);
  EXPECT_EQ(kv.size(), 128);
}

}  // namespace
}  // namespace kvinfer
