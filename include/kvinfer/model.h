#pragma once
// Model: configuration and weights of one checkpoint. Immutable after load; one Model may be
// shared by any number of threads, each with its own Session and KvCache.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "kvinfer/config.h"
#include "kvinfer/device.h"
#include "kvinfer/dtype.h"
#include "kvinfer/error.h"
#include "kvinfer/export.h"

KVINFER_PUBLIC_BEGIN
namespace kvinfer {

class Tokenizer;          // kvinfer/tokenizer.h
class GrammarVocabulary;  // kvinfer/grammar.h

// Called as weights are read into memory (or copied to the device): bytes done of total.
using LoadProgress = std::function<void(uint64_t done, uint64_t total)>;

struct LoadOptions {
  Device device = Device::Auto;
  // Which CUDA device (0 .. cuda_device_count() - 1) a CUDA model lives and runs on: its weights,
  // its caches and its sessions' streams. Auto picks that device when it is usable, else the CPU;
  // CUDA without it is an error naming the devices there are. Ignored on the CPU.
  int device_index = 0;
  LoadProgress on_progress = {};
  // CPU only, quantised weights only. Exact: every product is exact in f32 and matches HF on the
  // dequantised weights. Int8 (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K): each 32-value
  // block (256 for the K-quants) of a product's input quantised to 8 bits and multiplied in
  // integers, as llama.cpp does: faster decode, but the next-token distributions move (mean KL
  // 3-5e-3 from exact on SmolLM2 and Gemma 3, docs/benchmarks.md). Int15 (Q4_0, Q4_1, Q8_0; other
  // weights exact): 15-bit codes, two integer passes, 128 times finer than Int8. Cache-on ==
  // cache-off and thread-count independence hold in every mode.
  ActivationMode activations = ActivationMode::Exact;

  // Memory checked up front. The weights, plus a KV cache of kv_tokens positions (0: none
  // planned) in kv_dtype (default: KvCache's default for these weights), must fit in the memory
  // available on the device, or load throws naming the bytes needed and available before it
  // reads or uploads any weight. Every KvCache made for the model later must fit in what is left
  // of that figure after the weights and the model's other live caches. The figure is
  // memory_limit when nonzero, else $KVINFER_MEMORY_LIMIT (bytes, or "512M", "8G", ...), else
  // detected when the model loads: MemAvailable in /proc/meminfo for the CPU, or less when the
  // process's cgroup limit leaves less (a container), and the free bytes of cudaMemGetInfo for CUDA.
  uint64_t memory_limit = 0;
  int64_t kv_tokens = 0;  // at most the context length (below)
  std::optional<DType> kv_dtype = std::nullopt;

  // Debug: check the residual stream for NaN/Inf after the embedding and after every attention
  // and feed-forward block, and throw naming the first layer, block and position where one
  // appears. Costs one scan of the activations per block (a copy to the host on CUDA); changes
  // no result. $KVINFER_CHECK_FINITE=1 turns it on too. Without it the logits are still always
  // checked: non-finite logits throw, suggesting this option.
  bool check_finite = false;

  // CPU only. Off (the default): the weight matrices are read out of the file (pread), their
  // stored bytes unchanged, into memory on transparent huge pages where the kernel allows:
  // decode reads every matrix once a token, and 4 KiB pages cost it page walks (whole decode
  // steps 5-25 % faster, docs/benchmarks-history.md). On AVX-512 machines the bf16, Q8_0, Q4_0 and Q4_1
  // copies are then reordered within each block of 16 rows for decode's kernels
  // (src/cpu/packed_rows.h; bf16 and 8-bit decode steps another 9-22 % faster). The copy takes
  // about as long as the read of every page that loading does anyway. The file is unmapped and
  // closed before load returns: truncating, rewriting or deleting it later cannot affect the
  // model; one that shrinks or is rewritten while it is read makes load throw naming it.
  // On: every weight is used in place from the mapping, row-major (4 KiB pages, shared with
  // other processes that map the same file, llama.cpp's default), for the model's life.
  // Truncating or rewriting the file in place meanwhile is then undefined for the process
  // (SIGBUS on Linux), as with any mmap, llama.cpp's included; replace it by renaming a new file
  // over it instead (the mapping keeps the old one).
  bool weights_in_place = false;

  // The positions a KV cache of this model may hold: 0 (the default) is the model's context
  // length (max_position_embeddings, GGUF context_length, GPT-2 n_positions), and no KvCache is
  // made larger. A larger value is a deliberate extrapolation, allowed for rotary models only:
  // positions past the trained length are computed the same way, but the model never saw them
  // and its output usually degrades. Learned positions (GPT-2) have no rows for them: refused.
  int64_t context_length = 0;

  // CPU threads of this model's forward passes (a Session may choose its own): 0 picks
  // default_cpu_threads() when the model loads. Results do not depend on the count.
  int threads = 0;
  // Asked between tensors while weights are read or uploaded; true makes load throw Error
  // (kind Cancelled) and free everything it allocated.
  CancelCallback cancel = {};
};

class Model {
 public:
  // Loads a HF model directory (config.json + model.safetensors, or shards listed in
  // model.safetensors.index.json, and tokenizer.json when the directory has one) or a GGUF file
  // of llama.cpp's "llama" or "qwen2" architecture (known by its "GGUF" magic, whatever its name;
  // its tokenizer from the tokenizer.ggml.* metadata when present). Weights are used in their
  // stored dtype (GGUF's quantised types included, never dequantised up front) and read once up
  // front (so the first token does not pay for page faults), reporting progress; on the CPU the
  // large matrices are copied onto huge pages then, or used in place from a memory map of the
  // file (LoadOptions::weights_in_place, which says what changing the file does in each case).
  static std::shared_ptr<const Model> load(const std::filesystem::path& path, const LoadOptions& options = {});

  const ModelConfig& config() const { return config_; }
  Device device() const { return device_; }
  // The CUDA device it lives on (LoadOptions::device_index); 0 on the CPU.
  int device_index() const { return device_index_; }
  // The dtype of the projection weights (what the checkpoint stores).
  DType weight_dtype() const { return weight_dtype_; }
  // Bytes of all weights as stored (what one forward pass reads, embeddings aside).
  uint64_t weight_bytes() const { return weight_bytes_; }
  // Bytes of weights one decode step reads: every projection with its bias, the norms, and the
  // LM head whole (the token embedding when tied); of the embedding tables only one row each; of
  // a mixture-of-experts layer the router and the num_experts_per_tok largest experts.
  uint64_t step_weight_bytes() const { return step_weight_bytes_; }
  bool has_tokenizer() const { return tokenizer_ != nullptr; }
  // Throws kvinfer::Error when the model was loaded without one.
  const Tokenizer& tokenizer() const;
  // Every id that ends generation: config.json's eos ids and the tokenizer's.
  std::vector<int32_t> eos_ids() const;
  // The vocabulary grammars for this model are compiled for (kvinfer/grammar.h): made on the
  // first call (tens of milliseconds at 151,936 tokens) and shared after. Thread-safe; throws
  // when the model has no tokenizer.
  std::shared_ptr<const GrammarVocabulary> grammar_vocabulary() const;
  // The positions a KvCache of this model may hold: config().max_position_embeddings, or
  // LoadOptions::context_length when the model was loaded with a longer one.
  int64_t context_length() const { return context_length_; }

  // LoadOptions::activations as loaded (sessions of this model use it).
  ActivationMode activations() const { return activations_; }
  // LoadOptions::check_finite (or $KVINFER_CHECK_FINITE=1) as loaded.
  bool check_finite() const { return check_finite_; }
  // CPU threads of its sessions' forward passes unless a Session chooses (LoadOptions::threads).
  int threads() const { return threads_; }

  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

 private:
  struct Internal;  // the weights and the memory account (src/models/model_internal.h)
  explicit Model(std::unique_ptr<Internal> internal);
  friend struct ModelAccess;

  std::unique_ptr<Internal> internal_;
  ModelConfig config_;
  Device device_;
  int device_index_ = 0;
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::filesystem::path source_;
  DType weight_dtype_;
  uint64_t weight_bytes_;
  uint64_t step_weight_bytes_;
  ActivationMode activations_;
  bool check_finite_;
  int64_t context_length_;
  int threads_;
};

}  // namespace kvinfer
KVINFER_PUBLIC_END
