#!/usr/bin/env python3
"""HF transformers' reference run of kvinfer's default model (committed; CI has no torch).

    tools/fetch_model.sh      # models/SmolLM2-135M-Instruct.Q4_1.gguf
    /root/fixenv/bin/python tools/make_smollm2_reference.py [--gguf PATH] [--out tests/data/smollm2]

Needs: torch==2.15.0 transformers==5.24.0 gguf==0.19.0 accelerate==1.15.0 (which transformers
requires for GGUF files) safetensors==0.8.0 tokenizers==0.23.3 numpy==2.4.6. Runs in about 3
minutes on 2 busy CPU cores.

transformers loads the GGUF file itself (from_pretrained(..., gguf_file=...)): it dequantises
every Q4_1/Q8_0 tensor to float32 with the gguf package, undoes llama.cpp's Q/K row permutation
and builds a LlamaForCausalLM; the tokenizer is built from the GGUF metadata. All math is float32
on the CPU with eager attention. For each prompt (two raw texts, two chat conversations rendered
by apply_chat_template with the GGUF's template) it records the prompt ids, the logits at every
prompt position (one forward), and 32 greedy steps (explicit single-token forwards over HF's KV
cache, never stopping at EOS) with the logits of each step.

A full logits row is 49152 floats (192 KiB), so to stay small (~6 MB) reference.safetensors keeps,
per prompt i:
  p{i}.prompt_ids      int32 [T]
  p{i}.greedy_ids      int32 [32]
  p{i}.last_logits     f32 [V]        full row at the last prompt position (= greedy step 0)
  p{i}.prompt_cols     f32 [T, V/8]   every position, the columns 0, 8, 16, ... (a fixed sample)
  p{i}.greedy_cols     f32 [32, V/8]  every greedy step, the same columns
  p{i}.prompt_top_ids  int32 [T, 16]  every position, the 16 largest logits' ids (descending)
  p{i}.prompt_top      f32 [T, 16]    and their values
  p{i}.greedy_top_ids  int32 [32, 16]
  p{i}.greedy_top      f32 [32, 16]
and reference.json the texts, rendered chat text, each greedy step's top-1 minus top-2 margin, and
HF's own cache-on vs cache-off difference (its float32 noise floor).
"""
import argparse
import json
import pathlib
import sys

import numpy as np
import tokenizers
import torch
import transformers
from safetensors.numpy import save_file
from tokenizers import pre_tokenizers

ROOT = pathlib.Path(__file__).resolve().parent.parent
N_GREEDY = 32
COLUMN_STRIDE = 8
TOP_K = 16

PROMPTS = [
    {"kind": "raw", "text": "The capital of France is"},
    {"kind": "raw", "text": "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n"},
    {"kind": "chat", "messages": [{"role": "user", "content": "What is the capital of France?"}]},
    {"kind": "chat", "messages": [
        {"role": "system", "content": "You are a concise assistant."},
        {"role": "user", "content": "Write a haiku about a cache that remembers keys and values."}]},
]


def smollm2_pre_tokenizer_ids(tok, text):
    """Ids with SmolLM2's own pre-tokenizer (Digits + ByteLevel), which transformers' GGUF
    conversion lacks (it only matters for numerics outside 0-9; see
    tests/data/tokenizers/expected/PROVENANCE.md). The prompts must not depend on the difference."""
    backend = tokenizers.Tokenizer.from_str(tok.backend_tokenizer.to_str())
    backend.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    return backend.encode(text, add_special_tokens=False).ids


@torch.no_grad()
def reference(model, ids):
    x = torch.tensor([ids])
    out = model(x, use_cache=True)
    prompt_logits = out.logits[0].float()
    past = out.past_key_values
    step = prompt_logits[-1]
    greedy, greedy_logits = [], []
    for _ in range(N_GREEDY):
        greedy_logits.append(step.clone())
        nxt = int(torch.argmax(step))
        greedy.append(nxt)
        out = model(torch.tensor([[nxt]]), past_key_values=past, use_cache=True)
        past = out.past_key_values
        step = out.logits[0, -1].float()
    greedy_logits = torch.stack(greedy_logits)
    # HF without its cache: the same tokens, and how far its own float32 results move when only
    # the shapes of the products change (the noise floor of a different summation order).
    full = model(torch.tensor([ids + greedy[:-1]]), use_cache=False).logits[0].float()
    t = len(ids)
    if [int(i) for i in torch.argmax(full[t - 1:], dim=-1)] != greedy:
        sys.exit("HF's cache-off greedy tokens differ from its cache-on ones")
    self_diff = {"prompt": float((full[:t] - prompt_logits).abs().max()),
                 "greedy": float((full[t - 1:] - greedy_logits).abs().max())}
    return prompt_logits.numpy(), np.array(greedy, np.int32), greedy_logits.numpy(), self_diff


def top(rows):
    idx = np.argsort(-rows, axis=1, kind="stable")[:, :TOP_K].astype(np.int32)
    return idx, np.take_along_axis(rows, idx, axis=1).astype(np.float32)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gguf", type=pathlib.Path, default=ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf")
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "tests" / "data" / "smollm2")
    args = parser.parse_args()
    torch.manual_seed(0)

    directory, name = str(args.gguf.parent), args.gguf.name
    tok = transformers.AutoTokenizer.from_pretrained(directory, gguf_file=name)
    model = transformers.AutoModelForCausalLM.from_pretrained(
        directory, gguf_file=name, dtype=torch.float32, attn_implementation="eager").eval()
    assert type(model).__name__ == "LlamaForCausalLM", type(model).__name__

    tensors, meta = {}, []
    for i, p in enumerate(PROMPTS):
        entry = dict(p)
        if p["kind"] == "chat":
            text = tok.apply_chat_template(p["messages"], tokenize=False, add_generation_prompt=True)
            ids = tok(text, add_special_tokens=False)["input_ids"]
            entry["rendered"] = text
        else:
            text = p["text"]
            ids = tok(text)["input_ids"]  # add_special_tokens=True: the GGUF says add_bos_token false
        if smollm2_pre_tokenizer_ids(tok, text) != ids:
            sys.exit(f"prompt {i}: transformers' GGUF tokenizer and SmolLM2's pre-tokenizer disagree")
        prompt_logits, greedy, greedy_logits, self_diff = reference(model, ids)
        margins = np.sort(greedy_logits, axis=1)[:, -2:]
        entry.update({
            "prompt_tokens": len(ids),
            "greedy_text": tok.decode(greedy.tolist()),
            "greedy_margins": [float(m) for m in (margins[:, 1] - margins[:, 0])],
            "hf_cache_on_vs_off_max_abs": self_diff,
        })
        meta.append(entry)
        prompt_top_ids, prompt_top = top(prompt_logits)
        greedy_top_ids, greedy_top = top(greedy_logits)
        tensors.update({
            f"p{i}.prompt_ids": np.array(ids, np.int32),
            f"p{i}.greedy_ids": greedy,
            f"p{i}.last_logits": np.ascontiguousarray(prompt_logits[-1]),
            f"p{i}.prompt_cols": np.ascontiguousarray(prompt_logits[:, ::COLUMN_STRIDE]),
            f"p{i}.greedy_cols": np.ascontiguousarray(greedy_logits[:, ::COLUMN_STRIDE]),
            f"p{i}.prompt_top_ids": prompt_top_ids, f"p{i}.prompt_top": prompt_top,
            f"p{i}.greedy_top_ids": greedy_top_ids, f"p{i}.greedy_top": greedy_top,
        })
        print(f"prompt {i} ({p['kind']}, {len(ids)} tokens): {entry['greedy_text']!r}; "
              f"min margin {min(entry['greedy_margins']):.4f}; HF cache on/off {self_diff}")

    args.out.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(args.out / "reference.safetensors"))
    info = {"model": name, "vocab_size": int(model.config.vocab_size), "n_greedy": N_GREEDY,
            "column_stride": COLUMN_STRIDE, "top_k": TOP_K, "torch": torch.__version__,
            "transformers": transformers.__version__, "tokenizers": tokenizers.__version__, "prompts": meta}
    with open(args.out / "reference.json", "w", encoding="utf-8") as f:
        json.dump(info, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {args.out / 'reference.safetensors'} and reference.json")


if __name__ == "__main__":
    main()
