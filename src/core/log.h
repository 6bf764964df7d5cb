#pragma once
// The library's side of kvinfer/log.h: messages go to the application's callback, and cost one
// relaxed atomic load when nobody listens at their level.
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "kvinfer/log.h"

namespace kvinfer::log {

bool enabled(LogLevel level) noexcept;
void write(LogLevel level, std::string_view message);

template <typename... Args>
void message(LogLevel level, fmt::format_string<Args...> format, Args&&... args) {
  if (enabled(level)) write(level, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace kvinfer::log
