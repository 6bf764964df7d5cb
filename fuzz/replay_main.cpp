// Runs a fuzz target's LLVMFuzzerTestOneInput on files, without libFuzzer: the seed corpus and
// every input that once crashed (tests/data/fuzz/<target>/) replayed by ctest in every build.
//   fuzz_<target>_replay FILE_OR_DIR...
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

int run_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", p.c_str());
    return 1;
  }
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::fprintf(stderr, "  %s (%zu bytes)\n", p.c_str(), bytes.size());
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int files = 0, failures = 0;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path arg = argv[i];
    std::error_code ec;
    if (std::filesystem::is_directory(arg, ec)) {
      for (const auto& e : std::filesystem::directory_iterator(arg))
        if (e.is_regular_file() && e.path().filename() != "README.md") failures += run_file(e.path()), ++files;
    } else {
      failures += run_file(arg), ++files;
    }
  }
  std::fprintf(stderr, "replayed %d inputs, %d unreadable\n", files, failures);
  return failures == 0 ? 0 : 1;
}
