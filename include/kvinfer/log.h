#pragma once
// Logging: the library is silent unless the application installs a callback. Today it reports
// each load (file, weights, device, context, threads) at Info; nothing on the hot path.
#include <functional>
#include <string_view>

#include "kvinfer/export.h"

KVINFER_PUBLIC_BEGIN
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
KVINFER_PUBLIC_END
