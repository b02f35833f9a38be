"""Cross-encoder rerankers on POST /rerank (TEI's route), against
transformers.

tests/fixtures/rerank/ (tests/gen/gen_rerank_fixtures.py) holds four tiny
random rerankers of one label -- BertForSequenceClassification (token types
0 / 1 for query / text), XLMRobertaForSequenceClassification,
DistilBertForSequenceClassification and ModernBertForSequenceClassification
(mean pooling, a dense + GELU + LayerNorm head) -- with expected.json: the (query,
text) pairs' ids and type ids as the tokenizers package encodes them, and
the logits transformers computes (fp32).  posy must encode the same pairs,
score each text with the same logit (raw_scores) or its sigmoid, and sort
the texts by score; through `posy serve` and through a gateway in front of
a worker (whose engine gets the type ids over gRPC).  And the refusals:
an embedding route on a reranker, /rerank on an embedding model, bad
bodies, a pair over the limit unless "truncate".
"""
import json
import math
import os
import subprocess

import pytest

from conftest import FIXTURES
from serve_util import Server, serve_each, post_json as post

MODELS = ["bert", "xlmr", "distilbert", "modernbert", "gte"]


def model(name):
    return os.path.join(FIXTURES, "rerank", name)


def expected(name):
    return json.load(open(os.path.join(model(name), "expected.json")))


def check_ranking(body, logits, raw, texts=None):
    """body: /rerank's answer; every text once, sorted by score, each score its logit (or sigmoid)."""
    assert sorted(x["index"] for x in body) == list(range(len(logits))), body
    scores = [x["score"] for x in body]
    assert scores == sorted(scores, reverse=True), body
    for x in body:
        want = logits[x["index"]] if raw else 1.0 / (1.0 + math.exp(-logits[x["index"]]))
        assert abs(x["score"] - want) < 2e-5, (x, want)
        if texts is not None:
            assert x["text"] == texts[x["index"]], x
        else:
            assert "text" not in x, x


@pytest.mark.parametrize("name", MODELS)
def test_rerank_pair_ids(posy_bin, name):
    exp = expected(name)
    args = []
    for t in exp["texts"]:
        args += [exp["query"], t]
    r = subprocess.run([posy_bin, "tokenize", "--model", model(name), "--pair", "--", *args], capture_output=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    got = [json.loads(line) for line in r.stdout.decode().splitlines()]
    assert [g["ids"] for g in got] == exp["ids"]
    assert [g["type_ids"] for g in got] == exp["type_ids"]


@pytest.fixture(scope="module")
def servers(posy_bin):
    yield from serve_each(posy_bin, {n: model(n) for n in MODELS}, "--device", "auto", "--threads", "1")


@pytest.mark.parametrize("name", MODELS)
def test_rerank_scores(servers, name):
    exp, url = expected(name), servers[name]
    st, body = post(url, "/rerank", {"query": exp["query"], "texts": exp["texts"], "raw_scores": True})
    assert st == 200, body
    check_ranking(body, exp["logits"], raw=True)
    st, body = post(url, "/rerank", {"query": exp["query"], "texts": exp["texts"], "return_text": True})
    assert st == 200, body
    check_ranking(body, exp["logits"], raw=False, texts=exp["texts"])
    # one text at a time gives the same score as in the batch
    st, one = post(url, "/rerank", {"query": exp["query"], "texts": [exp["texts"][3]], "raw_scores": True})
    assert st == 200 and one[0]["index"] == 0 and abs(one[0]["score"] - exp["logits"][3]) < 2e-5, one


def test_v1_rerank(servers):
    """The Cohere / Jina form (vLLM's and Infinity's /v1/rerank): documents as strings or {"text"},
    top_n, return_documents (default true), relevance_score = sigmoid(logit)."""
    exp, url = expected("xlmr"), servers["xlmr"]
    docs = [t if i % 2 else {"text": t} for i, t in enumerate(exp["texts"])]
    st, body = post(url, "/v1/rerank", {"model": "any", "query": exp["query"], "documents": docs, "top_n": 3})
    assert st == 200, body
    assert body["model"] == "xlmr" and body["id"].startswith("rerank-") and body["usage"]["total_tokens"] > 0, body
    full = sorted(range(len(exp["logits"])), key=lambda i: -exp["logits"][i])
    assert [x["index"] for x in body["results"]] == full[:3], body
    for x in body["results"]:
        assert abs(x["relevance_score"] - 1.0 / (1.0 + math.exp(-exp["logits"][x["index"]]))) < 2e-5, x
        assert x["document"] == {"text": exp["texts"][x["index"]]}, x
    st, body = post(url, "/v2/rerank", {"query": exp["query"], "documents": exp["texts"], "return_documents": False})
    assert st == 200 and len(body["results"]) == len(exp["texts"]), body
    assert all("document" not in x for x in body["results"]), body
    for bad, status, word in [({"query": "q"}, 422, "documents"), ({"query": "q", "documents": ["a"], "top_n": 0}, 422,
                                                                  "top_n"),
                              ({"query": "q", "documents": [{"txt": "a"}]}, 400, "documents[0]")]:
        st, err = post(url, "/v1/rerank", bad)
        assert st == status and word in err["error"]["message"], (bad, err)


def test_rerank_embed_cli_refuses(posy_bin):
    r = subprocess.run([posy_bin, "embed", "--model", model("bert"), "x"], capture_output=True, timeout=120)
    assert r.returncode == 2 and "POST /rerank" in r.stderr.decode(), r.stderr.decode()


def test_rerank_info_and_refusals(servers, posy_bin, posy_model):
    import requests
    url = servers["bert"]
    info = requests.get(url + "/info", timeout=30).json()
    assert "reranker" in info["model_type"] and info["max_input_length"] == 256, info
    st, err = post(url, "/embed", {"inputs": "a"})
    assert st == 422 and "reranker" in err["error"], err
    st, err = post(url, "/v1/embeddings", {"input": "a"})
    assert st == 422 and "reranker" in err["error"]["message"], err
    for body, status, word in [({"texts": ["a"]}, 422, "query"), ({"query": "q", "texts": []}, 422, "empty"),
                               ({"query": "q", "texts": ["a", 3]}, 400, "texts[1]"), ({"query": 7, "texts": ["a"]}, 400,
                                                                                       "query"),
                               ({"query": "q", "texts": ["a"], "truncation_direction": "up"}, 422, "truncation")]:
        st, err = post(url, "/rerank", body)
        assert st == status and word in err["error"], (body, st, err)
    long_text = "the capital city of a very large country " * 40
    st, err = post(url, "/rerank", {"query": "q", "texts": ["a", long_text]})
    assert st == 422 and "256" in err["error"] and "text 1" in err["error"], err
    st, body = post(url, "/rerank", {"query": "q", "texts": ["a", long_text], "truncate": True})
    assert st == 200 and len(body) == 2, body
    # an embedding model has no /rerank
    s = Server(posy_bin, posy_model, "--device", "cpu", "--threads", "1")
    try:
        st, err = post(s.url, "/rerank", {"query": "q", "texts": ["a"]})
        assert st == 422 and "reranker" in err["error"], err
    finally:
        assert s.stop() == 0


def test_rerank_head_missing(posy_bin, tmp_path):
    """A config that says reranker over weights without its head: a start-up error naming the tensors."""
    import shutil
    d = tmp_path / "nohead"
    shutil.copytree(os.path.join(FIXTURES, "tiny-bert"), d)
    shutil.copy(os.path.join(model("bert"), "tokenizer.json"), d / "tokenizer.json")
    cfg = json.load(open(d / "config.json"))
    cfg.update(architectures=["BertForSequenceClassification"], id2label={"0": "LABEL_0"})
    json.dump(cfg, open(d / "config.json", "w"))
    (d / "modules.json").unlink()
    from serve_util import free_port
    r = subprocess.run([posy_bin, "serve", "--model", str(d), "--device", "cpu", "--host", "127.0.0.1", "--port",
                        str(free_port())], capture_output=True, timeout=120)
    err = r.stderr.decode(errors="replace") + r.stdout.decode(errors="replace")
    assert 0 < r.returncode < 128 and "bert.pooler.dense.weight" in err and "not in the checkpoint" in err, err


def test_rerank_gateway_and_worker(posy_bin):
    """A gateway in front of a worker: the pairs' token types (1 for the text) cross gRPC."""
    from grpc_util import http_post, start_gateway, start_worker
    exp = expected("bert")
    procs = []
    try:
        procs.append(start_worker(model=model("bert")))
        procs.append(start_gateway([procs[0].addr], model=model("bert")))
        st, body = http_post(procs[1].port, "/rerank", {"query": exp["query"], "texts": exp["texts"], "raw_scores": True})
        assert st == 200, body
        check_ranking(body, exp["logits"], raw=True)
    finally:
        for p in procs:
            p.stop()
