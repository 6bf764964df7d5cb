#include "formats/hf_checkpoint.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>
#include <fmt/std.h>
#include <nlohmann/json.hpp>

#include "core/input_file.h"
#include "kvinfer/error.h"

namespace kvinfer {

namespace fs = std::filesystem;

namespace {

// Shard file name → tensor names it must hold, from model.safetensors.index.json.
std::map<std::string, std::vector<std::string>> read_index(const fs::path& index_path) {
  nlohmann::json index;
  try {
    index = nlohmann::json::parse(read_input_file(index_path, kSafetensorsIndexLimit));
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorKind::BadFile, fmt::format("{}: invalid JSON: {}", index_path, e.what()));
  }
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
    throw Error(ErrorKind::BadFile, fmt::format("{}: no 'weight_map' object", index_path));
  std::map<std::string, std::vector<std::string>> shards;
  for (const auto& [tensor, file] : index["weight_map"].items()) {
    if (!file.is_string()) throw Error(ErrorKind::BadFile, fmt::format("{}: weight_map['{}'] is not a file name", index_path, tensor));
    std::string name = file.get<std::string>();
    if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..")
      throw Error(ErrorKind::BadFile, fmt::format("{}: weight_map['{}'] names '{}', not a file in the model directory", index_path,
                              tensor, name));
    shards[name].push_back(tensor);
  }
  return shards;
}

}  // namespace

HfCheckpoint::HfCheckpoint(const fs::path& dir) : dir_(dir) {
  if (model_path_kind(dir) != ModelPathKind::Directory) throw Error(ErrorKind::BadFile, fmt::format("{}: not a model directory", dir));
  fs::path config_path = dir / "config.json";
  if (!input_exists(config_path)) throw Error(ErrorKind::BadFile, fmt::format("{}: missing config.json", dir));
  config_ = load_config(config_path);

  fs::path single = dir / "model.safetensors";
  fs::path index_path = dir / "model.safetensors.index.json";
  if (input_exists(single)) {
    files_.push_back(std::make_unique<SafetensorsFile>(single));
    for (const auto& [name, t] : files_.back()->tensors()) tensors_.emplace(name, &t);
  } else if (input_exists(index_path)) {
    for (const auto& [shard, names] : read_index(index_path)) {
      files_.push_back(std::make_unique<SafetensorsFile>(dir / shard));
      const SafetensorsFile& file = *files_.back();
      for (const auto& name : names) {
        const TensorView* t = file.find(name);
        if (!t)
          throw Error(ErrorKind::BadFile, fmt::format("{}: tensor '{}' listed in {} is missing from the shard", file.path(), name,
                                  index_path.filename()));
        tensors_.emplace(name, t);
      }
    }
  } else {
    throw Error(ErrorKind::BadFile, fmt::format("{}: no weights (neither model.safetensors nor model.safetensors.index.json)", dir));
  }
}

const TensorView* HfCheckpoint::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : it->second;
}

const TensorView& HfCheckpoint::get(const std::string& name) const {
  if (const TensorView* t = find(name)) return *t;
  throw Error(ErrorKind::BadFile, fmt::format("{}: missing tensor '{}'", dir_, name));
}

std::vector<std::string> HfCheckpoint::names() const {
  std::vector<std::string> names;
  for (const auto& [name, t] : tensors_) names.push_back(name);
  std::ranges::sort(names);
  return names;
}

uint64_t HfCheckpoint::tensor_bytes() const {
  uint64_t sum = 0;
  for (const auto& [name, t] : tensors_) sum += t->bytes;
  return sum;
}

std::vector<const MappedFile*> HfCheckpoint::files() const {
  std::vector<const MappedFile*> files;
  for (const auto& f : files_) files.push_back(&f->file());
  return files;
}

}  // namespace kvinfer
