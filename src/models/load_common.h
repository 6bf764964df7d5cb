#pragma once
// What the two loaders (load_hf.cpp: HF directories, load_gguf.cpp: GGUF files) share: the
// device choice, binding a Llama-family model's tensors from a checkpoint by name, the rope
// frequencies, and the last step (read the weights once or upload them, then build the Model).
#include <cstddef>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/large_buffer.h"
#include "core/mapped_file.h"
#include "core/memory.h"
#include "kvinfer/config.h"
#include "kvinfer/model.h"
#include "models/weights.h"

namespace kvinfer {

// Model::load by format (model.cpp picks one by looking at the path).
std::shared_ptr<const Model> load_hf(const std::filesystem::path& dir, const LoadOptions& options);
std::shared_ptr<const Model> load_gguf(const std::filesystem::path& file, const LoadOptions& options);

// Device::Auto resolved; throws naming `path` when CUDA is asked for and none is usable.
Device resolve_device(const std::filesystem::path& path, Device requested, int index = 0);

// What a loaded model keeps alive: the mapped checkpoint (with LoadOptions::weights_in_place only;
// finish_load releases it otherwise) and the f32 vectors made from it.
struct HostStorage {
  std::shared_ptr<const void> checkpoint;
  std::vector<const MappedFile*> mapped;  // the checkpoint's files, mapped (read-only, private); owned by it
  std::vector<std::unique_ptr<float[]>> vectors;
  // Made at load (transposed, or random), each starting at a cache line: the AVX-512 prefill tiles
  // read 32 bytes of an f32 row at a time, and rows 16 bytes off (malloc's large blocks) split
  // every other read across two lines, 12-16 % slower (docs/benchmarks-history.md). Those of 2 MiB and
  // more start at a 2 MiB boundary, on transparent huge pages where the kernel allows
  // (core/large_buffer.h).
  std::vector<LargeBuffer> matrices;
  // Work that fills allocated matrices (GPT-2's transposes), run by finish_load once the memory
  // check has passed: until then an allocation is address space whose pages were never touched.
  std::vector<std::function<void()>> fills;
  Vector add(const std::vector<float>& values);
  // `bytes` bytes owned by the storage, uninitialised, 64-byte aligned.
  std::byte* allocate(size_t bytes);

  // The mapped file that holds [p, p + bytes), or null.
  const MappedFile* file_of(const std::byte* p, uint64_t bytes) const;
  // Copies [p, p + bytes) to `out`: inside a mapped file, read from the file with pread
  // (MappedFile::read: an Error naming a file that shrank, not SIGBUS); elsewhere, memcpy.
  void read(const std::byte* p, uint64_t bytes, std::byte* out) const;
  // The values of a stored 1 × n vector (norm weights, biases), read as above, widened to f32.
  std::vector<float> read_f32(const Matrix& stored) const;
  // Drops the checkpoint once no tensor of `w` lies in its files: the loader's own reference is
  // then the last, and the files are unmapped and closed when it returns.
  void release_checkpoint(const ModelWeights& w);
};

// A checkpoint's tensors by name, checked against the shape the config implies and returned in
// place, in their stored dtype. Errors name the file, the tensor, what was wanted and found.
class TensorSource {
 public:
  virtual ~TensorSource() = default;
  // A (rows, cols) row-major matrix.
  virtual Matrix matrix(const std::string& name, int64_t rows, int64_t cols) const = 0;
  // A vector of n values, as a 1 × n matrix (to be widened to f32).
  virtual Matrix vector(const std::string& name, int64_t n) const = 0;
  // A stacked (count, rows, cols) tensor (the experts of a layer), as one (count·rows, cols) matrix.
  virtual Matrix stacked(const std::string& name, int64_t count, int64_t rows, int64_t cols) const = 0;
  // Whether the checkpoint holds a tensor of that name.
  virtual bool has(const std::string& name) const = 0;
};

// A checkpoint's names for a mixture-of-experts layer, full tensor names after the layer prefix.
// PerExpert: gate/up/down hold "{}" for the expert's index (HF: "block_sparse_moe.experts.{}.w1.weight").
// Stacked: each names one (experts, rows, cols) tensor (GGUF: "ffn_gate_exps.weight").
// FusedGateUp: gate names HF's (experts, 2·inter, hidden) "experts.gate_up_proj" (each expert's
// gate rows, then its up rows), down the stacked (experts, hidden, inter) "experts.down_proj".
struct MoeNames {
  enum class Layout { PerExpert, Stacked, FusedGateUp };
  Layout layout = Layout::PerExpert;
  std::string router;             // (experts, hidden)
  std::string gate, up, down;     // the experts
  std::string shared_gate, shared_up, shared_down;  // Qwen2-MoE's shared expert (its SwiGLU)
  std::string shared_expert_gate;                   // (1, hidden)
};

// A checkpoint's names for the tensors of a Llama-family model. A layer's names are
// fmt::format(layer, index) followed by the part; linear layers add ".weight" and ".bias".
struct TensorNames {
  std::string embed, final_norm, lm_head;
  std::string layer;
  std::string attn_norm, q, k, v, o, ffn_norm, gate, up, down;
  // Read when the config asks for them (ModelConfig::qk_norm, Gemma's post-norms).
  std::string q_norm, k_norm, post_attn_norm, post_ffn_norm;
  // HF's Gemma norms multiply by (1 + w): 1 is added to every norm weight at load. llama.cpp's
  // converter stores them with the 1 added already.
  bool norm_plus_one = false;
  MoeNames moe;  // the layers config.is_moe_layer() names
  // Phi-3's fused projections, used in place of q/k/v and gate/up when set (no biases).
  std::string qkv = {}, gate_up = {};
};

// A tensor named under a layer prefix (TensorNames::layer, "model.layers.{}."): the layer's index
// (INT64_MAX when it does not fit) and the rest of the name. nullopt for any other name.
struct LayerTensor {
  int64_t layer;
  std::string_view part;
};
std::optional<LayerTensor> layer_tensor(std::string_view name, std::string_view layer);

// Every tensor of the model `c` describes, checked and bound; norms and biases are read (pread)
// and widened to f32 into `storage`. rope_inv_freq is left to the caller.
std::unique_ptr<ModelWeights> bind_weights(const ModelConfig& c, const TensorNames& names, const TensorSource& source,
                                           HostStorage& storage, const std::filesystem::path& path);

// A checkpoint's names for GPT-2's tensors. Norms and linear layers are prefixes completed by
// ".weight" and ".bias"; a layer's names are fmt::format(layer, index) followed by the part.
// conv1d: the projections are stored as HF's Conv1D weights, (in, out), and are transposed to
// (out, in) at load; GGUF stores them (out, in) already.
struct Gpt2TensorNames {
  std::string embed, pos_embed, final_norm, lm_head;
  std::string layer;
  std::string attn_norm, qkv, attn_out, ffn_norm, ffn_up, ffn_down;
  bool conv1d = false;
};

// Every tensor of the GPT-2 model `c` describes, checked and bound: the fused QKV projection
// becomes the q, k, v layers (its three row blocks), the MLP's fc / proj become up / down.
std::unique_ptr<ModelWeights> bind_gpt2_weights(const ModelConfig& c, const Gpt2TensorNames& names,
                                                const TensorSource& source, HostStorage& storage,
                                                const std::filesystem::path& path);

// inv_freq (rope_dim() / 2) from rope_theta and the config's rope scaling (kernels/core/rope.h).
// context_length (0: max_position_embeddings) is the model's (LoadOptions::context_length): dynamic
// NTK computes its base for it and LongRoPE takes its long factors when it exceeds the original
// length, as HF does for one call over a sequence that long (docs/rope-scaling.md).
std::vector<float> rope_inv_freq(const ModelConfig& c, int64_t context_length = 0);
// Gemma 3's sliding layers: inv_freq (rope_dim() / 2) from rope_local_theta, unscaled; empty when
// the config has no local base. context_length: as rope_inv_freq's.
std::vector<float> rope_local_inv_freq(const ModelConfig& c, int64_t context_length = 0);

// The memory figure a load checks against (LoadOptions::memory_limit, $KVINFER_MEMORY_LIMIT or
// the device's available memory), taken before the loader allocates anything.
MemoryBudget load_budget(Device device, const LoadOptions& options);

// CPU weights, before the first forward pass. With `copy`, every matrix that lies in a mapped
// checkpoint file (storage.mapped) is copied, its stored bytes unchanged, into one buffer of the
// storage's own (LargeBuffer: 2 MiB pages where the kernel allows; each matrix on a cache line),
// and the model points at the copy. The copy reads the file with pread (HostStorage::read), not
// through the mapping, whose pages are never touched: a file truncated meanwhile gives an Error
// naming it, not SIGBUS. Every other tensor (all of them without `copy`) is read once in place,
// a byte a page, which moves the page faults from the first forward pass to load time.
// A tensor two views share (a tied LM head is the embedding) is placed once. Reports bytes done of
// all the bytes. Then every matrix outside the mappings (the copies, and the matrices made at
// load) whose type this CPU's decode kernels read packed is packed (cpu/packed_rows.h), each view
// of it marked so.
// Decode streams every matrix once a token: on a 2-core Xeon VM, from 4 KiB pages it read at
// 22-24 GB/s where 2 MiB pages gave 34-36 (docs/benchmarks-history.md).
void place_weights(ModelWeights& w, HostStorage& storage, bool copy,
                   const std::function<void(uint64_t, uint64_t)>& progress);

// The weights (and the KV cache LoadOptions::kv_tokens plans) are checked against `budget`,
// throwing naming `path`, the bytes needed and available; then the storage's fills run, host
// weights are placed (place_weights: copied, or read in place with LoadOptions::weights_in_place)
// or uploaded to the device, reporting progress; a file that changed meanwhile throws naming it
// (MappedFile::check_unchanged); copied weights release the checkpoint (nothing the model holds
// reads the files again); then the Model is built.
std::shared_ptr<const Model> finish_load(const ModelConfig& c, std::unique_ptr<ModelWeights> w, Device device,
                                         std::shared_ptr<const Tokenizer> tokenizer,
                                         const std::filesystem::path& path, const LoadOptions& options,
                                         const MemoryBudget& budget, HostStorage& storage);

}  // namespace kvinfer
