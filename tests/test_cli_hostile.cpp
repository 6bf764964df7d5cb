// The four command-line tools against hostile and careless input, table-driven: devices, FIFOs
// and huge sparse files where a model or prompt should be, options out of range, a context that
// does not fit, output that cannot be written, text from files that would drive the terminal.
// Every case must end (a timeout fails it), with the documented exit status and, for errors,
// exactly one printable line on stderr, "<tool>: ...", naming what is at fault.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reference.h"
#include "run_binary.h"
#include "tool.h"

namespace {

namespace fs = std::filesystem;

constexpr int kOk = 0, kError = 1, kUsage = 2;
constexpr int kKilledBySigpipe = 128 + 13;  // as the shell reports it

const fs::path& scratch() {
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("kvinfer_hostile_" + std::to_string(::getpid()));
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

std::string tiny() { return kvinfer::test::model_dir("chatml_tiny").string(); }     // 256 positions
std::string gpt2() { return kvinfer::test::model_dir("gpt2_tiny").string(); }        // 128 learned positions
std::string q(const std::string& s) { return kvinfer::test::shell_quote(s); }

// A copy of chatml_tiny whose config.json (or another file) is replaced by `make`.
fs::path model_copy(const std::string& name) {
  const fs::path dir = scratch() / name;
  fs::create_directories(dir);
  for (const auto& e : fs::directory_iterator(tiny()))
    if (!fs::exists(dir / e.path().filename())) fs::copy(e.path(), dir / e.path().filename());
  return dir;
}

void write(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

// The hostile files, made once.
void make_files() {
  static bool made = false;
  if (made) return;
  made = true;
  const fs::path s = scratch();
  ::mkfifo((s / "fifo.gguf").c_str(), 0600);
  for (const char* d : {"zero_config", "fifo_config", "sparse_config", "escape_config"})
    fs::create_directories(s / d);
  fs::create_symlink("/dev/zero", s / "zero_config" / "config.json");
  ::mkfifo((s / "fifo_config" / "config.json").c_str(), 0600);
  {  // 2 GiB of holes: no disk, but a reader without a limit would allocate it all
    std::ofstream(s / "sparse_config" / "config.json");
    fs::resize_file(s / "sparse_config" / "config.json", uint64_t{2} << 30);
  }
  // An architecture name that would clear the screen and retitle the terminal.
  nlohmann::json c = nlohmann::json::parse(kvinfer::test::slurp(fs::path(tiny()) / "config.json"));
  c["architectures"] = {"\x1b[2J\x1b]0;owned\x07Llama\nForCausalLM"};
  write(s / "escape_config" / "config.json", c.dump());

  const fs::path zt = model_copy("zero_tokenizer_model");
  fs::remove(zt / "tokenizer.json");
  fs::create_symlink("/dev/zero", zt / "tokenizer.json");
  const fs::path ft = model_copy("fifo_template_model");
  fs::remove(ft / "chat_template.jinja");
  ::mkfifo((ft / "chat_template.jinja").c_str(), 0600);
  const fs::path np = model_copy("unreadable_config_model");
  fs::permissions(np / "config.json", fs::perms::none);
  fs::copy(fs::path(KVINFER_TEST_DATA) / "gguf" / "models" / "chatml_tiny.f32.gguf",
           s / "unreadable.gguf");
  fs::permissions(s / "unreadable.gguf", fs::perms::none);
  fs::permissions(s, fs::perms::all);  // the unprivileged user of the permission cases looks inside

  // Model files that are nothing: empty, and three bytes of the magic.
  write(s / "empty.gguf", "");
  write(s / "three.gguf", "GGU");
  // A config whose layer count would make per-layer work unbounded.
  const fs::path deep = model_copy("deep_config_model");
  nlohmann::json dc = nlohmann::json::parse(kvinfer::test::slurp(deep / "config.json"));
  dc["num_hidden_layers"] = 2000000000;
  write(deep / "config.json", dc.dump());
  // GGUF names with a NUL and a TAB, same lengths so that every offset holds: the LM head's tensor
  // (the model then ties it, and the renamed tensor is left over), and a key whose type is bad.
  {
    const std::string gguf =
        kvinfer::test::slurp(fs::path(KVINFER_TEST_DATA) / "gguf" / "models" / "chatml_tiny.f32.gguf");
    std::string t = gguf;
    const size_t at = t.find("output.weight");
    t.replace(at, 13, std::string("out\tut\0weight", 13));
    write(s / "named_tensor.gguf", t);
    std::string k = gguf;
    const size_t key = k.find("general.name");
    k.replace(key, 12, std::string("gen\0ral.n\tme", 12));
    const uint32_t bad_type = 99;
    std::memcpy(k.data() + key + 12, &bad_type, 4);
    write(s / "named_key.gguf", k);
  }

  write(s / "prompt_1mb.txt", [] {
    std::string t;
    while (t.size() < (1u << 20)) t += "the quick brown fox jumps over the lazy dog ";
    return t;
  }());
}

struct Case {
  std::string name;
  std::string tool;     // generate, chat, kv-plan, bench
  std::string args;     // shell words, already quoted
  std::string redirect; // stdin/stdout redirections ("" : stdin from /dev/null)
  int code;
  std::vector<std::string> err_has;  // substrings stderr must hold
  std::vector<std::string> out_has = {};  // substrings stdout must hold
};

std::string binary(const std::string& tool) {
  if (tool == "generate") return KVINFER_GENERATE_BIN;
  if (tool == "chat") return KVINFER_CHAT_BIN;
  if (tool == "kv-plan") return KVINFER_KV_PLAN_BIN;
#ifdef KVINFER_BENCH_BIN
  if (tool == "bench") return KVINFER_BENCH_BIN;
#endif
  return {};
}

struct Result {
  int code;
  std::string out, err;
};

// Runs `command` under bash, its stderr to a file; a case that hangs is killed at 120 s (code 124).
// as_nobody: as an unprivileged user (root reads any file whatever its permissions).
Result run_shell(const std::string& command, const std::string& tag, bool as_nobody = false) {
  const fs::path out = scratch() / (tag + ".out"), err = scratch() / (tag + ".err");
  const std::string user = as_nobody ? "setpriv --reuid=65534 --regid=65534 --clear-groups " : "";
  const std::string line = "timeout -k 5 120 " + user + "bash -c " + q("{ " + command + "; } 2> " + q(err.string())) +
                           " > " + q(out.string()) + " 2>&1";
  const int status = std::system(line.c_str());
  Result r{WIFEXITED(status) ? WEXITSTATUS(status) : -1, kvinfer::test::slurp(out), kvinfer::test::slurp(err)};
  fs::remove(out);
  fs::remove(err);
  return r;
}

class HostileCli : public testing::TestWithParam<Case> {
 protected:
  static void SetUpTestSuite() { make_files(); }
};

TEST_P(HostileCli, EndsWithTheDocumentedStatusAndOneClearLine) {
  const Case& c = GetParam();
  const std::string bin = binary(c.tool);
  if (bin.empty()) GTEST_SKIP() << "kvinfer-" << c.tool << " is not built (KVINFER_BENCH=OFF)";
  const bool as_nobody = c.name.find("permission") != std::string::npos && ::geteuid() == 0;
  const bool own_device = c.args.find("--device") != std::string::npos;  // the case tests --device itself
  const std::string device = c.tool == "kv-plan" || own_device ? "" : " --device cpu";
  const std::string redirect = c.redirect.empty() ? "< /dev/null" : c.redirect;
  const Result r = run_shell(q(bin) + device + " " + c.args + " " + redirect, c.name, as_nobody);
  EXPECT_EQ(r.code, c.code) << "stderr: " << r.err;
  for (const std::string& s : c.err_has) EXPECT_NE(r.err.find(s), std::string::npos) << "no '" << s << "' in: " << r.err;
  for (const std::string& s : c.out_has) EXPECT_NE(r.out.find(s), std::string::npos) << "no '" << s << "' in: " << r.out;
  if (c.code == kOk) return;
  EXPECT_EQ(r.err.rfind("kvinfer-" + c.tool + ": ", 0), 0u) << r.err;
  ASSERT_FALSE(r.err.empty());
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "not one line: " << r.err;
  for (size_t i = 0; i + 1 < r.err.size(); ++i)
    EXPECT_GE(static_cast<unsigned char>(r.err[i]), 0x20u) << "control byte at " << i << " in: " << r.err;
}

std::string S(const std::string& name) { return q((scratch() / name).string()); }

std::vector<Case> cases() {
  const std::string m = "-m " + q(tiny());
  const std::string g = "-m " + q(gpt2());
  const std::string p = m + " -p hello -n 2 --temp 0";
  const std::string p_no_n = m + " -p hello --temp 0";
  const std::string b = "-m " + q(kvinfer::test::model_dir("llama_gqa4").string()) + " -p 2 -n 2 --mode on --no-bandwidth-probe";
  std::vector<Case> v = {
      // 1. Bounded, typed reads: devices, FIFOs, huge files.
      {"kv_plan_dev_zero", "kv-plan", "-m /dev/zero", "", kError, {"/dev/zero", "a character device"}},
      {"kv_plan_fifo_gguf", "kv-plan", "-m " + S("fifo.gguf"), "", kError, {"fifo.gguf", "a FIFO"}},
      {"generate_fifo_gguf", "generate", "-m " + S("fifo.gguf") + " -p x", "", kError, {"fifo.gguf", "a FIFO"}},
      {"kv_plan_config_is_dev_zero", "kv-plan", "-m " + S("zero_config"), "", kError,
       {"config.json", "a character device"}},
      {"generate_config_is_dev_zero", "generate", "-m " + S("zero_config") + " -p x", "", kError,
       {"config.json", "a character device"}},
      {"kv_plan_config_is_fifo", "kv-plan", "-m " + S("fifo_config"), "", kError, {"config.json", "a FIFO"}},
      {"chat_config_is_fifo", "chat", "-m " + S("fifo_config"), "", kError, {"config.json", "a FIFO"}},
      {"kv_plan_sparse_2gb_config", "kv-plan", "-m " + S("sparse_config"), "", kError,
       {"config.json", "2.00 GiB", "16.0 MiB"}},
      {"generate_tokenizer_is_dev_zero", "generate", "-m " + S("zero_tokenizer_model") + " -p x", "", kError,
       {"tokenizer.json", "a character device"}},
      {"generate_chat_template_is_fifo", "generate", "-m " + S("fifo_template_model") + " -p x", "", kError,
       {"chat_template.jinja", "a FIFO"}},
      {"generate_prompt_from_dev_zero", "generate", m + " -n 2", "< /dev/zero", kError, {"stdin", "64.0 MiB", "prompt"}},
      {"generate_prompt_file_dev_zero", "generate", m + " -f /dev/zero", "", kError, {"/dev/zero", "a character device"}},
      {"chat_message_from_dev_zero", "chat", m + " --temp 0", "< /dev/zero", kError, {"stdin", "64.0 MiB"}},
      {"bench_model_dev_zero", "bench", "-m /dev/zero -n 2", "", kError, {"/dev/zero", "a character device"}},
      {"bench_prompt_positions_overflow", "bench",
       "-m " + q(kvinfer::test::model_dir("llama_gqa4").string()) + " -p 9223372036854775807 -n 2 --mode on", "",
       kUsage, {"-p/-n"}},
      // 2. The model's context is a hard limit.
      {"generate_ctx_beyond_model", "generate", p + " -c 300", "", kUsage, {"-c/--ctx", "300", "256", "--extend-context"}},
      {"chat_ctx_beyond_model", "chat", m + " -c 9000", "", kUsage, {"-c/--ctx", "9,000", "256"}},
      {"generate_gpt2_extend_refused", "generate", g + " --ids 1,2 -c 200 --extend-context", "", kError,
       {"128", "learned positions"}},
      {"generate_prompt_beyond_context", "generate", m + " -n 4 -f " + S("prompt_1mb.txt"), "", kError,
       {"the prompt is", "tokens", "256", "context length"}},
      {"generate_rope_model_stops_at_context", "generate", p_no_n + " -n 500 --ignore-eos", "", kOk,
       {"stop: context_full", "256/256 tokens"}},
      {"generate_gpt2_stops_at_context", "generate", g + " --ids 1,2,3 -n 500 --ignore-eos --temp 0", "", kOk,
       {"stop: context_full", "128/128 tokens"}},
      {"generate_extend_context_rope", "generate", p_no_n + " -n 400 --ignore-eos -c 300 --extend-context", "", kOk,
       {"stop: context_full", "300/300 tokens"}},
      {"kv_plan_tokens_beyond_context_marked", "kv-plan", m + " -n 100000", "", kOk, {}, {"beyond the model's context"}},
      // 3. Resource options are bounded.
      {"generate_threads_10000", "generate", p + " -t 10000", "", kUsage, {"-t/--threads", "10,000"}},
      {"chat_threads_negative", "chat", m + " -t -3", "", kUsage, {"--threads"}},
      {"bench_threads_10000", "bench", b + " -t 10000", "", kUsage, {"-t/--threads", "10,000"}},
      {"generate_negative_n", "generate", m + " -p x -n -5", "", kUsage, {"--max-new-tokens", "-5"}},
      {"kv_plan_zero_tokens", "kv-plan", m + " -n 0", "", kUsage, {"--tokens"}},
      {"kv_plan_batch_overflow", "kv-plan", m + " -n 256 -b 9223372036854775807", "", kUsage, {"-b/--batch"}},
      // 4. Output failures are failures; SIGPIPE stays Unix-normal.
      {"generate_stdout_full", "generate", p, "< /dev/null > /dev/full", kError, {"stdout", "no space left on device"}},
      {"generate_stdout_closed", "generate", p, "< /dev/null >&-", kError, {"stdout is closed"}},
      {"chat_stdout_full", "chat", m + " --temp 0 -n 2", "<<< hello > /dev/full", kError,
       {"stdout", "no space left on device"}},
      {"kv_plan_stdout_full", "kv-plan", m, "> /dev/full", kError, {"stdout", "no space left on device"}},
      {"bench_json_to_dev_full", "bench", b + " -t 1 --json /dev/full", "> /dev/null",
       kError, {"--json", "/dev/full", "a character device", "regular files"}},
      {"bench_svg_to_fifo", "bench", b + " -t 1 --svg " + S("fifo.gguf"), "> /dev/null", kError,
       {"--svg", "fifo.gguf", "a FIFO"}},
      // 5. Clear, consistent errors; exit statuses as documented.
      {"generate_missing_model", "generate", "-m /no/such/model -p x", "", kError, {"/no/such/model", "no such file or directory"}},
      {"chat_missing_model", "chat", "-m /no/such/model", "", kError, {"/no/such/model", "no such file or directory"}},
      {"kv_plan_missing_model", "kv-plan", "-m /no/such/model", "", kError, {"/no/such/model", "no such file or directory"}},
      {"bench_missing_model", "bench", "-m /no/such/model -n 2", "", kError, {"/no/such/model", "no such file or directory"}},
      {"generate_unreadable_config_permission", "generate", "-m " + S("unreadable_config_model") + " -p x", "", kError,
       {"config.json", "permission denied"}},
      {"kv_plan_unreadable_config_permission", "kv-plan", "-m " + S("unreadable_config_model"), "", kError,
       {"config.json", "permission denied"}},
      {"generate_unreadable_gguf_permission", "generate", "-m " + S("unreadable.gguf") + " -p x", "", kError,
       {"unreadable.gguf", "permission denied"}},
      {"kv_plan_unreadable_gguf_permission", "kv-plan", "-m " + S("unreadable.gguf"), "", kError,
       {"unreadable.gguf", "permission denied"}},
      {"generate_unknown_option", "generate", p + " --no-such-flag", "", kUsage, {"--no-such-flag"}},
      {"bench_unknown_option", "bench", b + " --no-such-flag", "", kUsage, {"--no-such-flag"}},
      {"kv_plan_unknown_option", "kv-plan", "--no-such-flag", "", kUsage, {"--no-such-flag"}},
      {"generate_n_not_a_number", "generate", m + " -p x -n abc", "", kUsage, {"--max-new-tokens", "abc"}},
      {"generate_ids_outside_vocab", "generate", m + " --ids 1,99999", "", kUsage, {"--ids", "99,999", "383"}},
      {"generate_ids_not_a_number", "generate", m + " --ids 1,x", "", kUsage, {"--ids", "'x'"}},
      {"generate_bias_outside_vocab", "generate", p + " --logit-bias 99999=1", "", kUsage, {"--logit-bias", "99,999"}},
      {"generate_bad_temperature", "generate", p + " --temp -1", "", kUsage, {"--temp"}},
      {"chat_bad_top_p", "chat", m + " --top-p 0", "", kUsage, {"--top-p"}},
      {"generate_bad_kv_dtype", "generate", p + " --kv-dtype q4_0x", "", kUsage, {"--kv-dtype"}},
      {"generate_escape_sequences_in_config", "generate", "-m " + S("escape_config") + " -p x", "", kError,
       {"\\x1b[2J", "\\x07", "\\n"}},
      {"kv_plan_escape_sequences_in_config", "kv-plan", "-m " + S("escape_config"), "", kError, {"\\x1b"}},
      {"generate_ids_and_prompt_conflict", "generate", m + " --ids 1 -p x", "", kUsage, {"--ids"}},
      // Every tool picks a model file's format by its content, alike.
      {"kv_plan_empty_gguf", "kv-plan", "-m " + S("empty.gguf"), "", kError,
       {"empty.gguf", "not a GGUF file", "it is empty", "not a config.json"}},
      {"generate_empty_gguf", "generate", "-m " + S("empty.gguf") + " -p x", "", kError,
       {"empty.gguf", "not a GGUF file", "it is empty", "not a config.json"}},
      {"kv_plan_three_byte_gguf", "kv-plan", "-m " + S("three.gguf"), "", kError, {"three.gguf", "not a GGUF file"}},
      {"chat_three_byte_gguf", "chat", "-m " + S("three.gguf"), "", kError, {"three.gguf", "not a GGUF file"}},
      {"kv_plan_two_billion_layers", "kv-plan", "-m " + S("deep_config_model"), "", kError,
       {"num_hidden_layers", "2000000000", "at most 4096 layers"}},
      // Names read from a file are escaped, NUL and TAB too; the message goes on past them.
      {"generate_gguf_tensor_name_with_nul_and_tab", "generate", "-m " + S("named_tensor.gguf") + " -p x", "", kError,
       {"tensor 'out\\tut\\x00weight' is not part of a llama model"}},
      {"kv_plan_gguf_key_with_nul_and_tab", "kv-plan", "-m " + S("named_key.gguf"), "", kError,
       {"key 'gen\\x00ral.n\\tme'", "99"}},
      // Command-line errors are found before the model loads (no such model here: it is never read).
      {"generate_empty_stop", "generate", "-m /no/such/model -p x --stop ''", "", kUsage, {"--stop", "empty"}},
      {"chat_empty_stop", "chat", "-m /no/such/model --stop ''", "", kUsage, {"--stop", "empty"}},
      // Beams' memory is checked before any of it is taken, with the plan.
      {"generate_beams_beyond_memory", "generate", m + " -p hello -n 4 --num-beams 2000000000", "", kError,
       {"beam search with 2000000000 beams needs", "more KV caches of", "logits", "is left after the weights"}},
      {"generate_device_unknown", "generate", p + " --device gpu", "", kUsage,
       {"--device", "'gpu' is not auto, cpu, cuda or cuda:N"}},
      {"generate_device_index_not_a_number", "generate", p + " --device cuda:x1", "", kUsage,
       {"--device", "'cuda:x1' names no CUDA device", "0 to 1023"}},
      {"bench_device_index_negative", "bench", b + " --device cuda:-1", "", kUsage, {"--device", "'cuda:-1'"}},
      {"generate_device_index_absent", "generate", p + " --device cuda:7", "", kError, {"CUDA device"}},
      // 6. What is accepted is really accepted.
      {"generate_empty_model_path", "generate", "-m '' -p x", "", kUsage, {"--model", "empty"}},
      {"chat_empty_model_path", "chat", "-m ''", "", kUsage, {"--model", "empty"}},
      {"kv_plan_empty_model_path", "kv-plan", "-m ''", "", kUsage, {"--model", "empty"}},
      {"bench_empty_model_path", "bench", "-m '' -n 2", "", kUsage, {"--model", "empty"}},
      {"generate_seed_beyond_64_bits", "generate", p + " --seed 18446744073709551616", "", kUsage, {"--seed"}},
      {"generate_seed_negative", "generate", p + " --seed -2", "", kUsage, {"--seed", "-2"}},
      {"generate_seed_fraction", "generate", p + " --seed 1.5", "", kUsage, {"--seed", "1.5"}},
      {"generate_seed_max_is_accepted", "generate", p + " --seed 18446744073709551615", "", kOk, {"seed - (greedy)"}},
      {"bench_seed_beyond_64_bits", "bench", b + " --seed 99999999999999999999", "", kUsage, {"--seed"}},
  };
  return v;
}

INSTANTIATE_TEST_SUITE_P(Cases, HostileCli, testing::ValuesIn(cases()),
                         [](const testing::TestParamInfo<Case>& i) { return i.param.name; });

// What makes a message printable: the escapes, and text that is left alone.
TEST(HostileCliText, ControlsBidiOverridesAndInvalidUtf8AreEscaped) {
  EXPECT_EQ(tool::printable("plain text, UTF-8 × é …"), "plain text, UTF-8 × é …");
  EXPECT_EQ(tool::printable("a\x1b[2Jb\x1b]0;t\x07"), "a\\x1b[2Jb\\x1b]0;t\\x07");
  EXPECT_EQ(tool::printable("one\ntwo\rthree\tfour"), "one\\ntwo\\rthree\\tfour");
  EXPECT_EQ(tool::printable("\x7f\xc2\x9b"), "\\x7f\\u009b");            // DEL, the C1 CSI
  EXPECT_EQ(tool::printable("x\xe2\x80\xaey"), "x\\u202ey");                // right-to-left override
  EXPECT_EQ(tool::printable("\xff\xc0\x80\xed\xa0\x80"), "\\xff\\xc0\\x80\\xed\\xa0\\x80");  // not UTF-8
  EXPECT_EQ(tool::printable(std::string("a\0b", 3)), "a\\x00b");
}

// $KVINFER_MODEL naming nothing: the same wording as -m, naming the variable.
TEST(HostileCliEnv, ModelVariableNamingNothingIsNoSuchFile) {
  const Result r = run_shell("KVINFER_MODEL=/no/such/model " + q(KVINFER_GENERATE_BIN) + " -p x < /dev/null", "env");
  EXPECT_EQ(r.code, kError);
  EXPECT_EQ(r.err, "kvinfer-generate: $KVINFER_MODEL: \"/no/such/model\": no such file or directory; pass -m PATH or "
                   "unset it\n");
}

// kvinfer-chat reads CRLF lines (a Windows file, pasted text): the CR is not part of a command.
TEST(HostileCliChat, CrlfLinesAreLines) {
  const Result r = run_shell("printf 'hello\\r\\n/stats\\r\\n/quit\\r\\n' | " + q(KVINFER_CHAT_BIN) + " --device cpu -m " +
                                 q(tiny()) + " --temp 0 -n 2",
                             "crlf");
  EXPECT_EQ(r.code, kOk) << r.err;
  EXPECT_EQ(r.err.find("unknown command"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("[2 messages; cache"), std::string::npos) << r.err;
}

// A destination that is not a regular file is never replaced by a save (it used to be renamed over).
TEST(HostileCliFiles, ASaveNeverReplacesAFifoOrADevice) {
  make_files();
  const fs::path fifo = scratch() / "fifo.gguf";
  struct stat st {};
  ASSERT_EQ(::lstat(fifo.c_str(), &st), 0);
  ASSERT_TRUE(S_ISFIFO(st.st_mode));
  const std::string b = "-m " + q(kvinfer::test::model_dir("llama_gqa4").string()) + " -p 2 -n 2 --mode on --no-bandwidth-probe";
#ifdef KVINFER_BENCH_BIN
  const Result r = run_shell(q(KVINFER_BENCH_BIN) + " " + b + " -t 1 --json " + q(fifo.string()) + " > /dev/null", "json_fifo");
  EXPECT_EQ(r.code, kError) << r.err;
#endif
  ASSERT_EQ(::lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode)) << "the FIFO was replaced";
}

// A reader that goes away: killed by SIGPIPE, as cat or grep would be, not an error message.
TEST(HostileCliPipe, AClosedPipeEndsTheToolWithSigpipe) {
  const Result r = run_shell(q(KVINFER_GENERATE_BIN) + " --device cpu -m " + q(tiny()) +
                                 " -p hello -n 200 --ignore-eos --temp 0 < /dev/null | true; exit ${PIPESTATUS[0]}",
                             "pipe");
  EXPECT_EQ(r.code, kKilledBySigpipe) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
}

}  // namespace
