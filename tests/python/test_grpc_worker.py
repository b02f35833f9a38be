"""`posy worker` driven by a Python grpcio client generated from
proto/posy.proto: Info, the standard health service, Embed and EmbedStream
give the same vectors as `posy embed`, and malformed input gets a status
code (the worker keeps serving).
"""
import concurrent.futures as cf

import grpc
import numpy as np
import pytest

from grpc_util import (POSY_MODEL, embed_request, posy_embed, start_worker, stubs, tokenizer, vectors)

TEXTS = ["The cat sits on the mat.", "Embeddings map text to vectors.", "Ça va? Привет 你好 🙂",
         "x" * 150, "def f(x): return x * 2", "A much longer sentence " * 40]


@pytest.fixture(scope="module")
def worker():
    w = start_worker()
    yield w
    assert w.stop() == 0, w.text()


@pytest.fixture(scope="module")
def channel(worker):
    with grpc.insecure_channel(worker.addr) as ch:
        yield ch


@pytest.fixture(scope="module")
def embedder(channel):
    return stubs()[1].EmbedderStub(channel)


@pytest.fixture(scope="module")
def reference():
    return posy_embed(TEXTS)


def close(a, b):
    """Same engine, possibly different batch composition: float32 noise only."""
    assert a.shape == b.shape
    np.testing.assert_allclose(a, b, atol=2e-6, rtol=1e-5)


def raw_embed(channel, payload, timeout=10):
    """Call Embed with raw request bytes (no client-side validation)."""
    call = channel.unary_unary("/posy.v1.Embedder/Embed", request_serializer=None, response_deserializer=None)
    return call(payload, timeout=timeout)


def test_info_describes_the_model(embedder):
    pb = stubs()[0]
    info = embedder.Info(pb.InfoRequest(), timeout=5)
    assert info.model == "all-MiniLM-L6-v2"
    assert info.dim == 384
    assert info.max_seq_len == 256
    assert info.vocab_size == 30522
    assert info.device == "cpu"
    assert info.pooling == "mean" and info.normalize
    assert len(info.fingerprint) == 32 and int(info.fingerprint, 16) >= 0


def test_health_service(channel):
    _, _, hpb, hgrpc = stubs()
    h = hgrpc.HealthStub(channel)
    assert h.Check(hpb.HealthCheckRequest(), timeout=5).status == hpb.HealthCheckResponse.SERVING
    assert h.Check(hpb.HealthCheckRequest(service="posy.v1.Embedder"), timeout=5).status == \
        hpb.HealthCheckResponse.SERVING
    with pytest.raises(grpc.RpcError) as e:
        h.Check(hpb.HealthCheckRequest(service="no.such.Service"), timeout=5)
    assert e.value.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.RpcError) as e:
        next(iter(h.Watch(hpb.HealthCheckRequest(), timeout=5)))
    assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_embed_equals_posy_embed(embedder, reference):
    tok = tokenizer()
    resp = embedder.Embed(embed_request(tok, TEXTS, request_id=42), timeout=60)
    assert resp.request_id == 42
    assert (resp.count, resp.dim) == (len(TEXTS), 384)
    close(vectors(resp), reference)
    assert resp.inference_time_us > 0


def test_stream_answers_every_request(embedder, reference):
    tok = tokenizer()
    reqs = [embed_request(tok, [t], request_id=100 + i) for i, t in enumerate(TEXTS)]
    got = {r.request_id: vectors(r)[0] for r in embedder.EmbedStream(iter(reqs), timeout=60)}
    assert sorted(got) == [100 + i for i in range(len(TEXTS))]
    close(np.stack([got[100 + i] for i in range(len(TEXTS))]), reference)


def test_info_counts_work(embedder):
    pb = stubs()[0]
    before = embedder.Info(pb.InfoRequest(), timeout=5)
    embedder.Embed(embed_request(tokenizer(), ["count me"]), timeout=30)
    after = embedder.Info(pb.InfoRequest(), timeout=5)
    assert after.requests == before.requests + 1
    assert after.sequences == before.sequences + 1


def bad_requests():
    pb = stubs()[0]
    yield "garbage bytes", b"\xff\xff\xff\xff\x0f\x01garbage"
    yield "truncated varint", b"\x08\xff"
    yield "ids as a string (wrong wire type)", b"\x12\x03abc"
    yield "request_id as bytes (wrong wire type)", b"\x0a\x02hi"
    yield "empty chunk", b""
    yield "out-of-vocabulary id", pb.EmbedRequest(ids=[101, 999999, 102], lengths=[3]).SerializeToString()
    yield "negative id", pb.EmbedRequest(ids=[101, -5, 102], lengths=[3]).SerializeToString()
    yield "lengths do not sum to ids", pb.EmbedRequest(ids=[101, 102], lengths=[3]).SerializeToString()
    yield "zero-length sequence", pb.EmbedRequest(ids=[101, 102], lengths=[0, 2]).SerializeToString()
    yield "negative length", pb.EmbedRequest(ids=[101, 102], lengths=[-1, 3]).SerializeToString()
    yield "longer than max_seq_len", pb.EmbedRequest(ids=[100] * 300, lengths=[300]).SerializeToString()
    yield "type_ids count mismatch", pb.EmbedRequest(ids=[101, 102], lengths=[2], type_ids=[0]).SerializeToString()
    yield "type id out of range", pb.EmbedRequest(ids=[101, 102], lengths=[2], type_ids=[0, 7]).SerializeToString()


@pytest.mark.parametrize("name,payload", list(bad_requests()), ids=[n for n, _ in bad_requests()])
def test_bad_input_is_invalid_argument(channel, embedder, name, payload):
    with pytest.raises(grpc.RpcError) as e:
        raw_embed(channel, payload)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (name, e.value.details())
    assert e.value.details()
    # and the worker still serves
    assert embedder.Embed(embed_request(tokenizer(), ["still alive"]), timeout=30).count == 1


def test_bad_message_ends_the_stream_with_invalid_argument(channel):
    pb = stubs()[0]
    good = embed_request(tokenizer(), ["fine"], request_id=1).SerializeToString()
    call = channel.stream_stream("/posy.v1.Embedder/EmbedStream", request_serializer=None,
                                 response_deserializer=None)
    with pytest.raises(grpc.RpcError) as e:
        for _ in call(iter([good, b"\xff\xff\xff"]), timeout=30):
            pass
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_admission_control_answers_resource_exhausted():
    w = start_worker(None, "--max-concurrent", "1")
    try:
        tok = tokenizer()
        req = embed_request(tok, ["a fairly long sentence to keep the engine busy for a while " * 4] * 16)
        with grpc.insecure_channel(w.addr) as ch:
            stub = stubs()[1].EmbedderStub(ch)

            def one(_):
                try:
                    stub.Embed(req, timeout=120)
                    return grpc.StatusCode.OK
                except grpc.RpcError as e:
                    return e.code()
            with cf.ThreadPoolExecutor(12) as ex:
                codes = list(ex.map(one, range(12)))
        assert grpc.StatusCode.RESOURCE_EXHAUSTED in codes, codes
        assert grpc.StatusCode.OK in codes, codes
        assert set(codes) <= {grpc.StatusCode.OK, grpc.StatusCode.RESOURCE_EXHAUSTED}, codes
    finally:
        assert w.stop() == 0, w.text()


def test_worker_flag_errors():
    import subprocess
    from grpc_util import POSY_BIN
    r = subprocess.run([POSY_BIN, "worker", "--model", POSY_MODEL, "--device", "tpu"], capture_output=True)
    assert r.returncode == 2 and b"--device" in r.stderr
    r = subprocess.run([POSY_BIN, "worker", "--model", "/nonexistent"], capture_output=True)
    assert r.returncode == 1 and b"/nonexistent" in r.stderr
    r = subprocess.run([POSY_BIN, "worker", "--frobnicate", "1"], capture_output=True)
    assert r.returncode == 2 and b"--frobnicate" in r.stderr
