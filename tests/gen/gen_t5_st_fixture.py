#!/usr/bin/env python3
"""Write tests/fixtures/t5_st/: a sentence-t5 / gtr-t5 shaped
sentence-transformers model saved by sentence-transformers itself --
Transformer (the tiny T5 encoder of tests/fixtures/decoders/t5: relu MLP,
relative position bias, its T5-style Unigram tokenizer) -> Pooling (mean)
-> Dense 64 -> 32 (Identity, no bias, as sentence-t5's and gtr-t5's) ->
Normalize -- and expected.json, the vectors SentenceTransformer.encode
gives for fixed texts (fp32, CPU).  tests/python/test_t5_st.py checks posy's
vectors against them, text to vector.

Needs torch + sentence-transformers (not in CI; the fixture is committed).
Run from the repository root:  python3 tests/gen/gen_t5_st_fixture.py
"""
import json
import os
import shutil

import torch
from sentence_transformers import SentenceTransformer, models

SRC = os.path.join("tests", "fixtures", "decoders", "t5")
OUT = os.path.join("tests", "fixtures", "t5_st")
TEXTS = ["What is the capital of China?", "The quick brown fox jumps over the lazy dog.", "a",
         "Embedding models turn text into vectors for retrieval, clustering and deduplication.",
         "café, naïve, 日本語 ☃", "  spaces   and\ttabs\n", "Gravity is a force " * 12]


def main():
    torch.manual_seed(8642)
    shutil.rmtree(OUT, ignore_errors=True)
    dense = models.Dense(64, 32, bias=False, activation_function=torch.nn.Identity())
    with torch.no_grad():
        dense.linear.weight.normal_(0.0, 64 ** -0.5)
    m = SentenceTransformer(modules=[models.Transformer(SRC, max_seq_length=128), models.Pooling(64, "mean"), dense,
                                     models.Normalize()], device="cpu")
    m.tokenizer.pad_token = "<pad>"  # as T5's tokenizer_config.json says; batches are padded
    m.save(OUT)
    for extra in ("README.md",):
        if os.path.exists(os.path.join(OUT, extra)):
            os.remove(os.path.join(OUT, extra))
    m.float()  # the reference in fp32 (the saved T5 weights are bf16 values)
    emb = m.encode(TEXTS, convert_to_numpy=True, normalize_embeddings=False).astype("float64")
    ids = [m.tokenize([t])["input_ids"][0].tolist() for t in TEXTS]
    json.dump({"texts": TEXTS, "ids": ids, "embeddings": emb.tolist()}, open(os.path.join(OUT, "expected.json"), "w"))
    print(sorted(os.listdir(OUT)), emb.shape)


if __name__ == "__main__":
    main()
