#!/usr/bin/env python3
"""Generate tiny random-weight HF checkpoints + reference logits for kvinfer tests.

Usage (from the repo root, normally via tools/make_fixtures.sh):
    python tools/make_fixtures.py [--out tests/data/models] [--only name1,name2]

For every fixture this writes tests/data/models/<name>/ containing the files
produced by HF `save_pretrained` (config.json, model.safetensors or shards +
model.safetensors.index.json, generation_config.json) plus reference.safetensors:

  prompt_ids            int32  [T]       random prompt (5 <= T <= 13, not a power of two)
  prompt_logits         f32    [T, V]    HF logits at every prompt position (one forward)
  greedy_ids            int32  [32]      greedy continuation (never stops at EOS)
  greedy_logits         f32    [32, V]   greedy_logits[i] = last-position logits after
                                         prompt + greedy_ids[:i]; argmax -> greedy_ids[i]
  prompt_logits_native  f32    [T, V]    (bf16/f16 fixtures only) logits of HF running
                                         natively in the stored half dtype on CPU
  prompt_logits_short   f32    [T, V]    ("pad_to" fixtures only) HF's own forward over the
                                         prompt alone (a call within the original length)

Fixtures with the option "pad_to": L (dynamic NTK, LongRoPE) are made as HF computes one call
over L positions: HF picks those frequencies by the length of each forward call, kvinfer by
the model's context length (docs/rope-scaling.md). Every reference forward is a no-cache call
over the sequence padded with token 0 to L positions; causal attention makes each row
independent of the padding after it, so row t holds the logits of the first t + 1 tokens with
the frequencies of a call of L positions, which kvinfer loaded with context_length L computes.

All reference math is float32 on CPU with attn_implementation="eager"; for half
precision fixtures the saved (rounded) weights are upcast with model.float().
The greedy continuation is an explicit loop of single-token forward calls using
HF's KV cache (past_key_values), not generate().

Everything is deterministic: a fixed base seed per fixture; if any greedy step has a
top-1 minus top-2 margin below MIN_MARGIN, the seed is bumped (+1) and the fixture is
rebuilt, until it holds.
"""

import argparse
import json
import math
import os
import shutil
import sys

import torch
import transformers
import safetensors
from safetensors.torch import save_file
from transformers import (
    Gemma2Config,
    Gemma2ForCausalLM,
    Gemma3ForCausalLM,
    Gemma3TextConfig,
    GPT2Config,
    GPT2LMHeadModel,
    Qwen3Config,
    Qwen3ForCausalLM,
    Qwen3MoeConfig,
    Qwen3MoeForCausalLM,
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,
    MistralForCausalLM,
    MixtralConfig,
    MixtralForCausalLM,
    Phi3Config,
    Phi3ForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
    Qwen2MoeConfig,
    Qwen2MoeForCausalLM,
)

N_GREEDY = 32
MIN_MARGIN = 1e-3
MIN_ROUTE_GAP = 1e-4  # MoE fixtures: every token's k-th and (k+1)-th expert probabilities differ by this
MAX_SEED_TRIES = 50
BIAS_STD = 0.1  # HF initialises biases to 0 -> randomise them so bias handling is tested
NORM_STD = 0.1  # HF initialises RMSNorm weights to 1 -> use 1 + N(0, NORM_STD)

COMMON = dict(
    vocab_size=128,
    num_hidden_layers=2,
    max_position_embeddings=128,
    initializer_range=0.15,
    hidden_act="silu",
    attention_dropout=0.0,
)


def rope(theta=10000.0, **extra):
    d = {"rope_type": "default", "rope_theta": theta}
    d.update(extra)
    return d


# LongRoPE factor lists (rotary dims / 2 each), fixed, spread so that short and long differ.
def longrope_factors(n, lo, hi):
    return [round(lo + (hi - lo) * i / max(n - 1, 1), 4) for i in range(n)]


# name -> (model class, config class, config kwargs, prompt length T, base seed, options)
FIXTURES = [
    ("llama_mha", LlamaForCausalLM, LlamaConfig,
     dict(hidden_size=64, intermediate_size=64, num_attention_heads=4, num_key_value_heads=4,
          tie_word_embeddings=False, rms_norm_eps=1e-5, rope_parameters=rope(10000.0),
          bos_token_id=1, eos_token_id=2),
     7, 1000, {}),
    ("llama_gqa4", LlamaForCausalLM, LlamaConfig,
     dict(hidden_size=64, intermediate_size=64, num_attention_heads=8, num_key_value_heads=2,
          tie_word_embeddings=True, rope_parameters=rope(10000.0),
          bos_token_id=0, eos_token_id=[1, 2]),
     9, 2000, {}),
    ("llama_mqa", LlamaForCausalLM, LlamaConfig,
     dict(hidden_size=64, intermediate_size=64, num_attention_heads=4, num_key_value_heads=1,
          tie_word_embeddings=False, rope_parameters=rope(10000.0),
          bos_token_id=1, eos_token_id=2),
     11, 3000, {}),
    ("llama_group7", LlamaForCausalLM, LlamaConfig,
     # transformers 5.24 LlamaConfig.validate_architecture rejects hidden % heads != 0 even with an
     # explicit head_dim (on init, setattr and from_pretrained), so hidden is 56 = 14*4 and the
     # explicit head_dim 16 != 56/14 = 4.
     dict(hidden_size=56, intermediate_size=32, num_attention_heads=14, num_key_value_heads=2,
          head_dim=16, tie_word_embeddings=True, rope_parameters=rope(10000.0),
          bos_token_id=1, eos_token_id=2),
     13, 4000, {}),
    ("llama_head_dim", LlamaForCausalLM, LlamaConfig,
     dict(hidden_size=64, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2,
          head_dim=32, tie_word_embeddings=True, rope_parameters=rope(10000.0),
          bos_token_id=1, eos_token_id=2),
     6, 5000, {}),
    ("llama3_rope", LlamaForCausalLM, LlamaConfig,
     dict(hidden_size=64, intermediate_size=64, num_attention_heads=2, num_key_value_heads=1,
          head_dim=64, tie_word_embeddings=True, max_position_embeddings=256,
          rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                           "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                           "original_max_position_embeddings": 32},
          bos_token_id=1, eos_token_id=2),
     10, 6000, {"check_llama3_bands": True}),
    ("llama_rope_linear", LlamaForCausalLM, LlamaConfig,
     dict(hidden_size=64, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2,
          tie_word_embeddings=True,
          rope_parameters={"rope_type": "linear", "rope_theta": 10000.0, "factor": 2.0},
          bos_token_id=1, eos_token_id=2),
     12, 7000, {}),
    ("llama_attn_bias", LlamaForCausalLM, LlamaConfig,
     dict(hidden_size=64, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2,
          attention_bias=True, mlp_bias=True, tie_word_embeddings=False,
          rope_parameters=rope(10000.0), bos_token_id=1, eos_token_id=2),
     5, 8000, {}),
    ("qwen2_bias", Qwen2ForCausalLM, Qwen2Config,
     dict(hidden_size=64, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2,
          tie_word_embeddings=True, use_sliding_window=False, rms_norm_eps=1e-6,
          rope_parameters=rope(1000000.0), bos_token_id=3, eos_token_id=4),
     10, 9000, {}),
    ("mistral_window", MistralForCausalLM, MistralConfig,
     dict(hidden_size=64, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2,
          head_dim=16, tie_word_embeddings=False, sliding_window=6,
          rope_parameters=rope(10000.0), bos_token_id=1, eos_token_id=2),
     11, 10000, {"check_window": True}),
    ("llama_bf16", LlamaForCausalLM, LlamaConfig,
     dict(hidden_size=64, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2,
          tie_word_embeddings=False, rope_parameters=rope(10000.0),
          bos_token_id=1, eos_token_id=2),
     9, 11000, {"save_dtype": torch.bfloat16}),
    ("llama_f16", LlamaForCausalLM, LlamaConfig,
     dict(hidden_size=64, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2,
          tie_word_embeddings=False, rope_parameters=rope(10000.0),
          bos_token_id=1, eos_token_id=2),
     7, 12000, {"save_dtype": torch.float16}),
    ("llama_sharded", LlamaForCausalLM, LlamaConfig,
     dict(hidden_size=64, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2,
          tie_word_embeddings=False, rope_parameters=rope(10000.0),
          bos_token_id=1, eos_token_id=2),
     6, 13000, {"max_shard_size": "100KB"}),
    # GPT-2: GPT2Config's own keys (n_embd, n_layer, ...), not COMMON's. Learned positions,
    # LayerNorm with bias, gelu_new, Conv1D weights, fused c_attn, tied LM head.
    ("gpt2_tiny", GPT2LMHeadModel, GPT2Config,
     dict(vocab_size=128, n_embd=64, n_layer=2, n_head=4, n_positions=128, n_inner=None,
          activation_function="gelu_new", layer_norm_epsilon=1e-5, initializer_range=0.15,
          resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=1, eos_token_id=2),
     9, 14000, {"no_common": True, "legacy_copy": "gpt2_legacy_names"}),
    # Untied LM head, explicit n_inner, gelu_pytorch_tanh, eps 1e-6, stored in f16.
    ("gpt2_untied_f16", GPT2LMHeadModel, GPT2Config,
     dict(vocab_size=128, n_embd=48, n_layer=3, n_head=3, n_positions=64, n_inner=96,
          activation_function="gelu_pytorch_tanh", layer_norm_epsilon=1e-6, initializer_range=0.15,
          tie_word_embeddings=False, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
          bos_token_id=1, eos_token_id=2),
     11, 15000, {"no_common": True, "save_dtype": torch.float16}),
    # Qwen3: per-head q/k RMSNorm, no biases, explicit head_dim (32 != 64 / 4).
    ("qwen3_tiny", Qwen3ForCausalLM, Qwen3Config,
     dict(hidden_size=64, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2,
          head_dim=32, tie_word_embeddings=False, rms_norm_eps=1e-6, attention_bias=False,
          use_sliding_window=False, rope_parameters=rope(1000000.0), bos_token_id=1, eos_token_id=2),
     9, 16000, {}),
    # Gemma 2: GeGLU, (1 + w) norms around each block, sqrt(hidden) embeddings, soft-caps small
    # enough to bite (checked below), 3 layers alternating sliding (window 4 < T) and global.
    # query_pre_attn_scalar == head_dim, as llama.cpp's GGUF assumes (gemma2_scalar has another).
    ("gemma2_tiny", Gemma2ForCausalLM, Gemma2Config,
     dict(hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
          num_key_value_heads=2, head_dim=16, hidden_act=None, hidden_activation="gelu_pytorch_tanh",
          query_pre_attn_scalar=16, sliding_window=4, attn_logit_softcapping=1.5,
          final_logit_softcapping=2.0, tie_word_embeddings=True, rms_norm_eps=1e-6,
          rope_parameters=rope(10000.0), bos_token_id=1, eos_token_id=2, pad_token_id=0),
     11, 17000, {"gemma": True, "effects": [{"attn_logit_softcapping": None},
                                            {"final_logit_softcapping": None},
                                            {"sliding_window": 64}]}),
    # Gemma 2 with query_pre_attn_scalar 24 != head_dim 16 (as Gemma 2 27B: 144 != 128), 2 layers.
    ("gemma2_scalar", Gemma2ForCausalLM, Gemma2Config,
     dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
          num_key_value_heads=2, head_dim=16, hidden_act=None, hidden_activation="gelu_pytorch_tanh",
          query_pre_attn_scalar=24, sliding_window=4, attn_logit_softcapping=1.5,
          final_logit_softcapping=2.0, tie_word_embeddings=True, rms_norm_eps=1e-6,
          rope_parameters=rope(10000.0), bos_token_id=1, eos_token_id=2, pad_token_id=0),
     7, 20000, {"gemma": True, "effects": [{"attn_logit_softcapping": None},
                                            {"final_logit_softcapping": None},
                                            {"sliding_window": 64}]}),
    # Gemma 3 (text): Gemma 2's blocks with (1 + w) per-head q/k norms, no soft-caps, 2 sliding
    # layers : 1 global (window 4 < T), the sliding layers' rope base 10000, the global layer's
    # 1e6 with linear scaling (factor 8).
    ("gemma3_tiny", Gemma3ForCausalLM, Gemma3TextConfig,
     dict(hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
          num_key_value_heads=2, head_dim=16, hidden_act=None, hidden_activation="gelu_pytorch_tanh",
          query_pre_attn_scalar=16, sliding_window=4,
          layer_types=["sliding_attention", "sliding_attention", "full_attention"],
          rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                           "full_attention": {"rope_type": "linear", "factor": 8.0,
                                              "rope_theta": 1000000.0}},
          tie_word_embeddings=True, rms_norm_eps=1e-6, bos_token_id=1, eos_token_id=2, pad_token_id=0),
     12, 18000, {"gemma": True, "effects": [{"sliding_window": 64}]}),
    # Qwen2 with use_sliding_window: layer 0 global, layer 1 (from max_window_layers on) a window
    # of 4 < T.
    ("qwen2_window", Qwen2ForCausalLM, Qwen2Config,
     dict(hidden_size=64, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2,
          tie_word_embeddings=True, use_sliding_window=True, sliding_window=4, max_window_layers=1,
          rms_norm_eps=1e-6, rope_parameters=rope(1000000.0), bos_token_id=3, eos_token_id=4),
     10, 19000, {"effects": [{"sliding_window": 64}]}),
    # Mixture of experts. Mixtral: 4 experts, top 2, renormalised; Mistral's attention (no window,
    # as Mixtral 8x7B: a GGUF "llama" file has no window key).
    ("mixtral_tiny", MixtralForCausalLM, MixtralConfig,
     dict(hidden_size=64, intermediate_size=32, num_attention_heads=4, num_key_value_heads=2,
          num_local_experts=4, num_experts_per_tok=2, sliding_window=None,
          tie_word_embeddings=False, rope_parameters=rope(1000000.0), rms_norm_eps=1e-5,
          bos_token_id=1, eos_token_id=2),
     11, 16000, {"check_routing": True, "fused_copy": "mixtral_fused"}),
    # Qwen2-MoE: 3 layers, layer 1 dense (mlp_only_layers), 4 experts of width 32, top 2 NOT
    # renormalised (norm_topk_prob false), a shared expert of width 48 behind its sigmoid gate.
    ("qwen2_moe_tiny", Qwen2MoeForCausalLM, Qwen2MoeConfig,
     dict(hidden_size=64, intermediate_size=64, moe_intermediate_size=32, shared_expert_intermediate_size=48,
          num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2, num_experts=4,
          num_experts_per_tok=2, norm_topk_prob=False, decoder_sparse_step=1, mlp_only_layers=[1],
          use_sliding_window=False, tie_word_embeddings=False, rope_parameters=rope(1000000.0),
          rms_norm_eps=1e-6, bos_token_id=3, eos_token_id=4),
     9, 17000, {"check_routing": True}),
    # Qwen3-MoE: Qwen3's attention (per-head q/k RMSNorm, no biases, explicit head_dim 32 != 64/4 as
    # the real checkpoints' 128 != 2048/32) with Qwen2-MoE's block minus the shared expert: 3
    # layers, layer 1 dense (mlp_only_layers), 4 experts of width 32, top 2 renormalised
    # (norm_topk_prob true, which must move the logits).
    ("qwen3_moe_tiny", Qwen3MoeForCausalLM, Qwen3MoeConfig,
     dict(hidden_size=64, intermediate_size=64, moe_intermediate_size=32, num_hidden_layers=3,
          num_attention_heads=4, num_key_value_heads=2, head_dim=32, num_experts=4, num_experts_per_tok=2,
          norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[1], attention_bias=False,
          use_sliding_window=False, tie_word_embeddings=False, rope_parameters=rope(1000000.0),
          rms_norm_eps=1e-6, bos_token_id=3, eos_token_id=4),
     11, 18000, {"check_routing": True, "effects": [{"norm_topk_prob": False}]}),
    # YaRN, HF's defaults: attention factor 0.1 ln(4) + 1, beta 32 / 1, truncated range. The tiny
    # original length 32 puts the ramp over dims [0, 3] of 16: original, blended and
    # interpolated frequencies all occur.
    ("llama_yarn", LlamaForCausalLM, LlamaConfig,
     dict(hidden_size=64, intermediate_size=64, num_attention_heads=2, num_key_value_heads=1,
          head_dim=32, tie_word_embeddings=True,
          rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                           "original_max_position_embeddings": 32},
          bos_token_id=1, eos_token_id=2),
     10, 16000, {}),
    # YaRN with an explicit attention_factor and beta_fast / beta_slow (what llama.cpp's converter
    # carries into GGUF), on Qwen2 (q/k/v biases).
    ("qwen2_yarn", Qwen2ForCausalLM, Qwen2Config,
     dict(hidden_size=64, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2,
          tie_word_embeddings=False, use_sliding_window=False, rms_norm_eps=1e-6,
          rope_parameters={"rope_type": "yarn", "rope_theta": 1000.0, "factor": 2.5,
                           "original_max_position_embeddings": 24, "attention_factor": 1.25,
                           "beta_fast": 16.0, "beta_slow": 2.0},
          bos_token_id=3, eos_token_id=4),
     9, 17000, {}),
    # YaRN with DeepSeek's mscale / mscale_all_dim ratio and truncate false (fractional range).
    ("llama_yarn_mscale", LlamaForCausalLM, LlamaConfig,
     dict(hidden_size=64, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2,
          tie_word_embeddings=True,
          rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 8.0,
                           "original_max_position_embeddings": 16, "mscale": 1.0,
                           "mscale_all_dim": 0.5, "truncate": False},
          bos_token_id=1, eos_token_id=2),
     11, 18000, {}),
    # Dynamic NTK: max_position_embeddings 32, references for one call of 64 positions (the
    # base grows by (2 · 64 / 32 - 1)^(16/14)); kvinfer loads it with context_length 64.
    ("llama_dynamic", LlamaForCausalLM, LlamaConfig,
     dict(hidden_size=64, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2,
          tie_word_embeddings=True, max_position_embeddings=32,
          rope_parameters={"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 2.0},
          bos_token_id=1, eos_token_id=2),
     12, 19000, {"pad_to": 64}),
    # Phi-3: fused qkv_proj / gate_up_proj, LongRoPE (original length 16, context 64: the long
    # factors; attention factor sqrt(1 + ln 4 / ln 16)), a sliding window of 8.
    ("phi3_longrope", Phi3ForCausalLM, Phi3Config,
     dict(hidden_size=64, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2,
          tie_word_embeddings=False, max_position_embeddings=64, original_max_position_embeddings=16,
          sliding_window=8, rms_norm_eps=1e-5,
          rope_parameters={"rope_type": "longrope", "rope_theta": 10000.0,
                           "short_factor": longrope_factors(8, 1.0, 1.6),
                           "long_factor": longrope_factors(8, 1.0, 6.0)},
          bos_token_id=1, eos_token_id=2, pad_token_id=0),
     13, 20000, {"pad_to": 64}),
    # Phi-4-mini's shape: partial_rotary_factor 0.75 (12 of 16 dims rotate), tied embeddings,
    # no window, LongRoPE.
    ("phi4_partial_rotary", Phi3ForCausalLM, Phi3Config,
     dict(hidden_size=64, intermediate_size=96, num_attention_heads=4, num_key_value_heads=1,
          tie_word_embeddings=True, max_position_embeddings=64, original_max_position_embeddings=16,
          sliding_window=None, rms_norm_eps=1e-5,
          rope_parameters={"rope_type": "longrope", "rope_theta": 10000.0, "partial_rotary_factor": 0.75,
                           "short_factor": longrope_factors(6, 1.0, 1.3),
                           "long_factor": longrope_factors(6, 1.5, 8.0)},
          bos_token_id=1, eos_token_id=2, pad_token_id=0),
     7, 21300, {"pad_to": 64}),
]


@torch.no_grad()
def routing_stats(model, seq):
    """Over a cache-off forward of seq: the smallest gap between a token's k-th and (k+1)-th
    expert probability (any MoE layer), and how often each (layer, expert) was chosen."""
    k = model.config.num_experts_per_tok
    gaps, uses, hooks = [], {}, []
    for name, mod in model.named_modules():
        if type(mod).__name__.endswith("TopKRouter"):
            def hook(m, args, out, name=name):
                probs = torch.softmax(out[0].float(), dim=-1)
                top = torch.sort(probs, dim=-1, descending=True).values
                gaps.append(float((top[:, k - 1] - top[:, k]).min()) if probs.shape[-1] > k else 1.0)
                uses[name] = torch.bincount(out[2].flatten(), minlength=probs.shape[-1]).tolist()
            hooks.append(mod.register_forward_hook(hook))
    model(input_ids=seq[None, :], use_cache=False)
    for h in hooks:
        h.remove()
    assert uses, "no router found"
    return min(gaps), uses


def write_fused_copy(src_dir, dst_dir, model_cls):
    """The same model as transformers 5 holds it in memory: experts fused into (experts, 2·inter,
    hidden) gate_up_proj and (experts, hidden, inter) down_proj (save_original_format=False)."""
    if os.path.isdir(dst_dir):
        shutil.rmtree(dst_dir)
    m = model_cls.from_pretrained(src_dir, attn_implementation="eager")
    m.save_pretrained(dst_dir, save_original_format=False)
    shutil.copy(os.path.join(src_dir, "reference.safetensors"), os.path.join(dst_dir, "reference.safetensors"))
    from safetensors import safe_open
    with safe_open(os.path.join(dst_dir, "model.safetensors"), "pt") as f:
        assert any(k.endswith("experts.gate_up_proj") for k in f.keys()), "not fused"
    b = model_cls.from_pretrained(dst_dir, attn_implementation="eager").eval()
    ids = torch.arange(0, 9)[None, :]
    with torch.no_grad():
        assert torch.equal(m.eval()(input_ids=ids).logits, b(input_ids=ids).logits)
    print(f"    fused-experts copy: {dst_dir}")


def check_llama3_bands(cfg):
    rp = cfg["rope_parameters"]
    head_dim = cfg["head_dim"]
    theta = rp["rope_theta"]
    old = rp["original_max_position_embeddings"]
    lo_wl = old / rp["low_freq_factor"]
    hi_wl = old / rp["high_freq_factor"]
    wl = [2 * math.pi * theta ** (i / head_dim) for i in range(0, head_dim, 2)]
    unscaled = [w for w in wl if w < hi_wl]
    scaled = [w for w in wl if w > lo_wl]
    smoothed = [w for w in wl if hi_wl <= w <= lo_wl]
    print(f"    llama3 bands: unscaled(wl<{hi_wl})={len(unscaled)} smoothed={len(smoothed)} "
          f"scaled(wl>{lo_wl})={len(scaled)} of {len(wl)}")
    assert unscaled and scaled and smoothed, "llama3 rope: a frequency band is empty"
    return {"unscaled": len(unscaled), "smoothed": len(smoothed), "scaled": len(scaled)}


def randomize_extra(model, norm_center=1.0):
    """HF inits biases to 0 and norm weights to 1 (Gemma's (1 + w) norms: 0); perturb them
    around norm_center (uses the seeded global RNG)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(".bias"):
                p.normal_(0.0, BIAS_STD)
            elif ("norm" in name or ".ln_" in name or name.startswith("ln_")) and name.endswith(".weight"):
                p.copy_(norm_center + NORM_STD * torch.randn_like(p))


@torch.no_grad()
def greedy_with_cache(model, prompt):
    """Prompt forward + explicit 32-step greedy loop with HF's KV cache."""
    out = model(input_ids=prompt[None, :], use_cache=True)
    prompt_logits = out.logits[0].float().clone()
    past = out.past_key_values
    logits = out.logits[0, -1].float()
    ids, step_logits = [], []
    for i in range(N_GREEDY):
        step_logits.append(logits.clone())
        tok = int(torch.argmax(logits))
        ids.append(tok)
        if i == N_GREEDY - 1:
            break
        out = model(input_ids=torch.tensor([[tok]], dtype=torch.long),
                    past_key_values=past, use_cache=True)
        past = out.past_key_values
        logits = out.logits[0, -1].float()
    return prompt_logits, torch.tensor(ids, dtype=torch.long), torch.stack(step_logits)


@torch.no_grad()
def padded_logits(model, seq, pad_to):
    """Logits of `seq` from one no-cache call over it padded with token 0 to pad_to positions."""
    ids = torch.cat([seq, torch.zeros(pad_to - len(seq), dtype=torch.long)])
    return model(input_ids=ids[None, :], use_cache=False).logits[0, :len(seq)].float()


@torch.no_grad()
def greedy_padded(model, prompt, pad_to):
    """greedy_with_cache's outputs, every forward a padded no-cache call of pad_to positions."""
    prompt_logits = padded_logits(model, prompt, pad_to)
    seq, logits = prompt, prompt_logits[-1]
    ids, step_logits = [], []
    for i in range(N_GREEDY):
        step_logits.append(logits.clone())
        tok = int(torch.argmax(logits))
        ids.append(tok)
        if i == N_GREEDY - 1:
            break
        seq = torch.cat([seq, torch.tensor([tok], dtype=torch.long)])
        logits = padded_logits(model, seq, pad_to)[-1]
    return prompt_logits.clone(), torch.tensor(ids, dtype=torch.long), torch.stack(step_logits)


@torch.no_grad()
def full_logits_no_cache(model, prompt, greedy_ids):
    seq = torch.cat([prompt, greedy_ids[:-1]])
    return model(input_ids=seq[None, :], use_cache=False).logits[0].float()


def min_margin(step_logits):
    top2 = torch.topk(step_logits, 2, dim=-1).values
    return float((top2[:, 0] - top2[:, 1]).min())


def build_one(name, model_cls, config_cls, cfg_kwargs, T, base_seed, opts, out_root):
    assert 5 <= T <= 13 and (T & (T - 1)) != 0, f"{name}: bad T={T}"
    out_dir = os.path.join(out_root, name)
    save_dtype = opts.get("save_dtype", torch.float32)
    info = {}
    for attempt in range(MAX_SEED_TRIES):
        seed = base_seed + attempt
        if os.path.isdir(out_dir):
            shutil.rmtree(out_dir)
        os.makedirs(out_dir)

        # --- build + save -------------------------------------------------------------
        cfg = {} if opts.get("no_common") else dict(COMMON)
        cfg.update(cfg_kwargs)
        config = config_cls(**cfg, attn_implementation="eager")
        torch.manual_seed(seed)
        model = model_cls(config).to(torch.float32)
        randomize_extra(model, 0.0 if opts.get("gemma") else 1.0)
        model.eval()
        if save_dtype != torch.float32:
            model = model.to(save_dtype)
            model.config.dtype = save_dtype
        else:
            model.config.dtype = torch.float32
        save_kwargs = {}
        if "max_shard_size" in opts:
            save_kwargs["max_shard_size"] = opts["max_shard_size"]
        model.save_pretrained(out_dir, **save_kwargs)
        del model

        gen = torch.Generator().manual_seed(seed + 1)
        prompt = torch.randint(0, cfg["vocab_size"], (T,), generator=gen, dtype=torch.long)

        # --- reload from disk; reference in exact f32 on the saved weights --------------
        model = model_cls.from_pretrained(out_dir, dtype=save_dtype, attn_implementation="eager")
        model = model.float().eval()
        pad_to = opts.get("pad_to")
        if pad_to:
            prompt_logits, greedy_ids, greedy_logits = greedy_padded(model, prompt, pad_to)
        else:
            prompt_logits, greedy_ids, greedy_logits = greedy_with_cache(model, prompt)
        assert torch.equal(greedy_logits[0], prompt_logits[-1])

        if pad_to:
            nocache = padded_logits(model, torch.cat([prompt, greedy_ids[:-1]]), pad_to)
        else:
            nocache = full_logits_no_cache(model, prompt, greedy_ids)
        nocache_steps = nocache[T - 1:]
        nocache_ids = torch.argmax(nocache_steps, dim=-1)
        cache_diff = float((nocache_steps - greedy_logits).abs().max())
        prompt_diff = float((nocache[:T] - prompt_logits).abs().max())
        margin = min_margin(greedy_logits)
        ok = margin >= MIN_MARGIN and torch.equal(nocache_ids, greedy_ids)
        if opts.get("check_routing"):
            gap, uses = routing_stats(model, torch.cat([prompt, greedy_ids[:-1]]))
            unused = [(n, e) for n, u in uses.items() for e, c in enumerate(u) if c == 0]
            print(f"    routing: min k-th/(k+1)-th gap {gap:.4g}, choices per expert {uses}")
            ok = ok and gap >= MIN_ROUTE_GAP and not unused
            info["route_gap"] = gap
        print(f"  {name}: seed={seed} T={T} min_margin={margin:.4g} "
              f"cache_on_vs_off_maxabs={cache_diff:.3g} (prompt part {prompt_diff:.3g}) "
              f"tokens_match={torch.equal(nocache_ids, greedy_ids)}")
        if not ok:
            print(f"    -> rejected, trying next seed")
            continue

        ref = {
            "prompt_ids": prompt.to(torch.int32).contiguous(),
            "prompt_logits": prompt_logits.contiguous(),
            "greedy_ids": greedy_ids.to(torch.int32).contiguous(),
            "greedy_logits": greedy_logits.contiguous(),
        }
        info.update(seed=seed, T=T, min_margin=margin, cache_on_off_maxabs=cache_diff,
                    greedy_ids=greedy_ids.tolist(), prompt_ids=prompt.tolist())

        if pad_to:
            # HF's own short call over the prompt (within the original length), and how far HF's
            # cache-on loop, whose frequencies change with each call's length, is from the
            # one-length references.
            with torch.no_grad():
                short = model(input_ids=prompt[None, :], use_cache=False).logits[0].float()
            ref["prompt_logits_short"] = short.contiguous()
            info["short_vs_long_maxabs"] = float((short - prompt_logits).abs().max())
            _, hf_ids, hf_logits = greedy_with_cache(model, prompt)
            info["hf_cache_loop_maxabs"] = float((hf_logits - greedy_logits).abs().max())
            info["hf_cache_loop_same_tokens"] = bool(torch.equal(hf_ids, greedy_ids))
            print(f"    pad_to={pad_to}: short call vs long max|d|={info['short_vs_long_maxabs']:.4g}; "
                  f"HF cache-on loop vs references max|d|={info['hf_cache_loop_maxabs']:.4g} "
                  f"(same tokens: {info['hf_cache_loop_same_tokens']})")
            assert info["short_vs_long_maxabs"] > 1e-3, "the long frequencies have no effect"

        if opts.get("check_window"):
            cfg_nw = json.load(open(os.path.join(out_dir, "config.json")))
            assert cfg_nw["sliding_window"] == cfg_kwargs["sliding_window"]
            nw = model_cls.from_pretrained(out_dir, dtype=save_dtype, attn_implementation="eager",
                                           sliding_window=None).float().eval()
            assert nw.config.sliding_window is None
            seq = torch.cat([prompt, greedy_ids[:-1]])
            with torch.no_grad():
                l_nw = nw(input_ids=seq[None, :], use_cache=False).logits[0].float()
            d_all = float((l_nw - nocache).abs().max())
            d_prefix = float((l_nw[:cfg_kwargs["sliding_window"]]
                              - nocache[:cfg_kwargs["sliding_window"]]).abs().max())
            print(f"    sliding_window=None vs {cfg_kwargs['sliding_window']}: max|dlogits|={d_all:.4g} "
                  f"(first {cfg_kwargs['sliding_window']} positions: {d_prefix:.3g})")
            assert d_all > 1e-2, "sliding window has no effect on logits"
            assert d_prefix == 0.0
            info["window_effect_maxabs"] = d_all
            del nw

        for override in opts.get("effects", []):
            # The feature must change the logits: a model without it differs by more than 1e-2.
            other = model_cls.from_pretrained(out_dir, dtype=save_dtype, attn_implementation="eager",
                                              **override).float().eval()
            seq = torch.cat([prompt, greedy_ids[:-1]])
            with torch.no_grad():
                l_other = other(input_ids=seq[None, :], use_cache=False).logits[0].float()
            d = float((l_other - nocache).abs().max())
            print(f"    without {override}: max|dlogits|={d:.4g}")
            assert d > 1e-2, f"{name}: {override} has no effect on the logits"
            info.setdefault("effects", {})[str(override)] = d
            del other

        if save_dtype != torch.float32:
            native = model_cls.from_pretrained(out_dir, dtype=save_dtype,
                                               attn_implementation="eager").eval()
            assert next(native.parameters()).dtype == save_dtype
            with torch.no_grad():
                pln = native(input_ids=prompt[None, :], use_cache=False).logits[0].float()
            ref["prompt_logits_native"] = pln.contiguous()
            nd = float((pln - prompt_logits).abs().max())
            print(f"    native {save_dtype} vs f32-upcast prompt logits max|d|={nd:.4g}")
            info["native_vs_f32_maxabs"] = nd
            del native

        if opts.get("check_llama3_bands"):
            info["llama3_bands"] = check_llama3_bands(json.load(open(os.path.join(out_dir, "config.json"))))

        save_file(ref, os.path.join(out_dir, "reference.safetensors"))
        if "fused_copy" in opts:
            write_fused_copy(out_dir, os.path.join(out_root, opts["fused_copy"]), model_cls)
        if "legacy_copy" in opts:
            write_legacy_gpt2(out_dir, os.path.join(out_root, opts["legacy_copy"]), cfg["n_positions"])
        return info
    raise RuntimeError(f"{name}: no seed with margin >= {MIN_MARGIN} in {MAX_SEED_TRIES} tries")


def write_legacy_gpt2(src_dir, dst_dir, n_positions):
    """The same GPT-2 model as OpenAI's original checkpoints name it: no "transformer." prefix,
    and each layer's causal-mask buffer "h.N.attn.bias" (1, 1, n_positions, n_positions) stored
    alongside the weights. Same config, same reference."""
    from safetensors.torch import load_file
    if os.path.isdir(dst_dir):
        shutil.rmtree(dst_dir)
    os.makedirs(dst_dir)
    tensors = load_file(os.path.join(src_dir, "model.safetensors"))
    out = {}
    for k, v in tensors.items():
        assert k.startswith("transformer."), k
        out[k[len("transformer."):]] = v
    n_layer = json.load(open(os.path.join(src_dir, "config.json")))["n_layer"]
    mask = torch.tril(torch.ones(n_positions, n_positions, dtype=torch.uint8)).view(1, 1, n_positions, n_positions)
    for i in range(n_layer):
        out[f"h.{i}.attn.bias"] = mask.clone()
    save_file(out, os.path.join(dst_dir, "model.safetensors"), metadata={"format": "pt"})
    for f in ("config.json", "reference.safetensors"):
        shutil.copy(os.path.join(src_dir, f), os.path.join(dst_dir, f))
    # transformers must read the renamed file as the same model
    a = GPT2LMHeadModel.from_pretrained(src_dir, attn_implementation="eager").eval()
    b = GPT2LMHeadModel.from_pretrained(dst_dir, attn_implementation="eager").eval()
    ids = torch.arange(0, 9)[None, :]
    with torch.no_grad():
        assert torch.equal(a(input_ids=ids).logits, b(input_ids=ids).logits)
    print(f"    legacy-named copy: {dst_dir} ({len(out)} tensors, {n_layer} mask buffers)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                  "..", "tests", "data", "models"))
    ap.add_argument("--only", default="")
    args = ap.parse_args()

    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, "
          f"safetensors {safetensors.__version__}, python {sys.version.split()[0]}")
    only = set(filter(None, args.only.split(",")))
    out_root = os.path.normpath(args.out)
    os.makedirs(out_root, exist_ok=True)
    summary = {}
    for name, mcls, ccls, kw, T, seed, opts in FIXTURES:
        if only and name not in only:
            continue
        summary[name] = build_one(name, mcls, ccls, kw, T, seed, opts, out_root)

    print("\nsummary:")
    for name, s in summary.items():
        extra = ""
        if "window_effect_maxabs" in s:
            extra += f" window_effect={s['window_effect_maxabs']:.4g}"
        for k, v in s.get("effects", {}).items():
            extra += f" without {k}: {v:.3g}"
        if "route_gap" in s:
            extra += f" route_gap={s['route_gap']:.4g}"
        if "native_vs_f32_maxabs" in s:
            extra += f" native_vs_f32={s['native_vs_f32_maxabs']:.4g}"
        if "short_vs_long_maxabs" in s:
            extra += (f" short_vs_long={s['short_vs_long_maxabs']:.4g}"
                      f" hf_cache_loop={s['hf_cache_loop_maxabs']:.4g}")
        print(f"  {name:18s} seed={s['seed']:5d} T={s['T']:2d} min_margin={s['min_margin']:.4g} "
              f"cache_on_off={s['cache_on_off_maxabs']:.3g}{extra}")


if __name__ == "__main__":
    main()
