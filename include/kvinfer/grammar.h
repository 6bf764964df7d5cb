#pragma once
// Structured output (docs/structured-output.md): a grammar, written in kvinfer's GBNF-style text
// format or compiled from a JSON schema, constrains sampling so that the output is always a prefix
// of its language, and the end token comes only once the output is complete. Set it as
// SamplingParams::grammar; every Sampler made from those parameters keeps its own parse.
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "kvinfer/export.h"

KVINFER_PUBLIC_BEGIN
namespace kvinfer {

class Tokenizer;

// The token side of grammars for one vocabulary: every token's bytes, sorted into a trie. Make it
// once per model and share it: grammars compiled for it keep it alive. Immutable, thread-safe.
class GrammarVocabulary {
 public:
  // vocab_size: the model's (ModelConfig::vocab_size), which may exceed the tokenizer's: ids past
  // the tokenizer's are never allowed; 0: the tokenizer's. Special tokens are never allowed as
  // text; the tokenizer's end ids (Tokenizer::eos_ids()) end an output once it is complete.
  explicit GrammarVocabulary(const Tokenizer& tokenizer, int32_t vocab_size = 0);
  ~GrammarVocabulary();
  GrammarVocabulary(const GrammarVocabulary&) = delete;
  GrammarVocabulary& operator=(const GrammarVocabulary&) = delete;

  int32_t vocab_size() const;
  std::span<const int32_t> end_ids() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  friend struct GrammarAccess;
};

// How the JSON-schema compiler writes JSON.
struct JsonSchemaOptions {
  // Whitespace between JSON tokens: true allows one space, or a newline and up to 20 spaces or
  // tabs of indentation, wherever JSON allows whitespace (inside the value: none before or after
  // it); false: none at all (compact JSON).
  bool whitespace = true;
};

struct GrammarStats {
  int64_t rules = 0;             // rules left after inlining (the root and recursive rules)
  int64_t states = 0;            // states of the byte automaton, all rules
  int64_t uncertain_tokens = 0;  // (state, token) pairs decided at run time by the stack below
  int64_t table_bytes = 0;       // the precomputed token tables
  double compile_seconds = 0;    // text → automaton → token tables
};

class Grammar {
 public:
  // From grammar text (docs/structured-output.md, "Grammar format"). Throws Error
  // (InvalidArgument) naming the line and column of a syntax error, a rule that is used but
  // undefined, left recursion, or a grammar beyond the limits (size, ambiguity, compile work).
  static std::shared_ptr<const Grammar> from_gbnf(std::string_view text, std::shared_ptr<const GrammarVocabulary> vocabulary);
  // From a JSON schema (the subset in docs/structured-output.md). Throws Error (Unsupported)
  // naming the first keyword or value outside the subset and where it is ("/properties/age:
  // 'multipleOf' is not supported"), (InvalidArgument) for JSON that is not a schema.
  static std::shared_ptr<const Grammar> from_json_schema(std::string_view schema,
                                                         std::shared_ptr<const GrammarVocabulary> vocabulary,
                                                         const JsonSchemaOptions& options = {});
  // Any JSON value (OpenAI's response_format json_object asks for an object: from_json_schema
  // with {"type": "object"} does that).
  static std::shared_ptr<const Grammar> any_json(std::shared_ptr<const GrammarVocabulary> vocabulary,
                                                 const JsonSchemaOptions& options = {});

  ~Grammar();
  Grammar(const Grammar&) = delete;
  Grammar& operator=(const Grammar&) = delete;

  // The grammar text it was compiled from (for a schema, the one the compiler wrote).
  const std::string& text() const;
  const GrammarVocabulary& vocabulary() const;
  int32_t vocab_size() const;
  const GrammarStats& stats() const;

 private:
  struct Impl;
  explicit Grammar(std::unique_ptr<Impl> impl);
  static std::shared_ptr<const Grammar> compile(std::string text, std::shared_ptr<const GrammarVocabulary> vocabulary,
                                                std::chrono::steady_clock::time_point started);
  std::unique_ptr<Impl> impl_;
  friend struct GrammarAccess;
};

// The grammar text a JSON schema compiles to; throws as Grammar::from_json_schema.
std::string json_schema_to_gbnf(std::string_view schema, const JsonSchemaOptions& options = {});

}  // namespace kvinfer
KVINFER_PUBLIC_END
