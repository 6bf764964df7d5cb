#pragma once
// What the library's own code reaches inside a Tokenizer through (Tokenizer's friend): its state,
// defined in tokenizer/tokenizer_data.h as TokenizerData.
#include <memory>

#include "kvinfer/tokenizer.h"

namespace kvinfer {

struct TokenizerAccess {
  using Data = Tokenizer::Impl;
  static Tokenizer make(std::unique_ptr<Data> data);
  static const Data& data(const Tokenizer& tokenizer);
};
using TokenizerData = TokenizerAccess::Data;

}  // namespace kvinfer
