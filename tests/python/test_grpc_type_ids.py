"""Token type ids over gRPC: a worker serving the tiny BERT fixture
(type_vocab_size 2) forwards per-token type ids to the engine.

The reference is tests/fixtures/tiny_expected.json, computed with
transformers by tests/gen/gen_tiny_models.py for the same ids and type ids,
so a worker that dropped the type ids (all zeros) would not match it; the
same ids with all-zero type ids must give different vectors, and type ids
beyond the model's type vocabulary are INVALID_ARGUMENT.
"""
import json
import os

import grpc
import numpy as np
import pytest

from grpc_util import POSY_BIN, ROOT, Proc, free_port, stubs, vectors, wait_serving

TINY = os.path.join(ROOT, "tests", "fixtures", "tiny-bert")


@pytest.fixture(scope="module")
def expected():
    with open(os.path.join(ROOT, "tests", "fixtures", "tiny_expected.json")) as f:
        return json.load(f)["tiny-bert"]


@pytest.fixture(scope="module")
def embedder():
    port = free_port()
    w = Proc([POSY_BIN, "worker", "--model", TINY, "--listen", f"127.0.0.1:{port}", "--device", "cpu",
              "--threads", "1"], f"worker-tiny-{port}")
    w.addr = f"127.0.0.1:{port}"
    wait_serving(w)
    with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
        yield stubs()[1].EmbedderStub(ch)
    assert w.stop() == 0, w.text()


def request(seqs, types):
    pb = stubs()[0]
    req = pb.EmbedRequest(ids=[i for s in seqs for i in s], lengths=[len(s) for s in seqs])
    if types is not None:
        req.type_ids.extend(t for s in types for t in s)
    return req


def test_info_advertises_type_vocab(embedder):
    assert embedder.Info(stubs()[0].InfoRequest(), timeout=5).type_vocab_size == 2


def test_type_ids_match_transformers(embedder, expected):
    assert any(t == 1 for s in expected["type_ids"] for t in s)
    got = vectors(embedder.Embed(request(expected["ids"], expected["type_ids"]), timeout=30))
    want = np.array(expected["embeddings"], dtype=np.float32)
    np.testing.assert_allclose(got, want, atol=1e-4, rtol=1e-4)


def test_type_ids_change_the_vectors(embedder, expected):
    ids = expected["ids"]
    typed = vectors(embedder.Embed(request(ids, expected["type_ids"]), timeout=30))
    zeros = vectors(embedder.Embed(request(ids, [[0] * len(s) for s in ids]), timeout=30))
    absent = vectors(embedder.Embed(request(ids, None), timeout=30))
    np.testing.assert_array_equal(zeros, absent)
    for i in range(len(ids)):
        assert np.abs(typed[i] - zeros[i]).max() > 1e-3, i


def test_type_id_beyond_type_vocab_is_invalid(embedder):
    with pytest.raises(grpc.RpcError) as e:
        embedder.Embed(request([[2, 50, 51, 3]], [[0, 0, 2, 2]]), timeout=10)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    # the worker keeps serving
    assert vectors(embedder.Embed(request([[2, 50, 51, 3]], [[0, 0, 1, 1]]), timeout=10)).shape[0] == 1
