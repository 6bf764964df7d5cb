#!/usr/bin/env python3
"""Writes the default model (SmolLM2-135M-Instruct Q4_1) with its Q4_1 matrices requantised to
another 32-value type (q8_0 or q4_0), every other tensor and all metadata unchanged: what
`llama-quantize --allow-requantize` makes, from the gguf package's reference quantisers.

    pip install gguf==0.19.0 numpy
    python3 requantize.py models/SmolLM2-135M-Instruct.Q4_1.gguf q8_0 /tmp/smol_q8_0.gguf
"""
import sys

import gguf
import numpy as np


def main() -> None:
    src, kind, dst = sys.argv[1], sys.argv[2], sys.argv[3]
    target = {"q8_0": gguf.GGMLQuantizationType.Q8_0, "q4_0": gguf.GGMLQuantizationType.Q4_0}[kind]
    reader = gguf.GGUFReader(src)
    arch = reader.fields[gguf.Keys.General.ARCHITECTURE].contents()
    writer = gguf.GGUFWriter(dst, arch=arch)
    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue
        val_type = field.types[0]
        sub_type = field.types[-1] if val_type == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), val_type, sub_type=sub_type)
    tensors = []
    for t in reader.tensors:
        if t.tensor_type == gguf.GGMLQuantizationType.Q4_1:
            values = gguf.quants.dequantize(t.data, t.tensor_type)  # (rows, cols) f32
            data, qtype = gguf.quants.quantize(values.astype(np.float32), target), target
        else:
            data, qtype = t.data, t.tensor_type
        tensors.append((t.name, data, qtype))
        writer.add_tensor_info(t.name, data.shape, data.dtype, data.nbytes, qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for _, data, _ in tensors:
        writer.write_tensor_data(data)
    writer.close()


if __name__ == "__main__":
    main()
