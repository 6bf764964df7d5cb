#!/usr/bin/env python3
"""Bit-exact test vectors for kvinfer's ggml quantised weight types (tests/test_quant.cpp).

Run:   /root/fixenv/bin/python tools/make_quant_fixtures.py [out_dir]    (default tests/data/quant)
Needs: pip install numpy==2.4.6 gguf==0.19.0

For every type it writes <type>.bin (the raw blocks of kRows rows of kCols values, row after
row) and <type>.f32 (little-endian float32: gguf.quants.dequantize of those blocks, the
reference our dequantisation must equal bit for bit). The output is deterministic.

Rows: 0-2 fixed-seed normal data (one plain, one weight-like with outliers, one shifted so the
minimum matters), 3 zeros, 4 huge and tiny magnitudes (f16 scales near the top of the range and
subnormal or zero), 5 raw random bytes with finite random f16 scales (every bit pattern of the
packed fields, which quantised data alone would not reach).

gguf 0.19 quantises Q8_0/Q4_0/Q4_1/Q5_0/Q5_1 (gguf.quants.quantize) but has no quantiser for the
K-quants: quantize_k() below packs them with a plain min/max choice of scales, not ggml's search.
How the codes were chosen does not matter to dequantisation; the reference values are still
gguf's own dequantize. Every .f32 is also checked here against a literal port of ggml-quants.c's
dequantize_row_* loops (scalar float32 operations in C's order), so the vectorised gguf-py code
and the C code are known to agree on these blocks.
"""
import sys
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize, quantize

kRows, kCols, kSeed = 6, 512, 20240531
TYPES = {"q8_0": T.Q8_0, "q4_0": T.Q4_0, "q4_1": T.Q4_1, "q5_0": T.Q5_0, "q5_1": T.Q5_1,
         "q4_k": T.Q4_K, "q5_k": T.Q5_K, "q6_k": T.Q6_K}
BLOCK = {T.Q8_0: (32, 34), T.Q4_0: (32, 18), T.Q4_1: (32, 20), T.Q5_0: (32, 22), T.Q5_1: (32, 24),
         T.Q4_K: (256, 144), T.Q5_K: (256, 176), T.Q6_K: (256, 210)}
F = np.float32


def data_rows(rng):
    rows = np.zeros((kRows - 1, kCols), dtype=F)
    rows[0] = rng.standard_normal(kCols)
    w = rng.standard_normal(kCols) * 0.02
    out = rng.choice(kCols, 8, replace=False)
    w[out] *= 40.0  # outliers, as real weight matrices have
    rows[1] = w
    rows[2] = rng.standard_normal(kCols) * 0.5 + 1.25
    # rows[3]: zeros
    # Alternate 32-value groups: f16 scales near the top of the range, subnormal ones, one that
    # rounds to zero, and one in the middle.
    mags = np.where(np.arange(kCols // 32) % 2 == 0, 8.0e3, 2.0e-5)
    mags[5], mags[7] = 1.0e-3, 1.0e-9
    rows[4] = rng.standard_normal(kCols) * np.repeat(mags, 32)
    rows[4, 64 + 3] = 6.0e4  # a lone huge value in a tiny group
    return rows


def random_half(rng, n):
    """Finite random f16 bit patterns (subnormals and zeros included), as uint8 pairs."""
    h = rng.integers(0, 1 << 16, n, dtype=np.uint16)
    h = np.where((h & 0x7C00) == 0x7C00, h & 0x83FF, h).astype("<u2")  # inf/NaN → subnormal
    return h.view(np.uint8).reshape(n, 2)


def random_blocks(rng, qtype):
    """One row of random blocks with finite f16 scales at the d/dmin offsets."""
    elems, size = BLOCK[qtype]
    nb = kCols // elems
    b = rng.integers(0, 256, (nb, size), dtype=np.uint8)
    half_offsets = {T.Q8_0: [0], T.Q4_0: [0], T.Q5_0: [0], T.Q4_1: [0, 2], T.Q5_1: [0, 2],
                    T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208]}[qtype]
    for off in half_offsets:
        b[:, off:off + 2] = random_half(rng, nb)
    return b.reshape(-1)


def f16(x):
    return np.asarray(x, dtype=F).astype(np.float16)


def pack_k_scales(sc, mn):
    """ggml's 12-byte packing of eight 6-bit scales and mins (inverse of get_scale_min_k4)."""
    s = np.zeros(12, dtype=np.uint8)
    for j in range(4):
        s[j] = (sc[j] & 63) | ((sc[j + 4] >> 4) << 6)
        s[j + 4] = (mn[j] & 63) | ((mn[j + 4] >> 4) << 6)
        s[j + 8] = (sc[j + 4] & 0xF) | ((mn[j + 4] & 0xF) << 4)
    return s


def quantize_k(x, qtype):
    """Packs one 256-value super-block (plain min/max scales; see the module docstring)."""
    x = x.astype(F)
    if qtype == T.Q6_K:
        sub = x.reshape(16, 16)
        amax = np.abs(sub).max(axis=1)
        scale = amax / 31.0
        d = f16(scale.max() / 127.0)
        df = F(d)
        sc = np.zeros(16, dtype=np.int8) if df == 0 else np.clip(np.rint(scale / df), -128, 127).astype(np.int8)
        q = np.full((16, 16), 32, dtype=np.int32)
        for j in range(16):
            step = F(df * F(sc[j]))
            if step != 0:
                q[j] = np.clip(np.rint(sub[j] / step), -32, 31).astype(np.int32) + 32
        q = q.reshape(256)
        ql = np.zeros(128, dtype=np.uint8)
        qh = np.zeros(64, dtype=np.uint8)
        for h in range(2):
            L = q[128 * h:128 * h + 128]
            for l in range(32):
                ql[64 * h + l] = (L[l] & 0xF) | ((L[l + 64] & 0xF) << 4)
                ql[64 * h + l + 32] = (L[l + 32] & 0xF) | ((L[l + 96] & 0xF) << 4)
                qh[32 * h + l] = (L[l] >> 4) | ((L[l + 32] >> 4) << 2) | ((L[l + 64] >> 4) << 4) | ((L[l + 96] >> 4) << 6)
        return np.concatenate([ql, qh, sc.view(np.uint8), np.array([d]).view(np.uint8)])
    levels = 15 if qtype == T.Q4_K else 31
    sub = x.reshape(8, 32)
    lo = np.minimum(sub.min(axis=1), 0)
    scale = (sub.max(axis=1) - lo) / levels
    mins = -lo
    d, dmin = f16(scale.max() / 63.0), f16(mins.max() / 63.0)
    df, dmf = F(d), F(dmin)
    sc = np.zeros(8, np.int32) if df == 0 else np.clip(np.rint(scale / df), 0, 63).astype(np.int32)
    mn = np.zeros(8, np.int32) if dmf == 0 else np.clip(np.rint(mins / dmf), 0, 63).astype(np.int32)
    q = np.zeros((8, 32), dtype=np.int32)
    for j in range(8):
        step = F(df * F(sc[j]))
        if step != 0:
            q[j] = np.clip(np.rint((sub[j] + F(dmf * F(mn[j]))) / step), 0, levels).astype(np.int32)
    qs = np.zeros(128, dtype=np.uint8)
    qh = np.zeros(32, dtype=np.uint8)
    for i in range(4):
        qs[32 * i:32 * i + 32] = (q[2 * i] & 0xF) | ((q[2 * i + 1] & 0xF) << 4)
    for j in range(8):
        qh |= ((q[j] >> 4) << j).astype(np.uint8)
    head = np.concatenate([np.array([d, dmin]).view(np.uint8), pack_k_scales(sc, mn)])
    return np.concatenate([head, qs] if qtype == T.Q4_K else [head, qh, qs])


def quantize_rows(rows, qtype):
    if qtype in (T.Q4_K, T.Q5_K, T.Q6_K):
        return np.concatenate([quantize_k(b, qtype) for b in rows.reshape(-1, 256)])
    return quantize(rows, qtype).reshape(-1)


# ---- ggml-quants.c's dequantize_row_* as written in C, one float32 operation at a time --------

def h(b, o):
    return F(np.frombuffer(bytes(b[o:o + 2]), dtype="<f2")[0])


def scale_min_k4(j, q):
    if j < 4:
        return int(q[j]) & 63, int(q[j + 4]) & 63
    return (int(q[j + 4]) & 0xF) | ((int(q[j - 4]) >> 6) << 4), (int(q[j + 4]) >> 4) | ((int(q[j]) >> 6) << 4)


def ggml_block(b, qtype):
    y = np.zeros(BLOCK[qtype][0], dtype=F)
    if qtype == T.Q8_0:
        d = h(b, 0)
        for j in range(32):
            y[j] = F(int(np.int8(b[2 + j]))) * d
    elif qtype in (T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1):
        has_min = qtype in (T.Q4_1, T.Q5_1)
        five = qtype in (T.Q5_0, T.Q5_1)
        d = h(b, 0)
        m = h(b, 2) if has_min else F(0)
        qs = (4 if has_min else 2) + (4 if five else 0)
        qh = int.from_bytes(bytes(b[qs - 4:qs]), "little") if five else 0
        off = 0 if has_min else (16 if five else 8)
        for j in range(16):
            x0 = (int(b[qs + j]) & 0x0F) | ((((qh >> j) << 4) & 0x10) if five else 0)
            x1 = (int(b[qs + j]) >> 4) | (((qh >> (j + 12)) & 0x10) if five else 0)
            y[j] = F(x0 - off) * d + m if has_min else F(x0 - off) * d
            y[j + 16] = F(x1 - off) * d + m if has_min else F(x1 - off) * d
    elif qtype in (T.Q4_K, T.Q5_K):
        d, mn = h(b, 0), h(b, 2)
        scales = b[4:16]
        qh = b[16:48]
        q = b[48:] if qtype == T.Q5_K else b[16:]
        k = 0
        for j in range(4):
            for half in range(2):
                sc, m = scale_min_k4(2 * j + half, scales)
                d1, m1 = d * F(sc), mn * F(m)
                for l in range(32):
                    v = (int(q[32 * j + l]) >> (4 * half)) & 0xF
                    if qtype == T.Q5_K and int(qh[l]) & (1 << (2 * j + half)):
                        v += 16
                    y[k] = d1 * F(v) - m1
                    k += 1
    else:  # Q6_K
        d = h(b, 208)
        for n in range(2):
            ql, qh, sc = b[64 * n:], b[128 + 32 * n:], b[192 + 8 * n:]
            for l in range(32):
                i = l // 16
                q1 = ((int(ql[l]) & 0xF) | (((int(qh[l]) >> 0) & 3) << 4)) - 32
                q2 = ((int(ql[l + 32]) & 0xF) | (((int(qh[l]) >> 2) & 3) << 4)) - 32
                q3 = ((int(ql[l]) >> 4) | (((int(qh[l]) >> 4) & 3) << 4)) - 32
                q4 = ((int(ql[l + 32]) >> 4) | (((int(qh[l]) >> 6) & 3) << 4)) - 32
                for k, qv in enumerate((q1, q2, q3, q4)):
                    y[128 * n + l + 32 * k] = d * F(int(np.int8(sc[i + 2 * k]))) * F(qv)
    return y


def main():
    out_dir = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "tests/data/quant")
    out_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(kSeed)
    rows = data_rows(rng)
    with np.errstate(all="ignore"):
        for name, qtype in TYPES.items():
            blocks = np.concatenate([quantize_rows(rows, qtype), random_blocks(rng, qtype)]).astype(np.uint8)
            elems, size = BLOCK[qtype]
            assert blocks.size == kRows * kCols // elems * size
            ref = dequantize(blocks, qtype).astype(F).reshape(-1)
            assert ref.size == kRows * kCols and np.isfinite(ref).all()
            c = np.concatenate([ggml_block(b, qtype) for b in blocks.reshape(-1, size)])
            assert c.view(np.uint32).tolist() == ref.view(np.uint32).tolist(), f"{name}: gguf-py != ggml C order"
            # The quantised data rows must be close to the data (a sanity check of quantize_k).
            err = np.abs(ref[:kCols * 3] - rows[:3].reshape(-1)).max() / np.abs(rows[:3]).max()
            assert err < 0.15, f"{name}: relative error {err}"
            (out_dir / f"{name}.bin").write_bytes(blocks.tobytes())
            (out_dir / f"{name}.f32").write_bytes(ref.astype("<f4").tobytes())
            print(f"{name}: {blocks.size} bytes, max relative error of rows 0-2 {err:.3g}")


if __name__ == "__main__":
    main()
