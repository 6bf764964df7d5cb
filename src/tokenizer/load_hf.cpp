// tokenizer.json (HF `tokenizers`) with tokenizer_config.json (special tokens, add_bos_token,
// chat_template), chat_template.jinja (transformers 5 writes the template there; it wins over
// the config) and generation_config.json (eos_token_id) from the same directory.
#include <algorithm>
#include <cstdint>

#include <fmt/format.h>
#include <fmt/std.h>
#include <nlohmann/json.hpp>

#include "core/input_file.h"
#include "kvinfer/error.h"
#include "tokenizer/hf_components.h"
#include "tokenizer/load.h"
#include "tokenizer/tokenizer_data.h"

namespace kvinfer {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

json read_json(const fs::path& path, const InputLimit& limit) {
  const std::string text = read_input_file(path, limit);
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    throw Error(ErrorKind::BadFile, fmt::format("{}: malformed JSON: {}", path, e.what()));
  }
}

// A token in tokenizer_config.json: "<s>", {"content": "<s>", ...} (a serialized AddedToken) or null.
std::string config_token(const json& config, const char* key, std::string_view where) {
  if (!config.contains(key) || config[key].is_null()) return {};
  const json& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object()) return json_string(v, "content", where, key);
  throw Error(ErrorKind::BadFile, fmt::format("{}: '{}' must be a string or an object with \"content\"", where, key));
}

BpeModel parse_model(const json& tokenizer, std::string_view where) {
  if (!tokenizer.contains("model") || !tokenizer["model"].is_object())
    throw Error(ErrorKind::BadFile, fmt::format("{}: 'model' is missing or not an object", where));
  const json& m = tokenizer["model"];
  const std::string path = "model";
  // Files from before the "type" tag are BPE when they have merges.
  const std::string type = json_string(m, "type", where, path, m.contains("merges") ? "BPE" : "");
  if (type != "BPE")
    throw Error(ErrorKind::Unsupported, fmt::format("{}: model: unsupported model type '{}' (only BPE is implemented)", where, type));
  if (m.contains("dropout") && !m["dropout"].is_null() && !(m["dropout"].is_number() && m["dropout"].get<double>() == 0))
    throw Error(ErrorKind::Unsupported, fmt::format("{}: model: BPE dropout {} is not supported (it makes encoding random)", where,
                            m["dropout"].dump()));
  if (!m.contains("vocab") || !m["vocab"].is_object()) throw Error(ErrorKind::BadFile, fmt::format("{}: model: 'vocab' must be an object", where));

  VocabMap vocab;
  vocab.reserve(m["vocab"].size());
  for (const auto& [token, id] : m["vocab"].items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
      throw Error(ErrorKind::BadFile, fmt::format("{}: model: vocab entry '{}' has id {}, not a token id", where, token, id.dump()));
    vocab.emplace(token, id.get<int32_t>());
  }
  BpeOptions options;
  options.byte_fallback = json_bool(m, "byte_fallback", where, path, false);
  options.fuse_unk = json_bool(m, "fuse_unk", where, path, false);
  options.ignore_merges = json_bool(m, "ignore_merges", where, path, false);
  options.continuing_subword_prefix = json_string(m, "continuing_subword_prefix", where, path, "");
  options.end_of_word_suffix = json_string(m, "end_of_word_suffix", where, path, "");
  const std::string unk = json_string(m, "unk_token", where, path, "");
  if (!unk.empty()) options.unk_id = lookup(vocab, unk);
  BpeModel model(std::move(vocab), std::move(options));

  if (!m.contains("merges") || !m["merges"].is_array()) throw Error(ErrorKind::BadFile, fmt::format("{}: model: 'merges' must be an array", where));
  const json& merges = m["merges"];
  const size_t prefix_len = model.options().continuing_subword_prefix.size();
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const json& item = merges[rank];
    std::string a, b;
    if (item.is_string()) {  // "a b"
      const std::string s = item.get<std::string>();
      const size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
        throw Error(ErrorKind::BadFile, fmt::format("{}: model: merge {} '{}' is not two tokens separated by one space", where, rank, s));
      a = s.substr(0, space);
      b = s.substr(space + 1);
    } else if (item.is_array() && item.size() == 2 && item[0].is_string() && item[1].is_string()) {  // ["a", "b"]
      a = item[0].get<std::string>();
      b = item[1].get<std::string>();
    } else {
      throw Error(ErrorKind::BadFile, fmt::format("{}: model: merge {} must be \"a b\" or [\"a\", \"b\"]", where, rank));
    }
    const auto id_of = [&](const std::string& token) {
      auto id = lookup(model.vocab(), token);
      if (!id) throw Error(ErrorKind::BadFile, fmt::format("{}: model: merge {} uses '{}', which is not in the vocabulary", where, rank, token));
      return *id;
    };
    // HF drops the continuing-subword prefix of the right part when naming the merged token.
    const std::string merged = a + b.substr(std::min(prefix_len, b.size()));
    const int32_t left = id_of(a), right = id_of(b), result = id_of(merged);
    model.add_merge(left, right, result, static_cast<uint32_t>(rank), /*replace=*/true);
  }
  return model;
}

std::vector<AddedToken> parse_added_tokens(const json& tokenizer, std::string_view where) {
  std::vector<AddedToken> added;
  if (!tokenizer.contains("added_tokens") || tokenizer["added_tokens"].is_null()) return added;
  const json& list = tokenizer["added_tokens"];
  if (!list.is_array()) throw Error(ErrorKind::BadFile, fmt::format("{}: 'added_tokens' must be an array", where));
  for (size_t k = 0; k < list.size(); ++k) {
    const json& t = list[k];
    const std::string path = fmt::format("added_tokens[{}]", k);
    if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer())
      throw Error(ErrorKind::BadFile, fmt::format("{}: {}: needs an integer 'id'", where, path));
    AddedToken a;
    a.id = static_cast<int32_t>(std::clamp<int64_t>(t["id"].get<int64_t>(), -1, INT32_MAX));
    a.content = json_string(t, "content", where, path);
    a.special = json_bool(t, "special", where, path, false);
    a.lstrip = json_bool(t, "lstrip", where, path, false);
    a.rstrip = json_bool(t, "rstrip", where, path, false);
    a.single_word = json_bool(t, "single_word", where, path, false);
    a.normalized = json_bool(t, "normalized", where, path, !a.special);
    if (a.content.empty()) continue;  // HF ignores empty added tokens
    added.push_back(std::move(a));
  }
  return added;
}

// tokenizer_config.json's "chat_template": a string, or the "default" of a list; "" when none.
std::string config_chat_template(const json& config, const std::string& where) {
  std::string chat_template;
  if (config.contains("chat_template")) {
    const json& t = config["chat_template"];
    if (t.is_string()) {
      chat_template = t.get<std::string>();
    } else if (t.is_array()) {  // [{"name": "default", "template": "..."}, {"name": "tool_use", ...}]
      for (const json& named : t)
        if (named.is_object() && named.value("name", "") == "default")
          chat_template = json_string(named, "template", where, "chat_template");
    } else if (!t.is_null()) {
      throw Error(ErrorKind::BadFile, fmt::format("{}: 'chat_template' must be a string or a list of {{name, template}}", where));
    }
  }
  return chat_template;
}

// chat_template.jinja, which wins over tokenizer_config.json's (transformers 5 writes it).
std::string read_jinja_template(const fs::path& dir) {
  return read_input_file(dir / "chat_template.jinja", kChatTemplateLimit);
}

// tokenizer_config.json: special tokens, add_bos_token / add_eos_token, chat_template.
void apply_config(TokenizerData& data, const fs::path& file, Template& templ) {
  const json config = read_json(file, kJsonSettingsLimit);
  const std::string where = file.string();
  if (!config.is_object()) throw Error(ErrorKind::BadFile, fmt::format("{}: expected a JSON object", where));
  data.bos_text = config_token(config, "bos_token", where);
  data.eos_text = config_token(config, "eos_token", where);
  if (auto unk = config_token(config, "unk_token", where); !unk.empty()) data.unk_id = data.token_id(unk);
  if (auto pad = config_token(config, "pad_token", where); !pad.empty()) data.pad_id = data.token_id(pad);
  if (!data.bos_text.empty()) data.bos_id = data.token_id(data.bos_text);
  if (!data.eos_text.empty()) data.eos_id = data.token_id(data.eos_text);
  // transformers 5 rebuilds the post-processor as "[bos] $A [eos]" when either flag is given.
  if (config.contains("add_bos_token") || config.contains("add_eos_token")) {
    templ.prefix.clear();
    templ.suffix.clear();
    if (json_bool(config, "add_bos_token", where, "add_bos_token", false) && data.bos_id) templ.prefix = {*data.bos_id};
    if (json_bool(config, "add_eos_token", where, "add_eos_token", false) && data.eos_id) templ.suffix = {*data.eos_id};
  }
  data.chat_template = config_chat_template(config, where);
}

// generation_config.json: eos_token_id, an id or a list of ids.
std::vector<int32_t> generation_eos_ids(const fs::path& file) {
  const json config = read_json(file, kJsonSettingsLimit);
  std::vector<int32_t> ids;
  if (!config.is_object() || !config.contains("eos_token_id")) return ids;
  const json& v = config["eos_token_id"];
  for (const json& id : v.is_array() ? v : json::array({v}))
    if (id.is_number_integer()) ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
  return ids;
}

}  // namespace

std::unique_ptr<TokenizerData> load_hf_tokenizer(const fs::path& dir_or_file) {
  std::error_code ec;
  const fs::path file = fs::is_directory(dir_or_file, ec) ? dir_or_file / "tokenizer.json" : dir_or_file;
  const fs::path dir = file.parent_path();
  const std::string where = file.string();
  const json tokenizer = read_json(file, kTokenizerJsonLimit);
  if (!tokenizer.is_object()) throw Error(ErrorKind::BadFile, fmt::format("{}: expected a JSON object", where));

  auto data = std::make_unique<TokenizerData>(parse_model(tokenizer, where));
  data->source = where;
  const auto component = [&](const char* key) { return tokenizer.contains(key) ? tokenizer[key] : json(); };
  parse_normalizer(component("normalizer"), where, "normalizer", data->normalizer);
  parse_pre_tokenizer(component("pre_tokenizer"), where, "pre_tokenizer", data->pre_tokenizer);
  parse_decoder(component("decoder"), where, "decoder", data->decoder);
  Template templ;
  parse_post_processor(component("post_processor"), where, "post_processor", templ);
  finish_vocabulary(*data, parse_added_tokens(tokenizer, where));
  data->unk_id = std::get<BpeModel>(data->model).options().unk_id;

  std::vector<int32_t> given_eos;
  // The optional files: absent is fine, present but unreadable (a FIFO, too large) is an error.
  if (input_exists(dir / "tokenizer_config.json")) apply_config(*data, dir / "tokenizer_config.json", templ);
  if (input_exists(dir / "chat_template.jinja")) data->chat_template = read_jinja_template(dir);
  if (data->eos_id) given_eos.push_back(*data->eos_id);
  if (input_exists(dir / "generation_config.json")) {
    for (int32_t id : generation_eos_ids(dir / "generation_config.json")) given_eos.push_back(id);
  }
  for (const auto* ids : {&templ.prefix, &templ.suffix})
    for (int32_t id : *ids)
      if (id < 0 || id >= data->vocab_size())
        throw Error(ErrorKind::BadFile, fmt::format("{}: post_processor: token id {} is out of range (vocabulary size {})", where, id,
                                data->vocab_size()));
  // Without a config, the template's one leading token is the BOS.
  if (!data->bos_id && templ.prefix.size() == 1) data->bos_id = templ.prefix[0];
  if (data->bos_id && data->bos_text.empty()) data->bos_text = data->tokens[static_cast<size_t>(*data->bos_id)];
  data->prefix = std::move(templ.prefix);
  data->suffix = std::move(templ.suffix);
  data->eos_ids = end_of_generation_ids(*data, std::move(given_eos));
  return data;
}

bool hf_has_tokenizer(const fs::path& dir) { return fs::exists(dir / "tokenizer.json"); }

std::string hf_chat_template(const fs::path& dir) {
  if (input_exists(dir / "chat_template.jinja")) return read_jinja_template(dir);
  const fs::path config = dir / "tokenizer_config.json";
  if (!input_exists(config)) return {};
  const json j = read_json(config, kJsonSettingsLimit);
  if (!j.is_object()) throw Error(ErrorKind::BadFile, fmt::format("{}: expected a JSON object", config));
  return config_chat_template(j, config.string());
}

}  // namespace kvinfer
