// What the forward passes share: activation buffers and the final norm + LM head.
#include <cstdint>

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

void check_residual(const ForwardScratch& s, const float* x, std::span<const int32_t> ids, int64_t hidden,
                    int64_t start, std::string_view where) {
  if (!s.exec.check_finite) return;
  float value = 0;
  const int64_t i = ops::first_nonfinite(s.exec, x, static_cast<int64_t>(ids.size()) * hidden, &value);
  if (i < 0) return;
  const int64_t row = i / hidden;
  throw Error(ErrorKind::BadFile, fmt::format("non-finite value {} in the residual stream after {}, at position {} (token id {}, index {} "
                          "of this call), hidden index {}; everything before it was finite (check_finite)",
                          value, where, start + row, ids[static_cast<size_t>(row)], row, i % hidden));
}

std::span<const float> final_logits(const ModelConfig& cfg, const ModelWeights& w, ForwardScratch& s, const float* x,
                                    int64_t n, Logits which) {
  const ops::Exec& e = s.exec;
  const Device dev = e.device;
  const int64_t hidden = cfg.hidden_size, vocab = cfg.vocab_size;
  const float eps = static_cast<float>(cfg.norm_eps);
  // Only the rows whose logits are wanted go through the final norm and the LM head.
  const int64_t first = which == Logits::All ? 0 : n - 1;
  const int64_t rows = n - first;
  float* h = s.h.reserve(dev, rows * hidden);  // (rows, hidden)
  if (cfg.is_gpt2())
    ops::layer_norm(e, x + first * hidden, w.final_norm, w.final_norm_bias, rows, hidden, eps, h);
  else
    ops::rms_norm(e, x + first * hidden, w.final_norm, rows, hidden, eps, h);
  float* logits = s.logits.reserve(dev, rows * vocab);  // (rows, vocab)
  ops::linear(e, w.lm_head, h, rows, logits);
  return {logits, static_cast<size_t>(rows * vocab)};
}

std::vector<const void*> step_key(const ForwardScratch& s, const KvCache& kv) {
  std::vector<const void*> key;
  for (const Activations* a : {&s.x, &s.h, &s.q, &s.k, &s.v, &s.att, &s.gate, &s.up, &s.logits})
    key.push_back(a->device_data());
  // The cache is one allocation: its base, capacity and dtype fix every layer's address.
  key.push_back(kv_k(kv, 0, 0));
  key.push_back(reinterpret_cast<const void*>(static_cast<uintptr_t>(kv.capacity())));
  key.push_back(reinterpret_cast<const void*>(static_cast<uintptr_t>(kv.dtype())));
  return key;
}

}  // namespace kvinfer
