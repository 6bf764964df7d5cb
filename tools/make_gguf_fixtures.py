#!/usr/bin/env python3
"""Write tests/data/gguf/types.gguf with the `gguf` package's own writer, and types.json with
what the package's own reader (gguf.GGUFReader) reports about it.

Usage (from the repo root):
    python tools/make_gguf_fixtures.py [--out tests/data/gguf]

Needs: gguf==0.19.0, numpy==2.4.6 (pip install gguf==0.19.0 numpy==2.4.6).

types.gguf holds metadata of every GGUF value type (u8 .. f64, bool, strings including an
empty and a non-ASCII one, arrays of every scalar type and of strings) and tensors of several
ggml types and ranks (1-D to 4-D) with general.alignment = 64, so that padding between tensors
and before the data section is exercised. Quantized tensors come from gguf.quants.quantize.
GGUFWriter refuses empty arrays, so the C++ test builds those by hand.

types.json is the reader's view: every metadata key with its type and value, and every tensor's
name, dims (ggml order: dims[0] is the row), type, offset from the data section, byte count,
sha256 and the bytes themselves as hex. The data is seeded, so the output is deterministic.
"""

import argparse
import hashlib
import json
from pathlib import Path

import numpy as np

import gguf
from gguf import GGMLQuantizationType as Q
from gguf import GGUFValueType as V
from gguf.quants import quantize

ALIGNMENT = 64

TYPE_NAMES = {
    V.UINT8: "u8", V.INT8: "i8", V.UINT16: "u16", V.INT16: "i16", V.UINT32: "u32", V.INT32: "i32",
    V.FLOAT32: "f32", V.BOOL: "bool", V.STRING: "string", V.ARRAY: "array", V.UINT64: "u64",
    V.INT64: "i64", V.FLOAT64: "f64",
}

SCALARS = [
    ("test.u8", V.UINT8, 200),
    ("test.i8", V.INT8, -100),
    ("test.u16", V.UINT16, 60000),
    ("test.i16", V.INT16, -30000),
    ("test.u32", V.UINT32, 4_000_000_000),
    ("test.i32", V.INT32, -2_000_000_000),
    ("test.u64", V.UINT64, 2**64 - 1),
    ("test.u64_small", V.UINT64, 12345),
    ("test.i64", V.INT64, -(2**63)),
    ("test.f32", V.FLOAT32, 3.14159),
    ("test.f64", V.FLOAT64, 2.718281828459045),
    ("test.bool_true", V.BOOL, True),
    ("test.bool_false", V.BOOL, False),
    ("test.string", V.STRING, "hello, gguf"),
    ("test.string_empty", V.STRING, ""),
    ("test.unicode", V.STRING, "h\u00e9llo w\u00f6rld \u2014 \u65e5\u672c\u8a9e \U0001f642"),
]

ARRAYS = [
    ("test.arr_u8", V.UINT8, [0, 1, 255]),
    ("test.arr_i8", V.INT8, [-128, 0, 127]),
    ("test.arr_u16", V.UINT16, [0, 65535]),
    ("test.arr_i16", V.INT16, [-32768, 32767, -1]),
    ("test.arr_u32", V.UINT32, [1, 2, 4_294_967_295]),
    ("test.arr_i32", V.INT32, [-2_147_483_648, 0, 2_147_483_647]),
    ("test.arr_u64", V.UINT64, [0, 2**63 - 1]),
    ("test.arr_u64_big", V.UINT64, [1, 2**64 - 1]),
    ("test.arr_i64", V.INT64, [-(2**63), 2**63 - 1]),
    ("test.arr_f32", V.FLOAT32, [0.5, -1.25, 1e-7, 65504.0]),
    ("test.arr_f64", V.FLOAT64, [0.1, -1e300, 5e-324]),
    ("test.arr_bool", V.BOOL, [True, False, True]),
    ("test.arr_str", V.STRING, ["a", "", "\u00fcn\u00ef", "\u0120t h"]),
]


def tensors(rng):
    """(name, numpy data as GGUFWriter takes it, raw ggml type or None)."""
    def f32(*shape):
        return rng.standard_normal(shape).astype(np.float32)
    return [
        ("vec.f32", f32(7), None),
        ("mat.f16", f32(3, 5).astype(np.float16), None),
        ("cube.f32", f32(2, 3, 4), None),
        ("hyper.f32", f32(2, 1, 3, 2), None),
        ("mat.q8_0", quantize(f32(4, 64), Q.Q8_0), Q.Q8_0),
        ("cube.q8_0", quantize(f32(2, 3, 32), Q.Q8_0), Q.Q8_0),
        ("mat.q4_0", quantize(f32(2, 64), Q.Q4_0), Q.Q4_0),
        ("mat.q4_1", quantize(f32(3, 32), Q.Q4_1), Q.Q4_1),
        ("mat.bf16", quantize(f32(3, 4), Q.BF16), Q.BF16),
        ("vec.i32", rng.integers(-1000, 1000, 5).astype(np.int32), None),
        ("vec.i8", rng.integers(-128, 128, 9).astype(np.int8), None),
        ("vec.f64", rng.standard_normal(3), None),
    ]


def write(path, rng):
    w = gguf.GGUFWriter(path, arch="kvinfer-test")
    w.add_custom_alignment(ALIGNMENT)
    w.add_name("types fixture")
    for key, vtype, value in SCALARS:
        w.add_key_value(key, value, vtype)  # add_string() would silently drop the empty string
    for key, vtype, value in ARRAYS:
        w.add_key_value(key, value, V.ARRAY, sub_type=vtype)
    for name, data, raw in tensors(rng):
        w.add_tensor(name, data, raw_dtype=raw)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def describe(path):
    r = gguf.GGUFReader(path)
    metadata = {}
    for key, field in r.fields.items():
        if key.startswith("GGUF."):  # the reader's pseudo-fields for the header
            continue
        entry = {"type": TYPE_NAMES[field.types[0]], "value": field.contents()}
        if field.types[0] == V.ARRAY:
            entry["element"] = TYPE_NAMES[field.types[-1]]
        metadata[key] = entry
    out_tensors = []
    raw = np.memmap(path, mode="r")
    for t in r.tensors:
        data = bytes(raw[t.data_offset:t.data_offset + t.n_bytes])
        out_tensors.append({
            "name": t.name,
            "dims": [int(d) for d in t.shape],
            "type": int(t.tensor_type),
            "type_name": t.tensor_type.name,
            "offset": int(t.data_offset) - int(r.data_offset),
            "bytes": int(t.n_bytes),
            "sha256": hashlib.sha256(data).hexdigest(),
            "hex": data.hex(),
        })
    return {
        "version": int(r.fields["GGUF.version"].contents()),
        "alignment": int(r.alignment),
        "data_offset": int(r.data_offset),
        "file_size": int(r.data.size),
        "metadata": metadata,
        "tensors": out_tensors,
    }


def check_against_inputs(desc):
    """The reader's view must equal what was written (f32 values after rounding to f32)."""
    md = desc["metadata"]
    for key, vtype, value in SCALARS:
        want = float(np.float32(value)) if vtype == V.FLOAT32 else value
        assert md[key]["value"] == want and md[key]["type"] == TYPE_NAMES[vtype], key
    for key, vtype, value in ARRAYS:
        want = [float(np.float32(v)) for v in value] if vtype == V.FLOAT32 else value
        assert md[key]["value"] == want and md[key]["element"] == TYPE_NAMES[vtype], key
    assert md["general.alignment"]["value"] == ALIGNMENT


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/data/gguf")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "types.gguf"
    write(path, np.random.default_rng(20240607))
    desc = describe(path)
    check_against_inputs(desc)
    (out / "types.json").write_text(json.dumps(desc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{path}: {desc['file_size']} bytes, {len(desc['metadata'])} keys, {len(desc['tensors'])} tensors")


if __name__ == "__main__":
    main()
