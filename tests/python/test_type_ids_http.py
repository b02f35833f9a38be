"""Token type ids through `posy serve`: the gateway sends the ids that the
tokenizer's single-text template gives, as `posy embed` does.

The default model's template gives type 0 everywhere, so this copy of it
changes tokenizer.json's single template to type 1 (its BERT body has a
second, trained type embedding row).  Hugging Face `tokenizers` confirms
the template; the server's vectors must then equal `posy embed`'s on the
same copy and differ from the unchanged model's (a gateway that dropped
the type ids would give exactly those).  Token-id inputs carry type 0, also
beside text inputs in one request, and "chunked" windows keep the type ids
of the positions they hold.
"""
import json
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from tokenizers import Tokenizer

from conftest import FIXTURES
from grpc_util import Proc, wait_http, wait_serving
from serve_util import Server, free_port, post_json

TEXTS = ["a query about type ids", "The quick brown fox jumps over the lazy dog."]


@pytest.fixture(scope="module")
def typed_model(tmp_path_factory, posy_model):
    d = tmp_path_factory.mktemp("typed_model")
    for name in os.listdir(posy_model):
        if name != "tokenizer.json":
            os.symlink(os.path.abspath(os.path.join(posy_model, name)), d / name)
    with open(os.path.join(posy_model, "tokenizer.json")) as f:
        tok = json.load(f)
    single = tok["post_processor"]["single"]
    for item in single:
        next(iter(item.values()))["type_id"] = 1
    (d / "tokenizer.json").write_text(json.dumps(tok))
    return str(d)


@pytest.fixture(scope="module")
def typed_server(posy_bin, typed_model):
    s = Server(posy_bin, typed_model, "--device", "cpu")
    yield s
    assert s.stop() == 0, s.output()


@pytest.fixture(scope="module")
def plain_server(posy_bin, posy_model):
    s = Server(posy_bin, posy_model, "--device", "cpu")
    yield s
    assert s.stop() == 0, s.output()


def embed(server, inputs, **extra):
    status, body = post_json(server.url, "/v1/embeddings", {"input": inputs, **extra})
    assert status == 200, body
    return np.array([d["embedding"] for d in body["data"]], dtype=np.float32)


def test_template_gives_type_one(typed_model):
    tok = Tokenizer.from_file(os.path.join(typed_model, "tokenizer.json"))
    tok.no_padding()   # the model's tokenizer.json pads to 128 with type 0
    enc = tok.encode(TEXTS[0])
    assert len(enc.type_ids) > 2 and set(enc.type_ids) == {1}


def test_server_sends_type_ids(posy, typed_model, typed_server, plain_server):
    cli = posy.embed_jsonl("--", *TEXTS, model=typed_model)
    got = embed(typed_server, TEXTS)
    np.testing.assert_allclose(got, cli, atol=2e-6, rtol=0)
    plain = embed(plain_server, TEXTS)
    assert np.abs(got - plain).max(axis=1).min() > 1e-3   # the type ids changed every vector


def test_token_id_inputs_are_type_zero(typed_server, plain_server):
    ids = [[101, 1037, 23032, 2055, 102], [101, 2828, 8909, 2015, 102]]
    np.testing.assert_allclose(embed(typed_server, ids), embed(plain_server, ids), atol=2e-6, rtol=0)


def test_concurrent_typed_and_untyped_requests(typed_server):
    """Text requests (type 1) and token-id requests (type 0) batched together
    by the scheduler: each gets the vectors it gets alone."""
    ids = [[101, 1037, 23032, 2055, 102]]
    alone_text, alone_ids = embed(typed_server, TEXTS), embed(typed_server, ids)
    with ThreadPoolExecutor(8) as ex:
        futs = [ex.submit(embed, typed_server, TEXTS if k % 2 else ids) for k in range(32)]
        for k, f in enumerate(futs):
            np.testing.assert_allclose(f.result(), alone_text if k % 2 else alone_ids, atol=2e-6, rtol=0)


def test_chunked_windows_keep_type_ids(typed_server, plain_server):
    """The windows of a long text carry the template's type ids: the same
    windows with type 0 (the unchanged model) give another vector."""
    long_text = " ".join(["type ids travel with every window of a long input"] * 60)
    got = embed(typed_server, [long_text], chunked=True)
    plain = embed(plain_server, [long_text], chunked=True)
    assert got.shape == plain.shape == (1, plain.shape[1])
    assert np.abs(got - plain).max() > 1e-3


def test_gateway_and_worker_send_type_ids(posy_bin, typed_model, typed_server):
    """`posy gateway` in front of a `posy worker`, requests split into
    chunks of a few tokens: each chunk carries its own slice of type ids."""
    wport, gport = free_port(), free_port()
    w = Proc([posy_bin, "worker", "--model", typed_model, "--listen", f"127.0.0.1:{wport}", "--device", "cpu",
              "--threads", "1"], f"worker-typed-{wport}")
    w.addr = f"127.0.0.1:{wport}"
    try:
        wait_serving(w)
        g = Proc([posy_bin, "gateway", "--model", typed_model, "--host", "127.0.0.1", "--port", str(gport),
                  "--backend", f"127.0.0.1:{wport}", "--chunk-tokens", "16"], f"gateway-typed-{gport}")
        try:
            wait_http(g, gport)
            g.url = f"http://127.0.0.1:{gport}"
            texts = TEXTS + [f"text number {i} for the chunks" for i in range(6)]
            np.testing.assert_allclose(embed(g, texts), embed(typed_server, texts), atol=2e-6, rtol=0)
        finally:
            g.stop()
    finally:
        w.stop()


def test_decoder_takes_no_type_ids(posy, posy_bin, tmp_path):
    """A model without token type embeddings (the Qwen3 fixture: type
    vocabulary 0) gets no type ids even when its tokenizer's template sets
    them, as transformers passes it none: the same vectors as unchanged,
    from `posy serve` and `posy embed` alike."""
    src = os.path.join(FIXTURES, "qwen3", "causal")
    for name in os.listdir(src):
        if name != "tokenizer.json":
            os.symlink(os.path.join(src, name), tmp_path / name)
    with open(os.path.join(src, "tokenizer.json")) as f:
        tok = json.load(f)
    for item in tok["post_processor"]["single"]:
        next(iter(item.values()))["type_id"] = 1
    (tmp_path / "tokenizer.json").write_text(json.dumps(tok))
    want = posy.embed_jsonl("--", *TEXTS, model=src)
    np.testing.assert_array_equal(posy.embed_jsonl("--", *TEXTS, model=str(tmp_path)), want)
    s = Server(posy_bin, str(tmp_path), "--device", "cpu")
    try:
        np.testing.assert_allclose(embed(s, TEXTS), want, atol=2e-6, rtol=0)
    finally:
        assert s.stop() == 0, s.output()
