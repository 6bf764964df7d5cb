// kvinfer-server's tool calls apart from HTTP (examples/server/tool_calls.cpp): the format each
// template family writes, parsing replies whole and piece by piece (the same calls and text
// whatever the pieces), the grammars for required / named / auto-with-strict (they accept the
// family's calls and refuse text where only calls may come), Hermes' instructions for templates
// without tools, and Python's json.dumps spelling.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "grammar/automaton.h"
#include "grammar/gbnf.h"
#include "grammar/matcher.h"
#include "kvinfer/error.h"
#include "server/tool_calls.h"
#include "test_files.h"

namespace server {
namespace {

using nlohmann::ordered_json;
using ::testing::HasSubstr;

bool whole(const std::string& gbnf, const std::string& text) {
  const auto pda = kvinfer::grammar::compile(kvinfer::grammar::parse_gbnf(gbnf));
  kvinfer::grammar::Matcher m(pda);
  return m.advance(text) && m.complete();
}

Tools weather_tools(ToolFormat format, ToolChoice choice, bool strict = true) {
  Tools t;
  t.format = format;
  t.choice = choice;
  ToolFunction f{"get_weather", ordered_json::parse(R"({"type": "object", "properties": {"city": {"type": "string"},
      "unit": {"enum": ["c", "f"]}}, "required": ["city"], "additionalProperties": false})"), strict};
  ToolFunction g{"now", ordered_json::parse(R"({"type": "object", "properties": {}})"), false};
  t.functions = {f, g};
  t.json = R"([{"type": "function", "function": {"name": "get_weather"}}, {"type": "function", "function": {"name": "now"}}])";
  if (choice == ToolChoice::Named) t.named = "now";
  return t;
}

TEST(ToolCalls, FormatOfEachFamily) {
  EXPECT_EQ(tool_format("{{ '<tool_call>' }}{% if tools %}"), ToolFormat::Hermes);
  EXPECT_EQ(tool_format("{{- '<|python_tag|>' + tool_call.name }}"), ToolFormat::Llama3);
  EXPECT_EQ(tool_format("{% for m in messages %}{{ m.content }}{% endfor %}"), ToolFormat::Generic);
}

TEST(ToolCalls, HermesRepliesParseWholeAndInAnyPieces) {
  const std::string reply = "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>\n"
                            "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>";
  const auto out = parse_tool_output(ToolFormat::Hermes, reply);
  EXPECT_EQ(out.content, "Let me check.\n");
  ASSERT_EQ(out.calls.size(), 2u);
  EXPECT_EQ(out.calls[0].name, "get_weather");
  EXPECT_EQ(out.calls[0].arguments, R"({"city":"Oslo"})");
  EXPECT_EQ(out.calls[1].name, "now");
  EXPECT_THAT(out.calls[0].id, ::testing::StartsWith("call_"));
  // Streamed a byte at a time: the same text and calls, and no text of a tag comes out early.
  ToolStream s(ToolFormat::Hermes);
  std::string content;
  std::vector<ToolCall> calls;
  for (char c : reply) {
    auto o = s.push(std::string(1, c));
    EXPECT_EQ(o.content.find('<'), std::string::npos) << "a tag's text given out as content";
    content += o.content;
    for (auto& call : o.calls) calls.push_back(call);
  }
  auto o = s.finish();
  content += o.content;
  for (auto& call : o.calls) calls.push_back(call);
  EXPECT_EQ(content, out.content);
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[1].arguments, "{}");
  // Not a call after all: text.
  EXPECT_EQ(parse_tool_output(ToolFormat::Hermes, "a <tool_call>{oops</tool_call> b").content, "a <tool_call>{oops</tool_call> b");
  EXPECT_EQ(parse_tool_output(ToolFormat::Hermes, "1 < 2 <tool").content, "1 < 2 <tool");
}

TEST(ToolCalls, Llama3RepliesAreACallOrText) {
  auto out = parse_tool_output(ToolFormat::Llama3, R"( {"name": "get_weather", "parameters": {"city": "Lima"}})");
  ASSERT_EQ(out.calls.size(), 1u);
  EXPECT_EQ(out.calls[0].arguments, R"({"city":"Lima"})");
  EXPECT_EQ(out.content, "");
  out = parse_tool_output(ToolFormat::Llama3, "It is sunny {really}.");
  EXPECT_TRUE(out.calls.empty());
  EXPECT_EQ(out.content, "It is sunny {really}.");
  out = parse_tool_output(ToolFormat::Llama3, "{not json");
  EXPECT_EQ(out.content, "{not json");
}

TEST(ToolCalls, GrammarsAcceptTheFamilysCallsOnly) {
  const std::string call = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"unit\": \"c\"}}\n</tool_call>";
  const std::string now = "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>";
  const std::string required = tool_grammar(weather_tools(ToolFormat::Hermes, ToolChoice::Required));
  EXPECT_TRUE(whole(required, call));
  EXPECT_TRUE(whole(required, call + "\n" + now));
  EXPECT_FALSE(whole(required, "Sure! " + call));
  EXPECT_FALSE(whole(required, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"unit\": \"c\"}}\n</tool_call>"));
  EXPECT_FALSE(whole(required, "<tool_call>\n{\"name\": \"other\", \"arguments\": {}}\n</tool_call>"));
  Tools single = weather_tools(ToolFormat::Hermes, ToolChoice::Required);
  single.parallel = false;
  EXPECT_FALSE(whole(tool_grammar(single), call + "\n" + now));
  const std::string named = tool_grammar(weather_tools(ToolFormat::Hermes, ToolChoice::Named));
  EXPECT_TRUE(whole(named, now));
  EXPECT_FALSE(whole(named, call));
  // "auto" with a strict function: any text without the tag, then calls that follow the schemas.
  const std::string automatic = tool_grammar(weather_tools(ToolFormat::Hermes, ToolChoice::Auto));
  for (const std::string& ok : std::vector<std::string>{"Plain text <b>bold</b> < tool_call <tool_cal", "",
                                                        "I will call it.\n" + call,
                                                        "<<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>"})
    EXPECT_TRUE(whole(automatic, ok)) << ok;
  EXPECT_FALSE(whole(automatic, "x <tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_EQ(tool_grammar(weather_tools(ToolFormat::Hermes, ToolChoice::Auto, /*strict=*/false)), "");
  EXPECT_EQ(tool_grammar(weather_tools(ToolFormat::Hermes, ToolChoice::None)), "");
  const std::string llama = tool_grammar(weather_tools(ToolFormat::Llama3, ToolChoice::Required));
  EXPECT_TRUE(whole(llama, R"({"name": "get_weather", "parameters": {"city": "Oslo"}})"));
  EXPECT_FALSE(whole(llama, R"({"name": "get_weather", "arguments": {"city": "Oslo"}})"));
  // A parameters schema outside the subset names the function's place.
  Tools bad = weather_tools(ToolFormat::Hermes, ToolChoice::Required);
  bad.functions[1].parameters = ordered_json::parse(R"({"type": "object", "properties": {"n": {"multipleOf": 2}}})");
  EXPECT_THAT(kvinfer::test::error_of([&] { tool_grammar(bad); }),
              HasSubstr("tools[1].function.parameters: JSON schema /properties/n: 'multipleOf' is not supported"));
}

TEST(ToolCalls, GenericTemplatesGetHermesInstructionsAndText) {
  const Tools t = weather_tools(ToolFormat::Generic, ToolChoice::Auto);
  std::vector<kvinfer::ChatMessage> in = {{"user", "Weather?"},
                                          {"assistant", "", {{"c1", "get_weather", R"({"city":"Oslo"})"}}},
                                          {"tool", "sunny", {}, "c1"},
                                          {"tool", "12:00", {}, "c2"}};
  const auto out = generic_tool_messages(in, t);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0].role, "system");
  EXPECT_THAT(out[0].content, HasSubstr("<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\"}}\n"));
  EXPECT_EQ(out[2].content, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>");
  EXPECT_EQ(out[3].role, "user");
  EXPECT_EQ(out[3].content, "<tool_response>\nsunny\n</tool_response>\n<tool_response>\n12:00\n</tool_response>");
  EXPECT_EQ(python_json(ordered_json::parse(R"({"b": [1, 2.5, "é\n"], "a": {}})")), "{\"b\": [1, 2.5, \"é\\n\"], \"a\": {}}");
}

}  // namespace
}  // namespace server
