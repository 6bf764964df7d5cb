// kvinfer-generate --num-beams: HF transformers' hypotheses and scores on the recorded searches
// that end at the model's own end ids (tests/data/beam/references.json), the text of the library's
// search, --help, and every bad combination as one usage line.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kvinfer/kvinfer.h"
#include "reference.h"
#include "run_binary.h"

namespace {

using kvinfer::test::Output;

Output run(const std::vector<std::string>& args) {
  std::vector<std::string> all = {"--device", "cpu"};
  all.insert(all.end(), args.begin(), args.end());
  return kvinfer::test::run_binary(KVINFER_GENERATE_BIN, all, "");
}

struct Hypothesis {
  std::vector<int32_t> tokens;
  double score = 0;
};

// "# hypothesis I: score S" lines (when several are printed), each followed by one line of ids.
std::vector<Hypothesis> parse_ids_output(const std::string& out, size_t expected) {
  std::istringstream in(out);
  std::vector<Hypothesis> hs;
  for (std::string line; std::getline(in, line);) {
    Hypothesis h;
    if (expected > 1) {
      const std::string head = "# hypothesis " + std::to_string(hs.size() + 1) + ": score ";
      EXPECT_EQ(line.rfind(head, 0), 0u) << line;
      h.score = std::stod(line.substr(head.size()));
      if (!std::getline(in, line)) break;
    }
    std::istringstream ids(line);
    for (int32_t id = 0; ids >> id;) h.tokens.push_back(id);
    hs.push_back(std::move(h));
  }
  return hs;
}

std::string join_ids(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s.append(s.empty() ? "" : ",").append(std::to_string(id));
  return s;
}

// Every recorded search whose end ids are the model's: the CLI's hypotheses are HF's.
TEST(BeamCli, HypothesesEqualTransformers) {
  std::ifstream f(std::filesystem::path(KVINFER_TEST_DATA) / "beam" / "references.json");
  const nlohmann::json refs = nlohmann::json::parse(f);
  int checked = 0;
  for (const nlohmann::json& c : refs["cases"]) {
    const std::string name = c["name"];
    if (!name.ends_with("_eosmodel")) continue;
    SCOPED_TRACE(name);
    const nlohmann::json& want = c["sequences"];
    // An f32 cache, as HF keeps its cache (and test_beam_search does).
    const Output r = run({"-m", kvinfer::test::model_dir(c["fixture"].get<std::string>()).string(), "--kv-dtype", "f32", "--ids",
                          join_ids(c["prompt_ids"].get<std::vector<int32_t>>()), "-n",
                          std::to_string(c["max_new_tokens"].get<int>()), "--num-beams",
                          std::to_string(c["num_beams"].get<int>()), "--length-penalty",
                          std::to_string(c["length_penalty"].get<double>()), "--early-stopping",
                          c["early_stopping"].get<std::string>(), "--no-repeat-ngram-size",
                          std::to_string(c["no_repeat_ngram_size"].get<int>()), "--num-return-sequences",
                          std::to_string(c["num_return_sequences"].get<int>())});
    ASSERT_EQ(r.code, 0) << r.err;
    const std::vector<Hypothesis> got = parse_ids_output(r.out, want.size());
    ASSERT_EQ(got.size(), want.size()) << r.out;
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].tokens, want[i]["tokens"].get<std::vector<int32_t>>()) << "hypothesis " << i;
      // Printed to 6 significant digits; HF's logits are ours within 1e-6 (test_beam_search.cpp).
      const double s = want[i]["score"].get<double>();
      if (want.size() > 1) {
        EXPECT_NEAR(got[i].score, s, 1e-4 * std::max(1.0, std::fabs(s))) << "hypothesis " << i;
      }
    }
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    // HF counts the prompt's pass as a step; the stats line counts the passes after it.
    EXPECT_NE(r.err.find(" beams, " + std::to_string(c["steps"].get<int>() - 1) + " steps"), std::string::npos) << r.err;
    ++checked;
  }
  EXPECT_GE(checked, 12);
}

// Text in, text out: the library's hypotheses decoded, without the end id that finished them.
// (The recorded searches that end at the model's end ids all use length_penalty 1: this one
// checks that the CLI passes the others on.)
TEST(BeamCli, TextIsTheLibrarysHypotheses) {
  const auto dir = kvinfer::test::model_dir("chatml_tiny");
  const Output r = run({"-m", dir.string(), "-p", "the cat and the dog", "-n", "12", "--num-beams", "3",
                        "--num-return-sequences", "2", "--no-repeat-ngram-size", "2", "--length-penalty", "0.5",
                        "--early-stopping", "never"});
  ASSERT_EQ(r.code, 0) << r.err;

  auto model = kvinfer::Model::load(dir, {.device = kvinfer::Device::CPU});
  const std::vector<int32_t> prompt = model->tokenizer().encode("the cat and the dog");
  kvinfer::KvCache kv(*model, static_cast<int64_t>(prompt.size()) + 12);
  kvinfer::Session session(model);
  kvinfer::BeamSearchOptions o;
  o.num_beams = 3;
  o.max_new_tokens = 12;
  o.num_return_sequences = 2;
  o.no_repeat_ngram_size = 2;
  o.length_penalty = 0.5f;
  o.early_stopping = kvinfer::EarlyStopping::Never;
  const kvinfer::BeamSearchResult want = kvinfer::beam_search(session, kv, prompt, o);
  std::string expected;
  const std::vector<int32_t> eos = model->eos_ids();
  for (size_t i = 0; i < want.sequences.size(); ++i) {
    std::vector<int32_t> t = want.sequences[i].tokens;
    if (!t.empty() && std::ranges::find(eos, t.back()) != eos.end()) t.pop_back();
    expected += fmt::format("# hypothesis {}: score {:.6g}\n{}\n", i + 1, want.sequences[i].score,
                            model->tokenizer().decode(t));
  }
  EXPECT_EQ(r.out, expected);
  EXPECT_NE(r.err.find("beam search: 3 beams"), std::string::npos) << r.err;
}

TEST(BeamCli, HelpListsTheOptions) {
  const Output r = run({"--help"});
  ASSERT_EQ(r.code, 0);
  for (const char* opt : {"--num-beams B=1", "--length-penalty P=1", "--early-stopping TEXT:{false,true,never}=false",
                          "--no-repeat-ngram-size N=0", "--num-return-sequences R=1"})
    EXPECT_NE(r.out.find(opt), std::string::npos) << opt << "\n" << r.out;
}

TEST(BeamCli, BadCombinationsAreOneUsageLineNamingTheOption) {
  const std::string gqa4 = kvinfer::test::model_dir("llama_gqa4").string();
  const std::vector<std::string> m = {"-m", gqa4, "--ids", "1,2,3", "-n", "4"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = m;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  const std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> cases = {
      {with({"--num-beams", "2", "--temp", "0.7"}), {"--num-beams", "--temp"}},
      {with({"--num-beams", "2", "--top-k", "5"}), {"--num-beams", "--top-k"}},
      {with({"--num-beams", "2", "--top-p", "0.5"}), {"--top-p"}},
      {with({"--num-beams", "2", "--seed", "3"}), {"--seed"}},
      {with({"--num-beams", "2", "--repeat-penalty", "1.1"}), {"--repeat-penalty"}},
      {with({"--num-beams", "2", "--logit-bias", "1=-inf"}), {"--logit-bias"}},
      {with({"--num-beams", "2", "--stop", "x"}), {"--stop"}},
      {with({"--num-beams", "2", "--lookup", "2"}), {"--num-beams", "speculative"}},
      {with({"--num-beams", "2", "--no-kv-cache"}), {"--num-beams", "--no-kv-cache"}},
      {with({"--num-beams", "2", "--num-return-sequences", "3"}), {"--num-return-sequences", "3", "2 beams"}},
      {with({"--num-beams", "0"}), {"--num-beams"}},
      {with({"--num-beams", "2", "--early-stopping", "maybe"}), {"--early-stopping", "maybe"}},
      {with({"--num-beams", "2", "--length-penalty", "nan"}), {"--length-penalty", "nan"}},
      {with({"--length-penalty", "2"}), {"--length-penalty", "needs --num-beams"}},
      {with({"--num-return-sequences", "2"}), {"--num-return-sequences", "needs --num-beams"}},
      {with({"--no-repeat-ngram-size", "2"}), {"--no-repeat-ngram-size", "needs --num-beams"}},
      {{"-m", gqa4, "--ids", "1,2,3", "-n", "0", "--num-beams", "2"}, {"--max-new-tokens", "at least 1"}},
  };
  for (const auto& [args, says] : cases) {
    const Output r = run(args);
    std::string line;
    for (const auto& a : args) line.append(a).push_back(' ');
    EXPECT_EQ(r.code, 2) << line << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << line << "\n" << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
    for (const std::string& s : says) EXPECT_NE(r.err.find(s), std::string::npos) << line << "\n" << r.err;
  }
  // --temp 0 says what beam search does anyway: allowed.
  EXPECT_EQ(run(with({"--num-beams", "2", "--temp", "0"})).code, 0);
}

}  // namespace
