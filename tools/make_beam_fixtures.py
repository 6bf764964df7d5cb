#!/usr/bin/env python3
"""HF transformers beam-search references for kvinfer's beam_search (tests/test_beam_search.cpp).

Usage (from the repo root, normally via tools/make_beam_fixtures.sh):
    python tools/make_beam_fixtures.py [--out tests/data/beam/references.json]

For each case below, loads a committed fixture (tests/data/models/<fixture>, as make_fixtures.py
does: stored dtype, then f32, eager attention), takes its prompt_ids from reference.safetensors
and runs

    model.generate(input_ids, attention_mask, num_beams=..., do_sample=False, length_penalty=...,
                   early_stopping=..., no_repeat_ngram_size=..., num_return_sequences=...,
                   max_new_tokens=..., eos_token_id=..., pad_token_id=...,
                   output_scores=True, return_dict_in_generate=True)

and records every returned hypothesis: its generated tokens (the length from beam_indices,
whose unused entries are -1) and sequences_scores, plus the number of steps HF ran
(len(scores)). The output is deterministic (one CPU thread, deterministic algorithms).

eos "model" is the fixture's config eos; "frequent" is the token that occurs most often in the
generated tokens of the same search run with the model's eos (ties: the lowest id), so that
hypotheses end at different lengths and the finished set, the length penalty and the
early-stopping rules all come into play.
"""

import argparse
import collections
import json
import os
import sys

import torch
import transformers
import safetensors
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
MODELS = os.path.join(REPO, "tests", "data", "models")

# (fixture, num_beams, max_new_tokens, length_penalty, early_stopping, no_repeat_ngram_size,
#  num_return_sequences, eos)
SETTINGS = [
    (2, 12, 1.0, False, 0, 1, "model"),
    (4, 16, 1.0, False, 0, 4, "model"),
    (4, 16, 0.5, True, 0, 2, "frequent"),
    (4, 16, 2.0, False, 0, 3, "frequent"),
    (4, 16, 1.0, "never", 0, 4, "frequent"),
    (3, 14, 2.0, "never", 2, 2, "frequent"),
    (2, 14, 0.5, False, 2, 2, "frequent"),
    (4, 12, 1.0, True, 2, 1, "model"),
]
FIXTURES = ["llama_mha", "llama_gqa4", "gpt2_tiny", "qwen2_bias", "mistral_window", "llama_bf16"]
EXTRA = [
    # one new token: every candidate hits max_new_tokens at once
    ("llama_mqa", 4, 1, 1.0, False, 0, 4, "model"),
    # length_penalty 0 with "never": the textbook beam search (HF's docstring)
    ("llama_mqa", 3, 10, 0.0, "never", 0, 3, "frequent"),
    # a negative length penalty favours short hypotheses; "never" then bounds by cur_len
    ("llama_attn_bias", 4, 12, -1.0, "never", 0, 2, "frequent"),
    ("llama_attn_bias", 4, 12, -1.0, False, 0, 2, "frequent"),
    # no_repeat_ngram_size 1: no token twice, the prompt's included
    ("gpt2_untied_f16", 2, 10, 1.0, False, 1, 2, "model"),
    # a 3-gram ban, early_stopping true, a head_dim of its own
    ("llama_head_dim", 2, 20, 1.0, True, 3, 2, "frequent"),
    # long searches where the stopping rules end the search early, each rule on its own
    ("llama_mha", 4, 40, 1.0, False, 0, 4, "frequent"),
    ("llama_mha", 4, 40, 1.0, True, 0, 4, "frequent"),
    ("gpt2_tiny", 3, 40, 1.0, False, 0, 3, "frequent"),
    ("gpt2_tiny", 3, 40, 2.0, "never", 0, 3, "frequent"),
    ("qwen2_bias", 4, 40, 0.0, False, 0, 2, "frequent"),
    ("llama_gqa4", 3, 40, 1.0, True, 0, 2, "model"),
]


def load(fixture):
    cfg = json.load(open(os.path.join(MODELS, fixture, "config.json")))
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[
        cfg.get("dtype", cfg.get("torch_dtype", "float32"))]
    model = AutoModelForCausalLM.from_pretrained(os.path.join(MODELS, fixture), dtype=dtype,
                                                 attn_implementation="eager")
    model = model.float().eval()
    prompt = load_file(os.path.join(MODELS, fixture, "reference.safetensors"))["prompt_ids"].to(torch.long)
    eos = cfg["eos_token_id"]
    return model, prompt, eos if isinstance(eos, list) else [eos]


def run(model, prompt, beams, new, lp, es, ngram, nret, eos):
    ids = prompt[None, :]
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), num_beams=beams, do_sample=False,
                             length_penalty=lp, early_stopping=es, no_repeat_ngram_size=ngram,
                             num_return_sequences=nret, max_new_tokens=new, eos_token_id=eos,
                             pad_token_id=eos[0], output_scores=True, return_dict_in_generate=True)
    T = prompt.shape[0]
    seqs = []
    for i in range(nret):
        n = int((out.beam_indices[i] != -1).sum())
        tokens = out.sequences[i, T:T + n].tolist()
        assert torch.equal(out.sequences[i, :T], prompt)
        # a hypothesis ends at its first eos id or at max_new_tokens
        assert n == new or (tokens[-1] in eos and not any(t in eos for t in tokens[:-1])), (tokens, eos)
        seqs.append({"tokens": tokens, "score": float(out.sequences_scores[i])})
    return seqs, len(out.scores)


def frequent_token(seqs):
    counts = collections.Counter(t for s in seqs for t in s["tokens"])
    return min(counts, key=lambda t: (-counts[t], t))


def dump(doc):
    """JSON with one case a line: small, and a regenerated file diffs case by case."""
    head = {k: v for k, v in doc.items() if k != "cases"}
    lines = [json.dumps(head)[:-1] + ', "cases": [']
    lines += [" " + json.dumps(c) + ("," if i + 1 < len(doc["cases"]) else "") for i, c in enumerate(doc["cases"])]
    return "\n".join(lines) + "\n]}\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "data", "beam", "references.json"))
    args = ap.parse_args()
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    versions = {"python": sys.version.split()[0], "torch": torch.__version__,
                "transformers": transformers.__version__, "safetensors": safetensors.__version__}
    print(versions)

    cases = [(f,) + s for f in FIXTURES for s in SETTINGS] + EXTRA
    out = []
    models = {}
    for fixture, beams, new, lp, es, ngram, nret, eos_mode in cases:
        if fixture not in models:
            models[fixture] = load(fixture)
        model, prompt, model_eos = models[fixture]
        eos = model_eos
        if eos_mode == "frequent":
            probe, _ = run(model, prompt, beams, new, lp, es, ngram, beams, model_eos)
            eos = [frequent_token(probe)]
        seqs, steps = run(model, prompt, beams, new, lp, es, ngram, nret, eos)
        name = f"{fixture}_b{beams}_n{new}_lp{lp}_es{str(es).lower()}_ng{ngram}_r{nret}_eos{eos_mode}"
        ended = sum(1 for s in seqs if s["tokens"][-1] in eos and len(s["tokens"]) < new)
        print(f"  {name}: steps={steps} eos={eos} lengths={[len(s['tokens']) for s in seqs]} ended_by_eos={ended}")
        out.append({"name": name, "fixture": fixture, "prompt_ids": prompt.tolist(), "num_beams": beams,
                    "max_new_tokens": new, "length_penalty": lp,
                    "early_stopping": es if isinstance(es, str) else str(es).lower(),
                    "no_repeat_ngram_size": ngram, "num_return_sequences": nret, "eos_token_id": eos,
                    "steps": steps, "sequences": seqs})

    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        f.write(dump({"generator": "tools/make_beam_fixtures.py", "versions": versions, "cases": out}))
    print(f"wrote {len(out)} cases to {os.path.relpath(args.out, REPO)}")


if __name__ == "__main__":
    main()
