#pragma once
// The filters, tests and global functions of the supported subset (docs/chat-templates.md).
#include <optional>
#include <string>
#include <string_view>

#include "tokenizer/jinja/value.h"

namespace kvinfer::jinja {

bool is_filter(std::string_view name);
bool is_test(std::string_view name);
Value apply_filter(const std::string& name, const Value& value, const CallArgs& args);
bool apply_test(const std::string& name, const Value& value, const CallArgs& args);

// range, namespace, dict, raise_exception, strftime_now; nullopt for other names.
std::optional<Value> global_function(const std::string& name);

}  // namespace kvinfer::jinja
