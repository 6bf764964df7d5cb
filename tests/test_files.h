#pragma once
// Helpers for tests that build hostile files: a fresh temporary directory per test, raw byte
// I/O, copies of fixture checkpoints, and safetensors files written from a header and a blob.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvinfer/error.h"
#include "core/kv_cache_access.h"
#include "kvinfer/kv_cache.h"

namespace kvinfer::test {

namespace fs = std::filesystem;

// A new, empty directory under the system temp directory, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "kvinfer-test-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed for " + pattern);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

inline fs::path fixture_dir(const std::string& name) { return fs::path(KVINFER_TEST_DATA) / "models" / name; }

inline std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

// Copies fixture `name` (a model directory under tests/data/models) into `tmp`, as directory
// `as` (default: the same name); returns the copy.
inline fs::path copy_fixture(const std::string& name, const TempDir& tmp, const std::string& as = "") {
  fs::path dst = tmp / (as.empty() ? name : as);
  fs::copy(fixture_dir(name), dst, fs::copy_options::recursive);
  return dst;
}

// 8-byte little-endian length, then `header_json`, then `data`. The header is padded with spaces
// so that the data section starts 8-byte aligned (as the safetensors library writes it).
inline std::string safetensors_bytes(std::string header_json, const std::string& data) {
  while ((8 + header_json.size()) % 8 != 0) header_json.push_back(' ');
  std::string out(8, '\0');
  uint64_t n = header_json.size();
  for (size_t i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header_json + data;
}

inline void write_safetensors(const fs::path& path, const std::string& header_json, const std::string& data) {
  write_bytes(path, safetensors_bytes(header_json, data));
}

// A safetensors file split into its parsed header and its data section.
struct SafetensorsParts {
  nlohmann::json header;
  std::string data;

  static SafetensorsParts read(const fs::path& path) {
    std::string bytes = read_bytes(path);
    uint64_t n = 0;
    for (size_t i = 0; i < 8; ++i) n |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
    return {nlohmann::json::parse(bytes.substr(8, n)), bytes.substr(8 + n)};
  }
  void write(const fs::path& path) const { write_safetensors(path, header.dump(), data); }
};

// Reads the safetensors file at `path`, lets `edit` change its header, and writes it back with
// the corrected header length and the same data section.
template <typename Edit>
void edit_safetensors_header(const fs::path& path, Edit&& edit) {
  auto parts = SafetensorsParts::read(path);
  std::forward<Edit>(edit)(parts.header);
  parts.write(path);
}

// Same for a JSON text file such as config.json or model.safetensors.index.json.
template <typename Edit>
void edit_json_file(const fs::path& path, Edit&& edit) {
  auto j = nlohmann::json::parse(read_bytes(path));
  std::forward<Edit>(edit)(j);
  write_bytes(path, j.dump(2));
}

// Sets (or, with nullopt, unsets) an environment variable for the scope; restores the old value.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      ::setenv(name, value->c_str(), 1);
    else
      ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// The message of the kvinfer::Error that `f` throws; records a test failure (and returns "")
// when it returns normally. Any other exception propagates and fails the test.
template <typename F>
std::string error_of(F&& f) {
  try {
    std::forward<F>(f)();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a kvinfer::Error, but nothing was thrown";
  return "";
}

// The same, and the error's kind must be `kind`.
template <typename F>
std::string error_of(ErrorKind kind, F&& f) {
  try {
    std::forward<F>(f)();
  } catch (const Error& e) {
    EXPECT_EQ(error_kind_name(e.kind()), error_kind_name(kind)) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "expected a kvinfer::Error (" << error_kind_name(kind) << "), but nothing was thrown";
  return "";
}

// The K and V of the filled positions of every layer and KV head (a CPU cache): what a failed
// call must leave as it was.
inline std::vector<std::byte> filled_kv(const KvCache& kv) {
  std::vector<std::byte> out;
  const size_t n = static_cast<size_t>(kv.size() * kv.head_dim()) * dtype_size(kv.dtype());
  for (int64_t l = 0; l < kv.num_layers(); ++l)
    for (int64_t h = 0; h < kv.num_kv_heads(); ++h)
      for (const std::byte* p : {kv_k(kv, l, h), kv_v(kv, l, h)}) out.insert(out.end(), p, p + n);
  return out;
}

}  // namespace kvinfer::test
