"""Output encodings over HTTP (docs/ENCODINGS.md), against the float
vectors the same server returns.

Starts `posy serve` on the default model and asks /v1/embeddings and /embed
for the same inputs in every encoding; each quantized answer must equal the
documented formula applied (here, in numpy) to the float answer with the
same `dimensions`, byte for byte.  binary/ubinary are also checked against
sentence-transformers' quantize_embeddings when it is installed (it is not
needed in CI: the numpy packbits formula is the same definition).
"""
import base64

import numpy as np
import pytest

from serve_util import Server, post_json as post

TEXTS = ["The quick brown fox jumps over the lazy dog.", "Embeddings map text to vectors.", "a"]


@pytest.fixture(scope="module")
def server(posy_bin, posy_model):
    s = Server(posy_bin, posy_model, "--device", "cpu", "--threads", "2")
    yield s.url
    assert s.stop() == 0


def int8_ref(x):
    y = x.astype(np.float64) * (127.0 / np.abs(x.astype(np.float64)).max())
    return np.clip(np.sign(y) * np.floor(np.abs(y) + 0.5), -127, 127).astype(np.int8), np.float32(127.0 / np.abs(x.astype(np.float64)).max())


def encode_ref(x, dtype):
    if dtype == "int8":
        return int8_ref(x)[0]
    if dtype == "uint8":
        return (int8_ref(x)[0].astype(np.int16) + 128).astype(np.uint8)
    if dtype == "ubinary":
        return np.packbits(x > 0)
    if dtype == "binary":
        return (np.packbits(x > 0).astype(np.int16) - 128).astype(np.int8)
    raise ValueError(dtype)


def openai_floats(url, dims=None):
    body = {"input": TEXTS, "model": "x"}
    if dims:
        body["dimensions"] = dims
    st, r = post(url, "/v1/embeddings", body)
    assert st == 200, r
    return [np.array(d["embedding"], dtype=np.float32) for d in r["data"]]


@pytest.mark.parametrize("dtype", ["int8", "uint8", "binary", "ubinary"])
@pytest.mark.parametrize("dims", [None, 100])
def test_openai_quantized_json_and_base64(server, dtype, dims):
    floats = openai_floats(server, dims)
    body = {"input": TEXTS, "model": "x", "encoding_format": dtype}
    if dims:
        body["dimensions"] = dims
    st, r = post(server, "/v1/embeddings", body)
    assert st == 200, r
    body.update(encoding_format="base64", output_dtype=dtype)
    st, r64 = post(server, "/v1/embeddings", body)
    assert st == 200, r64
    for x, d, d64 in zip(floats, r["data"], r64["data"]):
        want = encode_ref(x, dtype)
        assert d["embedding"] == [int(v) for v in want]
        assert base64.b64decode(d64["embedding"]) == want.tobytes()
        if dtype in ("int8", "uint8"):
            assert np.float32(d["scale"]) == int8_ref(x)[1]
        else:
            assert "scale" not in d


def test_tei_embed_quantized(server):
    st, fl = post(server, "/embed", {"inputs": TEXTS})
    assert st == 200
    st, q = post(server, "/embed", {"inputs": TEXTS, "encoding_format": "binary"})
    assert st == 200, q
    for x, b in zip(fl, q):
        assert b == [int(v) for v in encode_ref(np.array(x, dtype=np.float32), "binary")]
    st, q = post(server, "/embed", {"inputs": TEXTS, "encoding_format": "base64", "output_dtype": "int8"})
    assert st == 200, q
    for x, b in zip(fl, q):
        assert base64.b64decode(b) == encode_ref(np.array(x, dtype=np.float32), "int8").tobytes()


def test_float_base64_unchanged(server):
    floats = openai_floats(server)
    st, r = post(server, "/v1/embeddings", {"input": TEXTS, "encoding_format": "base64"})
    assert st == 200
    for x, d in zip(floats, r["data"]):
        assert np.frombuffer(base64.b64decode(d["embedding"]), dtype="<f4").tolist() == x.tolist()


@pytest.mark.parametrize("body", [{"encoding_format": "int4"}, {"output_dtype": "float16"},
                                  {"encoding_format": "int8", "output_dtype": "binary"}])
def test_bad_encoding_is_422(server, body):
    st, r = post(server, "/v1/embeddings", {"input": ["x"], **body})
    assert st == 422, r


def test_binary_matches_sentence_transformers(server):
    """binary/ubinary as docs/ENCODINGS.md defines them: numpy.packbits(x > 0)
    (sentence-transformers' quantize_embeddings, whose bytes test_vecenc.c
    pins); compared with sentence-transformers itself too where installed."""
    floats = np.stack(openai_floats(server))
    ubin = np.packbits(floats > 0, axis=-1)
    refs = [(ubin, ubin - 128)]
    try:
        from sentence_transformers.util import quantization as q
        refs.append((q.quantize_embeddings(floats, "ubinary"), q.quantize_embeddings(floats, "binary")))
    except ImportError:  # not in CI (no torch there); the numpy definition still applies
        pass
    st, r = post(server, "/v1/embeddings", {"input": TEXTS, "encoding_format": "ubinary"})
    got_u = np.array([d["embedding"] for d in r["data"]], dtype=np.uint8)
    st, r = post(server, "/v1/embeddings", {"input": TEXTS, "encoding_format": "binary"})
    got_b = np.array([d["embedding"] for d in r["data"]], dtype=np.int8)
    for ref_u, ref_b in refs:
        assert got_u.tolist() == np.asarray(ref_u, dtype=np.uint8).tolist()
        assert got_b.tolist() == np.asarray(ref_b).astype(np.int16).astype(np.int8).tolist()
