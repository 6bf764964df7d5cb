// Grammars: the text format (every construct, every error with its line and column), the byte
// automaton (recursion, UTF-8, limits), the token tables against a brute-force check of every
// token of real vocabularies (byte-level BPE and SentencePiece), and the JSON-schema compiler's
// exact languages (integer ranges, dates, patterns, key sets) and refusals.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "grammar/automaton.h"
#include "grammar/gbnf.h"
#include "grammar/grammar_access.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/token_matcher.h"
#include "kvinfer/error.h"
#include "kvinfer/grammar.h"
#include "kvinfer/sampler.h"
#include "kvinfer/tokenizer.h"
#include "test_files.h"

namespace kvinfer {
namespace {

using ::testing::HasSubstr;
using test::error_of;

// A compiled grammar and a byte-level matcher over it.
struct Bytes {
  explicit Bytes(const std::string& text) : pda(grammar::compile(grammar::parse_gbnf(text))) {}
  // Whether `s` is a whole output (complete) / a prefix of one.
  bool whole(const std::string& s) {
    grammar::Matcher m(pda);
    return m.advance(s) && m.complete();
  }
  bool prefix(const std::string& s) {
    grammar::Matcher m(pda);
    return m.advance(s);
  }
  grammar::Pda pda;
};

std::string gbnf_error(const std::string& text) {
  try {
    Bytes b(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(GrammarFormat, EveryConstruct) {
  Bytes g(R"(
    # comments and blank lines anywhere
    root ::= greeting ( ", " name )? "!"{1,3} tail
    greeting ::= "hello" | "hi"   # alternatives
    name ::= [A-Z] [a-z]* | "\u00e9t\u00E9" | "\x41\t"
    tail ::= ( [^a-z\n] . )*
  )");
  for (const char* ok : {"hello!", "hi, Bob!!", "hello, \xc3\xa9t\xc3\xa9!!!", "hi, A\t!", "hi!A\xe2\x82\xac"})
    EXPECT_TRUE(g.whole(ok)) << ok;
  for (const char* bad : {"hello", "hello?", "hi, bob!", "hi!a1", "hey!", "hi!\nx"}) EXPECT_FALSE(g.whole(bad)) << bad;
  EXPECT_TRUE(g.prefix("hi, B"));
  EXPECT_TRUE(g.prefix("hi!A\xe2\x82"));  // the first two bytes of €: a prefix
  EXPECT_FALSE(g.prefix("hi!A\xff"));     // not UTF-8
}

TEST(GrammarFormat, RepetitionCounts) {
  Bytes g(R"(root ::= "a"{2} "b"{1,} "c"{0,2} "d"{2,3})");
  EXPECT_TRUE(g.whole("aabdd"));
  EXPECT_TRUE(g.whole("aabbbccddd"));
  EXPECT_FALSE(g.whole("abdd"));
  EXPECT_FALSE(g.whole("aadd"));
  EXPECT_FALSE(g.whole("aabcccdd"));
  EXPECT_FALSE(g.whole("aabdddd"));
}

TEST(GrammarFormat, RecursionAndNullableRules) {
  Bytes g(R"(
    root ::= list
    list ::= "[" ( item ( "," item )* )? "]"
    item ::= list | [0-9]+ | empty "x"
    empty ::= ""
  )");
  for (const char* ok : {"[]", "[1]", "[[],[[x]],12]", "[[[[[[[[[[7]]]]]]]]]]"}) EXPECT_TRUE(g.whole(ok)) << ok;
  for (const char* bad : {"[", "[]]", "[1,]", "[[]", "[,]"}) EXPECT_FALSE(g.whole(bad)) << bad;
  EXPECT_TRUE(g.prefix("[[[1,[x"));
}

TEST(GrammarFormat, ErrorsNameTheLineAndColumn) {
  EXPECT_THAT(gbnf_error("root ::= \"a\"\nx ::= [b"), HasSubstr("line 2, column 7: unterminated character class"));
  EXPECT_THAT(gbnf_error("root ::= \"a"), HasSubstr("line 1, column 10: unterminated string"));
  EXPECT_THAT(gbnf_error("root ::= ( \"a\""), HasSubstr("unmatched '('"));
  EXPECT_THAT(gbnf_error("root ::= \"a\" )"), HasSubstr("unmatched ')'"));
  EXPECT_THAT(gbnf_error("root ::= other"), HasSubstr("rule 'other' is used but never defined"));
  EXPECT_THAT(gbnf_error("root ::= \"a\"\nroot ::= \"b\""), HasSubstr("rule 'root' is defined twice (first on line 1)"));
  EXPECT_THAT(gbnf_error("start ::= \"a\""), HasSubstr("no rule named 'root'"));
  EXPECT_THAT(gbnf_error("root ::= \"\\q\""), HasSubstr("unknown escape '\\q'"));
  EXPECT_THAT(gbnf_error("root ::= \"\\uD800\""), HasSubstr("not a Unicode scalar value"));
  EXPECT_THAT(gbnf_error("root ::= [z-a]"), HasSubstr("reversed"));
  EXPECT_THAT(gbnf_error("root ::= \"a\"{3,2}"), HasSubstr("the maximum is below the minimum"));
  EXPECT_THAT(gbnf_error("root ::= \"a\"{10001}"), HasSubstr("above the limit of 10000"));
  EXPECT_THAT(gbnf_error("root ::= \"a\"*+"), HasSubstr("two repetition operators in a row"));
  EXPECT_THAT(gbnf_error("root ::= ::="), HasSubstr("line 1, column 10: unexpected ':'"));
  EXPECT_THAT(gbnf_error("root ::= [\\uD800-\\uDFFF]"), HasSubstr("not a Unicode scalar value"));
  EXPECT_THAT(gbnf_error("root ::= [^\\x00-\\U0010FFFF]"), HasSubstr("matches no character"));
  EXPECT_THAT(gbnf_error(std::string("root ::= \"\xff\"")), HasSubstr("not valid UTF-8"));
}

TEST(GrammarFormat, RefusesLeftRecursionAndEmptyLanguages) {
  EXPECT_THAT(gbnf_error("root ::= root \"a\" | \"b\""), HasSubstr("rule 'root' is left-recursive"));
  EXPECT_THAT(gbnf_error("root ::= x\nx ::= opt y \"a\" | \"b\"\ny ::= x\nopt ::= \"o\"?"), HasSubstr("left-recursive"));
  EXPECT_THAT(gbnf_error("root ::= \"a\" root"), HasSubstr("matches nothing"));
  // A rule that can never end only takes its alternative away.
  Bytes g("root ::= \"a\" | never\nnever ::= \"b\" never");
  EXPECT_TRUE(g.whole("a"));
  EXPECT_FALSE(g.prefix("b"));
}

TEST(GrammarFormat, HostileSizesAreBounded) {
  // Deep parentheses, an automaton too large to build, an ambiguous grammar whose parses grow
  // without end: each an error, quickly.
  EXPECT_THAT(gbnf_error("root ::= " + std::string(300, '(') + "\"a\"" + std::string(300, ')')),
              HasSubstr("nested deeper than 200"));
  EXPECT_THAT(gbnf_error("root ::= ( ( [a-z]{1000} ){1000} ){10}"), HasSubstr("too large"));
  EXPECT_THAT(gbnf_error("root ::= " + std::string(9u << 20, ' ')), HasSubstr("more than the limit"));
  const auto t0 = std::chrono::steady_clock::now();
  // (a|b)*a(a|b){12}: a deterministic automaton of 2^13 states is built and stays within limits.
  Bytes blowup("root ::= [ab]* \"a\" [ab]{12}");
  EXPECT_TRUE(blowup.whole("ba" + std::string(12, 'b')));
  EXPECT_THAT(gbnf_error("root ::= [ab]* \"a\" [ab]{16}"), HasSubstr("more than 40000 states"));
  Bytes ambiguous("root ::= s\ns ::= \"a\" s s | \"\"");
  grammar::Matcher m(ambiguous.pda);
  EXPECT_THAT(error_of([&] { m.advance(std::string(5000, 'a')); }), HasSubstr("more than 4096 parses are alive"));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(30));
}

// ---- token tables: the precomputed masks agree with reading every token's bytes ----

const Tokenizer& tokenizer(const std::string& which) {
  const auto dir = std::filesystem::path(KVINFER_TOKENIZER_DATA);
  static const Tokenizer qwen = Tokenizer::from_hf(dir / "hf" / "qwen2_5");
  static const Tokenizer spm = Tokenizer::from_gguf(dir / "gguf-vocab" / "ggml-vocab-llama-spm.gguf");
  return which == "qwen2_5" ? qwen : spm;
}

std::shared_ptr<const GrammarVocabulary> vocabulary(const std::string& which) {
  static std::map<std::string, std::shared_ptr<const GrammarVocabulary>> cache;
  auto& v = cache[which];
  if (!v) v = std::make_shared<const GrammarVocabulary>(tokenizer(which));
  return v;
}

std::vector<int32_t> encode(const std::string& which, const std::string& text) {
  return tokenizer(which).encode(text, {.add_special = false, .parse_special = false});
}

// SentencePiece encodes text with a leading space ("▁"): its grammars allow one first.
std::string lead(const std::string& which, std::string gbnf) {
  if (which == "qwen2_5") return gbnf;
  gbnf.replace(gbnf.find("root ::= "), 9, "root0 ::= ");
  return "root ::= \" \"? root0\n" + gbnf;
}

// At every token of `ids` (which the grammar must allow, in order), the mask equals the set of
// tokens whose bytes the matcher reads; returns how many masks were compared.
int check_masks(const std::shared_ptr<const Grammar>& g, const std::vector<int32_t>& ids, std::mt19937_64& rng) {
  grammar::TokenMatcher m(g);
  std::vector<uint64_t> mask((static_cast<size_t>(g->vocab_size()) + 63) / 64);
  int compared = 0;
  for (size_t i = 0; i <= ids.size(); ++i) {
    m.fill_mask(mask);
    // Every token, or a random tenth of a large vocabulary plus every token the mask allows.
    const bool all = g->vocab_size() < 60000 || i % 4 == 0;
    for (int32_t t = 0; t < g->vocab_size(); ++t) {
      const bool in_mask = (mask[static_cast<size_t>(t) >> 6] >> (t & 63)) & 1;
      if (!all && !in_mask && rng() % 10 != 0) continue;
      EXPECT_EQ(in_mask, m.allows(t)) << "token " << t << " after " << i << " tokens";
      if (in_mask != m.allows(t)) return compared;
    }
    ++compared;
    if (i < ids.size()) {
      const bool allowed = (mask[static_cast<size_t>(ids[i]) >> 6] >> (ids[i] & 63)) & 1;
      EXPECT_TRUE(allowed) << "token " << ids[i] << " at " << i;
      if (!allowed || !m.accept(ids[i])) return compared;
    }
  }
  EXPECT_TRUE(m.complete());
  return compared;
}

class TokenTables : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenTables, MasksEqualEveryTokenReadByteByByte) {
  const std::string which = GetParam();
  std::mt19937_64 rng(7);
  const auto vocab = vocabulary(which);
  // Any JSON, with nesting deep enough for the stack below to decide tokens such as "}]".
  const std::string json = R"({"name": "Zoë \"Q\" \u00e9 — 東京", "n": [1, -2.5e+3, true, null, {"a": [[], {}]}],
 "deep": [[[{"x": "y"}]]], "z": 0})";
  int n = check_masks(Grammar::from_gbnf(lead(which, grammar::any_json_gbnf({})), vocab), encode(which, json), rng);
  // A schema: enum, pattern, integer range, optional keys, recursion through $ref.
  const std::string schema = R"({"type": "object", "properties": {
      "kind": {"enum": ["leaf", "node"]}, "code": {"type": "string", "pattern": "^[A-Z]{2}[0-9]+$"},
      "size": {"type": "integer", "minimum": -5, "maximum": 1200},
      "kids": {"type": "array", "items": {"$ref": "#"}}},
    "required": ["kind"], "additionalProperties": false})";
  n += check_masks(Grammar::from_gbnf(lead(which, json_schema_to_gbnf(schema)), vocab),
                   encode(which, R"({"kind": "node", "code": "AB12", "size": 1199, "kids": [{"kind": "leaf", "kids": []}]})"), rng);
  // Multi-byte characters split across tokens, and byte tokens.
  n += check_masks(Grammar::from_gbnf(lead(which, "root ::= ( [α-ω] | \"東京\" | [0-9] )+ \"!\""), vocab),
                   encode(which, "αβγ東京12ω!"), rng);
  EXPECT_GT(n, 100);
}

INSTANTIATE_TEST_SUITE_P(Vocabularies, TokenTables, ::testing::Values("qwen2_5", "llama_spm"));

TEST(TokenTables, EndIdsOnlyWhenComplete) {
  const auto vocab = vocabulary("qwen2_5");
  const auto g = Grammar::from_gbnf("root ::= \"12\" [0-9]*", vocab);
  grammar::TokenMatcher m(g);
  ASSERT_FALSE(vocab->end_ids().empty());
  const int32_t eos = vocab->end_ids()[0];
  EXPECT_FALSE(m.allows(eos));
  for (int32_t id : encode("qwen2_5", "12")) ASSERT_TRUE(m.accept(id));
  EXPECT_TRUE(m.complete());
  EXPECT_FALSE(m.finished());  // more digits may follow
  EXPECT_TRUE(m.allows(eos));
  EXPECT_TRUE(m.accept(eos));
  EXPECT_TRUE(m.finished());
  EXPECT_FALSE(m.allows(encode("qwen2_5", "3")[0]));  // nothing after the end
  // Special tokens are never text, even where their bytes would fit.
  const auto im = tokenizer("qwen2_5").token_id("<|im_start|>");
  ASSERT_TRUE(im.has_value());
  grammar::TokenMatcher any(Grammar::from_gbnf("root ::= .*", vocab));
  EXPECT_FALSE(any.allows(*im));
}

TEST(TokenTables, CompileStatsAndVocabularyMismatch) {
  const auto g = Grammar::any_json(vocabulary("qwen2_5"));
  EXPECT_GT(g->stats().states, 10);
  EXPECT_GT(g->stats().table_bytes, 0);
  EXPECT_GT(g->stats().compile_seconds, 0.0);
  EXPECT_EQ(g->vocab_size(), 151665);
  SamplingParams p;
  p.grammar = g;
  EXPECT_THAT(error_of([&] { p.validate(151936 - 1); }), HasSubstr("grammar: compiled for a vocabulary of 151665 tokens"));
}

// ---- the JSON-schema compiler's languages ----

Bytes schema(const std::string& s, JsonSchemaOptions o = {.whitespace = false}) { return Bytes(json_schema_to_gbnf(s, o)); }

std::string schema_error(const std::string& s) {
  try {
    json_schema_to_gbnf(s);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(JsonSchema, IntegerRangesAreExact) {
  for (auto [lo, hi] : std::vector<std::pair<int, int>>{{-37, 123}, {0, 9}, {1, 100}, {-100, -10}, {7, 7}, {95, 1005}}) {
    Bytes g = schema(fmt::format(R"({{"type": "integer", "minimum": {}, "maximum": {}}})", lo, hi));
    for (int v = -1200; v <= 1200; ++v) ASSERT_EQ(g.whole(std::to_string(v)), v >= lo && v <= hi) << v << " in " << lo << ".." << hi;
    EXPECT_FALSE(g.whole("-0"));
    EXPECT_FALSE(g.whole("007"));
  }
  Bytes open = schema(R"({"type": "integer", "exclusiveMinimum": 9.5, "exclusiveMaximum": 20})");
  for (int v = 0; v <= 30; ++v) EXPECT_EQ(open.whole(std::to_string(v)), v >= 10 && v < 20) << v;
  Bytes half = schema(R"({"type": "integer", "minimum": 42})");
  EXPECT_TRUE(half.whole("42"));
  EXPECT_TRUE(half.whole("100000000000000000000"));
  EXPECT_FALSE(half.whole("41"));
  EXPECT_FALSE(half.whole("-50"));
}

TEST(JsonSchema, DatesFollowTheCalendar) {
  Bytes g = schema(R"({"type": "string", "format": "date"})");
  for (int year : {1900, 2000, 2023, 2024}) {
    for (int month = 1; month <= 12; ++month)
      for (int day = 1; day <= 31; ++day) {
        std::tm t{};
        t.tm_year = year - 1900;
        t.tm_mon = month - 1;
        t.tm_mday = day;
        t.tm_hour = 12;
        std::tm copy = t;
        std::mktime(&copy);
        const bool valid = copy.tm_mday == day && copy.tm_mon == month - 1;
        ASSERT_EQ(g.whole(fmt::format("\"{:04}-{:02}-{:02}\"", year, month, day)), valid) << year << "-" << month << "-" << day;
      }
  }
  EXPECT_FALSE(g.whole("\"2024-1-01\""));
  Bytes uuid = schema(R"({"type": "string", "format": "uuid"})");
  EXPECT_TRUE(uuid.whole("\"123e4567-e89b-12d3-a456-426614174000\""));
  EXPECT_TRUE(uuid.whole("\"123E4567-E89B-12D3-A456-426614174000\""));
  EXPECT_FALSE(uuid.whole("\"123e4567e89b12d3a456426614174000\""));
  EXPECT_FALSE(uuid.whole("\"123e4567-e89b-12d3-a456-42661417400g\""));
}

TEST(JsonSchema, PatternsSearchUnlessAnchored) {
  Bytes anchored = schema(R"({"type": "string", "pattern": "^[A-Z]{2}-\\d{3}$"})");
  EXPECT_TRUE(anchored.whole("\"AB-123\""));
  EXPECT_FALSE(anchored.whole("\"xAB-123\""));
  EXPECT_FALSE(anchored.whole("\"AB-1234\""));
  Bytes search = schema(R"({"type": "string", "pattern": "a+b"})");
  EXPECT_TRUE(search.whole("\"xxaab yy\""));
  EXPECT_FALSE(search.whole("\"ba\""));
  // Characters JSON escapes are matched in their escaped spelling.
  Bytes quotes = schema(R"({"type": "string", "pattern": "^\"[^\"]*\"\\n$"})");
  EXPECT_TRUE(quotes.whole(R"("\"hi\"\n")"));
  EXPECT_FALSE(quotes.whole(R"("\"h\"i\"\n")"));
  Bytes alt = schema(R"({"type": "string", "pattern": "^ab|cd$"})");
  EXPECT_TRUE(alt.whole("\"abzz\""));
  EXPECT_TRUE(alt.whole("\"zzcd\""));
  EXPECT_FALSE(alt.whole("\"zabz\""));
  EXPECT_THAT(schema_error(R"j({"pattern": "(?=a)"})j"), HasSubstr("lookaround"));
  EXPECT_THAT(schema_error(R"j({"pattern": "(a)\\1"})j"), HasSubstr("backreferences"));
  EXPECT_THAT(schema_error(R"({"pattern": "\\bword"})"), HasSubstr("word boundary"));
  EXPECT_THAT(schema_error(R"({"pattern": "\\p{L}"})"), HasSubstr("Unicode property escapes"));
  EXPECT_THAT(schema_error(R"({"pattern": "a$b"})"), HasSubstr("'$' other than at the end"));
}

TEST(JsonSchema, ObjectsRequiredOptionalAndOtherKeys) {
  Bytes g = schema(R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"},
                     "c": {"type": "boolean"}}, "required": ["b"], "additionalProperties": false})");
  for (const char* ok : {R"({"b":"x"})", R"({"a":1,"b":"x"})", R"({"b":"x","c":true})", R"({"a":1,"b":"","c":false})"})
    EXPECT_TRUE(g.whole(ok)) << ok;
  for (const char* bad : {R"({})", R"({"a":1})", R"({"b":1})", R"({"b":"x","d":1})", R"({"b":"x",})", R"({"b":"x","b":"y"})"})
    EXPECT_FALSE(g.whole(bad)) << bad;
  // Extra keys with additionalProperties: any key but the declared ones.
  Bytes open = schema(R"({"properties": {"ab": {"type": "integer"}, "a": {"type": "null"}}, "additionalProperties": {"type": "boolean"}})");
  for (const char* ok : {R"({"ab":1,"x":true})", R"({"abc":false})", R"({"b":true,"":false})", R"({"a":null})", "\"str\"", "3"})
    EXPECT_TRUE(open.whole(ok)) << ok;
  for (const char* bad : {R"({"ab":true})", R"({"x":1})", R"({"a":true})"}) EXPECT_FALSE(open.whole(bad)) << bad;
  Bytes ws = schema(R"({"type": "object", "properties": {"k": {"type": "array", "items": {"type": "integer"}}}})", {});
  EXPECT_TRUE(ws.whole("{\n  \"k\": [1, 2,\n    3]\n}"));
  EXPECT_FALSE(ws.whole(" {}"));  // nothing before or after the value
  EXPECT_FALSE(ws.whole("{} "));
}

TEST(JsonSchema, ArraysTuplesAndCounts) {
  Bytes g = schema(R"({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "items": {"type": "boolean"},
                     "minItems": 1, "maxItems": 3})");
  for (const char* ok : {"[1]", R"([1,"a"])", R"([1,"a",true])"}) EXPECT_TRUE(g.whole(ok)) << ok;
  for (const char* bad : {"[]", R"(["a"])", R"([1,"a",true,false])", "[1,2]"}) EXPECT_FALSE(g.whole(bad)) << bad;
  Bytes counted = schema(R"({"type": "array", "items": {"enum": [1, "x"]}, "minItems": 2, "maxItems": 2})");
  EXPECT_TRUE(counted.whole(R"([1,"x"])"));
  EXPECT_FALSE(counted.whole("[1]"));
  EXPECT_FALSE(counted.whole("[1,1,1]"));
}

TEST(JsonSchema, CombinationsAndReferences) {
  Bytes any = schema(R"({"anyOf": [{"type": "integer", "minimum": 5}, {"type": "string", "maxLength": 2}]})");
  EXPECT_TRUE(any.whole("7"));
  EXPECT_TRUE(any.whole("\"ab\""));
  EXPECT_FALSE(any.whole("3"));
  EXPECT_FALSE(any.whole("\"abc\""));
  Bytes one = schema(R"({"oneOf": [{"type": "object", "properties": {"t": {"const": "a"}, "x": {"type": "integer"}}, "required": ["t"]},
                                    {"type": "object", "properties": {"t": {"const": "b"}}, "required": ["t"]}]})");
  EXPECT_TRUE(one.whole(R"({"t":"a","x":1})"));
  EXPECT_TRUE(one.whole(R"({"t":"b"})"));
  EXPECT_FALSE(one.whole(R"({"t":"c"})"));
  Bytes rec = schema(R"({"$defs": {"n": {"type": "object", "properties": {"k": {"type": "array", "items": {"$ref": "#/$defs/n"}}},
                        "additionalProperties": false}}, "$ref": "#/$defs/n"})");
  EXPECT_TRUE(rec.whole(R"({"k":[{},{"k":[{"k":[]}]}]})"));
  EXPECT_FALSE(rec.whole(R"({"k":[1]})"));
  Bytes c = schema(R"({"const": {"a": [1.0, "x\n"]}})");
  EXPECT_TRUE(c.whole(R"({"a":[1,"x\n"]})"));
  EXPECT_FALSE(c.whole(R"({"a":[1.0,"x\n"]})"));  // the canonical spelling only
}

TEST(JsonSchema, RefusesWhatItDoesNotCompileByName) {
  EXPECT_THAT(schema_error(R"({"type": "integer", "multipleOf": 3})"), HasSubstr("(root): 'multipleOf' is not supported"));
  EXPECT_THAT(schema_error(R"({"properties": {"a": {"patternProperties": {}}}})"),
              HasSubstr("/properties/a: 'patternProperties' is not supported"));
  EXPECT_THAT(schema_error(R"({"type": "string", "format": "email"})"), HasSubstr("format \"email\" is not supported"));
  EXPECT_THAT(schema_error(R"({"$ref": "http://example.com/s.json"})"), HasSubstr("only references within the schema"));
  EXPECT_THAT(schema_error(R"({"oneOf": [{"type": "integer"}, {"minimum": 2}]})"), HasSubstr("'oneOf' whose branches may match"));
  EXPECT_THAT(schema_error(R"({"allOf": [{"type": "integer"}, {"minimum": 2}]})"), HasSubstr("'allOf' with more than one"));
  EXPECT_THAT(schema_error(R"({"type": "number", "minimum": 0})"), HasSubstr("only on type integer"));
  EXPECT_THAT(schema_error(R"({"nullable": true})"), HasSubstr("'nullable' is not a keyword kvinfer knows"));
  EXPECT_THAT(schema_error(R"({"type": "array", "uniqueItems": true})"), HasSubstr("'uniqueItems': true"));
  EXPECT_THAT(schema_error(R"({"$ref": "#/$defs/a", "type": "object"})"), HasSubstr("'$ref' next to 'type'"));
  EXPECT_THAT(schema_error(R"({"enum": ["a"], "minLength": 1})"), HasSubstr("'enum' together with 'minLength'"));
  EXPECT_THAT(schema_error("false"), HasSubstr("it matches no value"));
  EXPECT_THAT(schema_error(R"({"type": "strin"})"), HasSubstr("unknown type \"strin\""));
  EXPECT_THAT(schema_error(R"({"$ref": "#/nowhere"})"), HasSubstr("points to nothing"));
  EXPECT_THAT(schema_error("{"), HasSubstr("not valid JSON"));
  EXPECT_THAT(schema_error(std::string(60, '[') + std::string(60, ']')), HasSubstr("must be an object or a boolean"));
  std::string deep = "true";
  for (int i = 0; i < 100; ++i) deep = R"({"items": )" + deep + "}";
  EXPECT_THAT(schema_error(deep), HasSubstr("nesting deeper than 64"));
}

TEST(JsonSchema, CanonicalValues) {
  using nlohmann::ordered_json;
  EXPECT_EQ(grammar::canonical_json(ordered_json::parse(R"({"b": [1.0, -0.0, 2.5, 1e2], "a": "é\n\u0001"})")),
            "{\"b\":[1,0,2.5,100],\"a\":\"é\\n\\u0001\"}");
}

}  // namespace
}  // namespace kvinfer
