#pragma once
// What the library's own code reaches inside a Grammar and a GrammarVocabulary (their friend):
// the compiled automaton, its token tables and the vocabulary's trie.
#include <memory>
#include <string>

#include "grammar/automaton.h"
#include "grammar/token_table.h"
#include "kvinfer/grammar.h"

namespace kvinfer {

struct GrammarVocabulary::Impl {
  grammar::TokenTrie trie;
};

struct Grammar::Impl {
  std::string text;
  grammar::Pda pda;
  grammar::TokenTables tables;
  std::shared_ptr<const GrammarVocabulary> vocabulary;
  GrammarStats stats;
};

struct GrammarAccess {
  static const grammar::TokenTrie& trie(const GrammarVocabulary& v) { return v.impl_->trie; }
  static const Grammar::Impl& impl(const Grammar& g) { return *g.impl_; }
};

}  // namespace kvinfer
