#pragma once
// The two tokenizer loaders. Both throw kvinfer::Error naming the file and the field at fault.
#include <filesystem>
#include <memory>

namespace kvinfer {

class GgufFile;
struct TokenizerData;

// tokenizer.json (+ tokenizer_config.json, chat_template.jinja, generation_config.json beside it).
std::unique_ptr<TokenizerData> load_hf_tokenizer(const std::filesystem::path& dir_or_file);
// tokenizer.ggml.* metadata.
std::unique_ptr<TokenizerData> load_gguf_tokenizer(const GgufFile& file);
std::unique_ptr<TokenizerData> load_gguf_tokenizer(const std::filesystem::path& path);

}  // namespace kvinfer
