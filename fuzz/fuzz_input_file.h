#pragma once
// The fuzz targets' way into the loaders that read files: the input written to a file of this
// process's own (in $TMPDIR, removed at exit), then opened by path like any model file.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace kvinfer::fuzz {

class InputFile {
 public:
  explicit InputFile(const std::string& name) {
    const char* tmp = std::getenv("TMPDIR");
    dir_ = std::filesystem::path(tmp && *tmp ? tmp : "/tmp") / ("kvinfer-fuzz-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    path_ = dir_ / name;
  }
  ~InputFile() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  // Replaces the file's contents with data.
  const std::filesystem::path& write(const uint8_t* data, size_t size) {
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    return path_;
  }

 private:
  std::filesystem::path dir_, path_;
};

}  // namespace kvinfer::fuzz
