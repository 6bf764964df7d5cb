// kvinfer-bench-batch as a user runs it, on the llama_gqa4 fixture: the table, the JSON (every
// batch size's rate and its share of the same run's prefill rate), the plot; bad options.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "run_binary.h"

namespace {

namespace fs = std::filesystem;
using kvinfer::test::Output;
using nlohmann::json;

const std::string kFixture = std::string(KVINFER_TEST_DATA) + "/models/llama_gqa4";

Output bench_batch(std::vector<std::string> args) {
  args.insert(args.end(), {"-t", "1", "--device", "cpu"});  // ctest runs tests side by side
  return kvinfer::test::run_binary(KVINFER_BENCH_BATCH_BIN, args);
}

TEST(BenchBatchCli, ReportsEveryBatchSizeBesideThePrefillRate) {
  const fs::path dir = fs::temp_directory_path() / ("kvinfer_bench_batch_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const Output r = bench_batch({"-m", kFixture, "-b", "1,3,8", "--steps", "2", "--prompt", "3", "-r", "2",
                                "--prefill-tokens", "16", "--json", (dir / "b.json").string(), "--svg",
                                (dir / "b.svg").string()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("prefill"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("of prefill"), std::string::npos) << r.out;
  const json j = json::parse(kvinfer::test::slurp(dir / "b.json"));
  const double prefill = j["prefill_tokens_per_second"].get<double>();
  EXPECT_GT(prefill, 0);
  ASSERT_EQ(j["batches"].size(), 3u);
  const int want[] = {1, 3, 8};
  for (size_t i = 0; i < 3; ++i) {
    const json& b = j["batches"][i];
    EXPECT_EQ(b["batch"].get<int>(), want[i]);
    const double rate = b["decode_tokens_per_second"].get<double>(), step = b["step_seconds"].get<double>();
    EXPECT_GT(step, 0);
    EXPECT_NEAR(rate, want[i] / step, 1e-9 * rate);  // B tokens a step
    EXPECT_NEAR(b["fraction_of_prefill"].get<double>(), rate / prefill, 1e-12);
  }
  const std::string svg = kvinfer::test::slurp(dir / "b.svg");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("prefill rate"), std::string::npos);
  fs::remove_all(dir);
}

TEST(BenchBatchCli, BadOptionsAndModelsGetOneLineAndTheirStatus) {
  Output r = bench_batch({"-m", kFixture, "-b", "1,0"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("-b/--batches: 0 is not in 1..1024"), std::string::npos) << r.err;
  r = bench_batch({"-m", kFixture, "--steps", "0"});
  EXPECT_EQ(r.code, 2) << r.err;
  r = bench_batch({"-m", kFixture + "/no-such-model"});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("no-such-model"), std::string::npos) << r.err;
}

}  // namespace
