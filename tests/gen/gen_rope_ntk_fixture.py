#!/usr/bin/env python3
"""Write tests/fixtures/rope_ntk.json: the float32 inverse rotary
frequencies of GTE's NTK scaling as its own remote code computes them
(Alibaba-NLP/new-impl's NTKScalingRotaryEmbedding, fixed and mixed), for
the shapes of the released checkpoints and a few others, as bit patterns
(test_eng_rope compares eng_rope.h's within a few ulp: posy takes pow in
double, torch its vectorized powf).  A factor of 1 or less leaves that
code's frequencies plain (its cache never outgrows the original context).

    POSY_GTE_REF=DIR python3 tests/gen/gen_rope_ntk_fixture.py
DIR: a folder holding new-impl's modeling.py and configuration.py (the
hub's GTE remote code; needs torch + transformers).
"""
import importlib
import json
import os
import struct
import sys

import torch

CASES = [
    # name, head_dim, theta, max_position_embeddings, factor, mixed_b
    ("gte-base-en-v1.5", 64, 500000.0, 8192, 2.0, None),
    ("gte-large-en-v1.5", 64, 160000.0, 8192, 2.0, None),
    ("ntk-factor-8", 64, 160000.0, 8192, 8.0, None),
    ("ntk-small", 16, 10000.0, 128, 2.0, None),
    ("ntk-mixed", 64, 160000.0, 8192, 4.0, 1.5),
    ("ntk-mixed-small", 16, 160000.0, 128, 4.0, 1.5),
    ("ntk-factor-below-1", 32, 10000.0, 512, 0.5, None),
]


def bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def main():
    d = os.environ.get("POSY_GTE_REF")
    if not d:
        sys.exit("set POSY_GTE_REF to a folder holding Alibaba-NLP/new-impl's modeling.py and configuration.py")
    d = os.path.abspath(d)
    sys.path.insert(0, os.path.dirname(d))
    mod = importlib.import_module(os.path.basename(d) + ".modeling")
    out = []
    for name, hd, theta, maxp, f, b in CASES:
        r = mod.NTKScalingRotaryEmbedding(hd, max_position_embeddings=maxp, base=theta, scaling_factor=f, mixed_b=b)
        assert r.inv_freq.dtype == torch.float32
        out.append({"name": name, "head_dim": hd, "rope_theta": theta, "factor": f, "mixed_b": b,
                    "inv_freq_bits": [bits(v) for v in r.inv_freq.tolist()]})
    path = os.path.join(os.path.dirname(__file__), "..", "fixtures", "rope_ntk.json")
    with open(path, "w") as fh:
        json.dump({"torch": torch.__version__, "cases": out}, fh, indent=1)
        fh.write("\n")


if __name__ == "__main__":
    main()
