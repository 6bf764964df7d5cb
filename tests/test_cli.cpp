// The command-line tools as a user runs them: kvinfer-generate and kvinfer-chat on the
// chatml_tiny fixture (a real tokenizer and chat template over random weights).
#include <gtest/gtest.h>

#include <algorithm>
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

// These tests mean the CPU backend (--device auto would pick a GPU where one exists): every run
// gets --device cpu unless its arguments choose a device themselves.
Output run(const char* binary, const std::vector<std::string>& args, const std::string& input = "") {
  std::vector<std::string> all;
  if (std::find(args.begin(), args.end(), "--device") == args.end()) all = {"--device", "cpu"};
  for (const std::string& a : args) all.push_back(a);
  return kvinfer::test::run_binary(binary, all, input);
}

nlohmann::json reference() {
  std::ifstream in(kvinfer::test::model_dir("chatml_tiny") / "text_reference.json");
  return nlohmann::json::parse(in);
}

const std::string kModel = kvinfer::test::model_dir("chatml_tiny").string();

// The README's quick-start self-check (tools/setup.sh runs it too): token ids in, token ids out on
// the llama_gqa4 fixture, HF's greedy continuation from its reference.safetensors.
TEST(GenerateCli, ReadmeQuickStartIdsEqualHfGreedy) {
  const kvinfer::test::Reference ref("llama_gqa4");
  std::string prompt;
  for (int32_t id : ref.prompt_ids) {
    if (!prompt.empty()) prompt += ',';
    prompt += std::to_string(id);
  }
  ASSERT_EQ(prompt, "0,4,6,16,58,102,101,80,1");  // the README's command line
  Output r = run(KVINFER_GENERATE_BIN, {"-m", kvinfer::test::model_dir("llama_gqa4").string(), "--ids", prompt, "-n",
                                        std::to_string(ref.greedy_ids.size()), "--temp", "0", "--ignore-eos"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::istringstream out(r.out);
  std::vector<int32_t> ids;
  for (int32_t id = 0; out >> id;) ids.push_back(id);
  EXPECT_EQ(ids, ref.greedy_ids) << r.out;
}

// -c is the context length that picks LongRoPE's factors, as HF does for a sequence that long: a
// Phi-3 LongRoPE model (original 16, max 64) run with -c 16 takes the short factors, and its first
// greedy token is the argmax of HF's short call over the prompt; without -c (64), the long one's.
TEST(GenerateCli, CtxPicksTheLongRopeFactorsAsHfDoes) {
  const kvinfer::test::Reference ref("phi3_longrope");
  std::string prompt;
  for (int32_t id : ref.prompt_ids) prompt += (prompt.empty() ? "" : ",") + std::to_string(id);
  const auto first_token = [&](const std::vector<float>& logits) {
    const size_t vocab = logits.size() / ref.prompt_ids.size();
    const auto last = logits.begin() + static_cast<std::ptrdiff_t>(logits.size() - vocab);
    return static_cast<int32_t>(std::max_element(last, logits.end()) - last);
  };
  const int32_t short_call = first_token(ref.prompt_logits_short), long_call = first_token(ref.prompt_logits);
  ASSERT_NE(short_call, long_call);  // else the test could not tell the factors apart
  for (const auto& [ctx, want] : {std::pair{"16", short_call}, std::pair{"0", long_call}, std::pair{"64", long_call}}) {
    Output r = run(KVINFER_GENERATE_BIN, {"-m", kvinfer::test::model_dir("phi3_longrope").string(), "--ids", prompt, "-n",
                                          "1", "--temp", "0", "--ignore-eos", "-c", ctx});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(std::stoi(r.out), want) << "-c " << ctx;
  }
}

TEST(GenerateCli, GreedyTextEqualsHfThenOneStatsLine) {
  const auto ref = reference();
  for (const auto& p : ref["prompts"]) {
    Output r = run(KVINFER_GENERATE_BIN, {"-m", kModel, "-p", p["text"], "--temp", "0", "-n", "24", "--ignore-eos"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, p["greedy_text"].get<std::string>() + "\n");
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find("prompt " + std::to_string(p["ids"].size()) + " tokens"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("generated 24 tokens"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("stop: max_tokens"), std::string::npos) << r.err;
  }
}

TEST(GenerateCli, ReadsThePromptFromStdinAndMatchesCacheOff) {
  const auto ref = reference();
  const auto& p = ref["prompts"][1];
  Output on = run(KVINFER_GENERATE_BIN, {"-m", kModel, "--temp", "0", "-n", "24", "--ignore-eos"}, p["text"]);
  Output off = run(KVINFER_GENERATE_BIN, {"-m", kModel, "--temp", "0", "-n", "24", "--ignore-eos", "--no-kv-cache"},
                p["text"]);
  ASSERT_EQ(on.code, 0) << on.err;
  ASSERT_EQ(off.code, 0) << off.err;
  EXPECT_EQ(on.out, p["greedy_text"].get<std::string>() + "\n");
  EXPECT_EQ(off.out, on.out);
  EXPECT_NE(off.err.find("recomputed every step"), std::string::npos) << off.err;
}

// The thread count changes nothing: sampled text (temperature 1.2, one seed) is the same on 1
// thread and on 3.
TEST(GenerateCli, ThreadCountDoesNotChangeTheText) {
  const std::vector<std::string> args = {"-m", kModel, "-p", "Hello", "--temp", "1.2", "-n", "16", "--seed", "7"};
  auto with = [&](const char* t) {
    std::vector<std::string> a = args;
    a.insert(a.end(), {"-t", t});
    return run(KVINFER_GENERATE_BIN, a);
  };
  Output one = with("1"), three = with("3");
  ASSERT_EQ(one.code, 0) << one.err;
  ASSERT_EQ(three.code, 0) << three.err;
  EXPECT_FALSE(one.out.empty());
  EXPECT_EQ(one.out, three.out);
}

TEST(GenerateCli, SameSeedSameText) {
  const std::vector<std::string> args = {"-m", kModel, "-p", "Hello", "--temp", "1.2", "-n", "16", "--seed", "123"};
  Output a = run(KVINFER_GENERATE_BIN, args), b = run(KVINFER_GENERATE_BIN, args);
  ASSERT_EQ(a.code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.err.find("seed 123"), std::string::npos) << a.err;
}

TEST(GenerateCli, ChatFlagUsesTheTemplate) {
  const auto ref = reference();
  const auto& turn = ref["chat"][0];
  std::vector<std::string> args = {"-m", kModel, "-p", turn["user"], "--chat", "--temp", "0", "-n", "24", "--ignore-eos"};
  for (int32_t id : ref["chat_banned_ids"].get<std::vector<int32_t>>()) {
    args.push_back("--logit-bias");
    args.push_back(std::to_string(id) + "=-inf");
  }
  Output r = run(KVINFER_GENERATE_BIN, args);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, turn["greedy_text"].get<std::string>() + "\n");
  EXPECT_NE(r.err.find("prompt " + std::to_string(turn["prefill_ids"].size()) + " tokens"), std::string::npos);
}

TEST(GenerateCli, HelpListsEveryOptionWithItsDefault) {
  Output r = run(KVINFER_GENERATE_BIN, {"--help"});
  ASSERT_EQ(r.code, 0);
  for (const char* opt : {"-m,--model", "-p,--prompt", "-n,--max-new-tokens", "--temp", "--top-k", "--top-p", "--min-p",
                          "--repeat-penalty", "--seed", "--no-kv-cache", "--chat", "--system", "--device", "--stop",
                          "--logit-bias", "-c,--ctx", "--kv-dtype", "-t,--threads"})
    EXPECT_NE(r.out.find(opt), std::string::npos) << opt;
  for (const char* def : {"--temp FLOAT=0.8", "--top-k INT=40", "--top-p FLOAT=0.95", "--min-p FLOAT=0.05",
                          "--repeat-penalty FLOAT=1", "--seed INT=-1", "-n,--max-new-tokens INT=256",
                          "--device TEXT:{auto,cpu,cuda}=auto", "--kv-dtype TEXT=auto", "-c,--ctx INT=0",
                          "-t,--threads INT=0"})
    EXPECT_NE(r.out.find(def), std::string::npos) << def;
}

TEST(GenerateCli, ErrorsAreOneLineAndNonZero) {
  const std::vector<std::vector<std::string>> bad = {
      {"-m", kModel, "-p", "x", "--temp", "-1"},                 // invalid sampling parameter
      {"-m", kModel, "-p", "x", "--top-p", "0"},                 // invalid sampling parameter
      {"-m", kModel, "-p", "x", "--logit-bias", "5"},            // malformed bias
      {"-m", kModel + "/missing", "-p", "x"},                    // no such model
      {"-m", kModel, "-p", "x", "--no-such-flag"},               // unknown option
      {"-m", kModel, "-p", std::string(300, 'a'), "-c", "16"},   // prompt longer than the cache
      {"-m", kModel, "-p", "x", "--device", "tpu"},              // unknown device
  };
  for (const auto& args : bad) {
    Output r = run(KVINFER_GENERATE_BIN, args);
    EXPECT_NE(r.code, 0) << args.back();
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(r.err.rfind("kvinfer-generate: ", 0), 0u) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
}

TEST(ChatCli, KeepsOneCacheAcrossTurnsWithResetAndStats) {
  const auto ref = reference();
  std::vector<std::string> args = {"-m", kModel, "--temp", "0", "-n", "24", "--ignore-eos", "-c", "256"};
  for (int32_t id : ref["chat_banned_ids"].get<std::vector<int32_t>>()) {
    args.push_back("--logit-bias");
    args.push_back(std::to_string(id) + "=-inf");
  }
  const std::string input = ref["chat"][0]["user"].get<std::string>() + "\n" + ref["chat"][1]["user"].get<std::string>() +
                            "\n/stats\n/reset\n/stats\n" + ref["chat"][0]["user"].get<std::string>() + "\n";
  Output r = run(KVINFER_CHAT_BIN, args, input);
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string a0 = ref["chat"][0]["greedy_text"], a1 = ref["chat"][1]["greedy_text"];
  EXPECT_EQ(r.out, a0 + "\n" + a1 + "\n" + a0 + "\n");
  const auto& t1 = ref["chat"][1];
  EXPECT_NE(r.err.find("last turn: " + std::to_string(t1["prefill_ids"].size()) + " tokens prefilled, " +
                       std::to_string(t1["reused"].get<int>()) + " reused"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("[conversation and cache cleared]"), std::string::npos);
  EXPECT_NE(r.err.find("[0 messages; cache 0/256 tokens"), std::string::npos) << r.err;
}

TEST(ChatCli, SaysClearlyWhenTheContextIsFull) {
  Output r = run(KVINFER_CHAT_BIN, {"-m", kModel, "--temp", "0", "-n", "8", "-c", "100"},
              "Hello! What is a KV cache?\nAnd why is decode memory bound? Tell me everything.\n");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("context full"), std::string::npos) << r.err;
}

}  // namespace
