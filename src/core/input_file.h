#pragma once
// Reading a stranger's files, bounded and typed: every input is checked to be a regular file (a
// pipe, for a prompt) of at most a stated size before a byte of it is read, so that /dev/zero, a
// FIFO or a 2 GB sparse config.json is one clear error instead of a hang or gigabytes of memory.
// The limits are the table in docs/reliability.md.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace kvinfer {

// What each kind of input may weigh. Real files are far below: a config.json is a few KiB, the
// largest published tokenizer.json about 35 MiB.
struct InputLimit {
  std::string_view kind;  // for messages: "a tokenizer.json"
  uint64_t bytes;
};
inline constexpr InputLimit kJsonSettingsLimit{"a JSON settings file", uint64_t{16} << 20};  // config.json, ...
inline constexpr InputLimit kSafetensorsIndexLimit{"a safetensors index", uint64_t{64} << 20};
inline constexpr InputLimit kTokenizerJsonLimit{"a tokenizer.json", uint64_t{128} << 20};
inline constexpr InputLimit kChatTemplateLimit{"a chat template", uint64_t{4} << 20};
inline constexpr InputLimit kPromptLimit{"a prompt", uint64_t{64} << 20};
inline constexpr InputLimit kGrammarLimit{"a grammar", uint64_t{8} << 20};       // grammar::kMaxGrammarBytes
inline constexpr InputLimit kJsonSchemaLimit{"a JSON schema", uint64_t{1} << 20};
// GGUF and safetensors files are mapped, never read whole; their tensors are checked against the
// file and the memory available. The limit only refuses what no model file is.
inline constexpr InputLimit kMappedModelLimit{"a model file", uint64_t{4} << 40};

// "no such file or directory", "permission denied", ...: errno as the tools word it.
std::string errno_text(int err);
// "a directory", "a FIFO", "a character device", ... for a stat mode.
std::string file_type_text(unsigned mode);

// The whole of `path`, which must be a regular file of at most limit.bytes. Errors name the file
// and the limit (docs/reliability.md). A file that grows while read is refused at the limit too.
std::string read_input_file(const std::filesystem::path& path, const InputLimit& limit);
// The whole of an open descriptor (stdin: a pipe, a file, a device), at most limit.bytes; `name`
// names it in errors.
std::string read_input_fd(int fd, std::string_view name, const InputLimit& limit);
// Checks, without opening it, that `path` is a regular file of at most limit.bytes (files that
// are mapped rather than read).
void check_input_file(const std::filesystem::path& path, const InputLimit& limit);
// Whether `path` exists (a dangling symlink does not); other stat errors than "no such file" are
// thrown, naming the path: an optional file that cannot be looked at is not silently skipped.
bool input_exists(const std::filesystem::path& path);

// What a model path is: a directory (HF) or a regular file (GGUF, or a bare config.json). A
// missing path, a FIFO or a device is an error naming it.
enum class ModelPathKind { Directory, File };
ModelPathKind model_path_kind(const std::filesystem::path& path);

// What a model file is, by its content and never its name (every tool decides the same way): a
// GGUF file starts with "GGUF", a config.json with '{' (after whitespace or a UTF-8 BOM). Anything
// else, an empty file too, is Error(BadFile) naming the file: "not a GGUF file (it does not start
// with "GGUF") and not a config.json".
enum class ModelFileKind { Gguf, ConfigJson };
ModelFileKind model_file_kind(const std::filesystem::path& path);

}  // namespace kvinfer
