"""A sentence-t5 / gtr-t5 shaped model, text to vector, against
sentence-transformers itself.

tests/fixtures/t5_st/ (tests/gen/gen_t5_st_fixture.py) was saved by
sentence-transformers 6: the tiny T5 encoder of tests/fixtures/decoders/t5
(relu MLP, relative position bias, a T5-style Unigram tokenizer), mean
Pooling in sentence-transformers 6's own format ("pooling_mode": "mean",
"embedding_dimension"), a Dense 64 -> 32 without bias (Identity, as
sentence-t5's and gtr-t5's), Normalize, and the tokenizer's
model_max_length as the length cap (no max_seq_length any more).
expected.json holds the ids SentenceTransformer.tokenize gave and the
vectors SentenceTransformer.encode gave (fp32).  posy must give the same
ids, serve 32 dimensions, and the same vectors at the CPU bar (cosine >=
0.99999) from `posy embed` and from /embed and /v1/embeddings.  The last
text is 146 tokens, over the 128 cap: sentence-transformers truncates it,
so does `posy embed`; the HTTP routes refuse it (422) unless the request
says "truncate": true.
"""
import json
import os
import subprocess

import numpy as np
import pytest

from conftest import FIXTURES
from serve_util import Server, post_json as post

MODEL = os.path.join(FIXTURES, "t5_st")
EXP = json.load(open(os.path.join(MODEL, "expected.json")))


def min_cos(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    assert a.shape == b.shape, (a.shape, b.shape)
    return float(((a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)).min())


def test_t5_st_token_ids(posy_bin):
    lines = "".join(json.dumps(t) + "\n" for t in EXP["texts"])
    # sentence-transformers truncates at model_max_length, 128 here (the last text has 146 tokens)
    r = subprocess.run([posy_bin, "tokenize", "--model", MODEL, "--json-input", "--max-len", "128"],
                       input=lines.encode(),
                       capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    assert [json.loads(line)["ids"] for line in r.stdout.decode().splitlines()] == EXP["ids"]


def test_t5_st_embed_cli(posy):
    v = posy.embed_jsonl("--", *EXP["texts"], model=MODEL)
    assert v.shape == (len(EXP["texts"]), 32)
    assert min_cos(v, EXP["embeddings"]) >= 0.99999


@pytest.fixture(scope="module")
def t5(posy_bin):
    s = Server(posy_bin, MODEL, "--device", "cpu", "--threads", "2")
    yield s.url
    assert s.stop() == 0


def test_t5_st_server(t5):
    st, err = post(t5, "/embed", {"inputs": EXP["texts"]})  # TEI: over the cap is an error unless truncate
    assert st == 422, err
    assert "128" in err["error"], err
    st, tei = post(t5, "/embed", {"inputs": EXP["texts"], "truncate": True})
    assert st == 200, tei
    assert min_cos(tei, EXP["embeddings"]) >= 0.99999
    st, oa = post(t5, "/v1/embeddings", {"input": EXP["texts"], "model": "t5", "truncate": True})
    assert st == 200, oa
    assert min_cos([d["embedding"] for d in oa["data"]], EXP["embeddings"]) >= 0.99999
