"""Encoders saved by sentence-transformers itself, text to vector, against
sentence-transformers' own output.

  t5_st       (tests/gen/gen_st_fixtures.py) a sentence-t5 / gtr-t5 shaped
              model: the tiny T5 encoder of tests/fixtures/decoders/t5 (relu
              MLP, relative position bias, a T5-style Unigram tokenizer),
              mean Pooling in sentence-transformers 6's own format
              ("pooling_mode": "mean", "embedding_dimension"), a Dense 64 ->
              32 without bias (Identity, as sentence-t5's and gtr-t5's),
              Normalize, and the tokenizer's model_max_length (128) as the
              length cap (no max_seq_length any more)
  deberta_st  a DeBERTa v3 embedder: the tiny encoder of
              tests/fixtures/classify/deberta3 (no absolute positions, 16
              position buckets, shared position keys, a LayerNormed relative
              table; DeBERTa v3's tokenizer form), mean Pooling, Normalize,
              max_seq_length 256.  Mean pooling reads every token's last
              state, which the classifier tests (the first token's) do not

expected.json holds the ids SentenceTransformer.tokenize gave and the
vectors SentenceTransformer.encode gave (fp32).  posy must give the same
ids, serve the model's dimensions, and the same vectors at the CPU bar
(cosine >= 0.99999) from `posy embed` and from /embed and /v1/embeddings.
The last text is over the cap: sentence-transformers truncates it, so does
`posy embed`; the HTTP routes refuse it (422) unless the request says
"truncate": true.
"""
import json
import os
import subprocess

import numpy as np
import pytest

from conftest import FIXTURES
from serve_util import Server, post_json as post
from vec_util import check_embed_routes, min_cos

MODELS = {"t5_st": (32, 128), "deberta_st": (64, 256)}   # name: (dimensions, length cap)


def model(name):
    return os.path.join(FIXTURES, name)


def expected(name):
    return json.load(open(os.path.join(model(name), "expected.json")))


@pytest.mark.parametrize("name", MODELS)
def test_st_token_ids(posy_bin, name):
    exp, cap = expected(name), MODELS[name][1]
    lines = "".join(json.dumps(t) + "\n" for t in exp["texts"])
    r = subprocess.run([posy_bin, "tokenize", "--model", model(name), "--json-input", "--max-len", str(cap)],
                       input=lines.encode(), capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    assert [json.loads(line)["ids"] for line in r.stdout.decode().splitlines()] == exp["ids"]


@pytest.mark.parametrize("name", MODELS)
def test_st_embed_cli(posy, name):
    exp = expected(name)
    v = posy.embed_jsonl("--", *exp["texts"], model=model(name))
    assert v.shape == (len(exp["texts"]), MODELS[name][0])
    assert min_cos(v, exp["embeddings"]) >= 0.99999


@pytest.fixture(scope="module")
def servers(posy_bin):
    s = {n: Server(posy_bin, model(n), "--device", "auto", "--threads", "2") for n in MODELS}
    yield {n: x.url for n, x in s.items()}
    for x in s.values():
        assert x.stop() == 0


@pytest.mark.parametrize("name", MODELS)
def test_st_server(servers, name):
    exp, url, cap = expected(name), servers[name], MODELS[name][1]
    st, err = post(url, "/embed", {"inputs": exp["texts"]})  # TEI: over the cap is an error unless truncate
    assert st == 422 and str(cap) in err["error"], err
    tei = check_embed_routes(url, exp["texts"], exp["embeddings"], name)
    # unit vectors (Normalize), and not all alike (the encoder is not a constant)
    v = np.asarray(tei)
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert float((v[0] * v[1]).sum()) < 0.999
