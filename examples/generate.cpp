// kvinfer-generate: greedy generation from token ids with a HF model directory.
// (Text in and out arrives with the tokenizers; until then prompts are token ids.)
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kvinfer/kvinfer.h"

namespace {

std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || item.find_first_not_of(" \t", used) != std::string::npos || v < 0 || v > INT32_MAX)
      throw kvinfer::Error(fmt::format("--ids: '{}' is not a token id", item));
    ids.push_back(static_cast<int32_t>(v));
  }
  if (ids.empty()) throw kvinfer::Error("--ids: no token ids given");
  return ids;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kvinfer-generate: greedy generation from token ids with a HF model directory"};
  std::string model_dir, ids_text, kv_dtype = "auto", device = "auto";
  int64_t max_new = 32, ctx = 0;
  bool no_cache = false, ignore_eos = false;
  app.add_option("-m,--model", model_dir, "HF model directory (config.json + *.safetensors)")->required();
  app.add_option("--ids", ids_text, "prompt token ids, comma separated, e.g. 1,15043,3186")->required();
  app.add_option("-n,--max-new-tokens", max_new, "tokens to generate")->capture_default_str();
  app.add_option("-c,--ctx", ctx, "KV cache capacity in tokens (0: prompt + max new tokens)")->capture_default_str();
  app.add_option("--kv-dtype", kv_dtype, "KV cache element type: auto (the weights' dtype), f32, f16, bf16")
      ->capture_default_str();
  app.add_option("--device", device, "where the forward pass runs: auto (a CUDA GPU if present), cpu, cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  app.add_flag("--no-kv-cache", no_cache, "recompute the whole sequence every step (cache-off baseline)");
  app.add_flag("--ignore-eos", ignore_eos, "do not stop at the model's EOS ids");
  CLI11_PARSE(app, argc, argv);

  try {
    const std::vector<int32_t> prompt = parse_ids(ids_text);
    const kvinfer::Device dev = device == "cpu"    ? kvinfer::Device::CPU
                                : device == "cuda" ? kvinfer::Device::CUDA
                                                   : kvinfer::Device::Auto;
    auto model = kvinfer::Model::load(model_dir, {.device = dev});
    const int64_t capacity = ctx > 0 ? ctx : static_cast<int64_t>(prompt.size()) + max_new;
    std::optional<kvinfer::DType> dtype;
    if (kv_dtype != "auto") dtype = kvinfer::parse_dtype(kv_dtype);
    kvinfer::KvCache kv(*model, capacity, dtype);
    kvinfer::Session session(model);

    kvinfer::GenerateOptions options;
    options.max_new_tokens = max_new;
    options.use_kv_cache = !no_cache;
    options.ignore_eos = ignore_eos;
    auto result = kvinfer::generate_greedy(session, kv, prompt, options, [](int32_t id, std::span<const float>) {
      std::printf("%d ", id);
      std::fflush(stdout);
      return true;
    });
    std::printf("\n");
    const double decode_steps = static_cast<double>(result.tokens.size()) - 1.0;
    std::fprintf(stderr,
                 "%s: prompt %lld tokens, generated %zu (stop: %s), kv cache %s %s (%llu bytes), prefill %.3f s "
                 "(%.1f tok/s), decode %.1f tok/s\n",
                 std::string(kvinfer::device_name(model->device())).c_str(),
                 static_cast<long long>(result.prompt_tokens), result.tokens.size(),
                 std::string(kvinfer::stop_reason_name(result.stop)).c_str(), no_cache ? "off" : "on",
                 std::string(kvinfer::dtype_name(kv.dtype())).c_str(), static_cast<unsigned long long>(kv.bytes()),
                 result.prefill_seconds, static_cast<double>(result.prompt_tokens) / result.prefill_seconds,
                 decode_steps > 0 ? decode_steps / result.decode_seconds : 0.0);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvinfer-generate: %s\n", e.what());
    return 1;
  }
  return 0;
}
