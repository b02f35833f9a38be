#!/usr/bin/env python3
"""Write tests/fixtures/static/: sentence-transformers StaticEmbedding
models (static-retrieval-mrl-*, model2vec's potion-*), each saved the way
one of their real layouts is, with expected.json: the ids
StaticEmbedding.preprocess gives and the vectors SentenceTransformer.encode
gives (fp32, CPU) for fixed texts.  tests/python/test_static.py checks
posy's against them, text to vector.

  st6  sentence-transformers 6's own save: the module at the root (path
       ""), model.safetensors with embedding.weight, tokenizer.json beside
       it (a WordPiece one), then Normalize; no config.json at all.
  st5  the layout of the hub's static-retrieval-mrl-en-v1 (sentence-
       transformers 3-5): modules.json naming
       sentence_transformers.models.StaticEmbedding in 0_StaticEmbedding/,
       a byte-level BPE tokenizer whose tokenizer.json truncates at 24
       tokens (sentence-transformers keeps that), then a Dense 48 -> 16
       (Tanh) and no Normalize.
  m2v  model2vec's potion-* layout: the module at "." beside model2vec's own
       config.json (not a transformers config), model.safetensors holding
       model2vec's "embeddings" (F16, fewer rows than token ids), "mapping"
       (I64, token id -> row) and "weights" (F64, a scale per token id),
       which sentence-transformers folds into one row per token id; a
       Unigram tokenizer; Normalize.

Needs torch, tokenizers, safetensors and sentence-transformers (not in CI;
the fixtures are committed).  Run from the repository root:
    python3 tests/gen/gen_static_fixtures.py
"""
import json
import os
import shutil

import numpy as np
import torch
from safetensors.numpy import save_file
from sentence_transformers import SentenceTransformer
from sentence_transformers.sentence_transformer.modules import Dense, Normalize, StaticEmbedding
from tokenizers import Tokenizer

TOK = os.path.join("tests", "fixtures", "tokenizers")
OUT = os.path.join("tests", "fixtures", "static")
TEXTS = ["What is the capital of China?", "The quick brown fox jumps over the lazy dog.", "a",
         "Embedding models turn text into vectors for retrieval, clustering and deduplication.",
         "café, naïve, 日本語 ☃", "  spaces   and\ttabs\n", "Gravity is a force " * 12, "", "   "]


def expected(d):
    m = SentenceTransformer(d, device="cpu")
    emb = m.encode(TEXTS, convert_to_numpy=True, normalize_embeddings=False).astype("float64")
    se = m[0]
    ids = [se.preprocess([t])["input_ids"].tolist() for t in TEXTS]
    json.dump({"texts": TEXTS, "ids": ids, "embeddings": emb.tolist()}, open(os.path.join(d, "expected.json"), "w"))
    for extra in ("README.md",):
        if os.path.exists(os.path.join(d, extra)):
            os.remove(os.path.join(d, extra))
    print(d, sorted(os.listdir(d)), emb.shape, [len(i) for i in ids])


def st6():
    d = os.path.join(OUT, "st6")
    tok = Tokenizer.from_file(os.path.join(TOK, "wordpiece_nfd.json"))
    w = torch.randn(tok.get_vocab_size(), 48) * 0.3
    SentenceTransformer(modules=[StaticEmbedding(tok, embedding_weights=w), Normalize()], device="cpu").save(d)
    expected(d)


def st5():
    d = os.path.join(OUT, "st5")
    tok = Tokenizer.from_file(os.path.join(TOK, "bpe_gpt2.json"))
    tok.enable_truncation(24)
    w = torch.randn(tok.get_vocab_size(), 48) * 0.3
    dense = Dense(48, 16, activation_function=torch.nn.Tanh())
    with torch.no_grad():
        dense.linear.weight.normal_(0.0, 48 ** -0.5)
        dense.linear.bias.normal_(0.0, 0.1)
    SentenceTransformer(modules=[StaticEmbedding(tok, embedding_weights=w), dense], device="cpu").save(d)
    # into the older layout: the module in its own folder, the old class names
    sub = os.path.join(d, "0_StaticEmbedding")
    os.makedirs(sub)
    for f in ("model.safetensors", "tokenizer.json"):
        os.rename(os.path.join(d, f), os.path.join(sub, f))
    mods = json.load(open(os.path.join(d, "modules.json")))
    mods[0]["path"] = "0_StaticEmbedding"
    mods[0]["type"] = "sentence_transformers.models.StaticEmbedding"
    mods[1]["type"] = "sentence_transformers.models.Dense"
    json.dump(mods, open(os.path.join(d, "modules.json"), "w"), indent=2)
    expected(d)


def m2v():
    d = os.path.join(OUT, "m2v")
    os.makedirs(os.path.join(d, "1_Normalize"))
    tok = Tokenizer.from_file(os.path.join(TOK, "unigram.json"))
    V, R, D = tok.get_vocab_size(), 2000, 32
    rng = np.random.default_rng(5150)
    save_file({"embeddings": (rng.standard_normal((R, D)) * 0.3).astype(np.float16),
               "mapping": rng.integers(0, R, V).astype(np.int64),
               "weights": rng.uniform(0.1, 2.0, V).astype(np.float64)}, os.path.join(d, "model.safetensors"))
    tok.save(os.path.join(d, "tokenizer.json"))
    json.dump({"model_type": "model2vec", "architectures": ["StaticModel"], "hidden_dim": D, "normalize": True,
               "seq_length": 1000000, "apply_pca": D, "apply_zipf": True}, open(os.path.join(d, "config.json"), "w"))
    json.dump([{"idx": 0, "name": "0", "path": ".", "type": "sentence_transformers.models.StaticEmbedding"},
               {"idx": 1, "name": "1", "path": "1_Normalize", "type": "sentence_transformers.models.Normalize"}],
              open(os.path.join(d, "modules.json"), "w"), indent=2)
    json.dump({}, open(os.path.join(d, "1_Normalize", "config.json"), "w"))
    expected(d)


def main():
    torch.manual_seed(2718)
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    st6()
    st5()
    m2v()


if __name__ == "__main__":
    main()
