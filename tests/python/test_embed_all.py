"""TEI's POST /embed_all: every token's last hidden state, against
sentence-transformers' encode(output_value="token_embeddings") on the same
texts (tests/fixtures/token_states, made by
tests/gen/gen_token_state_fixtures.py).

Six architectures, each through its own CPU path: BERT (the default
model), DeBERTa v3, a T5 encoder with a Dense module (which changes the
sentence vector, never the token states), a Qwen3 decoder (states after
its final RMSNorm; last-token pooling), ModernBERT and NomicBERT (states
after the last layer's post-MLP LayerNorm, no final norm).  Every token of
every input must match at the CPU bar (cosine >= 0.99999, and the same
norm within 1e-4), in order, special tokens included, and the tokens must
be the ones sentence-transformers tokenized.  Then: token-id inputs, the
pooled vector rebuilt from the states equals /embed's, the refusals (a
SPLADE model, a reranker, a static model, options that do not apply, an
answer past 32 MiB of states), the route in /metrics, and the same answer through a
gateway in front of a worker (the states cross gRPC).
"""
import os

import numpy as np
import pytest

from conftest import FIXTURES
from serve_util import Server, post_json as post

MODELS = {"minilm": None, "deberta_st": "deberta_st", "t5_st": "t5_st", "qwen3": "qwen3/causal",
          "modernbert": "decoders/modernbert", "nomic": "decoders/nomic"}


def model_dir(name, posy_model):
    return posy_model if MODELS[name] is None else os.path.join(FIXTURES, MODELS[name])


def expected(name):
    z = np.load(os.path.join(FIXTURES, "token_states", name + ".npz"))
    cu = z["cu"]
    return ([str(t) for t in z["texts"]], [z["ids"][cu[i]:cu[i + 1]].tolist() for i in range(len(cu) - 1)],
            [z["states"][cu[i]:cu[i + 1]] for i in range(len(cu) - 1)])


def check_states(got, want, name):
    assert len(got) == len(want), (name, len(got), len(want))
    for i, (g, w) in enumerate(zip(got, want)):
        g = np.asarray(g, dtype=np.float64)
        w = np.asarray(w, dtype=np.float64)
        assert g.shape == w.shape, (name, i, g.shape, w.shape)   # one vector a token, hidden floats each
        cos = (g * w).sum(1) / np.linalg.norm(g, axis=1) / np.linalg.norm(w, axis=1)
        assert cos.min() >= 0.99999, (name, i, int(cos.argmin()), float(cos.min()))
        rel = np.abs(np.linalg.norm(g, axis=1) / np.linalg.norm(w, axis=1) - 1)
        assert rel.max() <= 1e-4, (name, i, float(rel.max()))


@pytest.fixture(scope="module")
def servers(posy_bin, posy_model):
    s = {n: Server(posy_bin, model_dir(n, posy_model), "--device", "cpu", "--threads", "2") for n in MODELS}
    yield {n: x for n, x in s.items()}
    for x in s.values():
        assert x.stop() == 0


@pytest.mark.parametrize("name", MODELS)
def test_embed_all_matches_sentence_transformers(servers, posy_bin, name):
    texts, ids, want = expected(name)
    url = servers[name].url
    st, body = post(url, "/tokenize", {"inputs": texts})
    assert st == 200, body
    assert [[t["id"] for t in seq] for seq in body] == ids   # the same tokens as sentence-transformers
    st, got = post(url, "/embed_all", {"inputs": texts})
    assert st == 200, got
    check_states(got, want, name)
    st, one = post(url, "/embed_all", {"inputs": texts[0]})   # one string: one list of token vectors
    assert st == 200, one
    check_states(one, want[:1], name)
    st, by_ids = post(url, "/embed_all", {"inputs": ids})     # token ids in, as /embed takes them
    assert st == 200, by_ids
    check_states(by_ids, want, name)


def test_embed_all_pools_to_embed(servers):
    """The default model pools by the mean and normalizes: the states, so pooled, are /embed's vectors."""
    url = servers["minilm"].url
    texts = ["A short one.", "Token states, pooled by the mean and normalized, are the sentence vector."]
    st, tok = post(url, "/embed_all", {"inputs": texts})
    assert st == 200, tok
    st, vec = post(url, "/embed", {"inputs": texts})
    assert st == 200, vec
    for t, v in zip(tok, vec):
        m = np.asarray(t, dtype=np.float64).mean(0)
        m /= np.linalg.norm(m)
        assert np.abs(m - np.asarray(v)).max() < 1e-5


def test_embed_all_refusals(servers, posy_bin):
    url = servers["minilm"].url
    for extra in ({"dimensions": 8}, {"encoding_format": "base64"}, {"chunked": True}):
        st, err = post(url, "/embed_all", {"inputs": "hello", **extra})
        assert st == 422 and "/embed_all" in err["error"], (extra, err)
    st, err = post(url, "/embed_all", {"inputs": ["word " * 300] * 100, "truncate": True})   # 25.6k tokens x 384
    assert st == 422 and err["error_type"] == "Validation" and "tokens" in err["error"], err
    st, _ = post(url, "/embed_all", {"inputs": "still serving"})
    assert st == 200
    others = {"splade": ("splade/bert", "SPLADE"), "rerank": ("rerank/bert", "reranker"),
              "static": ("static/m2v", "static")}
    for kind, (d, word) in others.items():
        s = Server(posy_bin, os.path.join(FIXTURES, d), "--device", "cpu", "--threads", "1")
        try:
            st, err = post(s.url, "/embed_all", {"inputs": "hello"})
            assert st == 422 and word in err["error"], (kind, err)
        finally:
            assert s.stop() == 0


def test_embed_all_metrics(servers):
    url = servers["minilm"].url
    assert post(url, "/embed_all", {"inputs": "count me"})[0] == 200
    import urllib.request
    text = urllib.request.urlopen(url + "/metrics", timeout=30).read().decode()
    assert any(line.startswith("posy_requests_total{") and 'route="/embed_all"' in line and 'status="200"' in line
               for line in text.splitlines()), text[:2000]


@pytest.mark.parametrize("name", ["minilm", "qwen3"])
def test_embed_all_gateway_and_worker(posy_model, name):
    """A gateway in front of a worker: the states cross gRPC, split into chunks over the worker."""
    from grpc_util import http_post, start_gateway, start_worker
    texts, _, want = expected(name)
    d = model_dir(name, posy_model)
    procs = []
    try:
        procs.append(start_worker(model=d))
        procs.append(start_gateway([procs[0].addr], "--chunk-tokens", "16", model=d))
        st, got = http_post(procs[1].port, "/embed_all", {"inputs": texts})
        assert st == 200, got
        check_states(got, want, name)
    finally:
        for p in procs:
            p.stop()
