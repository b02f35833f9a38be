#!/usr/bin/env python3
"""Write tests/fixtures/deberta_st/: a sentence-transformers embedding model
on DeBERTa v3, saved by sentence-transformers itself -- Transformer (the
encoder of tests/fixtures/classify/deberta3: no absolute positions, 16
position buckets, shared position keys, LayerNormed relative table; its
DeBERTa v3-form tokenizer) -> Pooling (mean) -> Normalize -- and
expected.json, the ids SentenceTransformer.tokenize gives and the vectors
SentenceTransformer.encode gives for fixed texts (fp32, CPU).  Mean pooling
reads every token's last state, where the classifier fixtures read only
the first token's.  tests/python/test_deberta_st.py checks posy against it.

Needs torch + sentence-transformers (not in CI; the fixture is committed).
Run from the repository root:  python3 tests/gen/gen_deberta_st_fixture.py
"""
import json
import os
import shutil

import torch
from sentence_transformers import SentenceTransformer, models

SRC = os.path.join("tests", "fixtures", "classify", "deberta3")
OUT = os.path.join("tests", "fixtures", "deberta_st")
TEXTS = ["What is the capital of China?", "The quick brown fox jumps over the lazy dog.", "a",
         "Embedding models turn text into vectors for retrieval, clustering and deduplication.",
         "café, naïve, 日本語 ☃", "  spaces   and\ttabs\n", "Gravity is a force " * 40]


def main():
    torch.manual_seed(9753)
    shutil.rmtree(OUT, ignore_errors=True)
    m = SentenceTransformer(modules=[models.Transformer(SRC, max_seq_length=256), models.Pooling(64, "mean"),
                                     models.Normalize()], device="cpu")
    m.save(OUT)
    for extra in ("README.md",):
        if os.path.exists(os.path.join(OUT, extra)):
            os.remove(os.path.join(OUT, extra))
    emb = m.encode(TEXTS, convert_to_numpy=True).astype("float64")
    ids = [m.tokenize([t])["input_ids"][0].tolist() for t in TEXTS]
    json.dump({"texts": TEXTS, "ids": ids, "embeddings": emb.tolist()}, open(os.path.join(OUT, "expected.json"), "w"))
    print(sorted(os.listdir(OUT)), emb.shape, [len(i) for i in ids])


if __name__ == "__main__":
    main()
