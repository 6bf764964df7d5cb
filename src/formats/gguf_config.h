#pragma once
// GGUF metadata → ModelConfig, for llama.cpp's "llama" and "qwen2" architectures.
#include "formats/gguf.h"
#include "kvinfer/config.h"

namespace kvinfer {

// Reads `{arch}.*` hyper-parameters (with llama.cpp's defaults), the bos/eos ids of
// tokenizer.ggml.*, and what the tensor list implies: tied embeddings when there is no
// output.weight, the vocabulary size from token_embd.weight as the last resort. "llama" files
// hold llama.cpp's permuted Q/K rows, so their rope layout is Interleaved; "qwen2" ones are
// HalfSplit, with q/k/v biases. Llama 3 rope scaling travels as the rope_freqs.weight tensor, which
// the loader applies; the config then says no scaling. Throws kvinfer::Error naming the file and
// key for an unsupported architecture or rope scaling, a missing or mistyped key, and any value
// out of range (non-positive, indivisible heads, odd or partial-rotary head_dim, too large).
ModelConfig gguf_config(const GgufFile& file);

}  // namespace kvinfer
