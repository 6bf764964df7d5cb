#pragma once
// Template source → tokens, reproducing jinja2's lexer with transformers' settings: newlines
// normalised to \n and one trailing newline dropped, trim_blocks (the newline after a block or
// comment tag goes), lstrip_blocks (spaces/tabs before a block or comment tag on its own line
// go), "-" and "+" whitespace control, {% raw %} blocks. Comments produce no tokens.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kvinfer::jinja {

enum class TokenType { Data, VariableBegin, VariableEnd, BlockBegin, BlockEnd, Name, String, Integer, Float, Operator, Eof };

struct Token {
  TokenType type = TokenType::Eof;
  std::string text;  // Data, Name, Operator; the decoded value of a String
  int64_t integer = 0;
  double number = 0;
  int line = 1;
};

// Throws kvinfer::Error ("chat template line N: ...") on text jinja2's lexer rejects.
std::vector<Token> tokenize(std::string_view source);

}  // namespace kvinfer::jinja
