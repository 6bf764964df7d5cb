#pragma once
// Logging: the library is silent unless the application installs a callback. What it reports:
// the file and device a load chose, the memory checks, fallbacks (a CUDA library missing, a
// sampler step done on the host), at Info and Debug; nothing on the hot path above Debug.
#include <functional>
#include <string_view>

namespace kvinfer {

enum class LogLevel { Debug, Info, Warning, Error };

// Receives each message (one line, no newline) at or above the level it was installed with.
// Called from whichever thread runs the library code: it must be thread-safe.
using LogCallback = std::function<void(LogLevel level, std::string_view message)>;

// Process-wide. An empty callback (the default) silences the library.
void set_log_callback(LogCallback callback, LogLevel min_level = LogLevel::Info);

// "debug", "info", "warning", "error".
std::string_view log_level_name(LogLevel level);

}  // namespace kvinfer
