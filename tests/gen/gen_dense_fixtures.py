#!/usr/bin/env python3
"""Write tests/fixtures/dense/: sentence-transformers Dense modules on top of
all-MiniLM-L6-v2 (the default model, models/all-MiniLM-L6-v2), and the
embeddings sentence-transformers itself computes for fixed texts.

  a/  Pooling -> Dense 384->96 (Tanh, bias) -> Dense 96->48 (Identity, no
      bias) -> Normalize: the LaBSE / distiluse shape (a projection, then
      L2), served as 48 dimensions.
  b/  Pooling -> Dense 384->64 (GELU) -> Dense 64->40 (ReLU) -> Dense 40->24
      (Sigmoid), no Normalize: every other activation posy computes, and
      unnormalised output, so magnitudes are compared too.

Each folder holds modules.json and the Dense module folders only (config.json,
model.safetensors with weights of std 1/sqrt(in) and biases of std 0.5);
tests/python/test_dense.py links the MiniLM files beside them.
expected.json: {"texts": [...], "a": [[...]], "b": [[...]]} from
SentenceTransformer.encode (fp32, CPU).

Needs torch + sentence-transformers and the default model (scripts/fetch-model.sh).
Run from the repository root:  python3 tests/gen/gen_dense_fixtures.py
"""
import json
import os
import shutil

import torch
from sentence_transformers import SentenceTransformer, models

MINILM = os.path.join("models", "all-MiniLM-L6-v2")
OUT = os.path.join("tests", "fixtures", "dense")
TEXTS = ["What is the capital of China?", "The quick brown fox jumps over the lazy dog.", "a",
         "Embedding models turn text into vectors for retrieval, clustering and deduplication.",
         "café, naïve, 日本語 ☃", "  spaces   and\ttabs\n"]
SPECS = {
    "a": ([(384, 96, True, torch.nn.Tanh()), (96, 48, False, torch.nn.Identity())], True),
    "b": ([(384, 64, True, torch.nn.GELU()), (64, 40, True, torch.nn.ReLU()), (40, 24, True, torch.nn.Sigmoid())],
          False),
}


def main():
    torch.manual_seed(2468)
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    expected = {"texts": TEXTS}
    for name, (dense, normalize) in SPECS.items():
        mods = [models.Transformer(MINILM), models.Pooling(384, "mean")]
        for i, o, bias, act in dense:
            d = models.Dense(i, o, bias=bias, activation_function=act)
            with torch.no_grad():
                d.linear.weight.normal_(0.0, i ** -0.5)
                if bias:
                    d.linear.bias.normal_(0.0, 0.5)
            mods.append(d)
        if normalize:
            mods.append(models.Normalize())
        m = SentenceTransformer(modules=mods, device="cpu")
        tmp = os.path.join(OUT, name + ".full")
        m.save(tmp)
        dst = os.path.join(OUT, name)
        os.makedirs(dst)
        for entry in json.load(open(os.path.join(tmp, "modules.json"))):
            if entry["type"].endswith("Dense"):
                shutil.copytree(os.path.join(tmp, entry["path"]), os.path.join(dst, entry["path"]))
        shutil.copy(os.path.join(tmp, "modules.json"), dst)
        shutil.rmtree(tmp)
        with torch.no_grad():
            v = m.encode(TEXTS, convert_to_numpy=True, normalize_embeddings=False, batch_size=len(TEXTS))
        expected[name] = v.astype(float).tolist()
        print(name, "dims", v.shape, "norms", [round(float((r ** 2).sum() ** 0.5), 4) for r in v])
    json.dump(expected, open(os.path.join(OUT, "expected.json"), "w"))


if __name__ == "__main__":
    main()
