#pragma once
// Cache rows of positions (KvCache's layout): position p of a layer of `rows` rows per KV head
// lives in row p mod rows (a sliding-window ring; p itself when rows is the capacity). A kernel
// takes one modulo for the first position of a run and steps from there, wrapping by a
// subtraction: every run a call reads or writes spans at most `rows` positions (the launchers
// check it), so the step never passes a second wrap.
#include <cstdint>

#include "host_device.h"

namespace kvinfer::core {

// The row of position pos >= 0.
KVI_HD int64_t ring_row(int64_t pos, int64_t rows) { return pos % rows; }

// The row i positions after row `row` (row < rows, 0 <= i < rows).
KVI_HD int64_t ring_step(int64_t row, int64_t i, int64_t rows) {
  const int64_t r = row + i;
  return r < rows ? r : r - rows;
}

}  // namespace kvinfer::core
