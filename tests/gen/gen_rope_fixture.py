#!/usr/bin/env python3
"""Write tests/fixtures/rope_inv_freq.json: the float32 inverse rotary
frequencies transformers computes (ROPE_INIT_FUNCTIONS) for the rope types
posy runs (default, linear, llama3), with real Llama 3.x parameters and a
small original context that puts every frequency band in play.  Stored as
the floats' bit patterns, so test_eng_rope compares bit for bit: the
unscaled frequencies ("base_bits", torch's powf) and the scaled ones.

    python3 tests/gen/gen_rope_fixture.py   (needs torch + transformers)
"""
import json
import os
import struct

import torch
import transformers
from transformers import LlamaConfig
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

CASES = [
    # name, head_dim, rope_parameters
    ("llama-3.2-1b", 64, {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 32.0,
                          "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                          "original_max_position_embeddings": 8192}),
    ("llama-3.1-8b", 128, {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                           "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                           "original_max_position_embeddings": 8192}),
    ("llama3-small-context", 16, {"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0,
                                  "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                  "original_max_position_embeddings": 16}),
    ("llama3-odd-factors", 32, {"rope_type": "llama3", "rope_theta": 20000.0, "factor": 3.0,
                                "low_freq_factor": 1.5, "high_freq_factor": 7.0,
                                "original_max_position_embeddings": 300}),
    ("linear", 32, {"rope_type": "linear", "rope_theta": 10000.0, "factor": 4.0}),
    ("default-1e6", 128, {"rope_type": "default", "rope_theta": 1000000.0}),
]


def bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def main():
    out = []
    for name, d, rp in CASES:
        cfg = LlamaConfig(hidden_size=d * 2, num_attention_heads=2, head_dim=d, max_position_embeddings=131072,
                          rope_parameters=dict(rp))
        if rp["rope_type"] == "default":  # transformers 5 keeps the default in the model class
            inv, att = LlamaRotaryEmbedding.compute_default_rope_parameters(cfg, device="cpu")
        else:
            inv, att = ROPE_INIT_FUNCTIONS[rp["rope_type"]](cfg, "cpu")
        assert inv.dtype == torch.float32 and att == 1.0, (name, inv.dtype, att)
        base, _ = LlamaRotaryEmbedding.compute_default_rope_parameters(cfg, device="cpu")
        out.append({"name": name, "head_dim": d, "rope": rp, "base_bits": [bits(v) for v in base.tolist()],
                    "inv_freq_bits": [bits(v) for v in inv.tolist()]})
    path = os.path.join(os.path.dirname(__file__), "..", "fixtures", "rope_inv_freq.json")
    with open(path, "w") as f:
        json.dump({"transformers": transformers.__version__, "torch": torch.__version__, "cases": out}, f, indent=1)
        f.write("\n")
    print("wrote", os.path.normpath(path))


if __name__ == "__main__":
    main()
