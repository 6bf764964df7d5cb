#pragma once
// Internal to the built-ins: the filter functions, split by what they work on.
#include <optional>
#include <string>
#include <string_view>

#include "tokenizer/jinja/value.h"

namespace kvinfer::jinja {

using FilterFn = Value (*)(const Value& value, const CallArgs& args);

FilterFn find_text_filter(std::string_view name);      // filters_text.cpp: strings and numbers
FilterFn find_sequence_filter(std::string_view name);  // filters_sequence.cpp: lists and dicts

// Helpers shared by both files.
const Value* arg_or_null(const CallArgs& args, size_t position, const char* name);
bool arg_bool(const CallArgs& args, size_t position, const char* name, bool dflt);
std::optional<std::string> arg_string(const CallArgs& args, size_t position, const char* name, const char* filter);

}  // namespace kvinfer::jinja
