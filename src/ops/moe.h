#pragma once
// The scratch of a mixture-of-experts block (ops::moe_experts), on the Exec's device.
#include <cstdint>

namespace kvinfer {

// For n rows and k experts a row: x (n, hidden); gate, up (n·k, expert_inter); y (n·k, hidden).
// The CPU gathers one expert's rows at a time (n rows at most); CUDA runs every (row, expert)
// pair at once.
struct MoeScratch {
  float *x, *gate, *up, *y;
};

}  // namespace kvinfer
