// ChatTemplate: every fixture in tests/data/chat/expected.json (written by
// tools/make_chat_fixtures.py with transformers' own renderer) must render byte for byte; every
// failure case must be a kvinfer::Error; hostile templates hit a limit, never a crash.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvinfer/chat_template.h"
#include "kvinfer/error.h"
#include "test_files.h"

namespace kvinfer {
namespace {

using test::error_of;
using ::testing::HasSubstr;
using json = nlohmann::json;
namespace fs = std::filesystem;

const fs::path kChatData = fs::path(KVINFER_TEST_DATA) / "chat";

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const json& expected() {
  static const json j = json::parse(read_text(kChatData / "expected.json"));
  return j;
}

std::vector<ChatMessage> conversation(const std::string& name) {
  std::vector<ChatMessage> out;
  for (const auto& m : expected().at("conversations").at(name)) {
    out.push_back({m.at("role").get<std::string>(), m.at("content").get<std::string>()});
  }
  return out;
}

std::map<std::string, std::string> variables(const json& c) {
  std::map<std::string, std::string> out;
  if (c.contains("variables")) {
    for (const auto& [k, v] : c.at("variables").items()) out[k] = v.get<std::string>();
  }
  return out;
}

std::string render(const std::string& source, const std::string& conv = "multi_turn", bool add_generation_prompt = true) {
  return ChatTemplate(source, "<s>", "</s>").render(conversation(conv), add_generation_prompt);
}

TEST(ChatTemplate, RealTemplatesMatchTransformers) {
  const json& cases = expected().at("real");
  ASSERT_GE(cases.size(), 80u);  // 5 templates x 8 conversations x with/without generation prompt
  std::map<std::string, ChatTemplate> templates;
  for (const auto& [name, t] : expected().at("templates").items()) {
    templates.emplace(name, ChatTemplate(read_text(kChatData / t.at("file").get<std::string>()),
                                         t.at("bos_token").get<std::string>(), t.at("eos_token").get<std::string>()));
  }
  ASSERT_EQ(templates.size(), 5u);
  for (const auto& c : cases) {
    const std::string name = c.at("template").get<std::string>();
    SCOPED_TRACE(name + " / " + c.at("conversation").get<std::string>() +
                 (c.at("add_generation_prompt").get<bool>() ? " / generation prompt" : ""));
    const std::string got = templates.at(name).render(conversation(c.at("conversation").get<std::string>()),
                                                      c.at("add_generation_prompt").get<bool>());
    EXPECT_EQ(got, c.at("output").get<std::string>());
  }
}

// Tools: tests/data/chat/tools_expected.json (tools/make_tool_fixtures.py), transformers'
// apply_chat_template(tools=...) with assistant tool calls and tool results.
TEST(ChatTemplate, ToolsMatchTransformers) {
  using ordered = nlohmann::ordered_json;
  const ordered fixtures = ordered::parse(read_text(kChatData / "tools_expected.json"));
  const ChatTemplate qwen(read_text(kChatData / "templates" / "qwen2_5.jinja"), "", "<|im_end|>");
  int n = 0;
  for (const auto& c : fixtures.at("cases")) {
    ASSERT_EQ(c.at("template"), "qwen2_5");
    std::vector<ChatMessage> messages;
    for (const auto& m : c.at("messages")) {
      ChatMessage msg{m.at("role").get<std::string>(), m.at("content").get<std::string>()};
      if (m.contains("tool_calls"))
        for (const auto& t : m.at("tool_calls"))
          msg.tool_calls.push_back({t.at("id").get<std::string>(), t.at("name").get<std::string>(),
                                    t.at("arguments").get<std::string>()});
      msg.tool_call_id = m.value("tool_call_id", "");
      msg.name = m.value("name", "");
      messages.push_back(std::move(msg));
    }
    const std::string tools = c.at("tools").empty() ? std::string() : c.at("tools").dump();
    EXPECT_EQ(qwen.render(messages, true, {}, tools), c.at("expected").get<std::string>()) << c.at("name");
    ++n;
  }
  EXPECT_EQ(n, 5);
  EXPECT_TRUE(qwen.supports_tools());
  EXPECT_FALSE(ChatTemplate(read_text(kChatData / "templates" / "smollm2.jinja")).supports_tools());
  EXPECT_THAT(error_of([&] { qwen.render({}, true, {}, "{\"not\": \"a list\"}"); }), HasSubstr("tools must be a JSON list"));
  EXPECT_THAT(error_of([&] { qwen.render({}, true, {}, "[oops"); }), HasSubstr("tools is not valid JSON"));
}

TEST(ChatTemplate, FeatureCorpusMatchesJinja2) {
  const json& cases = expected().at("features");
  ASSERT_GE(cases.size(), 30u);
  for (const auto& c : cases) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    try {
      const ChatTemplate t(c.at("source").get<std::string>(), "<s>", "</s>");
      EXPECT_EQ(t.render(conversation(c.at("conversation").get<std::string>()),
                         c.at("add_generation_prompt").get<bool>(), variables(c)),
                c.at("output").get<std::string>());
    } catch (const Error& e) {
      ADD_FAILURE() << e.what();
    }
  }
}

TEST(ChatTemplate, FailureCasesAreErrors) {
  const json& cases = expected().at("failures");
  ASSERT_GE(cases.size(), 20u);
  for (const auto& c : cases) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    const std::string message = error_of([&] { render(c.at("source").get<std::string>(), c.at("conversation").get<std::string>()); });
    EXPECT_THAT(message, HasSubstr("chat template line "));
    if (c.contains("message")) {
      EXPECT_THAT(message, HasSubstr(c.at("message").get<std::string>()));
    }
  }
}

TEST(ChatTemplate, UnsupportedConstructsFailWhenParsed) {
  for (const char* source : {"{% macro f() %}{% endmacro %}", "{% include 'x' %}", "{{ x|wordwrap }}",
                             "{{ x is escaped }}", "{% for x in y recursive %}{% endfor %}"}) {
    SCOPED_TRACE(source);
    EXPECT_THAT(error_of(ErrorKind::Unsupported, [&] { ChatTemplate t(source); }), HasSubstr("unsupported"));
  }
}

TEST(ChatTemplate, ErrorsNameTheLine) {
  EXPECT_THAT(error_of(ErrorKind::BadFile, [] { ChatTemplate t("a\nb\n{{ 1 + }}"); }), HasSubstr("line 3"));
  EXPECT_THAT(error_of(ErrorKind::InvalidArgument, [] { render("x\n{% if true %}\n\n  {{ raise_exception('boom') }}{% endif %}"); }),
              HasSubstr("chat template line 4: raise_exception: boom"));
  EXPECT_THAT(error_of([] { render("{{\n  1 +\n  'a' }}"); }), HasSubstr("line 2"));
}

TEST(ChatTemplate, ExtraVariablesAndAccessors) {
  const std::string source = "{{ date_string }}|{{ messages|length }}|{{ bos_token }}{{ eos_token }}";
  const ChatTemplate t(source, "[B]", "[E]");
  EXPECT_EQ(t.source(), source);
  const std::vector<ChatMessage> messages{{"user", "hi"}};
  EXPECT_EQ(t.render(messages, false, {{"date_string", "26 Jul 2024"}}), "26 Jul 2024|1|[B][E]");
  EXPECT_EQ(t.render(messages, false), "|1|[B][E]");
  // The conversation is not overridable through the extra variables.
  EXPECT_EQ(t.render(messages, false, {{"messages", "x"}}), "|1|[B][E]");
  const ChatTemplate copy = t;
  EXPECT_EQ(copy.render(messages, true), t.render(messages, true));
  EXPECT_EQ(ChatTemplate("").render({}, true), "");
}

TEST(ChatTemplate, StrftimeNowFormatsTheLocalTime) {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  const std::string year = render("{{ strftime_now('%Y') }}");
  ASSERT_EQ(year.size(), 4u);
  EXPECT_NEAR(std::stoi(year), local.tm_year + 1900, 1);
  EXPECT_EQ(render("{{ strftime_now('%d %b %Y') | length }}"), "11");
}

// Hostile templates: each limit is a clear Error, and nothing crashes or overflows the stack.
TEST(ChatTemplateLimits, DeepNestingIsRejectedByTheParser) {
  const std::string parens = "{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}";
  EXPECT_THAT(error_of([&] { ChatTemplate t(parens); }), HasSubstr("nest"));
  const std::string brackets = "{{ " + std::string(100000, '[') + std::string(100000, ']') + " }}";
  EXPECT_THAT(error_of([&] { ChatTemplate t(brackets); }), HasSubstr("nest"));
  std::string chain = "{{ 1";
  for (int i = 0; i < 100000; ++i) chain += " + 1";
  EXPECT_THAT(error_of([&] { ChatTemplate t(chain + " }}"); }), HasSubstr("nested deeper"));
  std::string nots = "{{ ";
  for (int i = 0; i < 100000; ++i) nots += "not ";
  EXPECT_THAT(error_of([&] { ChatTemplate t(nots + "1 }}"); }), HasSubstr("nest"));
  std::string ifs;
  for (int i = 0; i < 10000; ++i) ifs += "{% if true %}";
  EXPECT_THAT(error_of([&] { ChatTemplate t(ifs); }), HasSubstr("nest"));
  std::string filters = "{{ 'x'";
  for (int i = 0; i < 100000; ++i) filters += "|trim";
  EXPECT_THAT(error_of([&] { ChatTemplate t(filters + " }}"); }), HasSubstr("nested deeper"));
  // Real templates nest far less than the limit.
  EXPECT_EQ(render("{{ " + std::string(50, '(') + "1" + std::string(50, ')') + " }}"), "1");
}

TEST(ChatTemplateLimits, HugeRangesAndLoopsStop) {
  EXPECT_THAT(error_of([] { render("{% for i in range(10000000) %}{% endfor %}"); }), HasSubstr("Range too big"));
  EXPECT_THAT(error_of([] { render("{% for i in range(10000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}"); }),
              HasSubstr("iterations"));
  EXPECT_EQ(render("{% set ns = namespace(n=0) %}{% for i in range(100000) %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.n }}"),
            "100000");
}

TEST(ChatTemplateLimits, HugeOutputAndStringsStop) {
  EXPECT_THAT(error_of([] { render("{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}"); }),
              HasSubstr("rendered output exceeds"));
  EXPECT_THAT(error_of([] { render("{{ 'x' * 100000000 }}"); }), HasSubstr("exceeds the limit"));
  EXPECT_THAT(error_of([] { render("{{ [1] * 100000000 }}"); }), HasSubstr("exceeds the limit"));
  EXPECT_THAT(error_of([] {
                render("{% set ns = namespace(s='') %}{% for i in range(100000) %}{% set ns.s = ns.s ~ ('x' * 1000) %}{% endfor %}");
              }),
              HasSubstr("work budget"));
  EXPECT_THAT(error_of([] { render("{{ 10 ** 100 }}"); }), HasSubstr("overflow"));
  // Inputs and literals past the string limit are refused up front.
  const std::vector<ChatMessage> huge{{"user", std::string((size_t{32} << 20) + 1, 'x')}};
  EXPECT_THAT(error_of([&] { ChatTemplate("{{ messages|length }}").render(huge, false); }),
              HasSubstr("chat template input: string of"));
  EXPECT_THAT(error_of([] { ChatTemplate t("{{ '" + std::string((size_t{32} << 20) + 1, 'x') + "' }}"); }),
              HasSubstr("exceeds the limit"));
}

TEST(ChatTemplateLimits, DeeplyNestedValuesStop) {
  const std::string build = "{% set ns = namespace(x=[]) %}{% for i in range(5000) %}{% set ns.x = [ns.x] %}{% endfor %}";
  for (const char* use : {"{{ ns.x }}", "{{ ns.x|tojson }}", "{{ ns.x == ns.x }}", "{{ ns.x < ns.x }}"}) {
    SCOPED_TRACE(use);
    EXPECT_THAT(error_of([&] { render(build + use); }), HasSubstr("deep"));
  }
}

}  // namespace
}  // namespace kvinfer
