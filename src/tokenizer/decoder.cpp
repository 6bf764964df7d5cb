#include "tokenizer/decoder.h"

#include <optional>

#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace kvinfer {

namespace {

using Kind = DecoderStep::Kind;

std::optional<unsigned char> byte_token(const std::string& token) {
  if (token.size() != 6 || token.compare(0, 3, "<0x") != 0 || token[5] != '>') return std::nullopt;
  const auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  const int hi = hex(token[3]), lo = hex(token[4]);
  if (hi < 0 || lo < 0) return std::nullopt;
  return static_cast<unsigned char>(hi * 16 + lo);
}

// Runs of <0xNN> tokens become their bytes: one string when the run is valid UTF-8, else one
// U+FFFD per byte (HF's ByteFallback).
std::vector<std::string> byte_fallback(std::vector<std::string> tokens, bool raw_bytes) {
  std::vector<std::string> out;
  std::string run;
  size_t run_tokens = 0;
  const auto flush = [&] {
    if (run_tokens == 0) return;
    if (raw_bytes || utf8::is_valid(run)) {
      out.push_back(run);
    } else {
      for (size_t k = 0; k < run_tokens; ++k) out.emplace_back("\xEF\xBF\xBD");
    }
    run.clear();
    run_tokens = 0;
  };
  for (std::string& t : tokens) {
    if (auto b = byte_token(t)) {
      run.push_back(static_cast<char>(*b));
      ++run_tokens;
      continue;
    }
    flush();
    out.push_back(std::move(t));
  }
  flush();
  return out;
}

std::string replace_all(const std::string& s, const Pattern& pattern, const std::string& content) {
  std::vector<Span> matches;
  pattern.find_all(s, matches);
  if (matches.empty()) return s;
  std::string out;
  size_t prev = 0;
  for (const Span& m : matches) {
    out.append(s, prev, m.begin - prev);
    out += content;
    prev = m.end;
  }
  out.append(s, prev);
  return out;
}

// Strips up to `start` leading and `stop` trailing copies of `c` (a single character).
std::string strip(const std::string& s, const std::string& c, size_t start, size_t stop) {
  size_t begin = 0, end = s.size();
  for (size_t k = 0; k < start && c.size() <= end - begin && s.compare(begin, c.size(), c) == 0; ++k) begin += c.size();
  for (size_t k = 0; k < stop && c.size() <= end - begin && s.compare(end - c.size(), c.size(), c) == 0; ++k)
    end -= c.size();
  return s.substr(begin, end - begin);
}

// ▁ becomes a space; in the sequence's first token every ▁ is dropped (HF drops them all, not
// only the leading one).
std::string metaspace(const std::string& s, const std::string& replacement, bool drop) {
  std::string out;
  size_t prev = 0;
  for (size_t pos = s.find(replacement); pos != std::string::npos; pos = s.find(replacement, prev)) {
    out.append(s, prev, pos - prev);
    if (!drop) out.push_back(' ');
    prev = pos + replacement.size();
  }
  out.append(s, prev);
  return out;
}

}  // namespace

std::string Decoder::run(std::vector<std::string> tokens, const DecodeContext& context) const {
  if (none_) {
    std::string out;
    for (size_t k = 0; k < tokens.size(); ++k) {
      if (k > 0 || !context.at_start) out.push_back(' ');
      out += tokens[k];
    }
    return out;
  }
  // Once joined, element 0 spans the whole list, so its start is the sequence's start only in
  // a list that starts the sequence, and its end the sequence's end only in one that ends it.
  bool joined = false;
  for (const DecoderStep& step : steps_) {
    switch (step.kind) {
      case Kind::ByteLevel: {
        std::string bytes;
        for (const std::string& t : tokens) byte_level::decode_token(t, bytes);
        tokens.assign(1, context.raw_bytes ? std::move(bytes) : utf8::lossy(bytes));
        joined = true;
        break;
      }
      case Kind::Fuse: {
        std::string all;
        for (const std::string& t : tokens) all += t;
        tokens.assign(1, std::move(all));
        joined = true;
        break;
      }
      case Kind::Replace:
        for (std::string& t : tokens) t = replace_all(t, *step.pattern, step.text);
        break;
      case Kind::ByteFallback: tokens = byte_fallback(std::move(tokens), context.raw_bytes); break;
      case Kind::Strip:
        for (size_t k = 0; k < tokens.size(); ++k) {
          const bool first = k == 0 && joined && !context.at_start;
          const bool last = k + 1 == tokens.size() && joined && !context.at_end;
          tokens[k] = strip(tokens[k], step.text, first ? 0 : step.start, last ? 0 : step.stop);
        }
        break;
      case Kind::Metaspace:
        for (size_t k = 0; k < tokens.size(); ++k)
          tokens[k] = metaspace(tokens[k], step.text, k == 0 && context.at_start && step.prepend);
        break;
    }
  }
  std::string out;
  for (const std::string& t : tokens) out += t;
  return out;
}

}  // namespace kvinfer
