// The C API (kvinfer/kvinfer_c.h): grammars for structured output.
#include "c_api/c_api_internal.h"

using namespace kvinfer;
using namespace kvinfer::capi;

namespace {

const char* text_arg(const char* p, const char* name) {
  if (p == nullptr) throw StatusError(KVINFER_ERR_INVALID_ARGUMENT, fmt::format("{} is NULL", name));
  return p;
}

}  // namespace

extern "C" {

kvinfer_status kvinfer_grammar_from_gbnf(const kvinfer_model* model, const char* text, kvinfer_grammar** out) {
  if (out != nullptr) *out = nullptr;
  return guard(__func__, [&] {
    need(out, "out");
    const Model& m = *need(model, "model").model;
    *out = new kvinfer_grammar{Grammar::from_gbnf(text_arg(text, "text"), m.grammar_vocabulary())};
  });
}

kvinfer_status kvinfer_grammar_from_json_schema(const kvinfer_model* model, const char* schema, int whitespace,
                                                kvinfer_grammar** out) {
  if (out != nullptr) *out = nullptr;
  return guard(__func__, [&] {
    need(out, "out");
    const Model& m = *need(model, "model").model;
    *out = new kvinfer_grammar{
        Grammar::from_json_schema(text_arg(schema, "schema"), m.grammar_vocabulary(), {.whitespace = whitespace != 0})};
  });
}

kvinfer_status kvinfer_grammar_any_json(const kvinfer_model* model, kvinfer_grammar** out) {
  if (out != nullptr) *out = nullptr;
  return guard(__func__, [&] {
    need(out, "out");
    *out = new kvinfer_grammar{Grammar::any_json(need(model, "model").model->grammar_vocabulary())};
  });
}

void kvinfer_grammar_free(kvinfer_grammar* grammar) { delete grammar; }

int kvinfer_sampler_grammar_finished(const kvinfer_sampler* sampler) {
  return sampler != nullptr && sampler->sampler.grammar_finished() ? 1 : 0;
}

}  // extern "C"
