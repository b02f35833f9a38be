"""Pool skips over gRPC (Pooling include_prompt false behind `posy gateway`).

A worker and a gateway both serve a copy of the default model whose
1_Pooling/config.json says "include_prompt": false and whose default prompt
is "query" (the fixture of test_include_prompt.py; the gateway checks the
worker's fingerprint, which covers the pooling files, so both read the same
copy).  Checked:
  - EmbedRequest.pool_skip is honoured by the worker: the ids of prompt +
    text with the prompt's length as skip give `posy embed`'s vector, and
    without it the prompt-pooled one;
  - a bad pool_skip (== length, negative, wrong count) is INVALID_ARGUMENT
    and the worker keeps serving;
  - the gateway counts the prompt and sends the skip: /embed and
    /v1/embeddings equal `posy embed`, also with left truncation, where the
    cut takes the prompt first and only [CLS] stays skipped.
"""
import json
import os

import grpc
import numpy as np
import pytest

from grpc_util import (POSY_BIN, POSY_MODEL, ROOT, Proc, free_port, http_post, openai_vectors, start_gateway,
                       stubs, vectors, wait_serving)

FIX = json.load(open(os.path.join(ROOT, "tests", "fixtures", "include_prompt", "expected.json")))
TEXTS = FIX["texts"]
QUERY = FIX["st_config"]["prompts"]["query"]
SKIP = next(c for c in FIX["cases"] if c["prompt_name"] == "query")["prompt_length"]
ATOL = 1e-6


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("grpc_excl_prompt")
    for name in os.listdir(POSY_MODEL):
        if name not in ("1_Pooling", "config_sentence_transformers.json"):
            os.symlink(os.path.join(POSY_MODEL, name), d / name)
    (d / "1_Pooling").mkdir()
    (d / "1_Pooling" / "config.json").write_text(json.dumps({**FIX["pooling"], "include_prompt": False}))
    (d / "config_sentence_transformers.json").write_text(
        json.dumps({"prompts": {**FIX["st_config"]["prompts"], "none": ""}, "default_prompt_name": "query"}))
    return str(d)


def cli(model_dir, *args):
    import subprocess
    r = subprocess.run([POSY_BIN, "embed", "--model", model_dir, "--device", "cpu", *args, "--", *TEXTS],
                       capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    return np.array([json.loads(x) for x in r.stdout.decode().splitlines()], dtype=np.float32)


@pytest.fixture(scope="module")
def want(model_dir):
    return {"query": cli(model_dir), "none": cli(model_dir, "--prompt-name", "none")}


@pytest.fixture(scope="module")
def worker(model_dir):
    port = free_port()
    w = Proc([POSY_BIN, "worker", "--model", model_dir, "--listen", f"127.0.0.1:{port}", "--device", "cpu",
              "--threads", "2"], f"worker-skip-{port}")
    w.addr = f"127.0.0.1:{port}"
    wait_serving(w)
    yield w
    assert w.stop() == 0, w.text()


@pytest.fixture(scope="module")
def embedder(worker):
    with grpc.insecure_channel(worker.addr) as ch:
        yield stubs()[1].EmbedderStub(ch)


@pytest.fixture(scope="module")
def tok():
    from tokenizers import Tokenizer
    t = Tokenizer.from_file(os.path.join(POSY_MODEL, "tokenizer.json"))
    t.no_padding()
    t.no_truncation()
    return t


def request(seqs, skips):
    req = stubs()[0].EmbedRequest(ids=[i for s in seqs for i in s], lengths=[len(s) for s in seqs])
    if skips is not None:
        req.pool_skip.extend(skips)
    return req


def test_worker_honours_pool_skip(embedder, tok, want):
    seqs = [tok.encode(QUERY + t).ids for t in TEXTS]
    got = vectors(embedder.Embed(request(seqs, [SKIP] * len(seqs)), timeout=30))
    np.testing.assert_allclose(got, want["query"], atol=ATOL, rtol=0)
    pooled = vectors(embedder.Embed(request(seqs, None), timeout=30))
    zeros = vectors(embedder.Embed(request(seqs, [0] * len(seqs)), timeout=30))
    np.testing.assert_array_equal(pooled, zeros)
    case = next(c for c in FIX["cases"] if c["prompt_name"] == "query")
    np.testing.assert_allclose(pooled, np.array(case["embeddings_prompt_pooled"], np.float32), atol=1e-4)
    assert np.abs(got - pooled).max() > 1e-2


def test_worker_mixed_skips_in_one_chunk(embedder, tok, want):
    """Prompted and plain sequences side by side: each keeps its own skip."""
    seqs, skips = [], []
    for t in TEXTS:
        seqs += [tok.encode(QUERY + t).ids, tok.encode(t).ids]
        skips += [SKIP, 0]
    got = vectors(embedder.Embed(request(seqs, skips), timeout=30))
    np.testing.assert_allclose(got[0::2], want["query"], atol=ATOL, rtol=0)
    np.testing.assert_allclose(got[1::2], want["none"], atol=ATOL, rtol=0)


@pytest.mark.parametrize("skips", [[4], [-1], [0, 0]], ids=["skip==length", "negative", "count"])
def test_worker_bad_pool_skip_is_invalid(embedder, skips):
    with pytest.raises(grpc.RpcError) as e:
        embedder.Embed(request([[101, 2023, 2003, 102]], skips), timeout=10)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "pool_skip" in e.value.details()
    assert vectors(embedder.Embed(request([[101, 2023, 2003, 102]], [3]), timeout=10)).shape[0] == 1


@pytest.fixture(scope="module")
def gateway(worker, model_dir):
    port = free_port()
    g = Proc([POSY_BIN, "gateway", "--model", model_dir, "--host", "127.0.0.1", "--port", str(port),
              "--backend", worker.addr, "--chunk-tokens", "32"], f"gateway-skip-{port}")
    g.port = port
    from grpc_util import wait_http
    wait_http(g, port)
    yield g
    assert g.stop() == 0, g.text()


def test_gateway_sends_the_skip(gateway, want):
    """--chunk-tokens 32 splits the request: skips must follow their chunk."""
    st, body = http_post(gateway.port, "/embed", {"inputs": TEXTS})
    assert st == 200, body
    np.testing.assert_allclose(np.array(body, np.float32), want["query"], atol=ATOL, rtol=0)
    st, body = http_post(gateway.port, "/v1/embeddings", {"input": TEXTS, "model": "m"})
    assert st == 200, body
    np.testing.assert_allclose(openai_vectors(body), want["query"], atol=ATOL, rtol=0)
    st, body = http_post(gateway.port, "/embed", {"inputs": TEXTS, "prompt_name": "none"})
    assert st == 200, body
    np.testing.assert_allclose(np.array(body, np.float32), want["none"], atol=ATOL, rtol=0)


def test_gateway_left_truncation_cuts_the_prompt_first(gateway, embedder, tok):
    """Left truncation drops the front of prompt + text, the prompt first:
    nothing of it is left, so only [CLS] stays out of pooling.  Reference:
    the worker on tokenizers' own left-truncated ids with pool_skip 1."""
    text = " ".join(["river"] * 300)
    st, body = http_post(gateway.port, "/embed", {"inputs": [text], "truncate": True, "truncation_direction": "left"})
    assert st == 200, body
    tok.enable_truncation(256, direction="left")
    try:
        ids = tok.encode(QUERY + text).ids
    finally:
        tok.no_truncation()
    assert len(ids) == 256
    ref = vectors(embedder.Embed(request([ids], [1]), timeout=30))
    np.testing.assert_allclose(np.array(body, np.float32), ref, atol=ATOL, rtol=0)
    whole = vectors(embedder.Embed(request([ids], [0]), timeout=30))
    assert np.abs(ref - whole).max() > 1e-4
