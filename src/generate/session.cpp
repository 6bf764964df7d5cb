#include "kvinfer/session.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/kv_cache_access.h"
#include "cpu/cpu_ops.h"
#include "cpu/threads.h"
#include "cuda/cuda_backend.h"
#include "cuda/device_memory.h"
#include "kvinfer/error.h"
#include "kvinfer/kv_plan.h"
#include "models/forward.h"
#include "models/model_internal.h"

namespace kvinfer {

struct Session::Scratch : ForwardScratch {};

namespace {
// The model's CUDA device, current for a call's device work (CUDA's current device is per host
// thread, and a session may be used from any); -1 for a CPU model.
int cuda_index(const Model& m) { return m.device() == Device::CUDA ? m.device_index() : -1; }

std::string where(Device d, int index) {
  return d == Device::CUDA && index > 0 ? fmt::format("cuda:{}", index) : std::string(device_name(d));
}
}  // namespace

Session::Session(std::shared_ptr<const Model> model, const SessionOptions& options)
    : model_(std::move(model)), options_(options), scratch_(std::make_unique<Scratch>()) {
  if (!model_) throw Error(ErrorKind::InvalidArgument, "Session needs a model (got a null pointer)");
  if (options_.threads < 0)
    throw Error(ErrorKind::InvalidArgument,
                fmt::format("SessionOptions::threads is {}; it must be 0 (the model's) or positive", options_.threads));
  if (options_.prefill_chunk_tokens < 1)
    throw Error(ErrorKind::InvalidArgument, fmt::format("SessionOptions::prefill_chunk_tokens is {}; it must be at least 1",
                                                        options_.prefill_chunk_tokens));
  if (options_.threads == 0) options_.threads = model_->threads();
  scratch_->exec.device = model_->device();
  scratch_->exec.activations = model_->activations();
  scratch_->exec.check_finite = model_->check_finite();
  if (model_->device() == Device::CUDA) {
    auto context = cuda_backend::create_context(model_->device_index());
    scratch_->exec.cuda = context.get();
    scratch_->cuda_context = std::move(context);
  }
}
Session::~Session() = default;
Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;

std::span<const float> Session::prefill(KvCache& kv, std::span<const int32_t> ids, Logits which,
                                        const CancelCallback& cancel) {
  return chunked(kv, ids, which, /*copy=*/true, cancel);
}

std::span<const float> Session::decode(KvCache& kv, int32_t id) {
  const cpu::ThreadScope threads(options_.threads);
  return forward(kv, {&id, 1}, Logits::Last, /*copy=*/true);
}

void Session::step(KvCache& kv, std::span<const int32_t> ids, const CancelCallback& cancel) {
  chunked(kv, ids, Logits::Last, /*copy=*/false, cancel);
}

std::span<const float> Session::chunked(KvCache& kv, std::span<const int32_t> ids, Logits which, bool copy,
                                        const CancelCallback& cancel) {
  const cpu::ThreadScope threads(options_.threads);
  const auto n = static_cast<int64_t>(ids.size());
  const int64_t chunk = options_.prefill_chunk_tokens;
  if (n <= chunk) return forward(kv, ids, which, copy);
  // Checked for the whole input first, so that no chunk runs when a later one could not fit.
  if (n > kv.remaining())
    throw Error(ErrorKind::ContextFull, fmt::format("{} tokens do not fit in the KV cache: {} of {} positions are free",
                                                    n, kv.remaining(), kv.capacity()));
  const int64_t start = kv.size();
  const int64_t vocab = model_->config().vocab_size;
  std::vector<float>& all = scratch_->logits_chunks;  // (n, vocab) with Logits::All
  if (which == Logits::All) all.resize(static_cast<size_t>(n * vocab));
  try {
    std::span<const float> logits;
    for (int64_t at = 0; at < n; at += chunk) {
      if (at > 0 && cancel && cancel())
        throw Error(ErrorKind::Cancelled, fmt::format("prefill cancelled after {} of {} tokens; the KV cache holds its "
                                                      "{} positions as before",
                                                      format_count(at), format_count(n), format_count(start)));
      const std::span<const int32_t> part = ids.subspan(static_cast<size_t>(at), static_cast<size_t>(std::min(chunk, n - at)));
      // Only the last chunk's logits are wanted (all of them with Logits::All): the others stay on the device.
      const bool last_chunk = at + chunk >= n;
      logits = forward(kv, part, which, which == Logits::All || (copy && last_chunk));
      if (which == Logits::All) std::copy(logits.begin(), logits.end(), all.begin() + at * vocab);
    }
    if (which == Logits::All) {
      last_.host = all;
      return all;
    }
    return logits;
  } catch (...) {
    restore(kv, start);
    throw;
  }
}

void Session::restore(KvCache& kv, int64_t n) {
  last_ = {};
  if (kv.reusable(n) == n) {
    kv.truncate(n);
    return;
  }
  // A sliding-window ring overwrote positions the first n need (the call wrote more than a ring's
  // rewind allows): computed again from their ids, the same bits (a row never depends on its batch).
  const std::vector<int32_t> ids(kv.tokens().begin(), kv.tokens().begin() + n);
  kv.clear();
  restoring_ = true;
  try {
    for (int64_t at = 0; at < n; at += options_.prefill_chunk_tokens)
      forward(kv, std::span(ids).subspan(static_cast<size_t>(at),
                                         static_cast<size_t>(std::min(options_.prefill_chunk_tokens, n - at))),
              Logits::Last, /*copy=*/false);
  } catch (...) {
    kv.clear();  // what failed once may fail again: the cache is left empty, not half computed
  }
  restoring_ = false;
  last_ = {};
}

namespace {

// Throws for inputs a forward pass over kv must refuse; `who` prefixes the message ("" or
// "batch item 3: ").
void check_input(const Model& model, const KvCache& kv, std::span<const int32_t> ids, std::string_view who) {
  const ModelConfig& c = model.config();
  if (kv.num_layers() != c.num_layers || kv.num_kv_heads() != c.num_kv_heads || kv.head_dim() != c.head_dim)
    throw Error(ErrorKind::InvalidArgument,
                fmt::format("{}KV cache shaped for {} layers × {} KV heads × head_dim {} does not fit this model "
                            "({} × {} × {})",
                            who, kv.num_layers(), kv.num_kv_heads(), kv.head_dim(), c.num_layers, c.num_kv_heads,
                            c.head_dim));
  if (kv.device() != model.device() || kv.device_index() != model.device_index())
    throw Error(ErrorKind::InvalidArgument, fmt::format("{}KV cache on {} but the model runs on {}", who,
                                                        where(kv.device(), kv.device_index()),
                                                        where(model.device(), model.device_index())));
  if (ids.empty()) throw Error(ErrorKind::InvalidArgument, fmt::format("{}forward pass over an empty list of token ids", who));
  const auto n = static_cast<int64_t>(ids.size());
  if (n > kv.remaining())
    throw Error(ErrorKind::ContextFull, fmt::format("{}{} tokens do not fit in the KV cache: {} of {} positions are free",
                                                    who, n, kv.remaining(), kv.capacity()));
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= c.vocab_size)
      throw Error(ErrorKind::InvalidArgument, fmt::format("{}token id {} at index {} is outside the vocabulary (size {})",
                                                          who, ids[i], i, c.vocab_size));
  if (c.is_gpt2() && kv.size() + n > c.max_position_embeddings)
    throw Error(ErrorKind::ContextFull,
                fmt::format("{}positions {} .. {} go beyond the model's {} learned positions (n_positions)", who,
                            kv.size(), kv.size() + n - 1, c.max_position_embeddings));
}

// Every call's logits are scanned (one pass over rows × vocab floats, next to the LM head's rows ×
// vocab × hidden multiply-adds). NaN or Inf there is never a result: the error says where, and
// Session::run undoes the call (every cache back to its start).
void check_logits(const Model& model, std::span<const BatchSegment> batch, std::span<const float> logits) {
  const int64_t i = cpu::first_nonfinite(logits.data(), static_cast<int64_t>(logits.size()));
  if (i < 0) return;
  const int64_t vocab = model.config().vocab_size;
  int64_t row = i / vocab;  // among the wanted rows: find its segment
  auto g = batch.begin();
  for (;; ++g) {
    const int64_t rows = g->which == Logits::All ? g->n() : 1;
    if (row < rows) break;
    row -= rows;
  }
  const int64_t index = g->which == Logits::All ? row : g->n() - 1;  // the token of that row in its segment
  int64_t count = 0;
  for (float v : logits) count += std::isfinite(v) ? 0 : 1;
  const std::string sequence = batch.size() > 1 ? fmt::format("sequence {} of the batch, ", g - batch.begin()) : "";
  throw Error(ErrorKind::BadFile, fmt::format(
      "non-finite logits: {} of the {} logits are NaN or Inf; the first, {} for vocabulary id {}, at {}position {} "
      "(token id {}, index {} of this call). The call was undone: {} as before. {}",
      count, logits.size(), logits[static_cast<size_t>(i)], i % vocab, sequence, g->start + index,
      g->ids[static_cast<size_t>(index)], index,
      batch.size() > 1 ? "every KV cache holds its positions" : fmt::format("the KV cache holds {} positions", g->start),
      model.check_finite()
          ? "The residual stream was finite after every layer (check_finite is on): the final norm or the LM head "
            "produced them"
          : "Load with LoadOptions::check_finite = true (or set KVINFER_CHECK_FINITE=1) to find the layer where "
            "they first appear"));
}

}  // namespace

std::span<const float> Session::forward(KvCache& kv, std::span<const int32_t> ids, Logits which, bool copy) {
  last_ = {};
  check_input(*model_, kv, ids, "");
  const BatchItem item{&kv, ids, which};
  return run({&item, 1}, copy);
}

std::span<const float> Session::batch(std::span<const BatchItem> items) {
  last_ = {};
  const cpu::ThreadScope threads(options_.threads);
  if (items.empty()) throw Error(ErrorKind::InvalidArgument, "Session::batch: no items");
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string who = fmt::format("batch item {}: ", i);
    if (items[i].kv == nullptr) throw Error(ErrorKind::InvalidArgument, who + "no KV cache (a null pointer)");
    for (size_t j = 0; j < i; ++j)
      if (items[j].kv == items[i].kv)
        throw Error(ErrorKind::InvalidArgument, fmt::format("{}the same KV cache as item {}: one sequence per cache", who, j));
    check_input(*model_, *items[i].kv, items[i].ids, who);
  }
  return run(items, /*copy=*/true);
}

std::span<const float> Session::run(std::span<const BatchItem> items, bool copy) {
  const cuda_backend::DeviceScope on(cuda_index(*model_));
  ForwardScratch& s = *scratch_;
  std::vector<BatchSegment>& batch = s.batch;  // (items) each item's rows among the call's
  batch.clear();
  int64_t rows = 0;
  for (const BatchItem& it : items) {
    batch.push_back({it.kv, it.ids, it.kv->size(), rows, it.logits});
    rows += static_cast<int64_t>(it.ids.size());
  }
  try {
    return run_checked(copy);
  } catch (...) {
    // Undone: every cache back to its start. Taken from the batch first: restore's passes reuse it.
    if (!restoring_) {
      std::vector<std::pair<KvCache*, int64_t>> starts;  // (items) each cache and its size before the call
      for (const BatchSegment& g : batch) starts.emplace_back(g.kv, g.start);
      for (const auto& [kv, start] : starts) restore(*kv, start);
    }
    throw;
  }
}

std::span<const float> Session::run_checked(bool copy) {
  const ModelConfig& c = model_->config();
  ForwardScratch& s = *scratch_;
  std::vector<BatchSegment>& batch = s.batch;
  const int64_t rows = batch.empty() ? 0 : batch.back().row + batch.back().n();
  std::span<const float> logits;  // on the model's device
  const auto forward = [&] {
    logits = c.is_gpt2()    ? gpt2_forward(c, model_weights(*model_), s, batch)
             : c.is_gemma() ? gemma_forward(c, model_weights(*model_), s, batch)
                            : llama_forward(c, model_weights(*model_), s, batch);
  };
  if (s.exec.device == Device::CUDA && rows == 1 && !s.exec.check_finite) {
    // A decode step: one graph launch once its graph is captured (the body may not run at all).
    KvCache& kv = *batch[0].kv;
    cuda_backend::decode_step(*s.exec.cuda, batch[0].ids[0], batch[0].start, [&] { return step_key(s, kv); }, forward);
    logits = {static_cast<const float*>(s.logits.device_data()), static_cast<size_t>(c.vocab_size)};
  } else {
    forward();
  }
  for (const BatchSegment& g : batch) KvCacheAccess::commit(*g.kv, g.ids);
  LastLogits last;
  last.device = logits;
  if (model_->device() != Device::CUDA) {
    last.host = logits;
  } else if (copy) {
    last.host = copy_logits(logits);
  } else {
    // One device pass for the NaN/Inf check (and the argmax that greedy sampling needs). Only
    // if it finds one are the logits copied, for check_logits' message and undo.
    const cuda_backend::LogitsScan scan =
        cuda_backend::scan_logits(*scratch_->exec.cuda, logits.data(), static_cast<int64_t>(logits.size()));
    if (scan.first_nonfinite >= 0) check_logits(*model_, batch, copy_logits(logits));  // throws
    last.scanned = true;
    last.argmax = scan.argmax;
    last.max_value = scan.max_value;
  }
  if (!last.host.empty()) check_logits(*model_, batch, last.host);
  last_ = last;
  return last.host;
}

std::span<const float> Session::copy_logits(std::span<const float> device) {
  const cuda_backend::DeviceScope on(cuda_index(*model_));
  scratch_->logits_host.resize(device.size());  // grows once to the largest call's rows × vocab
  cuda_backend::to_host(*scratch_->exec.cuda, device.data(), scratch_->logits_host.data(),
                        static_cast<int64_t>(device.size()));
  return scratch_->logits_host;
}

std::span<const float> Session::logits() {
  if (last_.device.empty())
    throw Error(ErrorKind::InvalidArgument, "Session::logits: no logits (call prefill, decode or step first; a call that threw leaves none)");
  if (last_.host.empty()) last_.host = copy_logits(last_.device);
  return last_.host;
}

int32_t Session::sample(Sampler& sampler) {
  if (last_.device.empty())
    throw Error(ErrorKind::InvalidArgument, "Session::sample: no logits (call prefill, decode or step first; a call that threw leaves none)");
  const int64_t vocab = model_->config().vocab_size;
  if (sampler.vocab_size() != vocab)
    throw Error(ErrorKind::InvalidArgument, fmt::format("Session::sample: the sampler is for a vocabulary of {}, the model has {}",
                            sampler.vocab_size(), vocab));
  const auto row_of = [&](std::span<const float> all) { return all.last(static_cast<size_t>(vocab)); };
  if (!last_.host.empty()) return sampler.sample(row_of(last_.host));
  // A grammar masks the whole row: it comes to the host (vocab floats) and is sampled there.
  if (sampler.params().grammar) return sampler.sample(row_of(logits()));
  // CUDA, after step(): the logits are on the device. Greedy without bias or penalties: the
  // step's scan has the pick.
  const SamplingParams& p = sampler.params();
  if (p.temperature == 0.0f && last_.scanned && p.logit_bias.empty() && sampler.penalty_counts().empty()) {
    const std::pair<int32_t, float> best{last_.argmax, last_.max_value};
    return sampler.sample_top_k({&best, 1});
  }
  const cuda_backend::DeviceScope on(cuda_index(*model_));
  return cuda_backend::sample_row(*scratch_->exec.cuda, sampler, row_of(last_.device).data(), vocab,
                                  [&] { return row_of(logits()); });
}

}  // namespace kvinfer
