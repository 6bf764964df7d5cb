#include "tokenizer/hf_components.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/file_error.h"
#include "kvinfer/error.h"

namespace kvinfer {

namespace {

using json = nlohmann::json;

[[noreturn]] void fail(std::string_view where, const std::string& path, const std::string& why) {
  throw Error(file_error_kind(why), fmt::format("{}: {}: {}", where, path, why));
}

std::string type_of(const json& j, std::string_view where, const std::string& path) {
  if (!j.is_object()) fail(where, path, "expected an object");
  return json_string(j, "type", where, path);
}

[[noreturn]] void unsupported(std::string_view where, const std::string& path, const std::string& kind,
                              const std::string& type) {
  fail(where, path, fmt::format("unsupported {} type '{}'", kind, type));
}

const json& array_field(const json& j, const char* key, std::string_view where, const std::string& path) {
  if (!j.contains(key) || !j[key].is_array()) fail(where, path, fmt::format("'{}' must be an array", key));
  return j[key];
}

// {"String": "..."} or {"Regex": "..."}.
Pattern parse_pattern(const json& j, std::string_view where, const std::string& path) {
  if (!j.contains("pattern") || !j["pattern"].is_object()) fail(where, path, "'pattern' must be an object");
  const json& p = j["pattern"];
  if (p.contains("String") && p["String"].is_string()) return Pattern::literal(p["String"].get<std::string>());
  if (p.contains("Regex") && p["Regex"].is_string())
    return Pattern::regex(p["Regex"].get<std::string>(), fmt::format("{}: {}", where, path));
  fail(where, path, "'pattern' must hold a \"String\" or a \"Regex\"");
}

size_t json_size(const json& j, const char* key, std::string_view where, const std::string& path, size_t fallback) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_number_unsigned()) fail(where, path, fmt::format("'{}' must be a non-negative integer", key));
  return j[key].get<size_t>();
}

PrependScheme prepend_scheme(const json& j, std::string_view where, const std::string& path) {
  if (j.contains("prepend_scheme")) {
    const std::string s = json_string(j, "prepend_scheme", where, path);
    if (s == "always") return PrependScheme::Always;
    if (s == "first") return PrependScheme::First;
    if (s == "never") return PrependScheme::Never;
    fail(where, path, fmt::format("unknown prepend_scheme '{}'", s));
  }
  // Files written before prepend_scheme existed say add_prefix_space.
  return json_bool(j, "add_prefix_space", where, path, true) ? PrependScheme::Always : PrependScheme::Never;
}

SplitBehavior split_behavior(const std::string& s, std::string_view where, const std::string& path) {
  if (s == "Isolated") return SplitBehavior::Isolated;
  if (s == "Removed") return SplitBehavior::Removed;
  if (s == "MergedWithPrevious") return SplitBehavior::MergedWithPrevious;
  if (s == "MergedWithNext") return SplitBehavior::MergedWithNext;
  if (s == "Contiguous") return SplitBehavior::Contiguous;
  fail(where, path, fmt::format("unknown split behavior '{}'", s));
}

}  // namespace

std::string json_string(const json& j, const char* key, std::string_view where, const std::string& path,
                        std::optional<std::string> fallback) {
  if ((!j.contains(key) || j[key].is_null()) && fallback) return *fallback;
  if (!j.contains(key) || !j[key].is_string()) fail(where, path, fmt::format("'{}' must be a string", key));
  return j[key].get<std::string>();
}

bool json_bool(const json& j, const char* key, std::string_view where, const std::string& path, bool fallback) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_boolean()) fail(where, path, fmt::format("'{}' must be true or false", key));
  return j[key].get<bool>();
}

void parse_normalizer(const json& j, std::string_view where, const std::string& path, Normalizer& out) {
  if (j.is_null()) return;
  using Kind = NormalizerStep::Kind;
  const std::string type = type_of(j, where, path);
  NormalizerStep step;
  if (type == "Sequence") {
    const json& list = array_field(j, "normalizers", where, path);
    for (size_t k = 0; k < list.size(); ++k)
      parse_normalizer(list[k], where, fmt::format("{}.normalizers[{}]", path, k), out);
    return;
  } else if (type == "NFC") {
    step.kind = Kind::Nfc;
  } else if (type == "NFD") {
    step.kind = Kind::Nfd;
  } else if (type == "NFKC") {
    step.kind = Kind::Nfkc;
  } else if (type == "NFKD") {
    step.kind = Kind::Nfkd;
  } else if (type == "Lowercase") {
    step.kind = Kind::Lowercase;
  } else if (type == "Strip") {
    step.kind = Kind::Strip;
    step.strip_left = json_bool(j, "strip_left", where, path, true);
    step.strip_right = json_bool(j, "strip_right", where, path, true);
  } else if (type == "Prepend") {
    step.kind = Kind::Prepend;
    step.text = json_string(j, "prepend", where, path);
  } else if (type == "Replace") {
    step.kind = Kind::Replace;
    step.pattern = parse_pattern(j, where, path);
    step.text = json_string(j, "content", where, path);
  } else {
    unsupported(where, path, "normalizer", type);
  }
  out.add(std::move(step));
}

void parse_pre_tokenizer(const json& j, std::string_view where, const std::string& path, PreTokenizer& out) {
  if (j.is_null()) return;
  using Kind = PreTokenizerStep::Kind;
  const std::string type = type_of(j, where, path);
  PreTokenizerStep step;
  if (type == "Sequence") {
    const json& list = array_field(j, "pretokenizers", where, path);
    for (size_t k = 0; k < list.size(); ++k)
      parse_pre_tokenizer(list[k], where, fmt::format("{}.pretokenizers[{}]", path, k), out);
    return;
  } else if (type == "ByteLevel") {
    step.kind = Kind::ByteLevel;
    step.add_prefix_space = json_bool(j, "add_prefix_space", where, path, true);
    if (json_bool(j, "use_regex", where, path, true))
      step.pattern = Pattern::regex(kGpt2Regex, fmt::format("{}: {}", where, path));
  } else if (type == "Split") {
    step.kind = Kind::Split;
    step.pattern = parse_pattern(j, where, path);
    step.behavior = split_behavior(json_string(j, "behavior", where, path), where, path);
    step.invert = json_bool(j, "invert", where, path, false);
  } else if (type == "Digits") {
    step.kind = Kind::Digits;
    step.individual_digits = json_bool(j, "individual_digits", where, path, false);
  } else if (type == "Metaspace") {
    step.kind = Kind::Metaspace;
    step.replacement = json_string(j, "replacement", where, path, "\xE2\x96\x81");
    step.prepend = prepend_scheme(j, where, path);
    step.split = json_bool(j, "split", where, path, true);
  } else {
    unsupported(where, path, "pre-tokenizer", type);
  }
  out.add(std::move(step));
}

void parse_decoder(const json& j, std::string_view where, const std::string& path, Decoder& out) {
  if (j.is_null()) {
    out.set_none();
    return;
  }
  using Kind = DecoderStep::Kind;
  const std::string type = type_of(j, where, path);
  DecoderStep step;
  if (type == "Sequence") {
    const json& list = array_field(j, "decoders", where, path);
    for (size_t k = 0; k < list.size(); ++k) parse_decoder(list[k], where, fmt::format("{}.decoders[{}]", path, k), out);
    return;
  } else if (type == "ByteLevel") {
    step.kind = Kind::ByteLevel;
  } else if (type == "Replace") {
    step.kind = Kind::Replace;
    step.pattern = parse_pattern(j, where, path);
    step.text = json_string(j, "content", where, path);
  } else if (type == "ByteFallback") {
    step.kind = Kind::ByteFallback;
  } else if (type == "Fuse") {
    step.kind = Kind::Fuse;
  } else if (type == "Strip") {
    step.kind = Kind::Strip;
    step.text = json_string(j, "content", where, path);
    step.start = json_size(j, "start", where, path, 0);
    step.stop = json_size(j, "stop", where, path, 0);
  } else if (type == "Metaspace") {
    step.kind = Kind::Metaspace;
    step.text = json_string(j, "replacement", where, path, "\xE2\x96\x81");
    step.prepend = prepend_scheme(j, where, path) != PrependScheme::Never;
  } else {
    unsupported(where, path, "decoder", type);
  }
  out.add(std::move(step));
}

void parse_post_processor(const json& j, std::string_view where, const std::string& path, Template& out) {
  if (j.is_null()) return;
  const std::string type = type_of(j, where, path);
  if (type == "Sequence") {
    const json& list = array_field(j, "processors", where, path);
    for (size_t k = 0; k < list.size(); ++k)
      parse_post_processor(list[k], where, fmt::format("{}.processors[{}]", path, k), out);
  } else if (type == "ByteLevel") {
    // Only adjusts offsets, which we do not compute.
  } else if (type == "TemplateProcessing") {
    const json& single = array_field(j, "single", where, path);
    const json specials = j.value("special_tokens", json::object());
    bool seen_sequence = false;
    for (const json& item : single) {
      if (item.contains("Sequence")) {
        if (json_string(item["Sequence"], "id", where, path) != "A")
          fail(where, path, "the single-sequence template may only hold sequence A");
        seen_sequence = true;
      } else if (item.contains("SpecialToken")) {
        const std::string name = json_string(item["SpecialToken"], "id", where, path);
        if (!specials.contains(name) || !specials[name].contains("ids") || !specials[name]["ids"].is_array())
          fail(where, path, fmt::format("special token '{}' has no ids in special_tokens", name));
        for (const json& id : specials[name]["ids"]) {
          if (!id.is_number_integer()) fail(where, path, fmt::format("special token '{}' has a non-integer id", name));
          (seen_sequence ? out.suffix : out.prefix).push_back(id.get<int32_t>());
        }
      } else {
        fail(where, path, "a template item must be a Sequence or a SpecialToken");
      }
    }
    if (!seen_sequence) fail(where, path, "the single-sequence template has no sequence A");
  } else if (type == "RobertaProcessing" || type == "BertProcessing") {
    // {"cls": ["<s>", 0], "sep": ["</s>", 2]}: cls A sep.
    for (const char* key : {"cls", "sep"}) {
      if (!j.contains(key) || !j[key].is_array() || j[key].size() != 2 || !j[key][1].is_number_integer())
        fail(where, path, fmt::format("'{}' must be [token, id]", key));
      (std::string(key) == "cls" ? out.prefix : out.suffix).push_back(j[key][1].get<int32_t>());
    }
  } else {
    unsupported(where, path, "post-processor", type);
  }
}

}  // namespace kvinfer
