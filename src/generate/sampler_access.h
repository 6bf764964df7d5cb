#pragma once
// What the library's generation loops reach inside a Sampler (its friend): the grammar's parse,
// which speculative decoding copies into the drafter's sampler and checks drafts against.
#include "grammar/token_matcher.h"
#include "kvinfer/sampler.h"

namespace kvinfer {

struct SamplerAccess {
  // The parse, or null without a grammar.
  static grammar::TokenMatcher* grammar(Sampler& s);
};

}  // namespace kvinfer
