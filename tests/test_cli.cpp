// The command-line tools as a user runs them: kvinfer-generate and kvinfer-chat on the
// chatml_tiny fixture (a real tokenizer and chat template over random weights).
#include <gtest/gtest.h>
#include <unistd.h>

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
                          "--device TEXT:{auto,cpu,cuda,cuda:N}=auto", "--kv-dtype TEXT=auto", "-c,--ctx INT=0",
                          "-t,--threads INT=0", "--activations TEXT:{exact,int15,int8}=exact"})
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
      {"-m", kModel, "-p", "x", "--activations", "int4"},        // unknown activation mode
      {"-m", kModel, "-p", "x", "--activations", "int15", "--int8-activations"},  // two modes
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

// --grammar, --json-schema (inline or a file) and --json constrain the text: on random weights only
// the grammar makes it JSON. Sampled at temperature 1 over a few seeds; each run stops by itself
// once the value is complete (the budget is far above what the schema allows).
TEST(GenerateCli, GrammarJsonSchemaAndJsonConstrainTheText) {
  const std::string schema = R"({"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
      "n": {"type": "integer", "minimum": 0, "maximum": 9}}, "required": ["name", "n"], "additionalProperties": false})";
  const fs::path dir = fs::temp_directory_path() / ("kvinfer_cli_grammar_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "schema.json") << schema;
  std::ofstream(dir / "yes_no.gbnf") << "# an answer\nroot ::= (\"yes\" | \"no\") \"!\"\n";
  const auto check_object = [](const Output& r, bool with_schema) {
    ASSERT_EQ(r.code, 0) << r.err;
    ASSERT_FALSE(r.out.empty());
    // Any object may have no end on random weights (a string that goes on): then cut short.
    if (!with_schema && r.err.find("stop: eos") == std::string::npos) {
      EXPECT_EQ(r.out[0], '{') << r.out;
      return;
    }
    const auto j = nlohmann::json::parse(r.out.substr(0, r.out.size() - 1), nullptr, false);
    ASSERT_TRUE(j.is_object()) << r.out;
    EXPECT_NE(r.err.find("grammar"), std::string::npos) << r.err;  // the stats line: its states and compile time
    if (!with_schema) return;
    ASSERT_EQ(j.size(), 2u) << r.out;
    ASSERT_TRUE(j["name"].is_string()) << r.out;
    EXPECT_LE(j["name"].get<std::string>().size(), 8u * 4) << r.out;
    ASSERT_TRUE(j["n"].is_number_integer()) << r.out;
    EXPECT_GE(j["n"].get<int>(), 0);
    EXPECT_LE(j["n"].get<int>(), 9);
  };
  for (const char* seed : {"1", "2", "3"}) {
    const std::vector<std::string> common = {"-m", kModel, "-p", "Data:", "--temp", "1", "--seed", seed, "-n", "400"};
    auto with = [&](std::vector<std::string> extra) {
      std::vector<std::string> a = common;
      a.insert(a.end(), extra.begin(), extra.end());
      return a;
    };
    check_object(run(KVINFER_GENERATE_BIN, with({"--json-schema", schema})), true);
    check_object(run(KVINFER_GENERATE_BIN, with({"--json-schema", (dir / "schema.json").string()})), true);
    check_object(run(KVINFER_GENERATE_BIN, with({"--json"})), false);
    const Output g = run(KVINFER_GENERATE_BIN, with({"--grammar", (dir / "yes_no.gbnf").string()}));
    ASSERT_EQ(g.code, 0) << g.err;
    EXPECT_TRUE(g.out == "yes!\n" || g.out == "no!\n") << g.out;
  }
  // kvinfer-chat: every turn's reply follows the grammar from its start.
  const Output c = run(KVINFER_CHAT_BIN, {"-m", kModel, "--temp", "1", "--seed", "5", "-n", "400", "--json-schema", schema},
                       "Give me a record.\nAnother one.\n");
  ASSERT_EQ(c.code, 0) << c.err;
  // The replies, one after another (each may span lines: the grammar allows JSON's whitespace).
  std::istringstream replies(c.out);
  int count = 0;
  while ((replies >> std::ws).peek() != std::char_traits<char>::eof()) {
    nlohmann::json j;
    replies >> j;
    EXPECT_TRUE(j.is_object() && j.contains("name") && j.contains("n")) << c.out;
    ++count;
  }
  EXPECT_EQ(count, 2) << c.out;
  fs::remove_all(dir);
}

// Grammar errors are one line naming the option (and the file, line and column or the schema's
// place), found before the model loads (the model path here does not exist); an inline schema is
// part of the command line (status 2), a file's content is input (status 1).
TEST(GenerateCli, GrammarErrorsNameTheOptionBeforeTheModelLoads) {
  const fs::path dir = fs::temp_directory_path() / ("kvinfer_cli_grammar_errors_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "bad.gbnf") << "root ::= \"a\"\nitem ::= (\"b\"\n";
  std::ofstream(dir / "bad.json") << R"({"type": "string", "format": "email"})";
  const std::string missing_model = kModel + "/missing";
  struct Case {
    std::vector<std::string> args;
    int code;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{"--grammar", (dir / "none.gbnf").string()}, 1, "--grammar \"" + (dir / "none.gbnf").string() + "\""},
      {{"--grammar", (dir / "bad.gbnf").string()}, 1, "bad.gbnf\": grammar line 2, column 10: unmatched '('"},
      {{"--json-schema", R"({"type": "integer", "multipleOf": 3})"}, 2, "--json-schema: JSON schema (root): 'multipleOf' is not supported"},
      {{"--json-schema", "{not json"}, 2, "--json-schema: "},
      {{"--json-schema", (dir / "bad.json").string()}, 1, "bad.json\": JSON schema (root): format \"email\" is not supported (date and uuid are)"},
      {{"--json", "--json-schema", "{}"}, 2, "--grammar, --json-schema and --json each set the output's grammar: give one"},
      {{"--json", "--num-beams", "2"}, 2, "--num-beams cannot be combined with --grammar, --json-schema or --json"},
  };
  for (const Case& k : cases) {
    std::vector<std::string> args = {"-m", missing_model, "-p", "x"};
    args.insert(args.end(), k.args.begin(), k.args.end());
    const Output r = run(KVINFER_GENERATE_BIN, args);
    EXPECT_EQ(r.code, k.code) << k.args[1] << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(r.err.rfind("kvinfer-generate: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(k.says), std::string::npos) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
  const Output chat = run(KVINFER_CHAT_BIN, {"-m", missing_model, "--json-schema", R"({"not": {}})"}, "x\n");
  EXPECT_EQ(chat.code, 2) << chat.err;
  EXPECT_NE(chat.err.find("kvinfer-chat: --json-schema: JSON schema (root): 'not' is not supported"), std::string::npos)
      << chat.err;
  fs::remove_all(dir);
}

}  // namespace
