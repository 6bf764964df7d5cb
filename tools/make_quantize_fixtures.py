#!/usr/bin/env python3
"""Bit-exact test vectors for kvinfer's quantiser, quantize_row (tests/test_quantize.cpp).

Run:   /root/fixenv/bin/python tools/make_quantize_fixtures.py [out_dir]    (default tests/data/quant)
Needs: pip install numpy==2.4.6 gguf==0.19.0

Writes quantize_in.f32 (little-endian float32 values, a whole number of 32-value blocks) and,
for each of q8_0, q4_0 and q4_1, quantize_<type>.bin: gguf.quants.quantize of those values, the
raw ggml blocks our quantiser must reproduce byte for byte. The output is deterministic.

The values, block by block: standard normal; weight-like (σ 0.02) with outliers ×40; shifted
(the minimum matters to Q4_1); all negative; random scales from 1e-6 to 1e4; uniform; tiny
(f16 scales that are subnormal, or that round to zero); huge; zeros; constants; blocks built so
that x·id lands exactly on .5 (roundf's ties for Q8_0, the + 8.5 / + 0.5 truncations of Q4_0 and
Q4_1); ties between +max and -max (Q4_0 keeps the first); a code that Q4_0 clips at 15; blocks
with a single non-zero value; a constant with a tiny spread (Q4_1's m far above d).

Every block is also quantised by a literal port of ggml-quants.c's quantize_row_{q8_0,q4_0,
q4_1}_ref (scalar float32 operations in C's order, C's float → int truncation, roundf), and
the script asserts it equals gguf-py byte for byte: on these values ggml and gguf-py agree.
They do not agree everywhere: on a Q4_0 block of zeros only whose first value is -0.0 gguf-py
stores d = +0 (its argmax picks the -0.0) where ggml stores -0 (it keeps its initial +0.0 max),
and numpy's min/max of mixed-sign zeros depends on its SIMD path (Q4_1's m). The values here
hold no -0.0; tests/test_quantize.cpp checks ggml's answer on those blocks by hand.
"""
import math
import sys
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize, quantize

kSeed = 20251129
kBlock = 32
TYPES = {"q8_0": T.Q8_0, "q4_0": T.Q4_0, "q4_1": T.Q4_1}
F = np.float32


def make_inputs(rng):
    """The fixture's values, shape (blocks, 32), float32."""
    blocks = []

    def add(values):
        v = np.asarray(values, dtype=np.float64).reshape(-1, kBlock)
        blocks.extend(v.astype(F))

    add(rng.standard_normal(32 * kBlock))
    w = rng.standard_normal(32 * kBlock) * 0.02
    w[rng.choice(w.size, 16, replace=False)] *= 40.0  # outliers, as real weight matrices have
    add(w)
    add(rng.standard_normal(16 * kBlock) * 0.5 + 1.25)
    add(-np.abs(rng.standard_normal(4 * kBlock)) * 3.0 - 0.5)
    scales = 10.0 ** rng.uniform(-6.0, 4.0, 32)  # one random magnitude per block
    add(rng.standard_normal((32, kBlock)) * scales[:, None])
    add(rng.uniform(-1.0, 1.0, 8 * kBlock))
    for sd in (1e-5, 1e-7, 1e-9):  # Q8_0 d ~ 2e-7 (subnormal f16), 2e-9 (rounds to 0 or nearly), 0
        add(rng.standard_normal(2 * kBlock) * sd)
    add(rng.standard_normal(2 * kBlock) * 1.0e3)
    lone = rng.standard_normal(kBlock) * 1.0e-3
    lone[7] = 6.0e4  # a lone huge value: every other code is 0
    add(lone)
    add(np.zeros(4 * kBlock))
    for c in (1.0, -1.0, 0.37, -2.5e-3, 1.0e4, 3.0e-6, 7.0, -100.0):
        add(np.full(kBlock, c))

    halves = np.arange(-15, 16) + 0.5  # 31 values k + 0.5
    # Q8_0 with max |x| = 127: d = 1, id = 1, so q = roundf(k + 0.5), away from zero.
    add(np.concatenate([[127.0], halves]))
    add(np.concatenate([[-127.0], -halves]))
    # Q4_0 with max = -8 (d = 1) or +8 (d = -1): x·id + 8.5 is an integer, trunc takes it as is.
    add(np.concatenate([[-8.0], np.arange(-7.5, 8.0, 0.5)]))
    add(np.concatenate([[8.0], np.arange(-7.5, 8.0, 0.5)]))
    # Q4_1 with min 0, max 15 (d = 1): (x - min)·id + 0.5 lands on integers and on .5 + .5.
    add(np.concatenate([[0.0, 15.0], np.arange(0.25, 15.0, 0.5)]))
    # Q4_0's max keeps the first of +a and -a.
    t = rng.uniform(-1.0, 1.0, kBlock)
    t[2], t[5] = -3.0, 3.0
    add(t)
    t = rng.uniform(-1.0, 1.0, kBlock)
    t[2], t[5] = 3.0, -3.0
    add(t)
    # Q4_0: max = -1 gives d = 1/8; +1 then maps to code 16, clipped to 15.
    t = rng.uniform(-0.9, 0.9, kBlock)
    t[0], t[1], t[20] = -1.0, 1.0, 0.999
    add(t)
    # A single non-zero value.
    t = np.zeros(kBlock)
    t[17] = 0.5
    add(t)
    t = np.zeros(kBlock)
    t[31] = -2.0e-3
    add(t)
    add(np.where(np.arange(kBlock) % 2 == 0, -1.0, 1.0))
    add(1000.0 + rng.standard_normal(kBlock) * 1.0e-3)  # Q4_1: m far above d
    x = np.stack(blocks).astype(F)
    assert not np.signbit(x[x == 0]).any(), "no -0.0 (see the docstring)"
    assert np.isfinite(x).all()
    return x


# ---- ggml-quants.c's quantize_row_*_ref as written in C, one float32 operation at a time ------

def f16_bytes(v):
    return np.array([v], dtype=F).astype("<f2").tobytes()  # round to nearest even, as ggml


def c_int8(v):
    """C's (int8_t) of a float: truncation toward zero (defined for -129 < v < 128)."""
    assert -129.0 < float(v) < 128.0, v
    return int(float(v))


def c_roundf(v):
    """roundf: half away from zero. |v| + 0.5 is exact in double for a float32 v."""
    return int(math.copysign(math.floor(abs(float(v)) + 0.5), float(v)))


def c_inverse(d):
    return F(F(1.0) / d) if d != 0 else F(0.0)


def c_q8_0(x):
    amax = F(0.0)
    for v in x:
        a = F(abs(v))
        amax = amax if amax > a else a
    d = F(amax / F(127.0))
    id = c_inverse(d)
    qs = [c_roundf(F(v * id)) for v in x]
    assert all(-128 <= q <= 127 for q in qs)
    return f16_bytes(d) + np.array(qs, dtype=np.int8).tobytes()


def c_nibbles(q):
    return bytes((q[j] | (q[j + 16] << 4)) for j in range(16))


def c_q4_0(x):
    amax, mx = F(0.0), F(0.0)
    for v in x:
        if amax < F(abs(v)):
            amax, mx = F(abs(v)), v
    d = F(mx / F(-8.0))
    id = c_inverse(d)
    q = [min(15, c_int8(F(F(v * id) + F(8.5)))) for v in x]
    assert all(0 <= c <= 15 for c in q)
    return f16_bytes(d) + c_nibbles(q)


def c_q4_1(x):
    mn, mx = F(np.finfo(F).max), F(-np.finfo(F).max)
    for v in x:
        if v < mn:
            mn = v
        if v > mx:
            mx = v
    d = F(F(mx - mn) / F(15.0))
    id = c_inverse(d)
    q = [min(15, c_int8(F(F(F(v - mn) * id) + F(0.5)))) for v in x]
    assert all(0 <= c <= 15 for c in q)
    return f16_bytes(d) + f16_bytes(mn) + c_nibbles(q)


C_REF = {T.Q8_0: c_q8_0, T.Q4_0: c_q4_0, T.Q4_1: c_q4_1}


def main():
    out_dir = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "tests/data/quant")
    out_dir.mkdir(parents=True, exist_ok=True)
    x = make_inputs(np.random.default_rng(kSeed))
    (out_dir / "quantize_in.f32").write_bytes(x.astype("<f4").tobytes())
    print(f"quantize_in.f32: {x.shape[0]} blocks, {x.size} values")
    for name, qtype in TYPES.items():
        with np.errstate(divide="ignore"):
            blocks = quantize(x, qtype).astype(np.uint8)
        size = blocks.shape[1]
        c = b"".join(C_REF[qtype](row) for row in x)
        for i in range(x.shape[0]):
            assert c[i * size:(i + 1) * size] == blocks[i].tobytes(), f"{name}: block {i}: gguf-py != ggml's C"
        # Sanity: the dequantised blocks are close to the values (the exact bound is the C++
        # test's). Blocks under 1e-3 are left out: their f16 scales are subnormal or zero.
        back = dequantize(blocks, qtype).astype(F)
        span = np.abs(x).max(axis=1, keepdims=True)
        big = span[:, 0] > 1e-3
        worst = float((np.abs(back - x)[big] / span[big]).max())
        assert worst < 0.13, f"{name}: relative error {worst}"  # Q4_0's clipped code: one step, 1/8
        (out_dir / f"quantize_{name}.bin").write_bytes(blocks.tobytes())
        print(f"quantize_{name}.bin: {blocks.size} bytes; equals ggml's C order; worst error {worst:.3g} of max|x|")


if __name__ == "__main__":
    main()
