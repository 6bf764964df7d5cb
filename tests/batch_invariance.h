#pragma once
// Batch invariance (docs/batching.md): a sequence's logits are the same bits whether it runs
// alone or in any batch. The solo run is prefill(prompt, Logits::All) and greedy decode steps;
// the batched run mixes random sequences in random steps: some prefill chunks of random length
// while others decode, sequences join late and leave early, each with its own KV dtype.
// On CUDA the solo run prefills the same chunks as the batched one (a chunk's rows take the
// kernels its own length picks, alone or in a batch: docs/batching.md); on the CPU it prefills the
// whole prompt at once.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kvinfer/kvinfer.h"

namespace kvinfer::test {

struct SoloTrace {
  std::vector<int32_t> prompt;
  DType kv_dtype;
  std::vector<size_t> chunks;                   // the prompt's chunks in the batched run
  std::vector<float> prompt_logits;             // (prompt, vocab)
  std::vector<std::vector<float>> step_logits;  // (steps) (vocab): the logits each decoded token gives
  std::vector<int32_t> tokens;                  // greedy: argmax of the prompt's last row, then of each step's
};

inline SoloTrace solo_run(Session& s, const Model& model, std::vector<int32_t> prompt, DType dtype,
                          std::vector<size_t> chunks, int64_t steps) {
  SoloTrace t{std::move(prompt), dtype, std::move(chunks), {}, {}, {}};
  KvCache kv(model, static_cast<int64_t>(t.prompt.size()) + steps, dtype);
  const int64_t vocab = model.config().vocab_size;
  if (model.device() == Device::CUDA) {
    size_t at = 0;
    for (size_t n : t.chunks) {
      const std::span<const float> l = s.prefill(kv, std::span<const int32_t>(t.prompt).subspan(at, n), Logits::All);
      t.prompt_logits.insert(t.prompt_logits.end(), l.begin(), l.end());
      at += n;
    }
  } else {
    const std::span<const float> all = s.prefill(kv, t.prompt, Logits::All);
    t.prompt_logits.assign(all.begin(), all.end());
  }
  t.tokens.push_back(argmax(std::span<const float>(t.prompt_logits).last(static_cast<size_t>(vocab))));
  for (int64_t i = 0; i < steps; ++i) {
    const std::span<const float> l = s.decode(kv, t.tokens.back());
    t.step_logits.emplace_back(l.begin(), l.end());
    t.tokens.push_back(argmax(l));
  }
  return t;
}

inline bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// `count` sequences with prompts of 1..max_prompt tokens decoded `steps` times each, solo and in
// random batches (seed), compared bit for bit. Returns the largest batch it ran (items).
inline size_t expect_batch_invariant(const std::shared_ptr<const Model>& model, int count, int max_prompt,
                                     int64_t steps, uint64_t seed, Session* batched_session = nullptr,
                                     Session* solo_session = nullptr) {
  std::mt19937_64 rng(seed);
  const int64_t vocab = model->config().vocab_size;
  const DType dtypes[] = {DType::F32, DType::F16, DType::BF16};
  Session own_solo(model), own_batched(model);
  Session& solo = solo_session ? *solo_session : own_solo;
  Session& batched = batched_session ? *batched_session : own_batched;
  std::vector<SoloTrace> traces;
  for (int i = 0; i < count; ++i) {
    std::vector<int32_t> prompt(std::uniform_int_distribution<size_t>(1, static_cast<size_t>(max_prompt))(rng));
    for (int32_t& id : prompt) id = static_cast<int32_t>(std::uniform_int_distribution<int64_t>(0, vocab - 1)(rng));
    std::vector<size_t> chunks;  // a random split of the prompt, one chunk a step
    for (size_t left = prompt.size(); left > 0;) {
      chunks.push_back(std::uniform_int_distribution<size_t>(1, left)(rng));
      left -= chunks.back();
    }
    traces.push_back(solo_run(solo, *model, std::move(prompt), dtypes[rng() % 3], std::move(chunks), steps));
  }

  struct Live {
    size_t seq;
    KvCache kv;
    size_t prefilled = 0;  // prompt tokens in the cache
    size_t chunk = 0;      // the next of its chunks
    int64_t decoded = 0;   // steps done
    int32_t next = -1;
  };
  std::vector<Live> live;
  size_t joined = 0, largest = 0;
  int64_t step = 0;
  while (joined < traces.size() || !live.empty()) {
    // Sequences join at random steps, about four at a time (at least one when none is running).
    while (joined < traces.size() && (live.empty() || rng() % 5 != 0)) {
      const SoloTrace& t = traces[joined];
      live.push_back({joined, KvCache(*model, static_cast<int64_t>(t.prompt.size()) + steps, t.kv_dtype)});
      ++joined;
    }
    std::shuffle(live.begin(), live.end(), rng);  // any order in the batch
    std::vector<BatchItem> items;
    for (Live& l : live) {
      const SoloTrace& t = traces[l.seq];
      if (l.prefilled < t.prompt.size()) {
        const size_t n = t.chunks[l.chunk++];
        items.push_back({&l.kv, std::span<const int32_t>(t.prompt).subspan(l.prefilled, n), Logits::All});
      } else {
        items.push_back({&l.kv, {&l.next, 1}, Logits::Last});
      }
    }
    SCOPED_TRACE("step " + std::to_string(step));
    const std::span<const float> logits = batched.batch(items);
    largest = std::max(largest, items.size());
    size_t row = 0;
    for (size_t i = 0; i < live.size(); ++i) {
      Live& l = live[i];
      const SoloTrace& t = traces[l.seq];
      const size_t rows = items[i].ids.size();
      const std::span<const float> got = logits.subspan(row * static_cast<size_t>(vocab), rows * static_cast<size_t>(vocab));
      row += items[i].logits == Logits::All ? rows : 1;
      if (l.prefilled < t.prompt.size()) {
        const std::span<const float> want =
            std::span<const float>(t.prompt_logits).subspan(l.prefilled * static_cast<size_t>(vocab), got.size());
        EXPECT_TRUE(same_bits(got, want)) << "sequence " << l.seq << ": prompt positions " << l.prefilled << ".."
                                          << l.prefilled + rows - 1 << " differ from its solo prefill";
        l.prefilled += rows;
        if (l.prefilled == t.prompt.size()) l.next = t.tokens[0];
      } else {
        EXPECT_TRUE(same_bits(got, t.step_logits[static_cast<size_t>(l.decoded)]))
            << "sequence " << l.seq << ": decode step " << l.decoded << " differs from its solo run";
        l.next = argmax(got);
        EXPECT_EQ(l.next, t.tokens[static_cast<size_t>(l.decoded) + 1]);
        ++l.decoded;
      }
    }
    // Sequences leave when done, and sometimes early (their remaining steps are not checked).
    std::erase_if(live, [&](const Live& l) { return l.decoded == steps || (l.decoded > 0 && rng() % 16 == 0); });
    ++step;
    if (::testing::Test::HasFailure()) break;
  }
  return largest;
}

}  // namespace kvinfer::test
