"""sentence-transformers StaticEmbedding models (static-retrieval-mrl-*,
model2vec's potion-*), text to vector, against sentence-transformers
itself.

tests/fixtures/static/ (tests/gen/gen_static_fixtures.py) holds three such
models saved in their real layouts: st6 (sentence-transformers 6: the
module at the root, Normalize), st5 (the hub's static-retrieval layout:
0_StaticEmbedding/, the old class names, a tokenizer.json that truncates at
24 tokens, a Dense 48 -> 16 with Tanh) and m2v (model2vec's: the module at
".", model2vec's own config.json, its embeddings / mapping / weights).
expected.json holds the ids StaticEmbedding.preprocess gave (no special
tokens) and the vectors SentenceTransformer.encode gave (fp32).  posy must
give the same ids and the same vectors at the CPU bar (cosine >= 0.99999)
from `posy tokenize`, `posy embed`, /embed and /v1/embeddings, and through
a gateway in front of a worker.
"""
import json
import os
import subprocess

import numpy as np
import pytest

from conftest import FIXTURES
from serve_util import serve_each, post_json as post
from vec_util import check_embed_routes

MODELS = ["st6", "st5", "m2v"]
DIMS = {"st6": 48, "st5": 16, "m2v": 32}


def model(name):
    return os.path.join(FIXTURES, "static", name)


def expected(name):
    return json.load(open(os.path.join(model(name), "expected.json")))


def min_cos(a, b):
    """Min cosine over rows; a row that is zero in the reference (sentence-transformers' empty bag:
    the empty text, and blanks for a WordPiece tokenizer) must be zero in `a` too (then it counts 1)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    assert a.shape == b.shape, (a.shape, b.shape)
    na, nb = np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1)
    zero = nb == 0
    assert (na[zero] == 0).all(), "a zero vector expected"
    return float(((a * b).sum(1)[~zero] / na[~zero] / nb[~zero]).min()) if (~zero).any() else 1.0


@pytest.mark.parametrize("name", MODELS)
def test_static_token_ids(posy_bin, name):
    exp = expected(name)
    lines = "".join(json.dumps(t) + "\n" for t in exp["texts"])
    # st5's tokenizer.json truncates at 24 tokens, which sentence-transformers keeps; posy tokenize
    # is told with --max-len (the server and `posy embed` read it from the file: max_seq_len)
    extra = ["--max-len", "24"] if name == "st5" else []
    r = subprocess.run([posy_bin, "tokenize", "--model", model(name), "--json-input", *extra], input=lines.encode(),
                       capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    assert "no special tokens" in r.stderr.decode(), r.stderr.decode()
    assert [json.loads(line)["ids"] for line in r.stdout.decode().splitlines()] == exp["ids"]


@pytest.mark.parametrize("name", MODELS)
def test_static_embed_cli(posy, name):
    exp = expected(name)
    v = posy.embed_jsonl("--", *exp["texts"], model=model(name))
    assert v.shape == (len(exp["texts"]), DIMS[name])
    assert min_cos(v, exp["embeddings"]) >= 0.99999


@pytest.fixture(scope="module")
def servers(posy_bin):
    yield from serve_each(posy_bin, {n: model(n) for n in MODELS}, "--device", "auto", "--threads", "1")


@pytest.mark.parametrize("name", MODELS)
def test_static_server(servers, name):
    exp, url = expected(name), servers[name]
    if name == "st5":   # over the tokenizer's 24: refused unless the request says truncate, as for any model
        st, err = post(url, "/embed", {"inputs": exp["texts"]})
        assert st == 422 and "24" in err["error"], err
    check_embed_routes(url, exp["texts"], exp["embeddings"], name, cos=min_cos)
    # no tokens at all (the empty text; blanks for WordPiece): sentence-transformers' empty bag, alone too
    st, empty = post(url, "/embed", {"inputs": ["", "   "]})
    assert st == 200 and min_cos(empty, exp["embeddings"][-2:]) >= 0.99999, empty


def test_static_tokenize_route(servers):
    """/tokenize says what the model embeds: no special tokens unless the request asks for them."""
    url, exp = servers["st6"], expected("st6")
    st, toks = post(url, "/tokenize", {"inputs": exp["texts"][0]})
    assert st == 200, toks
    assert [t["id"] for t in toks[0]] == exp["ids"][0] and not any(t["special"] for t in toks[0]), toks
    st, toks = post(url, "/tokenize", {"inputs": exp["texts"][0], "add_special_tokens": True})
    assert st == 200, toks
    assert toks[0][0]["special"] and toks[0][-1]["special"] and len(toks[0]) == len(exp["ids"][0]) + 2, toks


def test_static_info_and_long_input(servers):
    """st6 has no limit of its own (sentence-transformers truncates nothing): posy's is the CPU's
    default batch, 16384 tokens, and a text of 11000 tokens is embedded whole, as the mean of all
    its rows (checked against the same text's mean computed from short pieces: the mean of a
    static model is the token-weighted mean of its pieces' means)."""
    import requests
    url = servers["st6"]
    info = requests.get(url + "/info", timeout=30).json()
    assert info["max_input_length"] == 16384, info
    piece = "the quick brown fox jumps over the lazy dog "
    st, one = post(url, "/embed", {"inputs": piece, "normalize": False})
    assert st == 200, one
    st, many = post(url, "/embed", {"inputs": piece * 500, "normalize": False})
    assert st == 200, many
    assert min_cos(one, many) >= 0.99999


def test_static_gateway_and_worker(posy_bin):
    """`posy gateway` in front of a `posy worker` on st5: the gateway finds the tokenizer in
    0_StaticEmbedding/, adds no special tokens, and the worker's vectors match."""
    from grpc_util import http_post, start_gateway, start_worker
    exp = expected("st5")
    procs = []
    try:
        procs.append(start_worker(model=model("st5")))
        procs.append(start_gateway([procs[0].addr], model=model("st5")))
        st, body = http_post(procs[1].port, "/v1/embeddings", {"input": exp["texts"], "model": "st5", "truncate": True})
        assert st == 200, body
        v = np.array([x["embedding"] for x in sorted(body["data"], key=lambda x: x["index"])])
        assert v.shape == (len(exp["texts"]), 16) and min_cos(v, exp["embeddings"]) >= 0.99999
    finally:
        for p in procs:
            p.stop()
