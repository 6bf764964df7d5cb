#include "tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <fmt/format.h>

#include "kvinfer/error.h"
#include "tokenizer/utf8.h"

namespace kvinfer {

namespace {

constexpr std::string_view kWhiteSpace = "\\t-\\r\\x{20}\\x{85}\\p{Z}";

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof(buffer));
  return reinterpret_cast<const char*>(buffer);
}

struct MatchData {
  pcre2_match_data* data;
  explicit MatchData(const pcre2_code* code) : data(pcre2_match_data_create_from_pattern(code, nullptr)) {
    if (!data) throw Error(ErrorKind::OutOfMemory, "out of memory creating regex match data");
  }
  ~MatchData() { pcre2_match_data_free(data); }
  MatchData(const MatchData&) = delete;
  MatchData& operator=(const MatchData&) = delete;
};

// A JIT stack larger than the default 32 KiB, made only when a match needs it.
struct JitStack {
  pcre2_jit_stack* stack = nullptr;
  pcre2_match_context* context = nullptr;
  ~JitStack() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
  }
  pcre2_match_context* get() {
    if (!context) {
      stack = pcre2_jit_stack_create(64 * 1024, 64 * 1024 * 1024, nullptr);
      context = pcre2_match_context_create(nullptr);
      if (!stack || !context) throw Error(ErrorKind::OutOfMemory, "out of memory creating a regex JIT stack");
      pcre2_jit_stack_assign(context, nullptr, stack);
    }
    return context;
  }
};

}  // namespace

void Pattern::CodeDeleter::operator()(pcre2_real_code_8* code) const { pcre2_code_free(code); }

Pattern Pattern::literal(std::string text) {
  Pattern p;
  p.source_ = std::move(text);
  return p;
}

Pattern Pattern::regex(std::string_view pattern, std::string_view where) {
  const std::string translated = translate_whitespace_classes(pattern);
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error, &offset, nullptr);
  if (!code)
    throw Error(ErrorKind::BadFile, fmt::format("{}: invalid regex '{}' at offset {}: {}", where, pattern, offset, pcre2_message(error)));
  Pattern p;
  p.source_ = std::string(pattern);
  p.code_ = std::shared_ptr<pcre2_real_code_8>(code, CodeDeleter{});
  // Without JIT (an unsupported platform) pcre2_match interprets the pattern: slower, same result.
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  return p;
}

void Pattern::find_all(std::string_view text, std::vector<Span>& out) const {
  out.clear();
  if (!code_) {
    if (source_.empty()) return;
    for (size_t pos = text.find(source_); pos != std::string_view::npos; pos = text.find(source_, pos + source_.size()))
      out.push_back({pos, pos + source_.size()});
    return;
  }
  MatchData md(code_.get());
  JitStack jit_stack;
  pcre2_match_context* context = nullptr;
  const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t start = 0;
  while (start < text.size()) {
    int rc = pcre2_match(code_.get(), subject, text.size(), start, 0, md.data, context);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT && !context) {
      context = jit_stack.get();
      continue;
    }
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0)
      throw Error(ErrorKind::InvalidArgument, fmt::format("regex '{}' failed on a {}-byte text: {}", source_, text.size(), pcre2_message(rc)));
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.data);
    if (ov[1] > ov[0]) {
      out.push_back({ov[0], ov[1]});
      start = ov[1];
    } else {
      start = ov[0] + utf8::char_length(text, ov[0]);
    }
  }
}

std::string translate_whitespace_classes(std::string_view pattern) {
  std::string out;
  out.reserve(pattern.size() + 32);
  bool in_class = false;  // PCRE2 classes do not nest: '[' inside one is literal, except "[:name:]"
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[++i];
      if (e == 's') {
        out += in_class ? std::string(kWhiteSpace) : fmt::format("[{}]", kWhiteSpace);
      } else if (e == 'S' && !in_class) {
        out += fmt::format("[^{}]", kWhiteSpace);
      } else {
        out.push_back('\\');
        out.push_back(e);
      }
    } else if (in_class) {
      if (c == '[' && i + 1 < pattern.size() && pattern[i + 1] == ':') {
        const size_t close = pattern.find(":]", i + 2);
        const size_t end = close == std::string_view::npos ? pattern.size() : close + 2;
        out.append(pattern.substr(i, end - i));
        i = end - 1;
        continue;
      }
      if (c == ']') in_class = false;
      out.push_back(c);
    } else {
      out.push_back(c);
      if (c == '[') {
        in_class = true;
        // "[]..." and "[^]..." take the first ']' literally.
        if (i + 1 < pattern.size() && pattern[i + 1] == '^') out.push_back(pattern[++i]);
        if (i + 1 < pattern.size() && pattern[i + 1] == ']') out.push_back(pattern[++i]);
      }
    }
  }
  return out;
}

}  // namespace kvinfer
