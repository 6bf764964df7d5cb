// kvinfer-generate with speculative decoding (--lookup, --draft-model, --draft-int8-activations):
// the same output as without it (HF's greedy ids and text on the fixtures, sampled text with one
// seed), the acceptance figures on the stats line, and every bad combination as one usage line.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reference.h"
#include "run_binary.h"

namespace {

namespace fs = std::filesystem;
using kvinfer::test::Output;

Output run(const std::vector<std::string>& args, const std::string& input = "") {
  std::vector<std::string> all = {"--device", "cpu"};
  all.insert(all.end(), args.begin(), args.end());
  return kvinfer::test::run_binary(KVINFER_GENERATE_BIN, all, input);
}

const std::string kChatml = kvinfer::test::model_dir("chatml_tiny").string();
const std::string kGqa4 = kvinfer::test::model_dir("llama_gqa4").string();
const std::string kMha = kvinfer::test::model_dir("llama_mha").string();
const std::string kGqa4Q8 = (fs::path(KVINFER_TEST_DATA) / "gguf" / "models" / "llama_gqa4.q8_0.gguf").string();

std::vector<int32_t> ids_of(const std::string& out) {
  std::istringstream in(out);
  std::vector<int32_t> ids;
  for (int32_t id = 0; in >> id;) ids.push_back(id);
  return ids;
}

// The README's quick-start ids: HF's greedy continuation, with each drafter.
TEST(SpeculativeCli, GreedyIdsEqualHfWithEveryDrafter) {
  const kvinfer::test::Reference ref("llama_gqa4");
  std::string prompt;
  for (int32_t id : ref.prompt_ids) {
    if (!prompt.empty()) prompt.push_back(',');
    prompt.append(std::to_string(id));
  }
  const std::vector<std::string> base = {"-m", kGqa4, "--ids", prompt, "-n", std::to_string(ref.greedy_ids.size()),
                                         "--temp", "0", "--ignore-eos"};
  const std::vector<std::vector<std::string>> drafters = {{"--lookup", "3"},
                                                          {"--lookup", "1", "--draft-tokens", "2", "--draft-fixed"},
                                                          {"--draft-model", kMha},
                                                          {"--draft-model", kGqa4, "--draft-tokens", "16"}};
  for (const auto& d : drafters) {
    std::vector<std::string> args = base;
    args.insert(args.end(), d.begin(), d.end());
    const Output r = run(args);
    ASSERT_EQ(r.code, 0) << d[0] << ": " << r.err;
    EXPECT_EQ(ids_of(r.out), ref.greedy_ids) << d[0];
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    std::string says = "speculative draft model: drafted ";
    if (d[0] == "--lookup") says = std::string("speculative lookup ").append(d[1]).append(": drafted ");
    EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(" verify passes]"), std::string::npos) << r.err;
  }
  // The model as its own draft accepts every draft.
  std::vector<std::string> self = base;
  self.insert(self.end(), {"--draft-model", kGqa4});
  const Output r = run(self);
  EXPECT_NE(r.err.find("(100.0 %)"), std::string::npos) << r.err;
}

// Text in, text out with a tokenizer: greedy text and seeded sampled text are unchanged by
// prompt lookup (each id is still one draw from its own position's logits).
TEST(SpeculativeCli, TextUnchangedGreedyAndSampled) {
  const std::string prompt = "the cat and the dog and the cat and the dog and the";
  for (const std::vector<std::string>& sampling :
       {std::vector<std::string>{"--temp", "0"}, {"--temp", "0.9", "--seed", "42", "--repeat-penalty", "1.2"}}) {
    std::vector<std::string> args = {"-m", kChatml, "-p", prompt, "-n", "40", "--ignore-eos"};
    args.insert(args.end(), sampling.begin(), sampling.end());
    const Output plain = run(args);
    ASSERT_EQ(plain.code, 0) << plain.err;
    EXPECT_EQ(plain.err.find("speculative"), std::string::npos) << plain.err;
    for (const std::vector<std::string>& d :
         {std::vector<std::string>{"--lookup", "3"}, {"--lookup", "2", "--draft-tokens", "12"}}) {
      std::vector<std::string> a = args;
      a.insert(a.end(), d.begin(), d.end());
      const Output fast = run(a);
      ASSERT_EQ(fast.code, 0) << fast.err;
      EXPECT_EQ(fast.out, plain.out) << sampling[1];
      EXPECT_NE(fast.err.find("speculative lookup"), std::string::npos) << fast.err;
    }
  }
}

// --draft-int8-activations alone: the target's own file with 8-bit activations drafts; greedy
// output is still the exact model's.
TEST(SpeculativeCli, Int8SelfDraft) {
  const std::vector<std::string> args = {"-m", kGqa4Q8, "--ids", "1,5,9,33,7", "-n", "32", "--temp", "0", "--ignore-eos"};
  const Output plain = run(args);
  std::vector<std::string> a = args;
  a.push_back("--draft-int8-activations");
  const Output fast = run(a);
  ASSERT_EQ(plain.code, 0) << plain.err;
  ASSERT_EQ(fast.code, 0) << fast.err;
  EXPECT_EQ(fast.out, plain.out);
  EXPECT_NE(fast.err.find("speculative draft model: drafted"), std::string::npos) << fast.err;
}

TEST(SpeculativeCli, HelpListsTheOptions) {
  const Output r = run({"--help"});
  ASSERT_EQ(r.code, 0);
  for (const char* opt : {"--lookup INT=0", "--draft-model", "--draft-int8-activations", "--draft-tokens K=8",
                          "--draft-fixed"})
    EXPECT_NE(r.out.find(opt), std::string::npos) << opt;
}

TEST(SpeculativeCli, BadCombinationsAreOneUsageLineNamingTheOption) {
  struct Case {
    std::vector<std::string> args;
    int code;
    std::vector<std::string> says;
  };
  const std::vector<std::string> m = {"-m", kGqa4, "--ids", "1,2,3", "-n", "4"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = m;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  const std::vector<Case> cases = {
      {with({"--lookup", "3", "--draft-model", kMha}), 2, {"--lookup", "--draft-model", "use one"}},
      {with({"--lookup", "3", "--draft-int8-activations"}), 2, {"--lookup", "--draft-int8-activations"}},
      {with({"--lookup", "3", "--no-kv-cache"}), 2, {"--no-kv-cache", "--lookup"}},
      {with({"--draft-model", kMha, "--no-kv-cache"}), 2, {"--no-kv-cache", "--draft-model"}},
      {with({"--draft-tokens", "4"}), 2, {"--draft-tokens", "needs a drafter"}},
      {with({"--draft-fixed"}), 2, {"--draft-fixed", "needs a drafter"}},
      {with({"--lookup", "3", "--draft-tokens", "0"}), 2, {"--draft-tokens", "0", "1 to 256"}},
      {with({"--lookup", "3", "--draft-tokens", "300"}), 2, {"--draft-tokens", "300"}},
      {with({"--lookup", "-1"}), 2, {"--lookup"}},
      {with({"--lookup", "x"}), 2, {"--lookup"}},
      {with({"--draft-model", ""}), 2, {"--draft-model"}},
      // A draft with another vocabulary is refused at load: exit 1 with the difference.
      {{"-m", kChatml, "-p", "hi", "-n", "4", "--draft-model", kGqa4}, 1,
       {"draft model: its vocabulary has 128 tokens, the target's 384"}},
      {with({"--draft-model", (fs::path(kGqa4) / "missing").string()}), 1, {"--draft-model", "missing"}},
  };
  for (const Case& c : cases) {
    const Output r = run(c.args);
    std::string line;
    for (const auto& a : c.args) line.append(a).push_back(' ');
    EXPECT_EQ(r.code, c.code) << line << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << line << "\n" << r.err;
    EXPECT_EQ(r.err.rfind("kvinfer-generate: ", 0), 0u) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
    for (const std::string& s : c.says) EXPECT_NE(r.err.find(s), std::string::npos) << line << "\n" << r.err;
  }
}

}  // namespace
