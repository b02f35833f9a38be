"""A sentence-transformers embedding model on DeBERTa v3, text to vector,
against sentence-transformers itself.

tests/fixtures/deberta_st/ (tests/gen/gen_deberta_st_fixture.py) was saved
by sentence-transformers 6: the tiny DeBERTa v3 encoder of
tests/fixtures/classify/deberta3 (no absolute positions, 16 position
buckets, shared position keys, a LayerNormed relative table; DeBERTa v3's
tokenizer form), mean Pooling, Normalize, max_seq_length 256.  Mean
pooling reads every token's last state, which the classifier tests (the
first token's only) do not.  The last text is over 256 tokens, so the log
buckets and the far clamp are both in play; sentence-transformers
truncates it, so does `posy embed`, and the HTTP routes refuse it unless
the request says "truncate": true.  posy must give the same ids and the
same vectors at the CPU bar (cosine >= 0.99999).
"""
import json
import os
import subprocess

import numpy as np
import pytest

from conftest import FIXTURES
from serve_util import Server, post_json as post

MODEL = os.path.join(FIXTURES, "deberta_st")
EXP = json.load(open(os.path.join(MODEL, "expected.json")))


def min_cos(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    assert a.shape == b.shape, (a.shape, b.shape)
    return float(((a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)).min())


def test_deberta_st_token_ids(posy_bin):
    lines = "".join(json.dumps(t) + "\n" for t in EXP["texts"])
    r = subprocess.run([posy_bin, "tokenize", "--model", MODEL, "--json-input", "--max-len", "256"],
                       input=lines.encode(), capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    assert [json.loads(line)["ids"] for line in r.stdout.decode().splitlines()] == EXP["ids"]


def test_deberta_st_embed_cli(posy):
    v = posy.embed_jsonl("--", *EXP["texts"], model=MODEL)
    assert v.shape == (len(EXP["texts"]), 64)
    assert min_cos(v, EXP["embeddings"]) >= 0.99999


@pytest.fixture(scope="module")
def deb(posy_bin):
    s = Server(posy_bin, MODEL, "--device", "auto", "--threads", "2")
    yield s.url
    assert s.stop() == 0


def test_deberta_st_server(deb):
    st, err = post(deb, "/embed", {"inputs": EXP["texts"]})
    assert st == 422 and "256" in err["error"], err
    st, tei = post(deb, "/embed", {"inputs": EXP["texts"], "truncate": True})
    assert st == 200, tei
    assert min_cos(tei, EXP["embeddings"]) >= 0.99999
    st, oa = post(deb, "/v1/embeddings", {"input": EXP["texts"], "model": "d", "truncate": True})
    assert st == 200, oa
    assert min_cos([d["embedding"] for d in oa["data"]], EXP["embeddings"]) >= 0.99999
    # the vectors are unit length (Normalize) and not all alike (the encoder is not a constant)
    v = np.asarray(tei)
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert float((v[0] * v[1]).sum()) < 0.999
