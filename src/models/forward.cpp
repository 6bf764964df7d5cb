// What the forward passes share: activation buffers and the final norm + LM head.
#include <algorithm>
#include <cstdint>
#include <string>

#include <fmt/format.h>

#include "kvinfer/error.h"
#include "core/kv_cache_access.h"
#include "models/forward.h"

namespace kvinfer {

float* Activations::reserve(Device device, int64_t n) {
  const auto count = static_cast<size_t>(n);
  if (device == Device::CUDA) {
    if (device_.bytes() < count * sizeof(float)) device_ = DeviceBuffer(count * sizeof(float), "activations");
    return device_.as<float>();
  }
  if (host_.size() < count) host_.resize(count);
  return host_.data();
}

int64_t gather_ids(ForwardScratch& s, std::span<const BatchSegment> batch) {
  s.ids.clear();
  s.segment_rows.clear();
  s.sequences.clear();
  for (const BatchSegment& g : batch) {
    if (g.row != static_cast<int64_t>(s.ids.size()) || g.ids.empty())
      throw Error(ErrorKind::InvalidArgument,
                  fmt::format("forward pass: a segment of {} rows starts at row {}, expected {}", g.ids.size(), g.row, s.ids.size()));
    s.ids.insert(s.ids.end(), g.ids.begin(), g.ids.end());
    s.segment_rows.push_back(g.n());
    s.sequences.push_back({g.kv, g.start, g.row, g.n()});
  }
  s.exec.segments = s.segment_rows;
  return static_cast<int64_t>(s.ids.size());
}

void check_residual(const ForwardScratch& s, const float* x, std::span<const BatchSegment> batch, int64_t hidden,
                    std::string_view where) {
  if (!s.exec.check_finite) return;
  float value = 0;
  const int64_t i = ops::first_nonfinite(s.exec, x, static_cast<int64_t>(s.ids.size()) * hidden, &value);
  if (i < 0) return;
  const int64_t row = i / hidden;
  const auto g = std::find_if(batch.begin(), batch.end(), [&](const BatchSegment& seg) { return row < seg.row + seg.n(); });
  const int64_t index = row - g->row;
  const std::string sequence = batch.size() > 1 ? fmt::format("sequence {} of the batch, ", g - batch.begin()) : "";
  throw Error(ErrorKind::BadFile, fmt::format("non-finite value {} in the residual stream after {}, at {}position {} (token id {}, "
                                              "index {} of this call), hidden index {}; everything before it was finite "
                                              "(check_finite)",
                                              value, where, sequence, g->start + index,
                                              g->ids[static_cast<size_t>(index)], index, i % hidden));
}

std::span<const float> final_logits(const ModelConfig& cfg, const ModelWeights& w, ForwardScratch& s, const float* x,
                                    std::span<const BatchSegment> batch) {
  const ops::Exec& e = s.exec;
  const Device dev = e.device;
  const int64_t hidden = cfg.hidden_size, vocab = cfg.vocab_size;
  const float eps = static_cast<float>(cfg.norm_eps);
  // Only the rows whose logits are wanted go through the final norm and the LM head.
  int64_t rows = 0;
  for (const BatchSegment& g : batch) rows += g.which == Logits::All ? g.n() : 1;
  float* h = s.h.reserve(dev, rows * hidden);  // (rows, hidden)
  // The norm is row-wise: one call per run of adjacent wanted rows (all of a decode batch's rows).
  const auto norm = [&](int64_t first, int64_t count, int64_t out) {
    if (cfg.is_gpt2())
      ops::layer_norm(e, x + first * hidden, w.final_norm, w.final_norm_bias, count, hidden, eps, h + out * hidden);
    else
      ops::rms_norm(e, x + first * hidden, w.final_norm, count, hidden, eps, h + out * hidden);
  };
  int64_t run_first = 0, run_count = 0, out = 0;
  for (const BatchSegment& g : batch) {
    const int64_t first = g.which == Logits::All ? g.row : g.row + g.n() - 1;
    const int64_t count = g.row + g.n() - first;
    if (run_count > 0 && first != run_first + run_count) {
      norm(run_first, run_count, out);
      out += run_count;
      run_count = 0;
    }
    if (run_count == 0) run_first = first;
    run_count += count;
  }
  norm(run_first, run_count, out);
  float* logits = s.logits.reserve(dev, rows * vocab);  // (rows, vocab)
  // The LM head sees each segment's wanted rows as that segment's rows (ops::Exec::segments).
  s.logit_rows.clear();
  for (const BatchSegment& g : batch) s.logit_rows.push_back(g.which == Logits::All ? g.n() : 1);
  ops::Exec head = e;
  head.segments = s.logit_rows;
  ops::linear(head, w.lm_head, h, rows, logits);
  return {logits, static_cast<size_t>(rows * vocab)};
}

std::vector<const void*> step_key(const ForwardScratch& s, const KvCache& kv) {
  std::vector<const void*> key;
  for (const Activations* a : {&s.x, &s.h, &s.q, &s.k, &s.v, &s.att, &s.gate, &s.up, &s.router, &s.routes, &s.moe_x,
                               &s.moe_y, &s.moe_out, &s.shared, &s.shared_gate, &s.logits})
    key.push_back(a->device_data());
  // The cache is one allocation: its base, capacity and dtype fix every layer's address.
  key.push_back(kv_k(kv, 0, 0));
  key.push_back(reinterpret_cast<const void*>(static_cast<uintptr_t>(kv.capacity())));
  key.push_back(reinterpret_cast<const void*>(static_cast<uintptr_t>(kv.dtype())));
  return key;
}

}  // namespace kvinfer
