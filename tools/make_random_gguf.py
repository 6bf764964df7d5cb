#!/usr/bin/env python3
"""A llama GGUF of a published model's shape with random weights, for benchmarks on files of real
size (docs/benchmarks.md). Developer tool, not used by the build or the tests:
pip install gguf==0.19.0 numpy.

    tools/make_random_gguf.py q4_1 /tmp/tiny_q4_1.gguf                      # TinyLlama-1.1B shape
    tools/make_random_gguf.py f16 /tmp/tiny_f16.gguf --shape tinyllama --context 8192
    tools/make_random_gguf.py f16 /tmp/llama32_f16.gguf --shape llama3.2-1b
    llama-quantize /tmp/tiny_f16.gguf /tmp/tiny_q4_k_m.gguf Q4_K_M           # llama.cpp's own mixes

q4_1 and q8_0 write those blocks directly: small positive f16 scales (Q4_1's minimum -8 d) and
random codes, so that logits stay finite. f16 writes matrices of N(0, 0.02²) values, the
distribution of a trained model's weights, for llama.cpp's llama-quantize to turn into any of its
types (Q4_0, Q4_K_M, Q5_K_M, Q6_K ...) exactly as it quantises a real checkpoint. The vocabulary is
a stand-in SentencePiece one (<unk>, <s>, </s>, the 256 byte tokens, then "tok<i>"), so that other
GGUF readers (llama.cpp's llama-bench, to measure side by side on the same file) load the file
too; the benchmarks draw random prompt ids.
"""
import argparse

import gguf
import numpy as np

SHAPES = {  # hidden, ffn, layers, heads, kv heads, vocab, rope theta, tied embeddings
    "tinyllama": (2048, 5632, 22, 32, 4, 32000, 10000.0, False),
    "llama3.2-1b": (2048, 8192, 16, 32, 8, 128256, 500000.0, True),
}

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("type", choices=["q4_1", "q8_0", "f16"])
ap.add_argument("out")
ap.add_argument("--shape", choices=sorted(SHAPES), default="tinyllama")
ap.add_argument("--context", type=int, default=2048, help="context_length to state (the benchmarks' longest run)")
args = ap.parse_args()

H, F, L, NH, NKV, V, THETA, TIED = SHAPES[args.shape]
HD = H // NH
rng = np.random.default_rng(0)
TYPE = {"q4_1": gguf.GGMLQuantizationType.Q4_1, "q8_0": gguf.GGMLQuantizationType.Q8_0,
        "f16": gguf.GGMLQuantizationType.F16}[args.type]


def matrix(rows, cols):
    """(rows, cols) in the file's type: blocks as raw bytes, or f16 values."""
    if args.type == "f16":
        out = np.empty((rows, cols), np.float16)
        for r in range(0, rows, 4096):  # in slices: a 128k-row embedding in f32 would be 1 GiB
            out[r:r + 4096] = (rng.standard_normal((min(4096, rows - r), cols), np.float32) * 0.02).astype(np.float16)
        return out
    nb = cols // 32
    if args.type == "q4_1":
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


def add(w, name, m):
    if args.type == "f16":
        w.add_tensor(name, m)
    else:
        w.add_tensor(name, m, raw_dtype=TYPE)


w = gguf.GGUFWriter(args.out, "llama")
w.add_name(f"{args.shape}-shaped random weights")
w.add_context_length(args.context)
w.add_embedding_length(H)
w.add_block_count(L)
w.add_feed_forward_length(F)
w.add_head_count(NH)
w.add_head_count_kv(NKV)
w.add_layer_norm_rms_eps(1e-5)
w.add_rope_freq_base(THETA)
w.add_vocab_size(V)
w.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if args.type == "f16" else
                gguf.LlamaFileType.MOSTLY_Q4_1 if args.type == "q4_1" else gguf.LlamaFileType.MOSTLY_Q8_0)
tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
tokens += [f"tok{i}" for i in range(V - len(tokens))]
w.add_tokenizer_model("llama")
w.add_token_list(tokens)
w.add_token_scores([-float(i) for i in range(V)])
w.add_token_types([2, 3, 3] + [6] * 256 + [1] * (V - 259))  # unknown, control, byte, normal
w.add_bos_token_id(1)
w.add_eos_token_id(2)
w.add_unk_token_id(0)
add(w, "token_embd.weight", matrix(V, H))
for layer in range(L):
    p = f"blk.{layer}."
    w.add_tensor(p + "attn_norm.weight", np.ones(H, np.float32))
    add(w, p + "attn_q.weight", matrix(H, H))
    add(w, p + "attn_k.weight", matrix(NKV * HD, H))
    add(w, p + "attn_v.weight", matrix(NKV * HD, H))
    add(w, p + "attn_output.weight", matrix(H, H))
    w.add_tensor(p + "ffn_norm.weight", np.ones(H, np.float32))
    add(w, p + "ffn_gate.weight", matrix(F, H))
    add(w, p + "ffn_up.weight", matrix(F, H))
    add(w, p + "ffn_down.weight", matrix(H, F))
w.add_tensor("output_norm.weight", np.ones(H, np.float32))
if not TIED:
    add(w, "output.weight", matrix(V, H))
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
print(args.out)
