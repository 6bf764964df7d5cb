#!/usr/bin/env python3
"""Convert HF fixture checkpoints of tests/data/models into GGUF v3 models the way llama.cpp's
convert_hf_to_gguf.py does, and record HF reference logits for every lossy conversion.

Usage (from the repo root):
    /root/fixenv/bin/python tools/make_gguf_model_fixtures.py [--out tests/data/gguf/models]

Needs: gguf==0.19.0, numpy==2.4.6, torch==2.15.0, transformers==5.24.0, safetensors==0.8.0
(pip install gguf==0.19.0 numpy==2.4.6 torch==2.15.0 transformers==5.24.0 safetensors==0.8.0).
It imports MIN_MARGIN, greedy_with_cache and min_margin from tools/make_fixtures.py.

What is reproduced from llama.cpp (convert_hf_to_gguf.py, LlamaModel / Qwen2Model / Qwen3Model /
Gemma2Model / Gemma3Model, and
gguf-py's SpecialVocab), written here from its definition rather than copied:
  - metadata: general.architecture ("llama" or "qwen2"), {arch}.block_count, context_length,
    embedding_length, feed_forward_length, attention.head_count, head_count_kv,
    layer_norm_rms_epsilon, rope.freq_base, key_length/value_length (when config.json has
    head_dim), rope.dimension_count (llama), vocab_size, rope.scaling.type/factor (linear only),
    general.file_type; bos/eos/pad ids from SpecialVocab (which skips an eos *list*);
  - "qwen3": Qwen2's metadata and layout (no permutation), attn_q_norm / attn_k_norm, no biases;
  - "gemma2" / "gemma3": convert_gemma below (norms stored + 1, softcaps, sliding window);
  - tensor names from gguf's TensorNameMap (token_embd, blk.N.attn_q, ..., output_norm, output;
    no output.weight when the embeddings are tied);
  - "llama" Q and K rows permuted for ggml's interleaved rope: the rows of each head viewed as
    (n_head, 2, head_dim/2) with the middle two axes swapped, so that rotating the pairs
    (2i, 2i+1) equals HF's half-split rotation of (i, i + head_dim/2). "qwen2" is not permuted
    (ggml rotates it in the NEOX, half-split layout);
  - llama3 rope scaling as a rope_freqs.weight F32 tensor of per-frequency divisors (llama.cpp
    divides each frequency by it); the metadata then says no scaling;
  - tensor types: 1-D tensors (norms, biases, rope_freqs) F32; 2-D tensors F32, F16 or Q8_0
    (gguf.quants.quantize, blocks of 32 along each row);
  - the gpt2 tokenizer: tokens by id (AutoTokenizer, added special tokens CONTROL, other added
    tokens USER_DEFINED, the rest NORMAL), merges, the pre-tokenizer name, special ids and the
    chat template (SpecialVocab).

Every file is read back with gguf.GGUFReader, dequantised with gguf.quants.dequantize, its Q/K
rows un-permuted and loaded into the HF model class. A lossless file (F32, or F16 of F16 weights)
must give back the HF fixture's weights bit for bit and is checked against the fixture's own
reference.safetensors. A lossy file gets <name>.<type>.reference.safetensors: HF transformers'
f32 logits on the dequantised weights for the fixture's prompt at every position and a 32-step
greedy continuation (tools/make_fixtures.py's format and loop). Deterministic: two runs give
byte-identical files.
"""

import argparse
import hashlib
import json
import math
import os
import sys
from pathlib import Path

import numpy as np
import torch
import transformers
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

import gguf
from gguf import GGMLQuantizationType as Q

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_fixtures import FIXTURES as HF_FIXTURES, MIN_MARGIN, greedy_padded, greedy_with_cache, min_margin  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "tests" / "data" / "models"

# HF fixture -> the GGUF types it is converted to. Kept small (about 7 MB in all): every fixture
# in Q8_0 where its rows allow (multiples of 32), F32 where a test compares with the safetensors
# model exactly, F16 once lossless (llama_f16) and once lossy.
FIXTURES = [
    ("llama_gqa4", ["f32", "q8_0"]),
    ("llama_mha", ["q8_0"]),
    ("qwen2_bias", ["f32", "q8_0"]),
    ("llama3_rope", ["f16", "q8_0"]),
    ("llama_rope_linear", ["f16"]),  # Q8_0's greedy margin is 3.8e-4 < MIN_MARGIN
    ("llama_f16", ["f16"]),
    ("chatml_tiny", ["f32"]),
    ("gpt2_tiny", ["f32", "q8_0"]),
    ("qwen3_tiny", ["f32", "q8_0"]),
    ("gemma2_tiny", ["f32", "q8_0"]),
    ("gemma3_tiny", ["f32", "q8_0"]),
    ("mixtral_tiny", ["f32", "q8_0"]),
    ("qwen2_moe_tiny", ["f32", "q8_0"]),
    ("qwen3_moe_tiny", ["f32", "q8_0"]),
    ("llama_yarn", ["f32"]),
    ("qwen2_yarn", ["f32"]),
    ("phi3_longrope", ["f32"]),
    ("phi4_partial_rotary", ["f32", "q8_0"]),
]

FILE_TYPES = {"f32": gguf.LlamaFileType.ALL_F32, "f16": gguf.LlamaFileType.MOSTLY_F16,
              "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0}
ARCHS = {"LlamaForCausalLM": ("llama", gguf.MODEL_ARCH.LLAMA),
         "Qwen2ForCausalLM": ("qwen2", gguf.MODEL_ARCH.QWEN2),
         "Qwen3ForCausalLM": ("qwen3", gguf.MODEL_ARCH.QWEN3),
         "Gemma2ForCausalLM": ("gemma2", gguf.MODEL_ARCH.GEMMA2),
         "Gemma3ForCausalLM": ("gemma3", gguf.MODEL_ARCH.GEMMA3),
         "GPT2LMHeadModel": ("gpt2", gguf.MODEL_ARCH.GPT2),
         "MixtralForCausalLM": ("llama", gguf.MODEL_ARCH.LLAMA),
         "Qwen2MoeForCausalLM": ("qwen2moe", gguf.MODEL_ARCH.QWEN2MOE),
         "Qwen3MoeForCausalLM": ("qwen3moe", gguf.MODEL_ARCH.QWEN3MOE),
         "Phi3ForCausalLM": ("phi3", gguf.MODEL_ARCH.PHI3)}
# Mixture of experts, as convert_hf_to_gguf.py's LlamaModel (Mixtral), Qwen2MoeModel and
# Qwen3MoeModel (Qwen2MoeModel's conversion under the arch "qwen3moe"): each
# layer's per-expert matrices stacked into one (experts, rows, cols) tensor, ggml dims
# [cols, rows, experts]; the router (ffn_gate_inp) and the shared expert's gate
# (ffn_gate_inp_shexp) always F32, as its tensor type exclusions say.
EXPERT_PARTS = {"w1": "ffn_gate_exps", "w3": "ffn_up_exps", "w2": "ffn_down_exps",
                "gate_proj": "ffn_gate_exps", "up_proj": "ffn_up_exps", "down_proj": "ffn_down_exps"}
F32_ALWAYS = ("ffn_gate_inp.weight", "ffn_gate_inp_shexp.weight")
# GPT2Model in convert_hf_to_gguf.py: Conv1D weights transposed to (out, in); the causal-mask
# buffers dropped; output.weight written as a copy of token_embd (GPT-2 ties them).
GPT2_CONV1D = (".c_attn.weight", ".c_proj.weight", ".c_fc.weight")


def permute(w, n_head):
    """llama.cpp's Q/K permutation: rows as (n_head, 2, head_dim/2), middle axes swapped."""
    hd = w.shape[0] // n_head
    return w.reshape(n_head, 2, hd // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def unpermute(w, n_head):
    hd = w.shape[0] // n_head
    return w.reshape(n_head, hd // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def head_dim(cfg):
    return cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]


def llama3_rope_factors(cfg):
    """llama.cpp's LlamaModel.generate_extra_tensors, in torch f32 as there. original_max is
    read from the rope parameters (where HF keeps it)."""
    rp = cfg["rope_parameters"]
    dim = head_dim(cfg)
    freqs = 1.0 / (rp["rope_theta"] ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    factor, low, high = rp["factor"], rp["low_freq_factor"], rp["high_freq_factor"]
    old = rp["original_max_position_embeddings"]
    low_wl, high_wl = old / low, old / high
    factors = []
    for freq in freqs:
        wavelen = 2 * math.pi / freq
        if wavelen < high_wl:
            factors.append(1)
        elif wavelen > low_wl:
            factors.append(factor)
        else:
            smooth = (old / wavelen - low) / (high - low)
            factors.append(1 / ((1 - smooth) / factor + smooth))
    return torch.tensor(factors, dtype=torch.float32)


def write_tokenizer(w, model_dir, vocab_size):
    """llama.cpp's get_vocab_base + _set_vocab_gpt2 for a byte-level BPE tokenizer.json."""
    tok = AutoTokenizer.from_pretrained(model_dir)
    reverse = {i: t for t, i in tok.get_vocab().items()}
    added = tok.get_added_vocab()
    tokens, types = [], []
    for i in range(vocab_size):
        if i not in reverse:
            tokens.append(f"[PAD{i}]")
            types.append(gguf.TokenType.UNUSED)
            continue
        token = reverse[i]
        if token in added:
            special = tok.added_tokens_decoder[i].special
            types.append(gguf.TokenType.CONTROL if special else gguf.TokenType.USER_DEFINED)
        else:
            types.append(gguf.TokenType.NORMAL)
        tokens.append(token)
    pre = json.load(open(model_dir / "tokenizer.json"))["pre_tokenizer"]
    assert pre == {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}, pre
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")  # ByteLevel with use_regex: GPT-2's regex
    w.add_token_list(tokens)
    w.add_token_types(types)


def gguf_tensor(data, qtype, n_dims):
    """(array for GGUFWriter, raw ggml type or None) as llama.cpp picks the type per tensor."""
    x = data.float().numpy()
    if n_dims == 1 or qtype == "f32":
        return x.astype(np.float32), None
    if qtype == "f16":
        return x.astype(np.float16), None
    try:
        return gguf.quants.quantize(x, Q.Q8_0), Q.Q8_0
    except gguf.QuantError:  # rows not whole blocks (qwen2_moe_tiny's shared expert, width 48): as llama.cpp
        return x.astype(np.float16), None


def convert_gpt2(w, cfg, state, qtype, tmap):
    """llama.cpp's GPT2Model: metadata and tensors."""
    w.add_context_length(cfg["n_positions"])
    w.add_embedding_length(cfg["n_embd"])
    w.add_block_count(cfg["n_layer"])
    w.add_feed_forward_length(cfg["n_inner"] or 4 * cfg["n_embd"])
    w.add_head_count(cfg["n_head"])
    w.add_layer_norm_eps(cfg["layer_norm_epsilon"])
    w.add_vocab_size(cfg["vocab_size"])
    w.add_file_type(FILE_TYPES[qtype])
    for hf_name in sorted(state):
        data = state[hf_name]
        if hf_name.endswith(GPT2_CONV1D):
            data = data.t().contiguous()
        new = tmap.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        array, raw = gguf_tensor(data, qtype, data.dim())
        w.add_tensor(new, array, raw_dtype=raw)
        if new == "token_embd.weight":
            w.add_tensor("output.weight", array, raw_dtype=raw)


def is_gemma_norm(hf_name):
    """Gemma2Model / Gemma3Model.modify_tensors: every tensor named *norm.weight (the block norms,
    q_norm / k_norm, the final norm) is stored with HF's (1 + w) applied."""
    return hf_name.endswith("norm.weight")


def convert_gemma(w, cfg, arch_name, qtype, state, tmap):
    """llama.cpp's Gemma2Model / Gemma3Model: metadata and tensors. Neither writes
    query_pre_attn_scalar (llama.cpp assumes head_dim, except on the 27B models) nor layer_types:
    llama.cpp's loader takes sliding_window_pattern (default 2 for gemma2, 6 for gemma3; the last
    layer of each period global). gemma3_tiny's period is 3, so its file states it (a key
    llama.cpp's loader reads; the converter of this version writes none). No lm_head (tied)."""
    assert cfg["query_pre_attn_scalar"] == cfg["head_dim"], "llama.cpp scales by 1/sqrt(head_dim)"
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_key_length(cfg["head_dim"])
    w.add_value_length(cfg["head_dim"])
    w.add_file_type(FILE_TYPES[qtype])
    w.add_sliding_window(cfg["sliding_window"])
    if arch_name == "gemma2":
        w.add_attn_logit_softcapping(cfg["attn_logit_softcapping"])
        w.add_final_logit_softcapping(cfg["final_logit_softcapping"])
    else:
        full = cfg["rope_parameters"]["full_attention"]
        w.add_rope_freq_base(full["rope_theta"])
        if full.get("rope_type") == "linear":
            w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
            w.add_rope_scaling_factor(full["factor"])
        assert cfg["rope_parameters"]["sliding_attention"]["rope_theta"] == 10000.0  # llama.cpp's fixed local base
        if cfg.get("final_logit_softcapping"):
            w.add_final_logit_softcapping(cfg["final_logit_softcapping"])
        types = cfg["layer_types"]
        period = types.index("full_attention") + 1
        assert types == [("full_attention" if (i + 1) % period == 0 else "sliding_attention")
                         for i in range(len(types))], types
        if period != 6:
            w.add_sliding_window_pattern(period)
    for hf_name in sorted(state):
        if hf_name == "lm_head.weight":
            continue
        data = state[hf_name]
        if is_gemma_norm(hf_name):
            data = data + 1
        array, raw = gguf_tensor(data, qtype, data.dim())
        w.add_tensor(tmap.get_name(hf_name, try_suffixes=(".weight", ".bias")), array, raw_dtype=raw)


def convert_phi3(w, cfg, state, qtype, tmap):
    """llama.cpp's Phi3MiniModel: its own metadata (no vocab_size, no key_length), rope dims
    int(partial_rotary_factor * n_embd) // n_head, the window (0: none), and for LongRoPE the
    factor tensors with rope.scaling.attn_factor sqrt(1 + ln(s) / ln(original)), s the ratio of
    the context lengths. No Q/K permutation (NEOX rope); qkv_proj -> attn_qkv, gate_up_proj ->
    ffn_up, by gguf's tensor map."""
    rp = cfg["rope_parameters"]
    n_embd, n_head = cfg["hidden_size"], cfg["num_attention_heads"]
    max_pos, orig = cfg["max_position_embeddings"], rp["original_max_position_embeddings"]
    rope_dims = int(rp.get("partial_rotary_factor", 1.0) * n_embd) // n_head
    w.add_context_length(max_pos)
    w.add_rope_scaling_orig_ctx_len(orig)
    w.add_embedding_length(n_embd)
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_head_count(n_head)
    w.add_head_count_kv(cfg.get("num_key_value_heads", n_head))
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_rope_dimension_count(rope_dims)
    w.add_rope_freq_base(rp["rope_theta"])
    w.add_file_type(FILE_TYPES[qtype])
    w.add_sliding_window(cfg.get("sliding_window") or 0)
    if rp.get("long_factor"):
        scale = max_pos / orig
        w.add_rope_scaling_attn_factors(math.sqrt(1 + math.log(scale) / math.log(orig)) if scale > 1.0 else 1.0)
        w.add_tensor("rope_factors_long.weight", np.asarray(rp["long_factor"], dtype=np.float32))
        w.add_tensor("rope_factors_short.weight", np.asarray(rp["short_factor"], dtype=np.float32))
    for hf_name in sorted(state):
        array, raw = gguf_tensor(state[hf_name], qtype, state[hf_name].dim())
        w.add_tensor(tmap.get_name(hf_name, try_suffixes=(".weight", ".bias")), array, raw_dtype=raw)


def convert(name, qtype, out_path):
    model_dir = MODELS / name
    cfg = json.load(open(model_dir / "config.json"))
    arch_name, arch = ARCHS[cfg["architectures"][0]]
    if arch_name == "gpt2":
        w = gguf.GGUFWriter(str(out_path), arch_name)
        w.add_name(f"kvinfer fixture {name}")
        state = load_file(model_dir / "model.safetensors")
        gguf.SpecialVocab(model_dir, load_merges=False, n_vocab=cfg["vocab_size"]).add_to_gguf(w)
        convert_gpt2(w, cfg, state, qtype, gguf.get_tensor_name_map(arch, cfg["n_layer"]))
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        return cfg, arch_name, arch, state
    if arch_name in ("gemma2", "gemma3"):
        w = gguf.GGUFWriter(str(out_path), arch_name)
        w.add_name(f"kvinfer fixture {name}")
        state = load_file(model_dir / "model.safetensors")
        gguf.SpecialVocab(model_dir, load_merges=False, n_vocab=cfg["vocab_size"]).add_to_gguf(w)
        convert_gemma(w, cfg, arch_name, qtype, state, gguf.get_tensor_name_map(arch, cfg["num_hidden_layers"]))
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        return cfg, arch_name, arch, state
    if arch_name == "phi3":
        w = gguf.GGUFWriter(str(out_path), arch_name)
        w.add_name(f"kvinfer fixture {name}")
        gguf.SpecialVocab(model_dir, load_merges=False, n_vocab=cfg["vocab_size"]).add_to_gguf(w)
        state = load_file(model_dir / "model.safetensors")
        convert_phi3(w, cfg, state, qtype, gguf.get_tensor_name_map(arch, cfg["num_hidden_layers"]))
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        return cfg, arch_name, arch, state
    n_layers, n_head = cfg["num_hidden_layers"], cfg["num_attention_heads"]
    n_kv = cfg.get("num_key_value_heads", n_head)
    rp = cfg["rope_parameters"]

    w = gguf.GGUFWriter(str(out_path), arch_name)
    w.add_name(f"kvinfer fixture {name}")
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(n_layers)
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(n_head)
    w.add_head_count_kv(n_kv)
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_rope_freq_base(rp["rope_theta"])
    if cfg.get("head_dim") is not None:  # MixtralConfig writes "head_dim": null
        w.add_key_length(cfg["head_dim"])
        w.add_value_length(cfg["head_dim"])
    if arch_name == "llama":
        w.add_rope_dimension_count(head_dim(cfg))
    if rp.get("rope_type") == "linear":
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(rp["factor"])
    if rp.get("rope_type") == "yarn":
        # TextModel.set_gguf_parameters: type, factor, original length; the optional HF keys
        # extrapolation_factor, attention_factor (as yarn_attn_factor), beta_fast, beta_slow.
        w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        w.add_rope_scaling_factor(rp["factor"])
        w.add_rope_scaling_orig_ctx_len(rp["original_max_position_embeddings"])
        if rp.get("attention_factor") is not None:
            w.add_rope_scaling_yarn_attn_factor(rp["attention_factor"])
        if rp.get("beta_fast") is not None:
            w.add_rope_scaling_yarn_beta_fast(rp["beta_fast"])
        if rp.get("beta_slow") is not None:
            w.add_rope_scaling_yarn_beta_slow(rp["beta_slow"])
    w.add_vocab_size(cfg["vocab_size"])
    w.add_file_type(FILE_TYPES[qtype])
    n_experts = cfg.get("num_local_experts") or cfg.get("num_experts")
    if n_experts:
        w.add_expert_count(n_experts)
        w.add_expert_used_count(cfg["num_experts_per_tok"])
    if arch_name in ("qwen2moe", "qwen3moe"):
        w.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
    if arch_name == "qwen2moe":
        w.add_expert_shared_feed_forward_length(cfg["shared_expert_intermediate_size"])
    if arch_name == "qwen3moe":
        # The converter writes no expert_weights_norm: llama.cpp's qwen3moe graph always renormalises.
        assert cfg["norm_topk_prob"], "a qwen3moe GGUF cannot say norm_topk_prob: false"
    has_tokenizer = (model_dir / "tokenizer.json").exists()
    if has_tokenizer:
        write_tokenizer(w, model_dir, cfg["vocab_size"])
    gguf.SpecialVocab(model_dir, load_merges=has_tokenizer, n_vocab=cfg["vocab_size"]).add_to_gguf(w)

    if rp.get("rope_type") == "llama3":
        w.add_tensor("rope_freqs.weight", llama3_rope_factors(cfg).numpy())
    tmap = gguf.get_tensor_name_map(arch, n_layers)
    state = load_file(model_dir / "model.safetensors")
    for new, data in sorted(gguf_tensors(state, arch_name, n_head, n_kv, n_experts, tmap)):
        if new in F32_ALWAYS or new.endswith(F32_ALWAYS):
            array, raw = data.float().numpy().astype(np.float32), None
        else:
            array, raw = gguf_tensor(data, qtype, data.dim())
        w.add_tensor(new, array, raw_dtype=raw)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return cfg, arch_name, arch, state


def expert_name(hf_name):
    """(layer, expert, part) of a per-expert HF tensor name, or None."""
    parts = hf_name.split(".")
    if ".experts." not in hf_name or not hf_name.endswith(".weight"):
        return None
    i = parts.index("experts")
    return int(parts[2]), int(parts[i + 1]), parts[i + 2]


# A dense MLP in a "qwen2moe" or "qwen3moe" model (mlp_only_layers): gguf-py's QWEN2MOE / QWEN3MOE tensor lists
# has no ffn_gate/ffn_up/ffn_down, so llama.cpp's converter refuses such a checkpoint. kvinfer reads
# them under the names every other architecture gives them (blk.N.ffn_gate.weight, ...).
DENSE_MLP = {"mlp.gate_proj": gguf.MODEL_TENSOR.FFN_GATE, "mlp.up_proj": gguf.MODEL_TENSOR.FFN_UP,
             "mlp.down_proj": gguf.MODEL_TENSOR.FFN_DOWN}


def gguf_name(tmap, hf_name):
    new = tmap.get_name(hf_name, try_suffixes=(".weight", ".bias"))
    if new is None:
        layer, part = hf_name.split(".")[2], ".".join(hf_name.split(".")[3:5])
        new = gguf.TENSOR_NAMES[DENSE_MLP[part]].format(bid=layer) + ".weight"
    return new


def gguf_tensors(state, arch_name, n_head, n_kv, n_experts, tmap):
    """(GGUF name, tensor) pairs of an HF state dict: Q/K permuted for "llama", experts stacked."""
    stacks = {}
    for hf_name, data in state.items():
        e = expert_name(hf_name)
        if e:
            stacks.setdefault((e[0], EXPERT_PARTS[e[2]]), {})[e[1]] = data
            continue
        if arch_name == "llama" and ".self_attn.q_proj." in hf_name:
            data = permute(data, n_head)
        if arch_name == "llama" and ".self_attn.k_proj." in hf_name:
            data = permute(data, n_kv)
        yield gguf_name(tmap, hf_name), data
    for (layer, part), experts in stacks.items():
        assert sorted(experts) == list(range(n_experts)), (layer, part, sorted(experts))
        yield f"blk.{layer}.{part}.weight", torch.stack([experts[i] for i in range(n_experts)])


def read_back(path, cfg, arch_name, arch, hf_names):
    """The GGUF file's tensors dequantised to f32, un-permuted, under their HF names."""
    n_layers = cfg.get("num_hidden_layers") or cfg["n_layer"]
    n_head = cfg.get("num_attention_heads") or cfg["n_head"]
    n_kv = cfg.get("num_key_value_heads", n_head)
    tmap = gguf.get_tensor_name_map(arch, n_layers)
    to_hf = {gguf_name(tmap, n): n for n in hf_names if not expert_name(n)}
    experts = {}  # GGUF name of a stack -> the HF names of its experts, in order
    for n in hf_names:
        if e := expert_name(n):
            experts.setdefault(f"blk.{e[0]}.{EXPERT_PARTS[e[2]]}.weight", {})[e[1]] = n
    r = gguf.GGUFReader(str(path))
    assert int(r.fields["GGUF.version"].contents()) == 3
    out, types = {}, set()
    for t in r.tensors:
        x = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        x = x.reshape([int(d) for d in reversed(t.shape)])
        types.add(t.tensor_type.name)
        if t.name in ("rope_freqs.weight", "rope_factors_long.weight", "rope_factors_short.weight") or \
                (arch_name == "gpt2" and t.name == "output.weight"):
            continue
        if t.name in experts:
            for i, n in experts[t.name].items():
                out[n] = torch.from_numpy(np.ascontiguousarray(x[i]))
            continue
        hf_name = to_hf[t.name]
        if arch_name == "gpt2" and hf_name.endswith(GPT2_CONV1D):
            x = x.T
        if arch_name == "llama" and ".self_attn.q_proj." in hf_name:
            x = unpermute(x, n_head)
        if arch_name == "llama" and ".self_attn.k_proj." in hf_name:
            x = unpermute(x, n_kv)
        if arch_name in ("gemma2", "gemma3") and is_gemma_norm(hf_name):
            x = x - 1  # back to HF's w, which HF adds 1 to
        out[hf_name] = torch.from_numpy(np.ascontiguousarray(x))
    return out, sorted(types)


@torch.no_grad()
def hf_reference(name, weights):
    model_dir = MODELS / name
    config = AutoConfig.from_pretrained(model_dir, attn_implementation="eager")
    if any(expert_name(n) for n in weights):
        # Per-expert names: from_pretrained fuses them into transformers 5's in-memory layout.
        import shutil
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            shutil.copy(model_dir / "config.json", tmp)
            save_file({k: v.contiguous() for k, v in weights.items()}, os.path.join(tmp, "model.safetensors"),
                      metadata={"format": "pt"})
            model = AutoModelForCausalLM.from_pretrained(tmp, attn_implementation="eager").float().eval()
    else:
        model = AutoModelForCausalLM.from_config(config).float().eval()
        missing, unexpected = model.load_state_dict(weights, strict=False)
        assert not unexpected and all(k == "lm_head.weight" for k in missing), (missing, unexpected)
    if config.tie_word_embeddings:
        model.tie_weights()
        embed = "transformer.wte.weight" if "transformer.wte.weight" in weights else "model.embed_tokens.weight"
        assert torch.equal(model.lm_head.weight, weights[embed])
    with safe_open(model_dir / "reference.safetensors", "pt") as f:
        prompt = f.get_tensor("prompt_ids").long()
    pad_to = next(o for n, *_, o in HF_FIXTURES if n == name).get("pad_to")
    if pad_to:  # as make_fixtures.py: every call over pad_to positions
        prompt_logits, greedy_ids, greedy_logits = greedy_padded(model, prompt, pad_to)
    else:
        prompt_logits, greedy_ids, greedy_logits = greedy_with_cache(model, prompt)
    return {
        "prompt_ids": prompt.to(torch.int32).contiguous(),
        "prompt_logits": prompt_logits.contiguous(),
        "greedy_ids": greedy_ids.to(torch.int32).contiguous(),
        "greedy_logits": greedy_logits.contiguous(),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "tests" / "data" / "gguf" / "models"))
    ap.add_argument("--only", default="", help="comma-separated fixture names (default: all)")
    args = ap.parse_args()
    only = set(filter(None, args.only.split(",")))
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, numpy {np.__version__}, "
          f"python {sys.version.split()[0]}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    total = 0
    for name, qtypes in FIXTURES:
        if only and name not in only:
            continue
        for qtype in qtypes:
            path = out / f"{name}.{qtype}.gguf"
            cfg, arch_name, arch, state = convert(name, qtype, path)
            weights, types = read_back(path, cfg, arch_name, arch, state.keys())
            assert set(weights) == set(state), (set(weights) ^ set(state))
            # Stored precision: a conversion is lossless when every dequantised tensor equals the
            # HF checkpoint's values (f32 upcast) bit for bit.
            dq = max(float((weights[k] - state[k].float()).abs().max()) for k in state)
            size = path.stat().st_size
            line = f"  {path.name:28s} {size / 1024:6.1f} KiB  types {','.join(types):14s} max|w - w_hf| {dq:.3g}"
            if dq == 0.0:
                line += "  lossless: checked against the HF fixture's reference"
            else:
                ref = hf_reference(name, weights)
                ref_path = out / f"{name}.{qtype}.reference.safetensors"
                save_file(ref, str(ref_path))
                size += ref_path.stat().st_size
                with safe_open(MODELS / name / "reference.safetensors", "pt") as f:
                    hf_logits = f.get_tensor("prompt_logits")
                shift = float((ref["prompt_logits"] - hf_logits).abs().max())
                margin = min_margin(ref["greedy_logits"])
                assert margin >= MIN_MARGIN, f"{path.name}: greedy margin {margin} < {MIN_MARGIN}"
                line += (f"  own reference: min margin {margin:.4g}, "
                         f"prompt logits vs f32 HF max|d| {shift:.3g}")
            total += size
            print(line + f"  sha256 {hashlib.sha256(path.read_bytes()).hexdigest()[:12]}")
    print(f"total {total / 1024:.1f} KiB")


if __name__ == "__main__":
    main()
