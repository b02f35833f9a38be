"""vLLM's Score API, POST /score and /v1/score: one score a (text_1,
text_2) pair -- a reranker's sigmoid(logit) of the pair as one sequence
(against transformers' logits in tests/fixtures/rerank), an embedding
model's cosine of the two texts' vectors (against /embed's own vectors);
a single text_1 goes with every text_2, two lists pair up in order.  And
the refusals: lists of different lengths, a missing field, a classifier
of several labels, a SPLADE model.
"""
import json
import math
import os

import numpy as np
import pytest

from conftest import FIXTURES
from serve_util import Server, post_json as post


def reranker():
    return os.path.join(FIXTURES, "rerank", "bert")


@pytest.fixture(scope="module")
def rr_url(posy_bin):
    s = Server(posy_bin, reranker(), "--device", "cpu", "--threads", "1")
    yield s.url
    assert s.stop() == 0


@pytest.fixture(scope="module")
def emb_url(posy_bin, posy_model):
    s = Server(posy_bin, posy_model, "--device", "cpu", "--threads", "1")
    yield s.url
    assert s.stop() == 0


def test_score_reranker(rr_url):
    exp = json.load(open(os.path.join(reranker(), "expected.json")))
    want = [1.0 / (1.0 + math.exp(-x)) for x in exp["logits"]]
    for path, body in [("/score", {"model": "m", "text_1": exp["query"], "text_2": exp["texts"]}),
                       ("/v1/score", {"text_1": [exp["query"]] * len(exp["texts"]), "text_2": exp["texts"]}),
                       ("/score", {"text_1": [exp["query"]], "text_2": exp["texts"]})]:
        st, out = post(rr_url, path, body)
        assert st == 200, out
        assert out["object"] == "list" and out["id"].startswith("score-") and out["model"] == "bert", out
        assert [d["index"] for d in out["data"]] == list(range(len(want)))
        assert all(d["object"] == "score" and abs(d["score"] - w) < 2e-5 for d, w in zip(out["data"], want)), out
        assert out["usage"]["prompt_tokens"] == sum(len(i) for i in exp["ids"]), out
    st, out = post(rr_url, "/score", {"text_1": exp["query"], "text_2": exp["texts"][2]})
    assert st == 200 and len(out["data"]) == 1 and abs(out["data"][0]["score"] - want[2]) < 2e-5, out
    import requests   # /score and /v1/score count as one route in /metrics
    assert 'posy_requests_total{route="/score",status="200"} 4' in requests.get(rr_url + "/metrics", timeout=30).text


def test_score_embedding_model(emb_url):
    """Cosines of /embed's vectors: one text_1 against each text_2, then pairs in order."""
    a, b = ["how do I bake bread", "weather in paris"], ["a recipe for sourdough loaves", "rain in France today"]
    st, vecs = post(emb_url, "/embed", {"inputs": a + b})
    assert st == 200
    v = np.asarray(vecs, dtype=np.float64)
    cos = lambda x, y: float(x @ y / np.linalg.norm(x) / np.linalg.norm(y))
    st, out = post(emb_url, "/score", {"text_1": a[0], "text_2": b})
    assert st == 200, out
    assert [round(d["score"], 5) for d in out["data"]] == [round(cos(v[0], v[2]), 5), round(cos(v[0], v[3]), 5)]
    st, out = post(emb_url, "/v1/score", {"text_1": a, "text_2": b})
    assert st == 200, out
    assert [round(d["score"], 5) for d in out["data"]] == [round(cos(v[0], v[2]), 5), round(cos(v[1], v[3]), 5)]
    assert all(-1.0 - 1e-6 <= d["score"] <= 1.0 + 1e-6 for d in out["data"])


def test_score_refusals(rr_url, posy_bin):
    for body, status, word in [({"text_1": ["a", "b"], "text_2": ["c", "d", "e"]}, 422, "give one text_1"),
                               ({"text_1": "a"}, 422, "text_2"), ({"text_1": 3, "text_2": "b"}, 400, "text_1"),
                               ({"text_1": "a", "text_2": []}, 422, "empty"),
                               ({"text_1": "a", "text_2": ["b", 7]}, 400, "text_2[1]")]:
        st, err = post(rr_url, "/score", body)
        assert st == status and word in err["error"]["message"], (body, err)
    for name, word in [(os.path.join(FIXTURES, "classify", "bert3"), "3 labels"),
                       (os.path.join(FIXTURES, "splade", "bert"), "/embed_sparse")]:
        s = Server(posy_bin, name, "--device", "cpu", "--threads", "1")
        try:
            st, err = post(s.url, "/score", {"text_1": "a", "text_2": "b"})
            assert st == 422 and word in err["error"]["message"], err
        finally:
            assert s.stop() == 0
