#!/usr/bin/env python3
"""Write tests/fixtures/splade_router/ifs: an inference-free SPLADE model as
sentence-transformers saves one (the opensearch-neural-sparse-encoding-doc-
v2/v3 family): one Router module whose "query" route is a
SparseStaticEmbedding (a weight per token id, looked up for the query's
tokens without special tokens: no transformer at query time) and whose
"document" route is MLMTransformer + SpladePooling -- here the masked-LM of
tests/fixtures/splade/bert (max pooling, relu).  The query weights are
idf-like, random, about a fifth of them zero.

expected.json: the texts, the query ids (no special tokens) and the
vectors sentence-transformers computes for them (fp32, CPU) with
encode_query, encode_document and plain encode (the default route,
"document"), each as [[index, value], ...] of the non-zero entries.
tests/python/test_splade.py checks posy's /embed_sparse against them.

Needs torch and sentence-transformers >= 5 (not in CI; the fixture is
committed).  Run from the repository root:
    python3 tests/gen/gen_splade_router_fixture.py
"""
import json
import os
import shutil

import torch
from sentence_transformers import SparseEncoder
from sentence_transformers.models import Router
from sentence_transformers.sparse_encoder.modules import MLMTransformer, SparseStaticEmbedding, SpladePooling

OUT = os.path.join("tests", "fixtures", "splade_router", "ifs")
SRC = os.path.join("tests", "fixtures", "splade", "bert")
TEXTS = ["What is the capital of China?", "The capital of China is Beijing.", "a",
         "Gravity is a force that attracts two bodies towards each other. " * 6, "café, naïve, 日本語 ☃",
         "capital capital China"]


def sparse(v):
    return [[[int(i), float(x[i])] for i in torch.nonzero(x).flatten()] for x in v]


def main():
    torch.manual_seed(1357)
    shutil.rmtree(OUT, ignore_errors=True)
    doc = MLMTransformer(SRC)
    n = doc.tokenizer.vocab_size
    w = torch.rand(n) * 4.0
    w[torch.rand(n) < 0.2] = 0.0
    query = SparseStaticEmbedding(tokenizer=doc.tokenizer, weight=w, frozen=True)
    enc = SparseEncoder(modules=[Router.for_query_document(query_modules=[query],
                                                           document_modules=[doc, SpladePooling("max", "relu")])],
                        device="cpu")
    enc.save(OUT)
    os.remove(os.path.join(OUT, "README.md"))   # a model card: not a fixture
    with torch.no_grad():
        q = enc.encode_query(TEXTS, convert_to_tensor=True).to_dense()
        d = enc.encode_document(TEXTS, convert_to_tensor=True).to_dense()
        plain = enc.encode(TEXTS, convert_to_tensor=True).to_dense()
    qids = [doc.tokenizer(t, add_special_tokens=False, truncation=True)["input_ids"] for t in TEXTS]
    json.dump({"texts": TEXTS, "query_ids": qids, "vocab": n, "query": sparse(q), "document": sparse(d),
               "default": sparse(plain)}, open(os.path.join(OUT, "expected.json"), "w"), indent=0)
    print(sorted(os.listdir(OUT)), [len(x) for x in sparse(q)], [len(x) for x in sparse(d)])


if __name__ == "__main__":
    main()
