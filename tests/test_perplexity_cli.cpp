// kvinfer-perplexity as a user runs it, on the chatml_tiny fixture (a real byte-level BPE tokenizer
// over random weights) and a copy of it whose tokenizer adds a BOS: its perplexity against one
// computed here through the library API, --save-logits / --kl-base against a KL computed here from
// the saved file, and its errors (docs/perplexity.md).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/hash.h"
#include "kvinfer/kvinfer.h"
#include "perplexity_eval.h"
#include "reference.h"
#include "run_binary.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using kvinfer::test::Output;

const std::string kModel = kvinfer::test::model_dir("chatml_tiny").string();

// Prose for the tiny tokenizer (about 0.7 tokens a byte): some 1,400 tokens, 21 windows of 64.
const std::string kText =
    "A decoder-only transformer predicts the next token from every token before it. At each layer, "
    "the attention of a new position reads the keys and values of all earlier positions; computing them "
    "again for every new token would cost a full pass over the prompt each time. The KV cache keeps them "
    "instead: a prefill writes the keys and values of the prompt in one batched pass, and each decode step "
    "computes one new position and attends over what the cache holds. The cache grows by one row per layer "
    "and key-value head for every token, so its memory is the product of the layers, the heads, the head "
    "dimension, the context length and the bytes of one element. Grouped-query attention shares one key-value "
    "head among several query heads and divides that memory by the group size. A smaller element type divides "
    "it again, at the price of some precision: the perplexity of a model on a text says how much. It is the "
    "exponential of the mean negative log-likelihood of each token given the tokens before it, and the KL "
    "divergence between two runs says how far their next-token distributions moved, position by position. "
    "Perplexity alone can hide changes that cancel out; the divergence cannot. Both are measured on windows of "
    "a fixed length, each in a fresh cache, scoring only the second half of each window so that every scored "
    "token sees at least half a window of context. The quick brown fox jumps over the lazy dog, and the five "
    "boxing wizards jump quickly, while a sphinx of black quartz judges my vow. Numbers like 3.14159, 2.71828 "
    "and 1.41421 tokenize into many pieces, and so do rare words such as sesquipedalian and antidisestablish"
    "mentarianism. Café, naïve, Zürich, Kraków and São Paulo bring accents; 東京 and Москва bring other "
    "scripts. The end.";

// Every run means the CPU backend (--device auto would pick a GPU where there is one).
Output run(const std::vector<std::string>& args, const std::string& input = "") {
  std::vector<std::string> all = {"--device", "cpu"};
  all.insert(all.end(), args.begin(), args.end());
  return kvinfer::test::run_binary(KVINFER_PERPLEXITY_BIN, all, input);
}

json run_json(const std::vector<std::string>& args) {
  std::vector<std::string> a = args;
  a.push_back("--json");
  const Output r = run(a);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  return json::parse(r.out);
}

// A failure: exit `code`, nothing on stdout, one line on stderr naming the tool and each of `words`.
void expect_error(const std::vector<std::string>& args, int code, const std::vector<std::string>& words) {
  const Output r = run(args);
  std::string cmd;
  for (const std::string& a : args) cmd += " " + a;
  EXPECT_EQ(r.code, code) << cmd << "\n" << r.err;
  EXPECT_TRUE(r.out.empty()) << cmd << "\n" << r.out;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << cmd << "\n" << r.err;
  EXPECT_EQ(r.err.rfind("kvinfer-perplexity: ", 0), 0u) << cmd << "\n" << r.err;
  for (const std::string& w : words) EXPECT_NE(r.err.find(w), std::string::npos) << cmd << ": no '" << w << "' in\n" << r.err;
}

class PerplexityCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kvinfer_ppl_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    text_ = (dir_ / "text.txt").string();
    std::ofstream(text_, std::ios::binary) << kText;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // chatml_tiny with a tokenizer that adds <|endoftext|> as BOS (tokenizer_config.json's add_bos_token).
  std::string bos_model() {
    const fs::path d = dir_ / "chatml_tiny_bos";
    fs::create_directories(d);
    for (const auto& e : fs::directory_iterator(kModel)) fs::copy_file(e.path(), d / e.path().filename());
    std::ifstream in(d / "tokenizer_config.json");
    json config = json::parse(in);
    config["bos_token"] = "<|endoftext|>";
    config["add_bos_token"] = true;
    std::ofstream(d / "tokenizer_config.json") << config.dump(1);
    return d.string();
  }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
  std::string text_;
};

// The text's ids as the tool evaluates them, written here from the documented rule: the text
// without special tokens, a BOS first when the tokenizer adds one, windows of n, each starting
// with that BOS.
std::vector<std::vector<int32_t>> windows_of(const kvinfer::Model& model, const std::string& text, int64_t n,
                                             std::optional<int32_t> bos, int64_t max_windows) {
  std::vector<int32_t> ids = model.tokenizer().encode(text, {.add_special = false, .parse_special = false});
  if (bos) ids.insert(ids.begin(), *bos);
  std::vector<std::vector<int32_t>> out;
  for (size_t start = 0; start + static_cast<size_t>(n) <= ids.size(); start += static_cast<size_t>(n)) {
    if (max_windows > 0 && static_cast<int64_t>(out.size()) == max_windows) break;
    out.emplace_back(ids.begin() + static_cast<std::ptrdiff_t>(start), ids.begin() + static_cast<std::ptrdiff_t>(start) + n);
    if (bos) out.back()[0] = *bos;
  }
  return out;
}

// Every scored position's log-probs (double) of a run through the library API, with the id it should predict.
struct Scored {
  std::vector<double> logprobs;
  int32_t correct;
};
std::vector<Scored> scored_positions(const std::string& model_dir, const std::string& text, int64_t n,
                                     std::optional<std::string> bos_token, int64_t max_windows, kvinfer::DType kv_dtype) {
  auto model = kvinfer::Model::load(model_dir, {.device = kvinfer::Device::CPU});
  std::optional<int32_t> bos;
  if (bos_token) bos = model->tokenizer().token_id(*bos_token);
  const int64_t vocab = model->config().vocab_size;
  kvinfer::KvCache kv(*model, n, kv_dtype);
  kvinfer::Session session(model);
  std::vector<Scored> out;
  for (const auto& window : windows_of(*model, text, n, bos, max_windows)) {
    kv.clear();
    const std::span<const float> logits = session.prefill(kv, window, kvinfer::Logits::All);
    for (int64_t i = n / 2; i < n - 1; ++i) {
      const std::span<const float> row = logits.subspan(static_cast<size_t>(i * vocab), static_cast<size_t>(vocab));
      const double m = *std::max_element(row.begin(), row.end());
      double z = 0;
      for (float l : row) z += std::exp(l - m);
      Scored s{{}, window[static_cast<size_t>(i + 1)]};
      for (float l : row) s.logprobs.push_back(l - m - std::log(z));
      out.push_back(std::move(s));
    }
  }
  return out;
}

void expect_relative(double got, double want, double tolerance, const char* what) {
  EXPECT_LE(std::fabs(got - want), tolerance * std::fabs(want)) << what << ": " << got << " vs " << want;
}

// 1. The perplexity and its ± are those of the documented windows, through the library API.
TEST_F(PerplexityCli, PerplexityEqualsTheLibraryApi) {
  struct Case {
    std::string model;
    std::optional<std::string> bos;
    int64_t n, chunks;
  };
  const std::vector<Case> cases = {{kModel, std::nullopt, 64, 0}, {kModel, std::nullopt, 48, 5}, {bos_model(), "<|endoftext|>", 64, 0}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.model + " -c " + std::to_string(c.n));
    const auto scored = scored_positions(c.model, kText, c.n, c.bos, c.chunks, kvinfer::DType::F32);
    std::vector<double> nll;
    for (const Scored& s : scored) nll.push_back(-s.logprobs[static_cast<size_t>(s.correct)]);
    double mean = 0, ss = 0;
    for (double v : nll) mean += v;
    mean /= static_cast<double>(nll.size());
    for (double v : nll) ss += (v - mean) * (v - mean);
    const double se = std::sqrt(ss / static_cast<double>(nll.size() - 1) / static_cast<double>(nll.size()));

    const json j = run_json({"-m", c.model, "-f", text_, "-c", std::to_string(c.n), "--kv-dtype", "f32", "--chunks",
                             std::to_string(c.chunks)});
    const int64_t per_window = c.n - 1 - c.n / 2;
    EXPECT_EQ(j["scored"].get<int64_t>(), static_cast<int64_t>(nll.size()));
    EXPECT_EQ(j["windows"].get<int64_t>() * per_window, static_cast<int64_t>(nll.size()));
    if (c.chunks > 0) {
      EXPECT_EQ(j["windows"].get<int64_t>(), c.chunks);
    }
    EXPECT_EQ(j["bos_added"].get<bool>(), c.bos.has_value());
    EXPECT_EQ(j["window"].get<int64_t>(), c.n);
    EXPECT_EQ(j["kv_dtype"], "f32");
    expect_relative(j["mean_nll"].get<double>(), mean, 1e-9, "mean NLL");
    expect_relative(j["ppl"].get<double>(), std::exp(mean), 1e-9, "PPL");
    expect_relative(j["ppl_stderr"].get<double>(), std::exp(mean) * se, 1e-9, "PPL ±");
  }
  // The report says the same in words.
  const Output r = run({"-m", kModel, "-f", text_, "-c", "64"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = run_json({"-m", kModel, "-f", text_, "-c", "64"});
  char ppl[64];
  std::snprintf(ppl, sizeof ppl, "perplexity  %.4f ± %.4f", j["ppl"].get<double>(), j["ppl_stderr"].get<double>());
  EXPECT_NE(r.out.find(ppl), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("KV cache f32 on cpu"), std::string::npos) << r.out;  // auto: the f32 weights' dtype
}

// The saved file's records, read here from the documented layout.
struct SavedFile {
  int64_t vocab = 0, window = 0, scored = 0;
  struct Record {
    float max, scale, correct;
    int32_t argmax;
    std::vector<uint16_t> q;
  };
  std::vector<Record> records;
};
SavedFile read_saved(const std::string& file) {
  const std::string bytes = kvinfer::test::slurp(file);
  SavedFile f;
  EXPECT_EQ(bytes.substr(0, 6), "KVPPL1");
  std::memcpy(&f.vocab, bytes.data() + 8, 8);
  std::memcpy(&f.window, bytes.data() + 16, 8);
  std::memcpy(&f.scored, bytes.data() + 24, 8);
  uint16_t version = 0;
  std::memcpy(&version, bytes.data() + 6, 2);
  EXPECT_EQ(version, 2);
  // A 64-byte header (its hash64 at 56) and records of 16 + 2 × vocab bytes and their hash64.
  const size_t record = 16 + 2 * static_cast<size_t>(f.vocab) + 8;
  EXPECT_EQ(bytes.size(), 64 + static_cast<size_t>(f.scored) * record);
  for (int64_t k = 0; k < f.scored && 64 + (static_cast<size_t>(k) + 1) * record <= bytes.size(); ++k) {
    const char* p = bytes.data() + 64 + static_cast<size_t>(k) * record;
    SavedFile::Record r;
    std::memcpy(&r.max, p, 4);
    std::memcpy(&r.scale, p + 4, 4);
    std::memcpy(&r.correct, p + 8, 4);
    std::memcpy(&r.argmax, p + 12, 4);
    r.q.resize(static_cast<size_t>(f.vocab));
    std::memcpy(r.q.data(), p + 16, r.q.size() * 2);
    f.records.push_back(std::move(r));
  }
  return f;
}

// 2. A run against its own saved logits: what is left is the uint16 quantisation.
TEST_F(PerplexityCli, SameConfigurationAgainstItsSavedLogits) {
  const std::string base = path("base.bin");
  const json saved = run_json({"-m", kModel, "-f", text_, "-c", "64", "--kv-dtype", "f32", "--save-logits", base});
  ASSERT_EQ(saved["saved_logits"], base);
  EXPECT_EQ(saved["saved_bytes"].get<uint64_t>(), fs::file_size(base));
  EXPECT_EQ(fs::file_size(base), 64 + saved["scored"].get<uint64_t>() * (16 + 2 * 384 + 8));
  // No temporary file is left beside it.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 2);

  const json j = run_json({"-m", kModel, "-f", text_, "-c", "64", "--kv-dtype", "f32", "--kl-base", base});
  const json& kl = j["kl_base"];
  ASSERT_TRUE(kl.is_object()) << j.dump(1);
  EXPECT_EQ(kl["positions"], j["scored"]);
  EXPECT_LT(kl["kl_mean"].get<double>(), 1e-6);
  EXPECT_GT(kl["kl_mean"].get<double>(), -1e-12);
  EXPECT_LT(kl["kl_max"].get<double>(), 1e-6);
  EXPECT_EQ(kl["top1_agreement_percent"].get<double>(), 100.0);
  EXPECT_EQ(kl["top1_same"], j["scored"]);
  EXPECT_LT(kl["max_abs_dp_max"].get<double>(), 1e-4);  // a step of 24/65535 nats
  EXPECT_LT(std::fabs(kl["dp_correct_mean"].get<double>()), 1e-7);  // the correct token's log-prob is exact f32
  expect_relative(kl["base_ppl"].get<double>(), j["ppl"].get<double>(), 1e-6, "base PPL from f32 log-probs");
  EXPECT_EQ(kl["kv_dtype"], "f32");

  // The report.
  const Output r = run({"-m", kModel, "-f", text_, "-c", "64", "--kv-dtype", "f32", "--kl-base", base});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("top-1       100.000 % the same"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("percentiles by nearest rank"), std::string::npos) << r.out;
}

// 3. Another KV cache dtype moves the distributions: the KL and its companions, computed here from
// the saved file and the library's logits, and every JSON field.
TEST_F(PerplexityCli, OtherKvDtypeAgainstTheSavedBase) {
  const std::string base = path("base.bin");
  run_json({"-m", kModel, "-f", text_, "-c", "64", "--kv-dtype", "f32", "--save-logits", base});
  const json self = run_json({"-m", kModel, "-f", text_, "-c", "64", "--kv-dtype", "f32", "--kl-base", base});
  for (const char* dtype : {"f16", "bf16"}) {
    SCOPED_TRACE(dtype);
    const json j = run_json({"-m", kModel, "-f", text_, "-c", "64", "--kv-dtype", dtype, "--kl-base", base});
    for (const char* key : {"model", "file", "text_tokens", "bos_added", "window", "windows", "first_scored_position",
                            "scored", "kv_dtype", "device", "mean_nll", "mean_nll_stderr", "ppl", "ppl_stderr",
                            "tokens_evaluated", "seconds", "forward_seconds", "tokens_per_second", "saved_logits",
                            "saved_bytes", "kl_base"})
      EXPECT_TRUE(j.contains(key)) << key;
    EXPECT_EQ(j["kv_dtype"], dtype);
    const json& kl = j["kl_base"];
    for (const char* key : {"base_mean_nll", "base_ppl", "base_ppl_stderr", "ppl", "ppl_ratio", "kl_mean", "kl_stderr",
                            "kl_median", "kl_p99", "kl_max", "top1_agreement_percent", "max_abs_dp_mean",
                            "max_abs_dp_max", "dp_correct_mean"}) {
      ASSERT_TRUE(kl.contains(key) && kl[key].is_number()) << key << " in " << kl.dump(1);
      EXPECT_TRUE(std::isfinite(kl[key].get<double>())) << key;
    }
    for (const char* key : {"file", "kv_dtype", "positions", "top1_same"}) EXPECT_TRUE(kl.contains(key)) << key;
    EXPECT_GT(kl["kl_mean"].get<double>(), 10 * self["kl_base"]["kl_mean"].get<double>());
    EXPECT_GT(kl["kl_stderr"].get<double>(), 0);
    EXPECT_LE(kl["kl_median"].get<double>(), kl["kl_p99"].get<double>());
    EXPECT_LE(kl["kl_p99"].get<double>(), kl["kl_max"].get<double>());
    EXPECT_LE(kl["top1_agreement_percent"].get<double>(), 100.0);
    EXPECT_EQ(kl["base_ppl"], self["kl_base"]["base_ppl"]);

    // The same figures from the saved file, dequantised as documented, and this dtype's run.
    const SavedFile f = read_saved(base);
    const auto kv_dtype = kvinfer::parse_dtype(dtype);
    const auto run_positions = scored_positions(kModel, kText, 64, std::nullopt, 0, kv_dtype);
    ASSERT_EQ(f.records.size(), run_positions.size());
    std::vector<double> kls;
    double dp_correct = 0, max_abs_sum = 0;
    int64_t same_top1 = 0;
    for (size_t k = 0; k < run_positions.size(); ++k) {
      const SavedFile::Record& r = f.records[k];
      const std::vector<double>& lp = run_positions[k].logprobs;
      const double floor = static_cast<double>(r.max) - 65535.0 * r.scale;
      double z = 0;
      for (uint16_t q : r.q)
        if (q > 0) z += std::exp(floor + q * static_cast<double>(r.scale));
      double kl_k = 0, max_abs = 0;
      for (size_t v = 0; v < r.q.size(); ++v) {
        const double lb = r.q[v] > 0 ? floor + r.q[v] * static_cast<double>(r.scale) - std::log(z) : -INFINITY;
        const double pb = std::exp(lb);
        if (r.q[v] > 0) kl_k += pb * (lb - lp[v]);
        max_abs = std::max(max_abs, std::fabs(std::exp(lp[v]) - pb));
      }
      kls.push_back(kl_k);
      max_abs_sum += max_abs;
      same_top1 += r.argmax == std::max_element(lp.begin(), lp.end()) - lp.begin() ? 1 : 0;
      dp_correct += std::exp(lp[static_cast<size_t>(run_positions[k].correct)]) - std::exp(static_cast<double>(r.correct));
    }
    const auto n = static_cast<double>(kls.size());
    double kl_mean = 0;
    for (double v : kls) kl_mean += v / n;
    std::sort(kls.begin(), kls.end());
    expect_relative(kl["kl_mean"].get<double>(), kl_mean, 1e-9, "mean KL");
    // Nearest rank: the value of rank ceil(p/100 × n).
    expect_relative(kl["kl_median"].get<double>(), kls[static_cast<size_t>(std::ceil(0.5 * n)) - 1], 1e-9, "median");
    expect_relative(kl["kl_p99"].get<double>(), kls[static_cast<size_t>(std::ceil(0.99 * n)) - 1], 1e-9, "p99");
    expect_relative(kl["kl_max"].get<double>(), kls.back(), 1e-9, "max");
    EXPECT_EQ(kl["top1_same"].get<int64_t>(), same_top1);
    expect_relative(kl["max_abs_dp_mean"].get<double>(), max_abs_sum / n, 1e-9, "mean max |dp|");
    EXPECT_NEAR(kl["dp_correct_mean"].get<double>(), dp_correct / n, 1e-15);
  }
}

// 4. Bad inputs: one line naming the file and the field, exit 1; bad option values exit 2.
TEST_F(PerplexityCli, BadInputsAreOneLineNamingTheFileAndField) {
  const std::string base = path("base.bin");
  ASSERT_EQ(run({"-m", kModel, "-f", text_, "-c", "64", "--save-logits", base}).code, 0);
  const std::string bytes = kvinfer::test::slurp(base);
  auto write = [&](const std::string& name, const std::string& content) {
    std::ofstream(path(name), std::ios::binary) << content;
    return path(name);
  };
  std::string wrong_magic = bytes;
  wrong_magic[0] = 'X';
  std::string wrong_version = bytes;
  wrong_version[6] = 3;
  // A file that is consistent in itself but holds 383 log-probs a position (its checksums left
  // stale: the header's is made again, so that the vocabulary is what it refuses).
  std::string other_vocab = bytes.substr(0, bytes.size() - 2 * static_cast<size_t>(
                                                                     (bytes.size() - 64) / (16 + 2 * 384 + 8)));
  const int64_t vocab383 = 383;
  std::memcpy(other_vocab.data() + 8, &vocab383, 8);
  const uint64_t header_hash = kvinfer::hash64(other_vocab.data(), 56);
  std::memcpy(other_vocab.data() + 56, &header_hash, 8);
  // One bit flipped in a log-prob of position 7's record, and in the header's scored count.
  const size_t record = 16 + 2 * 384 + 8;
  std::string flipped = bytes, flipped_header = bytes;
  flipped[64 + 7 * record + 16 + 100] ^= 0x10;
  flipped_header[24] ^= 0x01;
  const std::string other_text = write("other.txt", std::string(kText).replace(0, 1, "The"));
  const std::string base_other_c = path("base32.bin"), base_other_text = path("base_other.bin");
  ASSERT_EQ(run({"-m", kModel, "-f", text_, "-c", "32", "--save-logits", base_other_c}).code, 0);
  ASSERT_EQ(run({"-m", kModel, "-f", other_text, "-c", "64", "--chunks", "3", "--save-logits", base_other_text}).code, 0);

  const std::vector<std::string> m = {"-m", kModel, "-c", "64"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = m;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  expect_error(with({"-f", path("missing.txt")}), 1, {path("missing.txt"), "no such file"});
  expect_error(with({"-f", write("short.txt", "Too short a text.")}), 1, {path("short.txt"), "at least 64 tokens"});
  expect_error(with({"-f", text_, "--kl-base", write("magic.bin", wrong_magic), "--save-logits", base}), 1,
               {path("magic.bin"), "'magic'"});
  expect_error(with({"-f", text_, "--kl-base", write("version.bin", wrong_version)}), 1, {path("version.bin"), "'version'"});
  expect_error(with({"-f", text_, "--kl-base", write("trunc.bin", bytes.substr(0, bytes.size() - 1))}), 1,
               {path("trunc.bin"), "'size'", "truncated"});
  expect_error(with({"-f", text_, "--kl-base", write("long.bin", bytes + "x")}), 1, {path("long.bin"), "'size'", "trailing"});
  expect_error(with({"-f", text_, "--kl-base", write("header.bin", bytes.substr(0, 20))}), 1, {path("header.bin"), "'header'"});
  expect_error(with({"-f", text_, "--kl-base", write("vocab.bin", other_vocab)}), 1, {path("vocab.bin"), "'vocab'"});
  expect_error(with({"-f", text_, "--kl-base", write("flipped.bin", flipped)}), 1,
               {path("flipped.bin"), "'position 7'", "checksum", "damaged"});
  expect_error(with({"-f", text_, "--kl-base", write("flipped_header.bin", flipped_header)}), 1,
               {path("flipped_header.bin"), "'header checksum'", "damaged"});
  expect_error(with({"-f", text_, "--kl-base", base_other_c}), 1, {base_other_c, "'window'", "-c/--ctx"});
  expect_error(with({"-f", text_, "--chunks", "2", "--kl-base", base}), 1, {base, "'scored'"});
  expect_error(with({"-f", text_, "--chunks", "3", "--kl-base", base_other_text}), 1, {base_other_text, "'hash'"});
  expect_error(with({"-f", text_, "--kl-base", path("missing.bin")}), 1, {path("missing.bin"), "no such file"});
  expect_error(with({"-f", text_, "--kl-base", dir_.string()}), 1, {dir_.string(), "directory"});
  expect_error(with({"-f", text_, "--save-logits", dir_.string()}), 1, {dir_.string(), "directory"});
  expect_error(with({"-f", text_, "--save-logits", path("no/such/dir.bin")}), 1, {path("no/such/dir.bin")});
  const std::string fifo = path("fifo.bin");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_error(with({"-f", text_, "--save-logits", fifo}), 1, {"--save-logits", fifo, "a FIFO", "regular files"});
  struct stat st {};
  ASSERT_EQ(::lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode)) << "the FIFO was replaced";
  // The files a failed run was to replace are as they were.
  EXPECT_EQ(kvinfer::test::slurp(base), bytes);

  // The command line: exit 2, the option named.
  expect_error({"-m", kModel, "-c", "64"}, 2, {"--file is required"});
  expect_error(with({"-f", text_, "-c", "5"}), 2, {"-c/--ctx"});
  expect_error({"-m", kModel, "-f", text_, "-c", "abc"}, 2, {"-c/--ctx"});
  expect_error({"-m", kModel, "-f", text_, "-c", "100000"}, 2, {"-c/--ctx", "context length"});
  expect_error(with({"-f", text_, "--chunks", "-1"}), 2, {"--chunks"});
  expect_error(with({"-f", text_, "--kv-dtype", "f12"}), 2, {"--kv-dtype"});
  expect_error(with({"-f", text_, "--kl-base", ""}), 2, {"--kl-base"});
  expect_error(with({"-f", text_, "--save-logits", ""}), 2, {"--save-logits"});
  expect_error(with({"-f", text_, "-t", "-3"}), 2, {"-t/--threads"});
}

// 5. A save interrupted by SIGTERM, SIGINT or SIGHUP leaves neither the file nor its temporary; one
// killed outright (SIGKILL: no handler runs) leaves the temporary, which the next successful save
// of that file removes. Older files (version 1, no checksums) are still read, and say so.
TEST_F(PerplexityCli, AnInterruptedSaveLeavesNoTemporaryAndOldFilesStillRead) {
  std::string big;
  for (int i = 0; i < 300; ++i) big += kText + " ";
  const std::string text = path("big.txt"), out = path("saved.bin");
  std::ofstream(text, std::ios::binary) << big;
  const auto temporaries = [&] {
    int n = 0;
    for (const auto& e : fs::directory_iterator(dir_)) n += e.path().filename().string().starts_with("saved.bin.tmp-");
    return n;
  };
  // Starts a save of the big text and returns its pid once its temporary file exists.
  const auto start_save = [&] {
    const pid_t pid = ::fork();
    if (pid == 0) {
      // As from a terminal: a test started in the background may inherit ignored SIGINT/SIGHUP,
      // which the tool rightly leaves ignored.
      for (const int s : {SIGINT, SIGTERM, SIGHUP}) ::signal(s, SIG_DFL);
      const int null = ::open("/dev/null", O_WRONLY);
      ::dup2(null, 1);
      ::dup2(null, 2);
      ::execl(KVINFER_PERPLEXITY_BIN, KVINFER_PERPLEXITY_BIN, "--device", "cpu", "-t", "1", "-m", kModel.c_str(), "-f",
              text.c_str(), "-c", "64", "--save-logits", out.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    for (int i = 0; i < 60000 && temporaries() == 0; ++i) ::usleep(1000);
    return pid;
  };
  for (const int sig : {SIGTERM, SIGINT, SIGHUP, SIGKILL}) {
    SCOPED_TRACE(sig);
    const pid_t pid = start_save();
    ASSERT_GT(pid, 0);
    ASSERT_EQ(temporaries(), 1) << "the save did not start";
    ASSERT_EQ(::kill(pid, sig), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == sig) << "status " << status;
    EXPECT_FALSE(fs::exists(out));
    EXPECT_EQ(temporaries(), sig == SIGKILL ? 1 : 0);
  }
  ASSERT_EQ(run({"-m", kModel, "-f", text_, "-c", "64", "--save-logits", out}).code, 0);
  EXPECT_TRUE(fs::exists(out));
  EXPECT_EQ(temporaries(), 0) << "the temporary of the killed run is still there";

  // The same file in version 1's layout: a 56-byte header, records without their checksums.
  const std::string v2 = kvinfer::test::slurp(out);
  const size_t record = 16 + 2 * 384;
  std::string v1 = v2.substr(0, 56);
  v1[6] = 1;
  for (size_t at = 64; at + record + 8 <= v2.size(); at += record + 8) v1 += v2.substr(at, record);
  std::ofstream(path("v1.bin"), std::ios::binary) << v1;
  const json j = run_json({"-m", kModel, "-f", text_, "-c", "64", "--kl-base", path("v1.bin")});
  EXPECT_FALSE(j["kl_base"]["checksums_checked"].get<bool>());
  EXPECT_LT(j["kl_base"]["kl_max"].get<double>(), 1e-6);
  EXPECT_TRUE(run_json({"-m", kModel, "-f", text_, "-c", "64", "--kl-base", out})["kl_base"]["checksums_checked"].get<bool>());
  const Output r = run({"-m", kModel, "-f", text_, "-c", "64", "--kl-base", path("v1.bin")});
  EXPECT_NE(r.out.find("a version 1 file: no checksums were checked"), std::string::npos) << r.out;
}

// The math on rows no fixture gives: a distribution spanning more than 24 nats (clamped ids count
// as probability 0, so a run against its own saved row has a KL near 0, not the clamped mass),
// nearest ranks on an even count, and a saved file read back as written.
TEST(PerplexityEval, ClampedIdsNearestRanksAndTheFileRoundTrip) {
  constexpr int64_t kVocab = 50000;
  std::vector<float> logits(kVocab, -30.0f);
  logits[7] = 0.0f;
  logits[8] = -2.0f;
  logits[9] = -23.0f;  // kept: within 24 nats of the largest
  ppl::LogProbs lp;
  ppl::log_softmax(logits, lp);
  EXPECT_EQ(lp.argmax, 7);
  ppl::SavedPosition saved;
  ppl::quantize_position(lp, 8, saved);
  EXPECT_EQ(saved.q[7], 65535);
  EXPECT_GT(saved.q[9], 0);
  EXPECT_EQ(saved.q[0], 0);  // 30 nats down: clamped
  const ppl::PositionComparison self = ppl::compare_position(saved, lp, 8);
  // The clamped ids' true mass (49,997 × e^-30 of the total) is all that renormalising moves; counted
  // at the floor instead they would add about 49,997 × e^-24 × 6 ≈ 1e-5.
  EXPECT_LT(self.kl, 1e-7);
  EXPECT_GT(self.kl, -1e-12);
  EXPECT_TRUE(self.same_top1);
  EXPECT_LT(std::fabs(self.dp_correct), 1e-7);

  std::vector<float> moved = logits;
  moved[8] = -1.0f;
  ppl::LogProbs lp2;
  ppl::log_softmax(moved, lp2);
  const ppl::PositionComparison c = ppl::compare_position(saved, lp2, 8);
  // KL(base ‖ this) for the two ids that matter, in closed form (the rest is below 1e-9); the
  // base's log-probs are within half a step (12/65535 nats) of the exact ones.
  const double pb7 = std::exp(lp.values[7]), pb8 = std::exp(lp.values[8]);
  const double want = pb7 * (lp.values[7] - lp2.values[7]) + pb8 * (lp.values[8] - lp2.values[8]);
  EXPECT_GT(want, 0.05);
  EXPECT_NEAR(c.kl, want, 5e-5);
  EXPECT_NEAR(c.dp_correct, std::exp(lp2.values[8]) - pb8, 1e-7);  // the correct token's log-prob is exact f32
  EXPECT_NEAR(c.max_abs_dp, std::fabs(std::exp(lp2.values[8]) - pb8), 5e-5);

  const std::vector<double> four = {1, 2, 3, 4}, hundred = [] {
    std::vector<double> v;
    for (int i = 1; i <= 100; ++i) v.push_back(i);
    return v;
  }();
  EXPECT_EQ(ppl::nearest_rank(four, 50), 2);  // rank ceil(0.5 × 4) = 2: the lower middle
  EXPECT_EQ(ppl::nearest_rank(four, 99), 4);
  EXPECT_EQ(ppl::nearest_rank(hundred, 99), 99);
  EXPECT_EQ(ppl::nearest_rank(hundred, 100), 100);
  std::vector<ppl::PositionComparison> positions(4);
  for (size_t i = 0; i < 4; ++i) positions[i].kl = 4.0 - static_cast<double>(i);
  EXPECT_EQ(ppl::summarize(positions).kl_median, 2);

  const fs::path file = fs::temp_directory_path() / ("kvinfer_ppl_eval_" + std::to_string(::getpid()) + ".bin");
  const ppl::Header h{.vocab = kVocab, .window = 8, .scored = 3, .hash = 42, .kv_dtype = "f16"};
  {
    ppl::Writer w(file, h);
    for (int i = 0; i < 3; ++i) w.write(saved);
    const uint64_t bytes = w.finish();
    EXPECT_EQ(bytes, fs::file_size(file));
    EXPECT_EQ(bytes, 64 + 3 * (16 + 2 * kVocab + 8));
  }
  ppl::Reader r(file);
  EXPECT_NO_THROW(r.check(h));
  EXPECT_EQ(r.header().kv_dtype, "f16");
  ppl::SavedPosition back;
  r.next(back);
  EXPECT_EQ(back.q, saved.q);
  EXPECT_EQ(back.max_logprob, saved.max_logprob);
  EXPECT_EQ(back.correct_logprob, saved.correct_logprob);
  EXPECT_EQ(back.argmax, 7);
  fs::remove(file);
}

TEST_F(PerplexityCli, HelpNamesEveryOptionAndTheExitStatuses) {
  const Output r = run({"--help"});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* s : {"-f,--file", "-c,--ctx", "--chunks", "--save-logits", "--kl-base", "--json", "--kv-dtype",
                        "--int8-activations", "-m,--model", "Exit status: 0 done; 1", "2 the command line"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s;
}

}  // namespace
