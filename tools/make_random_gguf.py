#!/usr/bin/env python3
"""A llama GGUF of the TinyLlama-1.1B shape with random Q4_1 or Q8_0 matrices, for measuring a real
file's decode (weights copied onto huge pages at load, or used in place with --weights-in-place)
against the synthetic shape of the same size (docs/benchmarks.md). Developer tool, not used by the
build or the tests: pip install gguf==0.19.0 numpy.

    tools/make_random_gguf.py q4_1 /tmp/tiny_q4_1.gguf
    build/bench/kvinfer-bench -m /tmp/tiny_q4_1.gguf --mode on -p 16 -n 64 [--weights-in-place]

The scales are small positive f16 values (Q4_1's minimum -8 d), the codes random bytes: logits
stay finite. The vocabulary is a stand-in SentencePiece one (<unk>, <s>, </s>, the 256 byte
tokens, then "tok<i>"), so that other GGUF readers (llama.cpp's llama-batched-bench, to measure
side by side on the same file) load the file too; the benchmarks draw random prompt ids.
"""
import sys

import gguf
import numpy as np

QTYPE = sys.argv[1] if len(sys.argv) > 1 else "q4_1"
OUT = sys.argv[2] if len(sys.argv) > 2 else f"tiny_{QTYPE}.gguf"
H, F, L, NH, NKV, V = 2048, 5632, 22, 32, 4, 32000  # TinyLlama-1.1B
HD = H // NH
rng = np.random.default_rng(0)
TYPE = {"q4_1": gguf.GGMLQuantizationType.Q4_1, "q8_0": gguf.GGMLQuantizationType.Q8_0}[QTYPE]


def matrix(rows, cols):
    """(rows, cols) in QTYPE's blocks, as raw bytes."""
    nb = cols // 32
    if QTYPE == "q4_1":
        blk = np.zeros((rows, nb, 20), np.uint8)
        d = (rng.standard_normal((rows, nb)) * 0.002 + 0.01).astype(np.float16)
        m = (-8 * d.astype(np.float32)).astype(np.float16)
        blk[:, :, 0:2] = d.view(np.uint8).reshape(rows, nb, 2)
        blk[:, :, 2:4] = m.view(np.uint8).reshape(rows, nb, 2)
        blk[:, :, 4:] = rng.integers(0, 256, (rows, nb, 16), dtype=np.uint8)
    else:
        blk = np.zeros((rows, nb, 34), np.uint8)
        d = (rng.standard_normal((rows, nb)) * 0.0002 + 0.001).astype(np.float16)
        blk[:, :, 0:2] = d.view(np.uint8).reshape(rows, nb, 2)
        blk[:, :, 2:] = rng.integers(0, 256, (rows, nb, 32), dtype=np.uint8)
    return blk.reshape(rows, nb * blk.shape[2])


w = gguf.GGUFWriter(OUT, "llama")
w.add_name("TinyLlama-1.1B-shaped random weights")
w.add_context_length(2048)
w.add_embedding_length(H)
w.add_block_count(L)
w.add_feed_forward_length(F)
w.add_head_count(NH)
w.add_head_count_kv(NKV)
w.add_layer_norm_rms_eps(1e-5)
w.add_rope_freq_base(10000.0)
w.add_vocab_size(V)
tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
tokens += [f"tok{i}" for i in range(V - len(tokens))]
w.add_tokenizer_model("llama")
w.add_token_list(tokens)
w.add_token_scores([-float(i) for i in range(V)])
w.add_token_types([2, 3, 3] + [6] * 256 + [1] * (V - 259))  # unknown, control, byte, normal
w.add_bos_token_id(1)
w.add_eos_token_id(2)
w.add_unk_token_id(0)
w.add_tensor("token_embd.weight", matrix(V, H), raw_dtype=TYPE)
for layer in range(L):
    p = f"blk.{layer}."
    w.add_tensor(p + "attn_norm.weight", np.ones(H, np.float32))
    w.add_tensor(p + "attn_q.weight", matrix(H, H), raw_dtype=TYPE)
    w.add_tensor(p + "attn_k.weight", matrix(NKV * HD, H), raw_dtype=TYPE)
    w.add_tensor(p + "attn_v.weight", matrix(NKV * HD, H), raw_dtype=TYPE)
    w.add_tensor(p + "attn_output.weight", matrix(H, H), raw_dtype=TYPE)
    w.add_tensor(p + "ffn_norm.weight", np.ones(H, np.float32))
    w.add_tensor(p + "ffn_gate.weight", matrix(F, H), raw_dtype=TYPE)
    w.add_tensor(p + "ffn_up.weight", matrix(F, H), raw_dtype=TYPE)
    w.add_tensor(p + "ffn_down.weight", matrix(H, F), raw_dtype=TYPE)
w.add_tensor("output_norm.weight", np.ones(H, np.float32))
w.add_tensor("output.weight", matrix(V, H), raw_dtype=TYPE)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
print(OUT)
