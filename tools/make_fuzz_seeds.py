#!/usr/bin/env python3
"""Small seeds for the tokenizer.json fuzz target (fuzz/seeds/tokenizer_json/), cut from the real
tokenizer.json files of tests/data/tokenizers/hf (packed; see its PROVENANCE.md): each keeps the file's
structure (normalizer, pre-tokenizer, model type, decoder, post-processor, added tokens) and the
first 300 entries of its vocabulary, with the merges whose parts and result are all kept. Real
files of 2-9 MB make a fuzzer execute a few times a second; these take milliseconds.
    python3 tools/make_fuzz_seeds.py
"""
import json
import pathlib

from tokenizer_data import unpacked

ROOT = pathlib.Path(__file__).resolve().parent.parent
SRC = unpacked() / "hf"  # tests/data/tokenizers/hf, its tokenizer.json files unpacked
OUT = ROOT / "fuzz/seeds/tokenizer_json"
KEEP = 300


def cut(tok):
    model = tok["model"]
    vocab = model.get("vocab")
    if isinstance(vocab, dict):  # BPE / WordPiece: token -> id
        kept = {t: i for t, i in vocab.items() if i < KEEP}
        model["vocab"] = kept
        merges = model.get("merges") or []
        out = []
        for m in merges:
            a, b = m.split(" ", 1) if isinstance(m, str) else m
            if a in kept and b in kept and (a + b) in kept:
                out.append(m)
        model["merges"] = out
    elif isinstance(vocab, list):  # Unigram: [token, score]
        model["vocab"] = vocab[:KEEP]
    return tok


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    for d in sorted(SRC.iterdir()):
        f = d / "tokenizer.json"
        if not f.is_file():
            continue
        tok = cut(json.loads(f.read_text(encoding="utf-8")))
        # Added tokens get ids after the kept vocabulary, in their order.
        for i, t in enumerate(tok.get("added_tokens") or []):
            t["id"] = KEEP + i
        (OUT / f"{d.name}.json").write_text(json.dumps(tok, ensure_ascii=False, indent=1), encoding="utf-8")
        print(OUT / f"{d.name}.json", (OUT / f"{d.name}.json").stat().st_size, "bytes")


if __name__ == "__main__":
    main()
