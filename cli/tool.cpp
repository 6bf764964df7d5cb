#include "tool.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cerrno>
#include <cstdio>
#include <regex>
#include <thread>

#include <fmt/format.h>

#include "core/input_file.h"
#include "core/output_file.h"
#include "kvinfer/kv_plan.h"
#include "tokenizer/utf8.h"

namespace tool {

namespace {

// A closed stdin or stderr would hand its number to the next file opened, which could then
// receive the tool's output: /dev/null takes the place. A closed stdout is an error.
void check_standard_descriptors() {
  for (int fd : {0, 2})
    if (::fcntl(fd, F_GETFD) == -1 && errno == EBADF) {
      const int null = ::open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
      if (null >= 0 && null != fd) ::close(null);  // not the lowest free number: leave it
    }
  if (::fcntl(1, F_GETFD) == -1 && errno == EBADF) throw OutputError("stdout is closed: nothing could be written");
}

void finish_stdout() {
  if (std::fflush(stdout) != 0 || std::ferror(stdout))
    throw OutputError(fmt::format("stdout: {}", kvinfer::errno_text(errno)));
}

// C0, DEL and C1 controls move the cursor or end the line; bidirectional overrides and isolates
// reorder what follows on the line.
bool unsafe(char32_t cp) {
  return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || (cp >= 0x202a && cp <= 0x202e) ||
         (cp >= 0x2066 && cp <= 0x2069);
}

// CLI11's parse errors in the tools' words: the option as all its names ("-c/--ctx"), a value
// that does not convert named with its type, a repeated option said so.
std::string parse_error_text(const CLI::App& app, const CLI::ParseError& e) {
  std::string text = e.what();
  static const std::regex convert(R"(^Could not convert: (\S+) = (.*)$)");
  static const std::regex repeated(R"(^(\S+): At Most 1 required but received (\d+)$)");
  std::smatch m;
  if (std::regex_match(text, m, convert)) {
    const CLI::Option* o = app.get_option_no_throw(m[1].str());
    text = fmt::format("{}: '{}' is not a valid {}", m[1].str(), m[2].str(), o ? o->get_type_name() : "value");
  } else if (std::regex_match(text, m, repeated)) {
    text = fmt::format("{}: given {} times; give it once", m[1].str(), m[2].str());
  }
  const size_t colon = text.find(": ");
  if (colon != std::string::npos && text[0] == '-') {
    if (const CLI::Option* o = app.get_option_no_throw(text.substr(0, colon))) {
      std::string names = o->get_name(false, true);
      std::replace(names.begin(), names.end(), ',', '/');
      text = names + text.substr(colon);
    }
  }
  return text;
}

}  // namespace

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t n = kvinfer::utf8::sequence_length(text, i);
    if (n == 0) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(text[i]));
      ++i;
      continue;
    }
    const char32_t cp = kvinfer::utf8::decode(text, i, n);
    if (!unsafe(cp)) {
      out.append(text.substr(i, n));
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp < 0x80) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned>(cp));
    } else {
      out += fmt::format("\\u{:04x}", static_cast<unsigned>(cp));
    }
    i += n;
  }
  return out;
}

int run(CLI::App& app, int argc, char** argv, const std::function<int()>& body) {
  const std::string name = app.get_name();
  const auto fail = [&](std::string_view message, int status) {
    std::fprintf(stderr, "%s: %s\n", name.c_str(), printable(message).c_str());
    return status;
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() != 0) return fail(fmt::format("{} (see --help)", parse_error_text(app, e)), kExitUsage);
    app.exit(e);  // --help: the text on stdout, which must arrive too
    try {
      finish_stdout();
    } catch (const OutputError& out) {
      return fail(out.what(), kExitError);
    }
    return kExitOk;
  }
  try {
    check_standard_descriptors();
    kvinfer::remove_temporaries_on_signal();  // an interrupted --save-logits or --json leaves no temporary
    const int status = body();
    finish_stdout();
    return status;
  } catch (const UsageError& e) {
    return fail(fmt::format("{} (see --help)", e.what()), kExitUsage);
  } catch (const std::bad_alloc&) {
    return fail("out of memory", kExitError);
  } catch (const std::exception& e) {
    return fail(e.what(), kExitError);
  }
}

void write_stdout(std::string_view text) {
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0)
    throw OutputError(fmt::format("stdout: {}", kvinfer::errno_text(errno)));
}

int checked_threads(int64_t requested, std::string_view option) {
  const int64_t cores = std::max(1u, std::thread::hardware_concurrency());
  const int64_t limit = kThreadsPerCore * cores;
  if (requested < 0)
    throw UsageError(fmt::format("{}: {} is not a thread count (0 = the default)", option,
                                 kvinfer::format_count(requested)));
  if (requested > limit)
    throw UsageError(fmt::format("{}: {} threads is more than {} × the {} cores of this machine ({})", option,
                                 kvinfer::format_count(requested), kThreadsPerCore, cores, limit));
  return static_cast<int>(requested);
}

std::string read_stdin_prompt() {
  if (::isatty(0)) throw UsageError("no prompt: give -p PROMPT, -f FILE or --ids, or pipe the prompt on stdin");
  return kvinfer::read_input_fd(0, "stdin", kvinfer::kPromptLimit);
}

std::string read_prompt_file(const std::string& path) {
  if (path == "-") return read_stdin_prompt();
  // A FIFO is a prompt file too (it waits for its writer, as cat does); devices are not.
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISFIFO(st.st_mode)) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw kvinfer::Error(kvinfer::ErrorKind::BadFile, fmt::format("\"{}\": {}", path, kvinfer::errno_text(errno)));
    try {
      std::string text = kvinfer::read_input_fd(fd, fmt::format("\"{}\"", path), kvinfer::kPromptLimit);
      ::close(fd);
      return text;
    } catch (...) {
      ::close(fd);
      throw;
    }
  }
  return kvinfer::read_input_file(path, kvinfer::kPromptLimit);
}

CLI::Validator at_least(int64_t min) {
  return CLI::Validator(
      [min](std::string& value) -> std::string {
        try {
          size_t used = 0;
          const long long v = std::stoll(value, &used);
          if (used == value.size() && v >= min) return {};
        } catch (const std::exception&) {
        }
        return fmt::format("'{}' is not a whole number of at least {}", value, kvinfer::format_count(min));
      },
      "");  // no name: the help shows "INT=0", the bound is in the option's text
}

CLI::Validator not_empty() {
  return CLI::Validator([](std::string& value) -> std::string { return value.empty() ? "the value is empty" : ""; },
                        "");
}

namespace {
constexpr int kMaxDeviceIndex = 1023;
// The reason `text` is not a --device value, or "".
std::string device_problem(std::string_view text, DeviceChoice& out) {
  out = {};
  if (text == "auto") return "";
  if (text == "cpu") return out.device = kvinfer::Device::CPU, "";
  if (text == "cuda") return out.device = kvinfer::Device::CUDA, "";
  if (text.starts_with("cuda:")) {
    const std::string_view n = text.substr(5);
    int index = -1;
    const auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), index);
    if (!n.empty() && ec == std::errc() && end == n.data() + n.size() && index >= 0 && index <= kMaxDeviceIndex) {
      out.device = kvinfer::Device::CUDA;
      out.index = index;
      return "";
    }
    return fmt::format("'{}' names no CUDA device: cuda:N takes a device number N from 0 to {}", printable(text),
                       kMaxDeviceIndex);
  }
  return fmt::format("'{}' is not auto, cpu, cuda or cuda:N", printable(text));
}
}  // namespace

DeviceChoice parse_device(std::string_view text, std::string_view option) {
  DeviceChoice d;
  if (const std::string why = device_problem(text, d); !why.empty())
    throw UsageError(fmt::format("{}: {}", option, why));
  return d;
}

kvinfer::ActivationMode ActivationsChoice::value() const {
  if (int8 || mode == "int8") return kvinfer::ActivationMode::Int8;
  if (mode == "int15") return kvinfer::ActivationMode::Int15;
  if (mode == "exact") return kvinfer::ActivationMode::Exact;
  throw UsageError(fmt::format("--activations: {:?} is not exact, int15 or int8", mode));
}

void add_activations_options(CLI::App& app, ActivationsChoice& choice) {
  auto* mode =
      app.add_option("--activations", choice.mode,
                     "CPU, quantised weights: how products meet them. exact: f32 products, HF's results on the "
                     "dequantised weights; int8: 8-bit activations and integer products, as llama.cpp does (every ggml "
                     "type; faster, the next-token distributions move by a mean KL of 3-5e-3); int15: 15-bit "
                     "activations, two integer passes (Q4_0, Q4_1, Q8_0; others exact), 128 times finer than int8")
          ->check(CLI::IsMember({"exact", "int15", "int8"}))
          ->capture_default_str();
  app.add_flag("--int8-activations", choice.int8, "--activations int8")->excludes(mode);
}

CLI::Validator device_value() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        DeviceChoice d;
        return device_problem(value, d);
      },
      "{auto,cpu,cuda,cuda:N}");
}

}  // namespace tool
