#include "kvinfer/session.h"

#include <cmath>

#include <fmt/format.h>

#include "cpu/cpu_ops.h"
#include "cuda/cuda_backend.h"
#include "kvinfer/error.h"
#include "models/forward.h"

namespace kvinfer {

Session::Session(std::shared_ptr<const Model> model)
    : model_(std::move(model)), scratch_(std::make_unique<ForwardScratch>()) {
  if (!model_) throw Error("Session needs a model (got a null pointer)");
  scratch_->exec.device = model_->device();
  scratch_->exec.int8_activations = model_->int8_activations();
  scratch_->exec.check_finite = model_->check_finite();
  if (model_->device() == Device::CUDA) {
    auto context = cuda_backend::create_context();
    scratch_->exec.cuda = context.get();
    scratch_->cuda_context = std::move(context);
  }
}
Session::~Session() = default;
Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;

std::span<const float> Session::prefill(KvCache& kv, std::span<const int32_t> ids, Logits which) {
  return forward(kv, ids, which);
}

std::span<const float> Session::decode(KvCache& kv, int32_t id) { return forward(kv, {&id, 1}, Logits::Last); }

std::span<const float> Session::forward(KvCache& kv, std::span<const int32_t> ids, Logits which) {
  const ModelConfig& c = model_->config();
  if (kv.num_layers() != c.num_layers || kv.num_kv_heads() != c.num_kv_heads || kv.head_dim() != c.head_dim)
    throw Error(fmt::format("KV cache shaped for {} layers × {} KV heads × head_dim {} does not fit this model "
                            "({} × {} × {})",
                            kv.num_layers(), kv.num_kv_heads(), kv.head_dim(), c.num_layers, c.num_kv_heads,
                            c.head_dim));
  if (kv.device() != model_->device())
    throw Error(fmt::format("KV cache on {} but the model runs on {}", device_name(kv.device()),
                            device_name(model_->device())));
  if (ids.empty()) throw Error("forward pass over an empty list of token ids");
  const auto n = static_cast<int64_t>(ids.size());
  if (n > kv.remaining())
    throw Error(fmt::format("{} tokens do not fit in the KV cache: {} of {} positions are free", n, kv.remaining(),
                            kv.capacity()));
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= c.vocab_size)
      throw Error(fmt::format("token id {} at index {} is outside the vocabulary (size {})", ids[i], i,
                              c.vocab_size));
  if (c.is_gpt2() && kv.size() + n > c.max_position_embeddings)
    throw Error(fmt::format("positions {} .. {} go beyond the model's {} learned positions (n_positions)", kv.size(),
                            kv.size() + n - 1, c.max_position_embeddings));
  const int64_t start = kv.size();
  ForwardScratch& s = *scratch_;
  std::span<const float> logits;
  const auto run = [&] {
    logits = c.is_gpt2() ? gpt2_forward(c, model_->weights(), s, kv, ids, which)
                         : llama_forward(c, model_->weights(), s, kv, ids, which);
  };
  if (s.exec.device == Device::CUDA && n == 1 && !s.exec.check_finite) {
    // A decode step: one graph launch once its graph is captured (the body may not run at all).
    cuda_backend::decode_step(*s.exec.cuda, ids[0], start, [&] { return step_key(s, kv); }, run);
    logits = {static_cast<const float*>(s.logits.device_data()), static_cast<size_t>(c.vocab_size)};
  } else {
    run();
  }
  kv.commit(n);
  if (s.exec.device == Device::CUDA) {
    s.logits_host.resize(logits.size());
    cuda_backend::to_host(*s.exec.cuda, logits.data(), s.logits_host.data(), static_cast<int64_t>(logits.size()));
    logits = s.logits_host;
  }
  check_logits(kv, start, ids, logits);
  return logits;
}

// Every call's logits are scanned (one pass over rows × vocab floats, next to the LM head's rows ×
// vocab × hidden multiply-adds). NaN or Inf there is never a result: the call is undone (the
// cache is cut back to `start`; the positions' K/V were written but are no longer committed)
// and the error says where.
void Session::check_logits(KvCache& kv, int64_t start, std::span<const int32_t> ids,
                           std::span<const float> logits) const {
  const int64_t i = cpu::first_nonfinite(logits.data(), static_cast<int64_t>(logits.size()));
  if (i < 0) return;
  kv.truncate(start);
  const int64_t vocab = model_->config().vocab_size;
  const auto rows = static_cast<int64_t>(logits.size()) / vocab;
  const int64_t row = i / vocab;
  const int64_t index = static_cast<int64_t>(ids.size()) - rows + row;  // the token of that row in this call
  int64_t count = 0;
  for (float v : logits) count += std::isfinite(v) ? 0 : 1;
  throw Error(fmt::format(
      "non-finite logits: {} of the {} logits are NaN or Inf; the first, {} for vocabulary id {}, at position {} "
      "(token id {}, index {} of this call). The call was undone: the KV cache holds {} positions as before. {}",
      count, logits.size(), logits[static_cast<size_t>(i)], i % vocab, start + index,
      ids[static_cast<size_t>(index)], index, kv.size(),
      model_->check_finite()
          ? "The residual stream was finite after every layer (check_finite is on): the final norm or the LM head "
            "produced them"
          : "Load with LoadOptions::check_finite = true (or set KVINFER_CHECK_FINITE=1) to find the layer where "
            "they first appear"));
}

}  // namespace kvinfer
