"""sentence-transformers Dense modules after pooling (LaBSE, distiluse-*,
stella style), text to vector, against sentence-transformers itself.

tests/fixtures/dense/ (tests/gen/gen_dense_fixtures.py) holds the Dense
module folders and modules.json of two models on top of the default model,
all-MiniLM-L6-v2, and the vectors SentenceTransformer.encode gave for fixed
texts: a/ projects 384 -> 96 (Tanh) -> 48 (Identity, no bias) and
normalises; b/ goes 384 -> 64 (GELU) -> 40 (ReLU) -> 24 (Sigmoid) without
normalising, so magnitudes count.  Each test links MiniLM's files beside a
fixture's folders.  posy must serve the projected dimension and the same
vectors (cosine >= 0.99999, the CPU bar; for b also the values) through
`posy embed`, /embed and /v1/embeddings (with `dimensions` below it), and
refuse a Dense folder holding only pytorch_model.bin with a message saying
how to convert it.
"""
import json
import os
import shutil
import subprocess

import numpy as np
import pytest

from conftest import FIXTURES
from serve_util import Server, post_json as post

ROOT = os.path.join(FIXTURES, "dense")
EXP = json.load(open(os.path.join(ROOT, "expected.json")))


def min_cos(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(((a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)).min())


def build(tmp, posy_model, name):
    """A model folder: MiniLM's files (linked) and the fixture's modules.json + Dense folders (copied)."""
    d = os.path.join(str(tmp), name)
    os.makedirs(d)
    src = os.path.join(ROOT, name)
    for f in os.listdir(posy_model):
        if f != "modules.json" and not f.endswith("_Normalize"):
            os.symlink(os.path.abspath(os.path.join(posy_model, f)), os.path.join(d, f))
    for f in os.listdir(src):
        s = os.path.join(src, f)
        (shutil.copytree if os.path.isdir(s) else shutil.copy)(s, os.path.join(d, f))
    return d


@pytest.mark.parametrize("name", ["a", "b"])
def test_dense_embed_cli(posy_bin, posy_model, tmp_path, name):
    d = build(tmp_path, posy_model, name)
    r = subprocess.run([posy_bin, "embed", "--model", d, "--"] + EXP["texts"], capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    got = np.array([json.loads(line) for line in r.stdout.decode().splitlines()], dtype=np.float64)
    want = np.array(EXP[name])
    assert got.shape == want.shape  # 48 or 24 dimensions, not 384
    assert min_cos(got, want) >= 0.99999
    if name == "b":  # not normalised: the values themselves
        assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max()
    else:
        assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    assert b"Dense module" in r.stderr  # the start-up line says so


def test_dense_server(posy_bin, posy_model, tmp_path):
    d = build(tmp_path, posy_model, "a")
    s = Server(posy_bin, d, "--device", "cpu", "--threads", "2")
    try:
        want = np.array(EXP["a"])
        st, tei = post(s.url, "/embed", {"inputs": EXP["texts"]})
        assert st == 200, tei
        assert np.asarray(tei).shape == want.shape and min_cos(tei, want) >= 0.99999
        st, oa = post(s.url, "/v1/embeddings", {"input": EXP["texts"], "model": "a"})
        assert st == 200, oa
        assert min_cos([x["embedding"] for x in oa["data"]], want) >= 0.99999
        st, oa = post(s.url, "/v1/embeddings", {"input": EXP["texts"][:2], "model": "a", "dimensions": 16})
        assert st == 200, oa
        v = np.array([x["embedding"] for x in oa["data"]])
        cut = want[:2, :16] / np.linalg.norm(want[:2, :16], axis=1, keepdims=True)
        assert v.shape == (2, 16) and min_cos(v, cut) >= 0.99999
        st, r = post(s.url, "/v1/embeddings", {"input": "x", "model": "a", "dimensions": 49})
        assert st in (400, 422) and "48" in json.dumps(r), r  # over the served dimension
    finally:
        assert s.stop() == 0


def test_dense_bin_only_is_refused(posy_bin, posy_model, tmp_path):
    d = build(tmp_path, posy_model, "a")
    os.remove(os.path.join(d, "2_Dense", "model.safetensors"))
    open(os.path.join(d, "2_Dense", "pytorch_model.bin"), "wb").write(b"PK\x03\x04 not read")
    r = subprocess.run([posy_bin, "embed", "--model", d, "--", "hello"], capture_output=True, timeout=60)
    err = r.stderr.decode(errors="replace")
    assert r.returncode != 0 and r.returncode < 128, err
    assert "pytorch_model.bin" in err and "safetensors" in err, err


def write_safetensors(path, tensors):
    """A safetensors file from {name: float32 array} (the format: 8-byte header length, JSON, data)."""
    header, blobs, off = {}, [], 0
    for name, a in tensors.items():
        b = np.ascontiguousarray(a, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h + b"".join(blobs))


@pytest.mark.parametrize("tensors,needle", [
    ({"linear.weight": np.zeros((96, 383)), "linear.bias": np.zeros(96)}, "linear.weight"),  # shape
    ({"linear.weight": np.zeros((96, 384))}, "linear.bias"),                                  # config says bias
    ({"weight": np.zeros((96, 384)), "linear.bias": np.zeros(96)}, "linear.weight"),          # name
])
def test_dense_bad_weights_are_refused(posy_bin, posy_model, tmp_path, tensors, needle):
    d = build(tmp_path, posy_model, "a")
    write_safetensors(os.path.join(d, "2_Dense", "model.safetensors"), tensors)
    r = subprocess.run([posy_bin, "embed", "--model", d, "--", "hello"], capture_output=True, timeout=60)
    err = r.stderr.decode(errors="replace")
    assert r.returncode != 0 and r.returncode < 128, err
    assert needle in err and "2_Dense" in err, err


def test_dense_unexpected_bias_is_refused(posy_bin, posy_model, tmp_path):
    d = build(tmp_path, posy_model, "a")  # 3_Dense: bias false
    write_safetensors(os.path.join(d, "3_Dense", "model.safetensors"),
                      {"linear.weight": np.zeros((48, 96)), "linear.bias": np.zeros(48)})
    r = subprocess.run([posy_bin, "embed", "--model", d, "--", "hello"], capture_output=True, timeout=60)
    err = r.stderr.decode(errors="replace")
    assert r.returncode != 0 and r.returncode < 128 and "bias false" in err, err


def test_dense_gateway_and_workers(posy_bin, posy_model, tmp_path):
    """`posy gateway` in front of a `posy worker`: the worker's engine runs the Dense modules, the
    gateway serves their dimension; a gateway started with a worker of the other Dense model (24
    dimensions) refuses it by name and dimension."""
    from grpc_util import Proc, free_port, http_post, wait_http, wait_serving
    procs = []

    def worker(d):
        port = free_port()
        w = Proc([posy_bin, "worker", "--model", d, "--listen", f"127.0.0.1:{port}", "--device", "cpu",
                  "--threads", "1"], f"worker-{port}")
        w.addr = f"127.0.0.1:{port}"
        procs.append(w)
        wait_serving(w)
        return w.addr

    def gateway(addr):
        port = free_port()
        g = Proc([posy_bin, "gateway", "--model", a, "--host", "127.0.0.1", "--port", str(port), "--backend", addr],
                 f"gateway-{port}")
        g.port = port
        procs.append(g)
        return g

    a, b = build(tmp_path, posy_model, "a"), build(tmp_path, posy_model, "b")
    try:
        g = gateway(worker(a))
        wait_http(g, g.port)
        st, body = http_post(g.port, "/v1/embeddings", {"input": EXP["texts"], "model": "a"})
        assert st == 200, body
        v = np.array([x["embedding"] for x in sorted(body["data"], key=lambda x: x["index"])])
        assert v.shape == (len(EXP["texts"]), 48) and min_cos(v, EXP["a"]) >= 0.99999
        bad = gateway(worker(b))
        bad.p.wait(timeout=60)
        assert bad.p.returncode not in (0, None) and "dim 24" in bad.text() and "another model" in bad.text(), \
            bad.text()
    finally:
        for p in procs:
            p.stop()
