#!/usr/bin/env python3
"""Build tests/data/models/chatml_tiny: a tiny random Llama with a real trained tokenizer and a
ChatML chat template, plus HF's own text-level references for kvinfer's text tests.

Usage (from the repo root):
    python tools/make_text_fixture.py [--out tests/data/models/chatml_tiny]
Needs: torch 2.15, transformers 5.24, tokenizers 0.23.3, safetensors 0.8 (pip).

Writes, next to the HF checkpoint (config.json, model.safetensors, generation_config.json):
  tokenizer.json, tokenizer_config.json  byte-level BPE (vocab 384) trained by HF `tokenizers` on
                                         the corpus below, with <|endoftext|>, <|im_start|> and
                                         <|im_end|> as special tokens; SmolLM2's ChatML template
  text_reference.json                    for each prompt: HF's ids (add_special_tokens=True) and
                                         the greedy continuation (24 tokens, eos ignored) as ids
                                         and decoded text (skip_special_tokens=True); for a
                                         2-turn chat continued over one cache: the ids each turn
                                         prefills (its rendered text beyond what the cache holds)
                                         and HF's greedy reply (tokens that are not whole UTF-8
                                         on their own banned, listed in chat_banned_ids).
Deterministic: fixed seeds; the seed is bumped until every greedy step has a top-1/top-2 logit
margin of at least 1e-3 (so float rounding cannot flip a token).
"""

import argparse
import json
import os

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

CORPUS = [
    "The key-value cache stores the keys and values of every token once.",
    "Decode is memory bound: each step reads the weights and the whole cache.",
    "Grüße aus München! Zażółć gęślą jaźń. Привет, мир. 你好，世界。 🦙✨",
    "def add(a, b):\n    return a + b\n\nprint(add(2, 3))  # 5\n",
    "Numbers: 3.14159, 2718281828, 1,000,000 and 42.",
    "Hello! How are you today? I'm fine, thanks. What's the weather like?",
    "Once upon a time, a small model answered questions about caches and tokens.",
]
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# SmolLM2-135M-Instruct's chat template (from its tokenizer_config.json / GGUF metadata).
CHAT_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}"
    "{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
PROMPTS = ["The key-value cache", "Grüße aus München! 🦙", "def add(a, b):\n"]
CHAT_TURNS = ["Hello! What is a KV cache?", "And why is decode memory bound?"]
N_NEW = 24
MIN_MARGIN = 1e-3


def train_tokenizer():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=384, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(CORPUS * 4, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=None, eos_token="<|im_end|>",
                                   unk_token=None, pad_token="<|endoftext|>")


def token_bytes(tok, i):
    """The bytes token i stands for (byte-level BPE: each character is one byte)."""
    table = {c: b for b, c in enumerate(bytes_to_unicode_chars())}
    return bytes(table[c] for c in tok.convert_ids_to_tokens(i)) if i >= len(SPECIALS) else SPECIALS[i].encode()


def bytes_to_unicode_chars():
    """GPT-2's byte → printable character map, as a list indexed by byte."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    chars, extra = [], 0
    for b in range(256):
        if b in keep:
            chars.append(chr(b))
        else:
            chars.append(chr(256 + extra))
            extra += 1
    return chars


def valid_utf8(b):
    try:
        b.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def greedy(model, ids, n, mask=None):
    """Greedy continuation with HF's cache; returns ids and the smallest top-1/top-2 margin."""
    out, margin = [], float("inf")
    past, inp = None, torch.tensor([ids])
    with torch.no_grad():
        for _ in range(n):
            r = model(input_ids=inp, past_key_values=past, use_cache=True)
            logits = r.logits[0, -1] if mask is None else r.logits[0, -1] + mask
            top = torch.topk(logits, 2).values
            margin = min(margin, float(top[0] - top[1]))
            nxt = int(torch.argmax(logits))
            out.append(nxt)
            past, inp = r.past_key_values, torch.tensor([[nxt]])
    return out, margin


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/data/models/chatml_tiny")
    args = ap.parse_args()
    hf_tok = train_tokenizer()
    hf_tok.chat_template = CHAT_TEMPLATE
    vocab = len(hf_tok)

    for seed in range(1000, 1050):
        torch.manual_seed(seed)
        cfg = LlamaConfig(vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                          initializer_range=0.15, rms_norm_eps=1e-6, tie_word_embeddings=False,
                          bos_token_id=None, eos_token_id=hf_tok.convert_tokens_to_ids("<|im_end|>"),
                          pad_token_id=hf_tok.convert_tokens_to_ids("<|endoftext|>"))
        model = LlamaForCausalLM(cfg).eval()
        prompts, worst = [], float("inf")
        for text in PROMPTS:
            ids = hf_tok(text, add_special_tokens=True)["input_ids"]
            new, m = greedy(model, ids, N_NEW)
            worst = min(worst, m)
            prompts.append({"text": text, "ids": ids, "greedy_ids": new,
                            "greedy_text": hf_tok.decode(new, skip_special_tokens=True)})
        # The chat, as kvinfer continues it over one cache: turn 2 appends only the text the cache
        # lacks (the reply's last token, never fed back, then the template's glue and the new
        # message). Tokens that are not whole UTF-8 text on their own are banned so the replies
        # are text that survives decode → render.
        banned = [i for i in range(vocab) if not valid_utf8(token_bytes(hf_tok, i))]
        mask = torch.zeros(vocab)
        mask[banned] = float("-inf")
        messages, turns, cached_ids, cached_text = [], [], [], ""
        for user in CHAT_TURNS:
            messages.append({"role": "user", "content": user})
            rendered = hf_tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
            assert rendered.startswith(cached_text)
            new_ids = hf_tok(rendered[len(cached_text):], add_special_tokens=False)["input_ids"]
            reply, m = greedy(model, cached_ids + new_ids, N_NEW, mask)
            worst = min(worst, m)
            text = hf_tok.decode(reply, skip_special_tokens=True)
            turns.append({"user": user, "rendered": rendered, "prefill_ids": new_ids, "reused": len(cached_ids),
                          "greedy_ids": reply, "greedy_text": text})
            cached_ids = cached_ids + new_ids + reply[:-1]
            cached_text = rendered + "".join(token_bytes(hf_tok, i).decode() for i in reply[:-1])
            messages.append({"role": "assistant", "content": text})
        if worst >= MIN_MARGIN:
            break
    else:
        raise SystemExit("no seed gave greedy margins >= %g" % MIN_MARGIN)

    os.makedirs(args.out, exist_ok=True)
    model.save_pretrained(args.out, safe_serialization=True)
    hf_tok.save_pretrained(args.out)
    ref = {"seed": seed, "min_margin": worst, "max_new_tokens": N_NEW, "prompts": prompts, "chat_banned_ids": banned,
           "chat": turns}
    with open(os.path.join(args.out, "text_reference.json"), "w", encoding="utf-8") as f:
        json.dump(ref, f, ensure_ascii=False, indent=1)
    print(f"{args.out}: vocab {vocab}, seed {seed}, min margin {worst:.4g}")


if __name__ == "__main__":
    main()
