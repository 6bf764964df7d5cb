#include "tokenizer/gguf_pre.h"

#include <algorithm>
#include <initializer_list>

#include "tokenizer/pre_tokenizer.h"

namespace kvinfer {

namespace {

// llama.cpp's "GPT-2" regex: kGpt2Regex without the final "|\s+". The text between matches is
// kept as pieces too, so the two split text the same way.
constexpr std::string_view kGpt2Short = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
constexpr std::string_view kLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kSeedCoder =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kTekken =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kGpt4o =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kDeepseekV3 =
    R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kPoro = R"( ?[^(\s|.,!?…。，、।۔،)]+)";

bool in(std::string_view name, std::initializer_list<std::string_view> names) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

std::optional<GgufPreTokenizer> gguf_pre_tokenizer(std::string_view name) {
  if (name == "default")
    return GgufPreTokenizer{{R"([\p{P}\$\+<=>\^~\|]+)", kGpt2Short, R"(\p{N}+)", "[0-9][0-9][0-9]"}};
  if (in(name, {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano"}))
    return GgufPreTokenizer{{kLlama3}, true, true};
  if (in(name, {"dbrx", "smaug-bpe", "chatglm-bpe", "glm4"})) return GgufPreTokenizer{{kLlama3}};
  if (in(name, {"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum",
                "modern-bert", "mpt", "olmo", "jais", "trillion", "granite-docling", "exaone4"}))
    return GgufPreTokenizer{{kGpt2Regex}};
  if (in(name, {"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "stablelm2", "hunyuan", "megrez", "solar-open", "grok-2"}))
    return GgufPreTokenizer{{kQwen2}};
  if (in(name, {"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b", "mellum2"}))
    return GgufPreTokenizer{{R"(\p{N})", kGpt2Regex}};
  if (name == "falcon") return GgufPreTokenizer{{R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2Short, "[0-9][0-9][0-9]"}};
  if (name == "deepseek-coder")
    return GgufPreTokenizer{{R"([\r\n])", R"(\s?\p{L}+)", R"(\s?\p{P}+)", "[一-龥ࠀ-一가-퟿]+", R"(\p{N})"}};
  if (name == "deepseek-v3") return GgufPreTokenizer{{R"(\p{N}{1,3})", "[一-龥぀-ゟ゠-ヿ]+", kDeepseekV3}};
  if (in(name, {"poro-chat", "bloom", "gpt3-finnish"})) return GgufPreTokenizer{{kPoro}};
  if (name == "viking") return GgufPreTokenizer{{kPoro, R"(\p{N})"}};
  if (name == "tekken") return GgufPreTokenizer{{kTekken}, true, true};
  if (in(name, {"gpt-4o", "llama4"})) return GgufPreTokenizer{{kGpt4o}};
  if (name == "seed-coder") return GgufPreTokenizer{{kSeedCoder}};
  return std::nullopt;
}

}  // namespace kvinfer
