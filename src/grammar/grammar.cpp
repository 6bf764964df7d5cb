// The public Grammar and GrammarVocabulary: compile text (or a schema's text) for a vocabulary.
#include "kvinfer/grammar.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "grammar/gbnf.h"
#include "grammar/grammar_access.h"
#include "grammar/json_schema.h"
#include "kvinfer/error.h"
#include "kvinfer/tokenizer.h"

namespace kvinfer {

GrammarVocabulary::GrammarVocabulary(const Tokenizer& tokenizer, int32_t vocab_size) : impl_(std::make_unique<Impl>()) {
  const int32_t tok = tokenizer.vocab_size();
  if (vocab_size < 0) throw Error(ErrorKind::InvalidArgument, fmt::format("GrammarVocabulary: vocab_size {} is negative", vocab_size));
  const int32_t n = vocab_size == 0 ? tok : vocab_size;
  std::vector<int32_t> ends = tokenizer.eos_ids();
  std::vector<std::string> bytes(static_cast<size_t>(n));
  for (int32_t id = 0; id < std::min(n, tok); ++id)
    if (!tokenizer.is_special(id) && std::find(ends.begin(), ends.end(), id) == ends.end())
      bytes[static_cast<size_t>(id)] = tokenizer.token_bytes(id);
  std::erase_if(ends, [&](int32_t id) { return id >= n; });
  impl_->trie = grammar::TokenTrie::build(std::move(bytes), std::move(ends));
}

GrammarVocabulary::~GrammarVocabulary() = default;

int32_t GrammarVocabulary::vocab_size() const { return impl_->trie.vocab_size; }
std::span<const int32_t> GrammarVocabulary::end_ids() const { return impl_->trie.end_ids; }

Grammar::Grammar(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Grammar::~Grammar() = default;

const std::string& Grammar::text() const { return impl_->text; }
const GrammarVocabulary& Grammar::vocabulary() const { return *impl_->vocabulary; }
int32_t Grammar::vocab_size() const { return impl_->vocabulary->vocab_size(); }
const GrammarStats& Grammar::stats() const { return impl_->stats; }

namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

std::shared_ptr<const Grammar> Grammar::compile(std::string text, std::shared_ptr<const GrammarVocabulary> vocabulary,
                                                std::chrono::steady_clock::time_point started) {
  if (!vocabulary) throw Error(ErrorKind::InvalidArgument, "Grammar: no vocabulary given (null)");
  auto impl = std::make_unique<Impl>();
  impl->pda = grammar::compile(grammar::parse_gbnf(text));
  impl->tables = grammar::build_tables(impl->pda, GrammarAccess::trie(*vocabulary));
  impl->text = std::move(text);
  impl->vocabulary = std::move(vocabulary);
  GrammarStats& s = impl->stats;
  s.rules = static_cast<int64_t>(impl->pda.rules.size());
  s.states = static_cast<int64_t>(impl->pda.states.size());
  s.uncertain_tokens = static_cast<int64_t>(impl->tables.uncertain.size());
  s.table_bytes = static_cast<int64_t>(impl->tables.bytes());
  s.compile_seconds = std::chrono::duration<double>(Clock::now() - started).count();
  return std::shared_ptr<const Grammar>(new Grammar(std::move(impl)));
}

std::shared_ptr<const Grammar> Grammar::from_gbnf(std::string_view text, std::shared_ptr<const GrammarVocabulary> vocabulary) {
  return compile(std::string(text), std::move(vocabulary), Clock::now());
}

std::shared_ptr<const Grammar> Grammar::from_json_schema(std::string_view schema,
                                                         std::shared_ptr<const GrammarVocabulary> vocabulary,
                                                         const JsonSchemaOptions& options) {
  const auto t0 = Clock::now();
  return compile(json_schema_to_gbnf(schema, options), std::move(vocabulary), t0);
}

std::shared_ptr<const Grammar> Grammar::any_json(std::shared_ptr<const GrammarVocabulary> vocabulary,
                                                 const JsonSchemaOptions& options) {
  return compile(grammar::any_json_gbnf(options), std::move(vocabulary), Clock::now());
}

}  // namespace kvinfer
