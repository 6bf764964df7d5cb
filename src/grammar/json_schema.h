#pragma once
// JSON schema → grammar text (docs/structured-output.md, "JSON schemas"). The public entry point
// is kvinfer::json_schema_to_gbnf (kvinfer/grammar.h); these are the pieces it and the tests share.
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvinfer/grammar.h"

namespace kvinfer::grammar {

// Any JSON value, as one grammar (root ::= value).
std::string any_json_gbnf(const JsonSchemaOptions& options);

// Several schemas in one grammar: each one's values become a rule of its own, and `root` writes
// the root rule's body from those rules' names, in order. Errors start with the label of the
// schema at fault.
std::string json_schemas_gbnf(const std::vector<std::pair<std::string, const nlohmann::ordered_json*>>& schemas,
                              const std::function<std::string(const std::vector<std::string>&)>& root,
                              const JsonSchemaOptions& options);

// The one serialization of a JSON value the schema grammars write for enum and const values, and
// expect of every string they constrain: compact, object members in their order, strings with
// only the escapes JSON requires (\" \\ \b \f \n \r \t, other control characters as \u00xx), and
// numbers with an integral value as integers ("1.0" → "1", "-0" → "0"), others in their shortest
// round-trip form.
std::string canonical_json(const nlohmann::ordered_json& value);

}  // namespace kvinfer::grammar
