// kvinfer-bench as a user runs it: the cache-on / cache-off experiment on the llama_gqa4 fixture
// (vocab 128, 128 positions) and on the smollm2-135m synthetic shape; JSON, CSV, SVG; errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "run_binary.h"

namespace {

namespace fs = std::filesystem;
using kvinfer::test::Output;
using nlohmann::json;

const std::string kFixture = std::string(KVINFER_TEST_DATA) + "/models/llama_gqa4";
// llama_gqa4: 2 layers, 2 KV heads, head_dim 8, f32: 2 (K, V) × 2 × 2 × 8 × 4 bytes per position.
constexpr uint64_t kKvBytesPerToken = 2 * 2 * 2 * 8 * 4;

Output bench(std::vector<std::string> args) {
  args.insert(args.end(), {"-t", "1"});  // ctest runs tests side by side on few cores
  // The CPU backend throughout (bandwidth probe, peak RSS, f32 bit-equal tokens): --device auto
  // would pick a GPU where one exists.
  args.insert(args.end(), {"--device", "cpu"});
  return kvinfer::test::run_binary(KVINFER_BENCH_BIN, args);
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + what.size())) ++n;
  return n;
}

// The trapezoid estimate in step index: measured steps kept, the others on the line between
// their measured neighbours.
double trapezoid_total_ms(const json& steps) {
  std::vector<std::pair<double, double>> measured;  // (step, ms)
  for (const json& s : steps)
    if (!s["off_ms"].is_null()) measured.emplace_back(s["step"].get<double>(), s["off_ms"].get<double>());
  double total = 0;
  for (size_t i = 0; i < measured.size(); ++i) {
    total += measured[i].second;
    if (i == 0) continue;
    const auto [x0, y0] = measured[i - 1];
    const auto [x1, y1] = measured[i];
    for (double x = x0 + 1; x < x1; ++x) total += y0 + (y1 - y0) * (x - x0) / (x1 - x0);
  }
  return total;
}

void expect_one_line_error(const Output& r, const std::string& needle) {
  EXPECT_NE(r.code, 0);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(count(r.err, "\n"), 1u) << r.err;
  EXPECT_EQ(r.err.rfind("kvinfer-bench: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
}

TEST(BenchCli, CacheOnAndOffAgreeOnTheFixture) {
  Output r = bench({"-m", kFixture, "-p", "4", "-n", "40", "--off-every", "1", "--json", "-"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);  // stdout holds the JSON alone; the table went to stderr
  EXPECT_NE(r.err.find("same tokens: yes (40 of 40 compared)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("speedup (off/on total time): "), std::string::npos) << r.err;

  EXPECT_EQ(j["tokens_match"], true);
  EXPECT_EQ(j["compared_steps"], 40);
  EXPECT_TRUE(j["first_mismatch"].is_null());
  EXPECT_EQ(j["config"]["prompt_tokens"], 4);
  EXPECT_EQ(j["config"]["tokens"], 40);
  EXPECT_EQ(j["config"]["params"], j["config"]["weight_bytes"].get<uint64_t>() / 4);  // f32, every weight counted once
  ASSERT_TRUE(j["speedup"].is_number());
  EXPECT_GT(j["speedup"].get<double>(), 0);
  EXPECT_NEAR(j["speedup"].get<double>(),
              j["cache_off"]["total_s"].get<double>() / j["cache_on"]["total_s"].get<double>(), 1e-9);
  EXPECT_EQ(j["cache_off"]["estimated"], false);
  EXPECT_EQ(j["cache_off"]["steps_run"], 40);
  EXPECT_EQ(j["positions_processed"]["cache_on"], 43);    // P + N - 1
  EXPECT_EQ(j["positions_processed"]["cache_off"], 940);  // sum over i = 1..40 of 4 + i - 1

  const json& kv = j["kv_cache"];
  EXPECT_EQ(kv["dtype"], "f32");
  EXPECT_EQ(kv["capacity_tokens"], 44);
  EXPECT_EQ(kv["bytes_per_token"], kKvBytesPerToken);
  EXPECT_EQ(kv["bytes"], kKvBytesPerToken * 44);
  EXPECT_EQ(kv["bytes_used"], kKvBytesPerToken * 43);  // the last token is never fed back

  const json& steps = j["steps"];
  ASSERT_EQ(steps.size(), 40u);
  double on_sum = 0, off_sum = 0;
  const auto weights = j["config"]["step_weight_bytes"].get<uint64_t>();
  for (size_t i = 0; i < steps.size(); ++i) {
    const json& s = steps[i];
    EXPECT_EQ(s["step"], i + 1);
    EXPECT_EQ(s["positions"], 4 + i);  // P + step - 1
    ASSERT_TRUE(s["on_ms"].is_number() && s["off_ms"].is_number()) << s;
    EXPECT_EQ(s["on_token"], s["off_token"]);
    on_sum += s["on_ms"].get<double>();
    off_sum += s["off_ms"].get<double>();
    if (i == 0) {
      EXPECT_TRUE(s["on_GBps"].is_null());  // step 1 is the prefill
    } else {
      EXPECT_EQ(s["on_bytes_read"], weights + kKvBytesPerToken * (4 + i));
      EXPECT_GT(s["on_GBps"].get<double>(), 0);
    }
  }
  EXPECT_NEAR(j["cache_on"]["total_s"].get<double>() * 1e3, on_sum, 1e-6);
  EXPECT_NEAR(j["cache_off"]["total_s"].get<double>() * 1e3, off_sum, 1e-6);
  EXPECT_NEAR(j["cache_on"]["ttft_ms"].get<double>(), steps[0]["on_ms"].get<double>(), 1e-9);
  EXPECT_GT(j["bandwidth"]["probe_GBps"].get<double>(), 0);
  EXPECT_GT(j["bandwidth"]["decode_median_GBps"].get<double>(), 0);
  EXPECT_GT(j["bandwidth"]["decode_median_fraction"].get<double>(), 0);
  EXPECT_GT(j["cache_on"]["peak_rss_bytes"].get<uint64_t>(), 0u);
  // Default report positions 1,64,256,512,1000 clamped to N = 40: steps 1 and 40.
  EXPECT_EQ(j["config"]["positions"], json::array({1, 40}));

  // The decode floor, at the middle decode step 1 + 40 / 2 = 21, which attends P + 20 = 24
  // positions: every weight a step reads, K/V of 24 positions read and of 1 written, over the
  // read probe (the CPU's bandwidth).
  EXPECT_TRUE(j["device_copy"].is_null());  // the CPU has no device copy
  const json& f = j["decode_floor"];
  ASSERT_TRUE(f.is_object()) << j.dump();
  EXPECT_EQ(f["step"], 21);
  EXPECT_EQ(f["context"], 24);
  const json& b = f["bytes"];
  EXPECT_EQ(b["weights"], weights);
  EXPECT_EQ(b["positions_read"], 24);
  EXPECT_EQ(b["kv_read"], kKvBytesPerToken * 24);
  EXPECT_EQ(b["kv_write"], kKvBytesPerToken);
  EXPECT_EQ(b["total"], weights + kKvBytesPerToken * 25);
  EXPECT_EQ(b["layer_matrices"].get<uint64_t>() + b["lm_head"].get<uint64_t>() + b["norms_biases"].get<uint64_t>() +
                b["embedding_rows"].get<uint64_t>(),
            weights);
  EXPECT_GT(b["lm_head"].get<uint64_t>(), 0u);
  EXPECT_EQ(f["bandwidth_source"], "host read probe");
  EXPECT_EQ(f["bandwidth_GBps"], j["bandwidth"]["probe_GBps"]);
  const double floor_ms = b["total"].get<double>() / (f["bandwidth_GBps"].get<double>() * 1e9) * 1e3;
  EXPECT_NEAR(f["floor_ms_per_token"].get<double>(), floor_ms, floor_ms * 1e-9);
  EXPECT_NEAR(f["floor_tokens_per_s"].get<double>(), 1e3 / floor_ms, 1e-6 / floor_ms);
  const double achieved = 1e3 / j["cache_on"]["median_decode_ms"].get<double>();
  EXPECT_NEAR(f["achieved_tokens_per_s"].get<double>(), achieved, achieved * 1e-9);
  EXPECT_NEAR(f["fraction_of_floor"].get<double>(), achieved * floor_ms / 1e3, 1e-9);
  // The table says the same.
  EXPECT_NE(r.err.find("decode step bytes (step 21, 24 positions): "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("host read probe); achieved "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("% of the floor"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("device copy bandwidth"), std::string::npos) << r.err;
}

TEST(BenchCli, OffEveryRunsASubsetAndSaysItEstimated) {
  Output r = bench({"-m", kFixture, "-p", "4", "-n", "40", "--off-every", "7", "--positions", "1,20,500",
                    "--no-bandwidth-probe", "--json", "-"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  // 1, 8, 15, 22, 29, 36, then the last step and the report positions (500 clamped to 40).
  const std::set<int> expected = {1, 8, 15, 20, 22, 29, 36, 40};
  std::set<int> ran;
  for (const json& s : j["steps"]) {
    EXPECT_TRUE(s["on_ms"].is_number());
    if (!s["off_ms"].is_null()) ran.insert(s["step"].get<int>());
  }
  EXPECT_EQ(ran, expected);
  EXPECT_EQ(j["cache_off"]["steps_run"], 8);
  EXPECT_EQ(j["cache_off"]["estimated"], true);
  EXPECT_EQ(j["speedup_estimated"], true);
  EXPECT_EQ(j["compared_steps"], 8);
  EXPECT_EQ(j["tokens_match"], true);
  EXPECT_NE(j["cache_off"]["estimate"].get<std::string>().find("estimated from 8 of 40 steps"), std::string::npos);
  EXPECT_NE(r.err.find("estimated from 8 of 40 steps"), std::string::npos) << r.err;
  EXPECT_NEAR(j["cache_off"]["total_s"].get<double>() * 1e3, trapezoid_total_ms(j["steps"]), 1e-6);
  EXPECT_TRUE(j["bandwidth"]["probe_GBps"].is_null());
  EXPECT_NE(r.err.find("not measured (--no-bandwidth-probe)"), std::string::npos) << r.err;
  // No bandwidth, no floor: the bytes and the achieved rate only.
  const json& f = j["decode_floor"];
  EXPECT_EQ(f["bytes"]["total"], j["config"]["step_weight_bytes"].get<uint64_t>() + kKvBytesPerToken * 25);
  EXPECT_TRUE(f["bandwidth_GBps"].is_null());
  EXPECT_TRUE(f["floor_tokens_per_s"].is_null());
  EXPECT_TRUE(f["fraction_of_floor"].is_null());
  EXPECT_GT(f["achieved_tokens_per_s"].get<double>(), 0);
  EXPECT_NE(r.err.find("decode floor: not computed, not measured (--no-bandwidth-probe); achieved "), std::string::npos)
      << r.err;
}

TEST(BenchCli, WritesCsvAndSvgFiles) {
  const fs::path dir = fs::temp_directory_path() / ("kvinfer_bench_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  // A model path with XML's special characters: the plot's title must escape them.
  const fs::path model = dir / "m&<x>";
  fs::create_directory_symlink(kFixture, model);
  const fs::path csv = dir / "steps.csv", svg = dir / "plot.svg";
  Output r = bench({"-m", model.string(), "-p", "4", "-n", "12", "--off-every", "5", "--no-bandwidth-probe", "--csv",
                    csv.string(), "--svg", svg.string()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("cache on"), std::string::npos);  // the table on stdout

  const std::string c = kvinfer::test::slurp(csv);
  EXPECT_EQ(count(c, "\n"), 13u) << c;
  EXPECT_EQ(c.rfind("step,positions,on_ms,off_ms,on_bytes_read,on_GBps\n", 0), 0u) << c;
  EXPECT_NE(c.find("\n2,5,"), std::string::npos) << c;  // step 2 attends P + 1 = 5 positions

  const std::string s = kvinfer::test::slurp(svg);
  EXPECT_EQ(s.rfind("<svg", 0), 0u);
  EXPECT_EQ(s.substr(s.size() - 7), "</svg>\n");
  EXPECT_EQ(count(s, "<polyline"), 2u);
  EXPECT_NE(s.find(">cache on<"), std::string::npos);
  EXPECT_NE(s.find(">cache off (4 of 12 steps measured)<"), std::string::npos) << s;  // 1, 6, 11, 12
  EXPECT_NE(s.find("m&amp;&lt;x&gt;"), std::string::npos);
  EXPECT_EQ(s.find("m&<x>"), std::string::npos);
  EXPECT_EQ(count(s, "<text"), count(s, "</text>"));
  EXPECT_EQ(count(s, "<g"), count(s, "</g>"));
  fs::remove_all(dir);
}

TEST(BenchCli, CsvOnStdoutSendsTheTableToStderr) {
  Output r = bench({"-m", kFixture, "-p", "4", "-n", "3", "--no-bandwidth-probe", "--csv", "-"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("step,positions,", 0), 0u) << r.out;
  EXPECT_EQ(count(r.out, "\n"), 4u);
  EXPECT_NE(r.err.find("same tokens: yes (3 of 3 compared)"), std::string::npos) << r.err;
}

TEST(BenchCli, OneModeOnlyComparesNothing) {
  Output r = bench({"-m", kFixture, "-p", "4", "-n", "5", "--mode", "on", "--no-bandwidth-probe", "--json", "-"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_TRUE(j["tokens_match"].is_null());
  EXPECT_TRUE(j["speedup"].is_null());
  EXPECT_TRUE(j["cache_off"].is_null());
  for (const json& s : j["steps"]) EXPECT_TRUE(s["off_ms"].is_null());
  EXPECT_NE(r.err.find("not compared (--mode on)"), std::string::npos) << r.err;
}

TEST(BenchCli, ErrorsAreOneLine) {
  expect_one_line_error(bench({"-s", "gpt3"}), "gpt2-medium");  // lists the known shapes
  expect_one_line_error(bench({"-m", kFixture, "-n", "0"}), "-n");
  expect_one_line_error(bench({"-m", kFixture, "-p", "0"}), "-p");
  expect_one_line_error(bench({"-m", kFixture, "-p", "4", "-n", "200"}), "4 + 200");
  expect_one_line_error(bench({"-m", kFixture, "-p", "4", "-n", "200"}), "128");
  expect_one_line_error(bench({"-s", "gpt2-medium", "-p", "100", "-n", "1000"}), "1,024");
  expect_one_line_error(bench({"-m", kFixture + "/missing"}), "no such file or directory");
  expect_one_line_error(bench({}), "-m PATH or -s NAME");
  expect_one_line_error(bench({"-m", kFixture, "--positions", "1,x"}), "--positions");
  expect_one_line_error(bench({"-m", kFixture, "--positions", "0"}), "--positions");
  expect_one_line_error(bench({"-m", kFixture, "--off-every", "0"}), "--off-every");
  expect_one_line_error(bench({"-m", kFixture, "--off-every", "3", "--mode", "off"}), "--mode both");
  expect_one_line_error(bench({"-m", kFixture, "--kv-dtype", "q4_0"}), "--kv-dtype");
  expect_one_line_error(bench({"-m", kFixture, "--mode", "sideways"}), "--mode");
  expect_one_line_error(bench({"-m", kFixture, "--json", "/nonexistent/dir/out.json"}), "--json");
}

TEST(BenchCli, ListsShapesAndEveryOptionWithItsDefault) {
  Output r = bench({"--list-shapes"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("gpt2-medium"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("smollm2-135m"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("qwen2.5-0.5b"), std::string::npos) << r.out;

  Output h = bench({"--help"});
  ASSERT_EQ(h.code, 0) << h.err;
  for (const char* s : {"--model",
                        "--shape",
                        "--dtype",
                        "=f32",
                        "--kv-dtype",
                        "=auto",
                        "--prompt-tokens",
                        "=16",
                        "--tokens",
                        "=1000",
                        "--mode",
                        "=both",
                        "--off-every",
                        "=1",
                        "--positions",
                        "=1,64,256,512,1000",
                        "--threads",
                        "--device",
                        "--seed",
                        "--json",
                        "--csv",
                        "--svg",
                        "--no-bandwidth-probe",
                        "--list-shapes",
                        "q4_k",
                        "Decode floor",
                        "gpt2-medium"})
    EXPECT_NE(h.out.find(s), std::string::npos) << s;
}

// --dtype q4_k is accepted; a shape whose hidden size is not whole 256-value super-blocks
// (smollm2-135m: 576) is refused in one line naming the block size, before anything runs.
TEST(BenchCli, Q4KNeedsWholeSuperBlocks) {
  expect_one_line_error(bench({"-s", "smollm2-135m", "--dtype", "q4_k", "-n", "2"}), "256-value q4_k blocks");
  expect_one_line_error(bench({"-s", "smollm2-135m", "--dtype", "q5_0", "-n", "2"}), "--dtype");
}

// Only one decode step's worth of output: N = 1 has no decode step, so no floor.
TEST(BenchCli, OneTokenHasNoDecodeFloor) {
  Output r = bench({"-m", kFixture, "-p", "4", "-n", "1", "--mode", "on", "--no-bandwidth-probe", "--json", "-"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_TRUE(j["decode_floor"].is_null());
  EXPECT_EQ(r.err.find("decode floor"), std::string::npos) << r.err;
}

TEST(BenchCli, SyntheticShapeSmoke) {
  Output r = bench({"-s", "smollm2-135m", "-p", "4", "-n", "8", "--no-bandwidth-probe", "--json", "-"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["tokens_match"], true);
  EXPECT_EQ(j["config"]["synthetic"], true);
  EXPECT_EQ(j["config"]["model"], "smollm2-135m");
  EXPECT_NEAR(j["config"]["params"].get<double>(), 134.5e6, 0.1e6);
  EXPECT_EQ(j["steps"].size(), 8u);
  EXPECT_TRUE(j["speedup"].is_number());
  EXPECT_NE(r.err.find("synthetic, random weights"), std::string::npos) << r.err;
}

// A GGUF file (llama.cpp's gpt2, Q8_0 weights, an f16 KV cache by default) runs the same way,
// and picks HF's greedy tokens for that file (tests/data/gguf/models/PROVENANCE.md).
TEST(BenchCli, GgufGpt2ModelRunsBothModes) {
  const std::string gguf = std::string(KVINFER_TEST_DATA) + "/gguf/models/gpt2_tiny.q8_0.gguf";
  Output r = bench({"-m", gguf, "-p", "6", "-n", "24", "--no-bandwidth-probe", "--json", "-"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["tokens_match"], true);
  EXPECT_EQ(j["compared_steps"], 24);
  EXPECT_EQ(j["config"]["architecture"], "GPT2LMHeadModel");
  EXPECT_EQ(j["config"]["weight_dtype"], "q8_0");
  EXPECT_EQ(j["kv_cache"]["dtype"], "f16");
  // P + N beyond gpt2_tiny's 128 learned positions is refused before anything runs.
  expect_one_line_error(bench({"-m", gguf, "-p", "100", "-n", "29"}), "exceed the model's 128 learned positions");
}

}  // namespace
