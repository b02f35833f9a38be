""""chunked": true on /embed and /v1/embeddings (posy extension): an input
longer than max_seq_length is split into windows that keep [CLS]/[SEP]
(the encoding's leading/trailing special tokens), each window is embedded,
and the window embeddings are averaged weighted by window length and
re-normalised (src/common/posy_chunk.h).  The expected vector is rebuilt
here independently: `posy tokenize` for the ids, the windows cut in numpy,
each window embedded through the server as a token-id input, combined in
numpy."""
import json
import os
import subprocess

import numpy as np
import pytest

from serve_util import Server, post_json as post

LONG = " ".join(f"sentence {i} talks about topic {i % 7} and the weather in city {i % 13}." for i in range(80))


@pytest.fixture(scope="module")
def server(posy_bin, posy_model):
    s = Server(posy_bin, posy_model, "--device", "cpu", "--threads", "2")
    yield s.url
    assert s.stop() == 0




@pytest.fixture(scope="module")
def long_ids(posy_bin, posy_model):
    r = subprocess.run([posy_bin, "tokenize", "--model", posy_model, LONG], capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    enc = json.loads(r.stdout)
    return enc["ids"], enc["special_tokens_mask"]


def max_len(posy_model):
    return json.load(open(os.path.join(posy_model, "sentence_bert_config.json")))["max_seq_length"]


def expected(server, ids, n_prefix, n_suffix, m):
    W = m - n_prefix - n_suffix
    body = ids[n_prefix:len(ids) - n_suffix]
    wins = [ids[:n_prefix] + body[i:i + W] + ids[len(ids) - n_suffix:] for i in range(0, len(body), W)]
    st, embs = post(server, "/embed", {"inputs": wins})
    assert st == 200, embs
    e = np.array(embs, dtype=np.float64)
    v = (e * np.array([len(w) for w in wins])[:, None]).sum(0) / sum(len(w) for w in wins)
    return v / np.linalg.norm(v), len(wins)


def cos(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


def test_chunked_text(server, long_ids, posy_model):
    ids, special = long_ids
    m = max_len(posy_model)
    assert len(ids) > 2 * m                      # really over-long: 3+ windows
    assert special[0] == 1 and special[-1] == 1 and sum(special) == 2
    want, k = expected(server, ids, 1, 1, m)
    assert k >= 3
    st, got = post(server, "/embed", {"inputs": [LONG, "short text"], "chunked": True})
    assert st == 200, got
    assert cos(got[0], want) >= 0.99999
    assert abs(np.linalg.norm(got[0]) - 1) < 1e-5
    st, plain = post(server, "/embed", {"inputs": ["short text"]})
    assert got[1] == plain[0]                    # inputs that fit are untouched
    st, trunc = post(server, "/embed", {"inputs": [LONG], "truncate": True})
    assert cos(trunc[0], want) < 0.999           # not the truncated embedding


def test_chunked_openai_dimensions(server, long_ids, posy_model):
    ids, _ = long_ids
    want, _ = expected(server, ids, 1, 1, max_len(posy_model))
    st, r = post(server, "/v1/embeddings", {"input": ["a", LONG], "chunked": True, "dimensions": 64})
    assert st == 200, r
    v = r["data"][1]["embedding"]
    w = want[:64] / np.linalg.norm(want[:64])
    assert len(v) == 64 and cos(v, w) >= 0.99999
    assert r["data"][0]["index"] == 0 and r["data"][1]["index"] == 1


def test_chunked_token_ids(server, long_ids, posy_model):
    ids, _ = long_ids
    content = ids[1:-1]
    want, k = expected(server, content, 0, 0, max_len(posy_model))
    st, got = post(server, "/embed", {"inputs": [content], "chunked": True})
    assert st == 200, got
    assert cos(got[0], want) >= 0.99999


def test_over_long_without_chunked_is_422(server):
    st, r = post(server, "/embed", {"inputs": [LONG]})
    assert st == 422, r


def test_posy_embed_chunked(server, long_ids, posy_model, posy):
    """`posy embed --chunked`: the same windows and combination as the server,
    for an over-long text between short ones (windows of one text stay in one
    batch; the short ones are untouched), in every batch arrangement the
    token budget allows."""
    ids, _ = long_ids
    want, k = expected(server, ids, 1, 1, max_len(posy_model))
    texts = ["short text", LONG, "another one", LONG]
    plain = posy.embed_jsonl(input="\n".join(t for t in texts if t != LONG).encode() + b"\n")
    assert k == 5 and len(ids) + (k - 1) * 2 == 1050
    for budget in ("16384", "1052"):   # 1052: each long text's 1050 window tokens make a batch of their own
        got = posy.embed_jsonl("--chunked", "--max-batch-tokens", budget, input="\n".join(texts).encode() + b"\n")
        assert got.shape == (4, 384)
        for i in (1, 3):
            assert cos(got[i], want) >= 0.99999, budget
            assert abs(np.linalg.norm(got[i]) - 1) < 1e-5
        np.testing.assert_allclose(got[[0, 2]], plain, atol=2e-6, rtol=0)
    trunc = posy.embed_jsonl(input=LONG.encode() + b"\n")
    assert cos(trunc[0], want) < 0.999           # without --chunked: truncated, as before


def test_posy_embed_chunked_over_budget(posy, posy_model):
    r = posy.run("embed", "--model", posy_model, "--device", "cpu", "--chunked", "--max-batch-tokens", "300",
                 input=LONG.encode() + b"\n")
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 1 and "windows" in err and "--max-batch-tokens 300" in err, err
