#pragma once
// Runs a parsed template. Each render has its own state, so one parsed template can be rendered
// from many threads at once.
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/jinja/ast.h"

namespace kvinfer::jinja {

// Bounds on one render, so that a hostile template fails with a clear error instead of running
// for hours or exhausting memory (see docs/chat-templates.md).
struct RenderLimits {
  size_t max_output_bytes = size_t{32} << 20;
  uint64_t max_loop_iterations = 1'000'000;  // all loops of the render together
  uint64_t max_work = uint64_t{1} << 30;     // evaluation steps plus bytes/items produced
};

using Variables = std::vector<std::pair<std::string, Value>>;

// Throws kvinfer::Error "chat template line N: ..." on any evaluation failure.
std::string render(const Body& body, const Variables& variables, const RenderLimits& limits);

}  // namespace kvinfer::jinja
