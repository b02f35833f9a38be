#!/usr/bin/env python3
"""Write the fuzzer's seed corpus (tests/fuzz/seeds/): a small file mixing
dtypes (F32, F16, BF16, I64, an empty tensor) and a complete tiny BERT
(H=8, I=16, V=4, P=4, T=2, one layer) in F32 and, under a "bert." prefix,
in BF16, and a tiny MPNet (its names, the relative bias, "mpnet." prefix),
so the fuzzer starts from inputs that reach the weights loader.
Standard library only; run from the repository root."""
import json
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "seeds")


def st(tensors):
    hdr, data = {"__metadata__": {"format": "pt"}}, b""
    for name, dt, shape, raw in tensors:
        hdr[name] = {"dtype": dt, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def f32(n):
    return struct.pack("<%df" % n, *[(i % 7 - 3) / 4 for i in range(n)])


def bf16(n):
    return b"".join(struct.pack("<f", (i % 7 - 3) / 4)[2:] for i in range(n))


def filled(names_shapes, enc, dt, prefix):
    """(prefix + name, dtype, shape, bytes) for each (name, shape), values from enc."""
    out = []
    for n, s in names_shapes:
        k = 1
        for d in s:
            k *= d
        out.append((prefix + n, dt, s, enc(k)))
    return out


def tiny(enc, dt, prefix):
    H, I, V, P, T = 8, 16, 4, 4, 2
    t = [("embeddings.word_embeddings.weight", [V, H]), ("embeddings.position_embeddings.weight", [P, H]),
         ("embeddings.token_type_embeddings.weight", [T, H]), ("embeddings.LayerNorm.weight", [H]),
         ("embeddings.LayerNorm.bias", [H])]
    for mod, o, i in [("attention.self.query", H, H), ("attention.self.key", H, H), ("attention.self.value", H, H),
                      ("attention.output.dense", H, H), ("intermediate.dense", I, H), ("output.dense", H, I)]:
        t += [("encoder.layer.0.%s.weight" % mod, [o, i]), ("encoder.layer.0.%s.bias" % mod, [o])]
    for ln in ["attention.output.LayerNorm", "output.LayerNorm"]:
        t += [("encoder.layer.0.%s.weight" % ln, [H]), ("encoder.layer.0.%s.bias" % ln, [H])]
    out = filled(t, enc, dt, prefix)
    out.append(("embeddings.position_ids", "I64", [1, P], struct.pack("<4q", 0, 1, 2, 3)))
    return st(out)


def tiny_mpnet(enc, dt, prefix):
    """MPNet's names, no token types, the relative position bias [32, heads=2]."""
    H, I, V, P = 8, 16, 4, 4
    t = [("embeddings.word_embeddings.weight", [V, H]), ("embeddings.position_embeddings.weight", [P, H]),
         ("embeddings.LayerNorm.weight", [H]), ("embeddings.LayerNorm.bias", [H]),
         ("encoder.relative_attention_bias.weight", [32, 2])]
    for mod, o, i in [("attention.attn.q", H, H), ("attention.attn.k", H, H), ("attention.attn.v", H, H),
                      ("attention.attn.o", H, H), ("intermediate.dense", I, H), ("output.dense", H, I)]:
        t += [("encoder.layer.0.%s.weight" % mod, [o, i]), ("encoder.layer.0.%s.bias" % mod, [o])]
    for ln in ["attention.LayerNorm", "output.LayerNorm"]:
        t += [("encoder.layer.0.%s.weight" % ln, [H]), ("encoder.layer.0.%s.bias" % ln, [H])]
    return st(filled(t, enc, dt, prefix))


def main():
    os.makedirs(OUT, exist_ok=True)
    files = {
        "mixed.safetensors": st([("w", "F32", [2, 2], f32(4)), ("h", "F16", [3], b"\x00\x3c\x00\xc0\x00\x38"),
                                 ("b", "BF16", [2], bf16(2)), ("ids", "I64", [1], struct.pack("<q", 7)),
                                 ("e", "F32", [0, 5], b"")]),
        "tiny_bert_f32.safetensors": tiny(f32, "F32", ""),
        "tiny_bert_bf16.safetensors": tiny(bf16, "BF16", "bert."),
        "tiny_mpnet_f32.safetensors": tiny_mpnet(f32, "F32", "mpnet."),
    }
    for name, blob in files.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(blob)


if __name__ == "__main__":
    main()
