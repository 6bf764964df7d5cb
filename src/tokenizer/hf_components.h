#pragma once
// The pipeline components of a tokenizer.json: normalizer, pre_tokenizer, decoder and
// post_processor. Each parser throws kvinfer::Error naming the file, the component's place in
// the JSON and, for a type we do not implement, the type.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pre_tokenizer.h"

namespace kvinfer {

// `where`: the file, for messages; `path`: the component's place in the JSON ("normalizer").
void parse_normalizer(const nlohmann::json& j, std::string_view where, const std::string& path, Normalizer& out);
void parse_pre_tokenizer(const nlohmann::json& j, std::string_view where, const std::string& path, PreTokenizer& out);
void parse_decoder(const nlohmann::json& j, std::string_view where, const std::string& path, Decoder& out);

// The ids a post-processor puts before and after a single sequence.
struct Template {
  std::vector<int32_t> prefix, suffix;
};
void parse_post_processor(const nlohmann::json& j, std::string_view where, const std::string& path, Template& out);

// Field access with errors that name the file and the field.
std::string json_string(const nlohmann::json& j, const char* key, std::string_view where, const std::string& path,
                        std::optional<std::string> fallback = std::nullopt);
bool json_bool(const nlohmann::json& j, const char* key, std::string_view where, const std::string& path,
               bool fallback);

}  // namespace kvinfer
