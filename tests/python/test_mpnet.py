"""MPNet (sentence-transformers/all-mpnet-base-v2's architecture), text to
vector, against Hugging Face transformers.

tests/fixtures/tiny-mpnet is a random-weight MPNet made by
tests/gen/gen_tiny_mpnet.py with transformers' own MPNetModel and
MPNetTokenizer (WordPiece, BertNormalizer, RobertaProcessing: <s> ... </s>);
tiny_mpnet_expected.json holds, for fixed texts, the token ids that
tokenizer gives and the mean-pooled, normalised embeddings transformers
computes from them.  posy must give the same ids (`posy tokenize`, the
server's /tokenize) and the same vectors (cosine >= 0.99999, the CPU bar)
from `posy embed`, /embed and /v1/embeddings.  The engine's numbers on
fixed ids, a 200-token sequence included, are checked in
tests/unit/test_engine_tiny.c; the buckets in test_eng_relpos.c.
"""
import json
import os
import subprocess

import numpy as np
import pytest
import requests

from conftest import FIXTURES
from serve_util import Server, post_json as post

MODEL = os.path.join(FIXTURES, "tiny-mpnet")
FIX = json.load(open(os.path.join(FIXTURES, "tiny_mpnet_expected.json")))
TEXTS = [t["text"] for t in FIX["texts"]]
IDS = [t["ids"] for t in FIX["texts"]]
WANT = [t["embedding"] for t in FIX["texts"]]


def min_cos(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(((a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)).min())


def test_mpnet_token_ids(posy_bin):
    lines = "".join(json.dumps(t) + "\n" for t in TEXTS)
    r = subprocess.run([posy_bin, "tokenize", "--model", MODEL, "--json-input"], input=lines.encode(),
                       capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    assert [json.loads(line)["ids"] for line in r.stdout.decode().splitlines()] == IDS


def test_mpnet_embed_cli(posy):
    v = posy.embed_jsonl("--", *TEXTS, model=MODEL)
    assert min_cos(v, WANT) >= 0.99999
    assert np.allclose(v, WANT, atol=2e-5)


@pytest.fixture(scope="module")
def server(posy_bin):
    s = Server(posy_bin, MODEL, "--device", "cpu", "--threads", "2")
    yield s.url
    assert s.stop() == 0


def test_mpnet_server(server):
    st, tei = post(server, "/embed", {"inputs": TEXTS})
    assert st == 200, tei
    assert min_cos(tei, WANT) >= 0.99999
    st, oa = post(server, "/v1/embeddings", {"input": TEXTS, "model": "tiny-mpnet"})
    assert st == 200, oa
    assert min_cos([d["embedding"] for d in oa["data"]], WANT) >= 0.99999
    st, tok = post(server, "/tokenize", {"inputs": TEXTS, "add_special_tokens": True})
    assert st == 200, tok
    assert [[t["id"] for t in seq] for seq in tok] == IDS
    info = requests.get(server + "/info", timeout=10).json()
    assert info["max_input_length"] == 200


def test_mpnet_too_long(server):
    """302 tokens > max_seq_length 200: refused by default (TEI), embedded as its first 200 with truncate."""
    long = " ".join(["fox"] * 300)
    st, r = post(server, "/embed", {"inputs": [long]})
    assert st == 422 and "limit of 200" in r["error"], r
    st, r = post(server, "/embed", {"inputs": [long], "truncate": True})
    assert st == 200 and len(r[0]) == 32, r
    # as the tokenizer truncates: <s>, the first 198 words, </s>
    st, cut = post(server, "/embed", {"inputs": [" ".join(["fox"] * 198)]})
    assert st == 200
    assert min_cos(r, cut) >= 0.99999

