// Model files that change under a running process. With the default options (weights copied at
// load) nothing of the process reads the file once Model::load has returned: the file is no
// longer mapped, and truncating, rewriting or deleting it leaves the loaded model's tokens and
// logits as they were. A file that shrinks or is rewritten while the weights are being copied
// gives a kvinfer::Error naming it, not SIGBUS. With LoadOptions::weights_in_place the file stays
// mapped for the model's life (changing it then is undefined, as with any mmap: not tested).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cctype>
#include <chrono>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "kvinfer/kvinfer.h"
#include "test_files.h"

namespace kvinfer {
namespace {

namespace fs = std::filesystem;
using test::error_of;
using test::TempDir;
using ::testing::AllOf;
using ::testing::HasSubstr;

struct Fixture {
  const char* name;  // a GGUF file under tests/data/gguf/models, or a HF directory under tests/data/models
  bool gguf;
};
void PrintTo(const Fixture& f, std::ostream* os) { *os << f.name; }
// Quantised raw blocks (q8_0), f16 with rope_freqs, a GGUF tokenizer, GPT-2's fused QKV row
// blocks and its Conv1D transposes (HF), a sharded checkpoint, a tokenizer.json.
const Fixture kFixtures[] = {
    {"llama_gqa4.q8_0.gguf", true}, {"llama3_rope.f16.gguf", true}, {"chatml_tiny.f32.gguf", true},
    {"gpt2_tiny.f32.gguf", true},   {"llama_gqa4", false},          {"gpt2_tiny", false},
    {"llama_sharded", false},       {"chatml_tiny", false},
};

// A copy of the fixture in `tmp`: the path to load.
fs::path copy_to(const Fixture& f, const TempDir& tmp) {
  if (!f.gguf) return test::copy_fixture(f.name, tmp);
  const fs::path dst = tmp / "model.gguf";
  fs::copy_file(fs::path(KVINFER_TEST_DATA) / "gguf" / "models" / f.name, dst);
  return dst;
}

// The files the model's weights are read from, as absolute paths.
std::vector<fs::path> weight_files(const fs::path& model) {
  if (fs::is_regular_file(model)) return {fs::canonical(model)};
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(model))
    if (e.path().extension() == ".safetensors" && e.path().filename().string().starts_with("model"))
      files.push_back(fs::canonical(e.path()));
  return files;
}

// Whether this process maps `file` (a line of /proc/self/maps ends with its path).
bool mapped_now(const fs::path& file) {
  std::ifstream maps("/proc/self/maps");
  std::string p = " ";  // the path field follows a space (not `" " + ...`: GCC 12's -Wrestrict misfires)
  p += file.string();
  std::string deleted = p;
  deleted += " (deleted)";
  for (std::string line; std::getline(maps, line);)
    if (line.ends_with(p) || line.ends_with(deleted)) return true;
  return false;
}

// Kilobytes of `file`'s mappings resident in this process (/proc/self/smaps Rss): pages the
// process has read through a mapping of it.
int64_t mapped_resident_kb(const fs::path& file) {
  std::ifstream smaps("/proc/self/smaps");
  std::string p = " ";  // as in mapped_now
  p += file.string();
  int64_t kb = 0;
  bool in_file = false;
  for (std::string line; std::getline(smaps, line);) {
    if (line.empty()) continue;
    if (std::isxdigit(static_cast<unsigned char>(line[0])) && line.find('-') < line.find(' '))
      in_file = line.ends_with(p);  // a mapping's first line: "begin-end perms offset dev inode path"
    else if (in_file && line.starts_with("Rss:"))
      kb += std::stoll(line.substr(4));
  }
  return kb;
}

// Overwrites every byte of `file` in place (no truncation): same size, other bytes. The
// modification time is then now.
void overwrite_with_garbage(const fs::path& file) {
  std::string garbage(fs::file_size(file), '\0');
  std::mt19937 rng(7);
  for (char& c : garbage) c = static_cast<char>(rng());
  std::fstream out(file, std::ios::in | std::ios::out | std::ios::binary);
  out.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
  ASSERT_TRUE(out.good()) << file;
}

// What the model computes: a few greedy tokens and the logits each was chosen from.
struct Outcome {
  std::vector<int32_t> tokens;
  std::vector<float> logits;  // (tokens, vocab)
  std::string text;           // models with a tokenizer
};

Outcome run(const std::shared_ptr<const Model>& model) {
  std::vector<int32_t> prompt = {1, 5, 9, 2, 7};
  if (model->has_tokenizer()) prompt = model->tokenizer().encode("Hello, file changes");
  KvCache kv(*model, 32, DType::F32);
  Session s(model);
  GenerateOptions opt;
  opt.max_new_tokens = 6;
  opt.ignore_eos = true;
  Outcome r;
  r.tokens = generate_greedy(s, kv, prompt, opt, [&](int32_t, std::span<const float> logits) {
               r.logits.insert(r.logits.end(), logits.begin(), logits.end());
               return true;
             }).tokens;
  if (model->has_tokenizer()) r.text = model->tokenizer().decode(r.tokens);
  return r;
}

class FileChanges : public ::testing::TestWithParam<Fixture> {
 protected:
  void SetUp() override {
    path_ = copy_to(GetParam(), tmp_);
    files_ = weight_files(path_);
    ASSERT_FALSE(files_.empty());
  }
  // Loads with the default options, runs, changes the files with `change`, runs again: the same.
  template <typename Change>
  void expect_unaffected(Change&& change) {
    const auto model = Model::load(path_, {.device = Device::CPU});
    const Outcome before = run(model);
    ASSERT_EQ(before.tokens.size(), 6u);
    for (const fs::path& f : files_) change(f);
    const Outcome after = run(model);
    EXPECT_EQ(after.tokens, before.tokens);
    EXPECT_EQ(after.logits, before.logits) << "the logits differ bit for bit";
    EXPECT_EQ(after.text, before.text);
  }

  TempDir tmp_;
  fs::path path_;
  std::vector<fs::path> files_;
};

TEST_P(FileChanges, DefaultLoadUnmapsTheFileInPlaceKeepsItMapped) {
  {
    const auto model = Model::load(path_, {.device = Device::CPU});
    for (const fs::path& f : files_) EXPECT_FALSE(mapped_now(f)) << f << " is still mapped after a default load";
  }
  const auto model = Model::load(path_, {.device = Device::CPU, .weights_in_place = true});
  for (const fs::path& f : files_) EXPECT_TRUE(mapped_now(f)) << f << " is not mapped with weights_in_place";
}

// The default load reads the file with pread only: when the last progress is reported (every
// header, vector, transpose and matrix read), no page of its mapping was ever touched.
TEST_P(FileChanges, DefaultLoadReadsNothingThroughTheMapping) {
  std::vector<int64_t> resident;  // (files) at the last progress report
  Model::load(path_, {.device = Device::CPU, .on_progress = [&](uint64_t done, uint64_t total) {
                        if (done != total) return;
                        resident.clear();
                        for (const fs::path& f : files_) resident.push_back(mapped_resident_kb(f));
                      }});
  EXPECT_EQ(resident, std::vector<int64_t>(files_.size(), 0)) << "kB of each file's mapping resident";
  // The measure sees pages read in place.
  const auto in_place = Model::load(path_, {.device = Device::CPU, .weights_in_place = true});
  for (const fs::path& f : files_) EXPECT_GT(mapped_resident_kb(f), 0) << f;
}

TEST_P(FileChanges, TruncatedAfterLoad) {
  expect_unaffected([](const fs::path& f) { fs::resize_file(f, 0); });
}

TEST_P(FileChanges, OverwrittenAfterLoad) { expect_unaffected(overwrite_with_garbage); }

TEST_P(FileChanges, DeletedAfterLoad) {
  expect_unaffected([](const fs::path& f) { fs::remove(f); });
}

// Progress is reported once before the first tensor and then after each: the first report with
// bytes done comes while the copy is under way.
LoadOptions changing_on_first_progress(const std::vector<fs::path>& files, void (*change)(const fs::path&)) {
  auto changed = std::make_shared<bool>(false);
  return {.device = Device::CPU, .on_progress = [=](uint64_t done, uint64_t) {
            if (done == 0 || *changed) return;
            *changed = true;
            for (const fs::path& f : files) change(f);
          }};
}

TEST_P(FileChanges, TruncatedWhileLoadingThrowsNamingTheFile) {
  const std::string e = error_of([&] {
    Model::load(path_, changing_on_first_progress(files_, [](const fs::path& f) { fs::resize_file(f, 0); }));
  });
  EXPECT_THAT(e, AllOf(HasSubstr(tmp_.path().string()), HasSubstr("while being loaded")));
  bool names_a_file = false;
  for (const fs::path& f : files_) names_a_file |= e.find(f.string()) != std::string::npos;
  EXPECT_TRUE(names_a_file) << e;
}

// A rewrite of the same size is seen by its modification time, set an hour back here so that it
// differs even within the clock tick of the copy.
TEST_P(FileChanges, RewrittenWhileLoadingThrowsNamingTheFile) {
  for (const fs::path& f : files_) fs::last_write_time(f, fs::last_write_time(f) - std::chrono::hours(1));
  const std::string e =
      error_of([&] { Model::load(path_, changing_on_first_progress(files_, overwrite_with_garbage)); });
  EXPECT_THAT(e, AllOf(HasSubstr(tmp_.path().string()), HasSubstr("changed while being loaded")));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, FileChanges, ::testing::ValuesIn(kFixtures), [](const auto& p) {
  std::string name = p.param.name;
  for (char& c : name)
    if (c == '.') c = '_';
  return name;
});

}  // namespace
}  // namespace kvinfer
