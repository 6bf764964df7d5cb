#pragma once
// What every kvinfer command-line tool does the same way: exit statuses, one printable error line,
// bounded prompts, checked output, and the limits of resource options (README: "Exit status").
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

#include "kvinfer/device.h"
#include "kvinfer/dtype.h"
#include "kvinfer/error.h"

namespace tool {

inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;  // a model, input or prompt is bad or does not fit; a run or output failed
inline constexpr int kExitUsage = 2;  // the command line: an option, its value or a combination (named)

// For --help: the statuses above, as the README states them.
inline constexpr const char* kExitStatusHelp =
    "Exit status: 0 done; 1 a model, input or prompt is bad or does not fit, or a run or its output failed; "
    "2 the command line is wrong (the message names the option).";

// An option's value is wrong; the message starts with the option as the user spelled it.
class UsageError : public kvinfer::Error {
 public:
  explicit UsageError(const std::string& message) : kvinfer::Error(kvinfer::ErrorKind::InvalidArgument, message) {}
};

// stdout could not be written (a full disk, a closed descriptor). Not a kvinfer::Error, so that a
// loop that survives bad turns (kvinfer-chat) does not survive this.
class OutputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Parses the command line and runs `body`, whose return value is the exit status. Parse errors
// and UsageError exit kExitUsage, every other exception kExitError, each as one line on stderr:
// "<tool>: <message>", made printable. stdout is flushed and checked before a success is returned.
int run(CLI::App& app, int argc, char** argv, const std::function<int()>& body);

// `text` safe to show on one terminal line: control characters (newlines included), C1 controls,
// bidirectional overrides and bytes that are not UTF-8 become visible escapes (\n, \x1b, \u202e).
std::string printable(std::string_view text);

// Writes to stdout and flushes (streamed output is seen as it comes); throws OutputError.
void write_stdout(std::string_view text);

// -t/--threads checked: 0 (one per core) up to kThreadsPerCore × the cores; UsageError naming
// `option` otherwise.
inline constexpr int kThreadsPerCore = 4;
int checked_threads(int64_t requested, std::string_view option);

// The prompt from stdin, bounded (kvinfer::kPromptLimit); a terminal is refused (nothing piped).
std::string read_stdin_prompt();
// A prompt file ("-" is stdin), bounded; a regular file or a pipe.
std::string read_prompt_file(const std::string& path);

// CLI11 validators whose messages name the bound in plain digits.
CLI::Validator at_least(int64_t min);
CLI::Validator not_empty();

// --device: auto, cpu, cuda or cuda:N (CUDA device N, as nvidia-smi numbers them; cuda is cuda:0).
struct DeviceChoice {
  kvinfer::Device device = kvinfer::Device::Auto;
  int index = 0;  // LoadOptions::device_index
};
inline constexpr const char* kDeviceHelp =
    "where the forward pass runs: auto (a CUDA GPU if present), cpu, cuda, or cuda:N for CUDA device N";
// UsageError starting with `option` for any other text.
DeviceChoice parse_device(std::string_view text, std::string_view option = "--device");
// The same check as a CLI11 validator (the message names the accepted forms).
CLI::Validator device_value();

// --activations exact|int15|int8 and its shorthand --int8-activations (LoadOptions::activations),
// taken the same way by every tool that loads a model.
struct ActivationsChoice {
  std::string mode = "exact";
  bool int8 = false;  // --int8-activations
  kvinfer::ActivationMode value() const;
};
void add_activations_options(CLI::App& app, ActivationsChoice& choice);

}  // namespace tool
