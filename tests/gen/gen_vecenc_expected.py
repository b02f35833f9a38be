#!/usr/bin/env python3
"""Print the exact bytes tests/unit/test_vecenc.c expects for its fixed
vectors: binary/ubinary from sentence-transformers' quantize_embeddings
(the definition posy matches), int8 from the formula of docs/ENCODINGS.md
in float64 numpy (sentence-transformers' own int8 is calibrated per
dimension over a set of vectors, a different quantity), base64 from the
standard library.  Run: python3 tests/gen/gen_vecenc_expected.py
"""
import numpy as np, base64
from sentence_transformers.util.quantization import quantize_embeddings
V1 = np.array([0.5, -0.25, 0.0, 1.0, -1.0, 0.125, 0.3, -0.3, 0.7, -0.0], dtype=np.float32)
V2 = np.array([127.0, 2.5, -2.5, 0.5, -0.5, 1.5, 63.5, -126.5, 0.49999997, 100.0, -127.0, 3.0, 0.0], dtype=np.float32)
V3 = np.array([np.sin(i * 0.7) * (i + 1) / 17.0 for i in range(17)], dtype=np.float32)
def int8(v):
    m = np.abs(v.astype(np.float64)).max(); s = 127.0 / m
    y = v.astype(np.float64) * s
    return np.clip(np.sign(y) * np.floor(np.abs(y) + 0.5), -127, 127).astype(np.int8), np.float32(s)
for name, v in (("V1", V1), ("V2", V2), ("V3", V3)):
    q, s = int8(v)
    print(name, "floats", [float(x) for x in v])
    print(name, "int8", list(q), "scale", repr(float(s)))
    print(name, "ubinary", list(quantize_embeddings(v[None], "ubinary")[0]))
    print(name, "binary", list(quantize_embeddings(v[None], "binary")[0]))
    print(name, "b64f32", base64.b64encode(v.astype('<f4').tobytes()).decode())
    print(name, "b64int8", base64.b64encode(q.tobytes()).decode())
