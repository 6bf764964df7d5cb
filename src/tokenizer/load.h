#pragma once
// The two tokenizer loaders, and what a model's loader and inspect_model ask of a checkpoint's
// tokenizer without loading it. The loaders throw kvinfer::Error naming the file and the field at
// fault.
#include <filesystem>
#include <memory>
#include <string>

#include "kvinfer/tokenizer.h"
#include "tokenizer/access.h"

namespace kvinfer {

class GgufFile;

// tokenizer.json (+ tokenizer_config.json, chat_template.jinja, generation_config.json beside it).
std::unique_ptr<TokenizerData> load_hf_tokenizer(const std::filesystem::path& dir_or_file);
// tokenizer.ggml.* metadata.
std::unique_ptr<TokenizerData> load_gguf_tokenizer(const GgufFile& file);
std::unique_ptr<TokenizerData> load_gguf_tokenizer(const std::filesystem::path& path);
// Tokenizer::from_gguf of a file already open (Model::load's).
Tokenizer gguf_tokenizer(const GgufFile& file);

// Whether a model ships a tokenizer: tokenizer.json in the directory, tokenizer.ggml.* in the file.
bool hf_has_tokenizer(const std::filesystem::path& dir);
bool gguf_has_tokenizer(const GgufFile& file);
// The chat template the tokenizer loaders read, "" when none: chat_template.jinja in the
// directory, else tokenizer_config.json's "chat_template" (a string, or the "default" of a list);
// GGUF tokenizer.chat_template.
std::string hf_chat_template(const std::filesystem::path& dir);
std::string gguf_chat_template(const GgufFile& file);

}  // namespace kvinfer
