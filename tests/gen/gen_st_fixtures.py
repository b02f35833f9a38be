#!/usr/bin/env python3
"""Write encoders saved by sentence-transformers itself, each with
expected.json: the ids SentenceTransformer.tokenize gives and the vectors
SentenceTransformer.encode gives for fixed texts (fp32, CPU).
tests/python/test_st_encoders.py checks posy's vectors against them, text
to vector.

  t5_st       a sentence-t5 / gtr-t5 shaped model: Transformer (the tiny T5
              encoder of tests/fixtures/decoders/t5: relu MLP, relative
              position bias, its T5-style Unigram tokenizer) -> Pooling
              (mean) -> Dense 64 -> 32 (Identity, no bias, as sentence-t5's
              and gtr-t5's) -> Normalize
  deberta_st  a DeBERTa v3 embedder: Transformer (the encoder of
              tests/fixtures/classify/deberta3: no absolute positions, 16
              position buckets, shared position keys, LayerNormed relative
              table; its DeBERTa v3-form tokenizer; max_seq_length 256) ->
              Pooling (mean) -> Normalize

Needs torch + sentence-transformers (not in CI; the fixtures are committed).
Run from the repository root:  python3 tests/gen/gen_st_fixtures.py [NAME ...]
"""
import json
import os
import shutil
import sys

import torch
from sentence_transformers import SentenceTransformer, models

TEXTS = ["What is the capital of China?", "The quick brown fox jumps over the lazy dog.", "a",
         "Embedding models turn text into vectors for retrieval, clustering and deduplication.",
         "café, naïve, 日本語 ☃", "  spaces   and\ttabs\n"]


def t5_st():
    torch.manual_seed(8642)
    dense = models.Dense(64, 32, bias=False, activation_function=torch.nn.Identity())
    with torch.no_grad():
        dense.linear.weight.normal_(0.0, 64 ** -0.5)
    src = os.path.join("tests", "fixtures", "decoders", "t5")
    m = SentenceTransformer(modules=[models.Transformer(src, max_seq_length=128), models.Pooling(64, "mean"), dense,
                                     models.Normalize()], device="cpu")
    m.tokenizer.pad_token = "<pad>"  # as T5's tokenizer_config.json says; batches are padded
    return m, TEXTS + ["Gravity is a force " * 12]


def deberta_st():
    torch.manual_seed(9753)
    src = os.path.join("tests", "fixtures", "classify", "deberta3")
    m = SentenceTransformer(modules=[models.Transformer(src, max_seq_length=256), models.Pooling(64, "mean"),
                                     models.Normalize()], device="cpu")
    return m, TEXTS + ["Gravity is a force " * 40]


def write(name, m, texts):
    out = os.path.join("tests", "fixtures", name)
    shutil.rmtree(out, ignore_errors=True)
    m.save(out)
    for extra in ("README.md",):
        if os.path.exists(os.path.join(out, extra)):
            os.remove(os.path.join(out, extra))
    m.float()  # the reference in fp32 (the saved T5 weights are bf16 values)
    emb = m.encode(texts, convert_to_numpy=True, normalize_embeddings=False).astype("float64")
    ids = [m.tokenize([t])["input_ids"][0].tolist() for t in texts]
    json.dump({"texts": texts, "ids": ids, "embeddings": emb.tolist()}, open(os.path.join(out, "expected.json"), "w"))
    print(name, sorted(os.listdir(out)), emb.shape, [len(i) for i in ids])


def main():
    for name in sys.argv[1:] or ["t5_st", "deberta_st"]:
        write(name, *globals()[name]())


if __name__ == "__main__":
    main()
