#include "core/log.h"

#include <atomic>
#include <memory>
#include <mutex>

namespace kvinfer {

namespace {

struct Sink {
  LogCallback callback;
};

// The installed callback; replaced whole, so a message in flight keeps the one it started with.
std::mutex sink_mutex;
std::shared_ptr<const Sink> sink;
// The lowest level delivered; above every level while no callback is installed.
constexpr int kSilent = static_cast<int>(LogLevel::Error) + 1;
std::atomic<int> min_level{kSilent};

}  // namespace

void set_log_callback(LogCallback callback, LogLevel level) {
  const std::lock_guard lock(sink_mutex);
  const bool on = static_cast<bool>(callback);
  sink = on ? std::make_shared<const Sink>(Sink{std::move(callback)}) : nullptr;
  min_level.store(on ? static_cast<int>(level) : kSilent, std::memory_order_relaxed);
}

std::string_view log_level_name(LogLevel level) {
  switch (level) {
    case LogLevel::Debug: return "debug";
    case LogLevel::Info: return "info";
    case LogLevel::Warning: return "warning";
    case LogLevel::Error: return "error";
  }
  return "?";
}

namespace log {

bool enabled(LogLevel level) noexcept {
  return static_cast<int>(level) >= min_level.load(std::memory_order_relaxed);
}

void write(LogLevel level, std::string_view message) {
  std::shared_ptr<const Sink> s;
  {
    const std::lock_guard lock(sink_mutex);
    s = sink;
  }
  if (s && enabled(level)) s->callback(level, message);
}

}  // namespace log
}  // namespace kvinfer
