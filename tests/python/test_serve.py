"""`posy serve` with the real model, driven by the clients users run: the
official `openai` SDK (float and base64), `huggingface_hub.InferenceClient`
(TEI's feature extraction), `requests` for TEI /embed and the other routes.
Every vector is compared with `posy embed` for the same text.  A 64-client
load with mixed single and batched requests checks that requests sharing
engine batches get exactly their own vectors.
"""
import base64
import concurrent.futures as cf
import json
import os
import random
import signal
import time

import numpy as np
import openai
import pytest
import requests
from huggingface_hub import InferenceClient

from serve_util import Server

TEXTS = ["The cat sits on the mat.", "Embeddings map text to vectors.", "hello world",
         "Ça va? Привет 你好 🙂", "def f(x): return x * 2", "A much longer sentence " * 12,
         "", "Paris is the capital of France."]

# The CPU engine is batch-invariant: a text's vector does not depend on what
# shares its batch, so the server must give exactly `posy embed`'s floats,
# whatever the batching.  (POSY_TEST_ATOL relaxes this for an engine that is
# not, e.g. a GPU one whose GEMM tiling follows the batch size.)  Vectors cut
# with `dimensions` are re-normalised in double precision by the server and
# in float32 by numpy here, hence DIMS_ATOL.
ATOL = float(os.environ.get("POSY_TEST_ATOL", "0"))
DIMS_ATOL = 1e-6


@pytest.fixture(scope="module")
def server(posy_bin, posy_model):
    s = Server(posy_bin, posy_model, "--device", "cpu", "--max-batch-tokens", "4096")
    yield s
    assert s.stop() == 0, s.output()


@pytest.fixture(scope="module")
def cli_vectors(posy):
    """text -> vector from `posy embed` (one text per line on stdin)."""
    texts = TEXTS + [f"sentence number {i} about topic {i % 7}" for i in range(40)]
    stdin = "\n".join(json.dumps(t) for t in texts) + "\n"
    vecs = posy.embed_jsonl("--input", "-", "--input-format", "jsonl", input=stdin)
    return dict(zip(texts, vecs))


def oa_client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)


def test_openai_float_matches_posy_embed(server, cli_vectors, posy_model):
    r = oa_client(server).embeddings.create(model=os.path.basename(posy_model), input=TEXTS,
                                            encoding_format="float")
    assert [d.index for d in r.data] == list(range(len(TEXTS)))
    got = np.array([d.embedding for d in r.data], dtype=np.float32)
    want = np.stack([cli_vectors[t] for t in TEXTS])
    np.testing.assert_allclose(got, want, atol=ATOL, rtol=0)
    assert r.model == os.path.basename(posy_model)
    assert r.usage.prompt_tokens == r.usage.total_tokens > len(TEXTS) * 2


def test_openai_base64_is_the_float32_bytes(server, cli_vectors):
    raw = requests.post(server.url + "/v1/embeddings",
                        json={"input": TEXTS, "encoding_format": "base64"}).json()
    flt = requests.post(server.url + "/v1/embeddings", json={"input": TEXTS}).json()
    for b, f in zip(raw["data"], flt["data"]):
        v = np.frombuffer(base64.b64decode(b["embedding"]), dtype="<f4")
        # The same request shape gives the same floats; JSON round-trips them exactly.
        assert np.array_equal(v, np.array(f["embedding"], dtype=np.float32))
        # Byte-identical to what OpenAI's encoder would produce from these floats.
        assert b["embedding"] == base64.b64encode(v.astype("<f4").tobytes()).decode()
    # The SDK's default (no encoding_format) asks for base64 and decodes it.
    r = oa_client(server).embeddings.create(model="m", input=TEXTS[:3])
    got = np.array([d.embedding for d in r.data], dtype=np.float32)
    np.testing.assert_allclose(got, np.stack([cli_vectors[t] for t in TEXTS[:3]]), atol=ATOL, rtol=0)


def test_openai_dimensions_truncate_and_renormalise(server, cli_vectors):
    r = oa_client(server).embeddings.create(model="m", input=TEXTS[:2], dimensions=64, encoding_format="float")
    for d, t in zip(r.data, TEXTS[:2]):
        v = np.array(d.embedding, dtype=np.float32)
        want = cli_vectors[t][:64] / np.linalg.norm(cli_vectors[t][:64])
        assert v.shape == (64,)
        np.testing.assert_allclose(v, want, atol=DIMS_ATOL, rtol=0)


def test_openai_token_id_inputs(server, cli_vectors, posy_model):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(posy_model, "tokenizer.json"))
    tok.no_padding()   # the model's tokenizer.json pads to 128 for training; the server never pads
    ids = [tok.encode(t).ids for t in TEXTS[:3]]
    one = requests.post(server.url + "/v1/embeddings", json={"input": ids[0]}).json()
    many = requests.post(server.url + "/v1/embeddings", json={"input": ids}).json()
    np.testing.assert_allclose(np.array(one["data"][0]["embedding"], np.float32), cli_vectors[TEXTS[0]], atol=ATOL, rtol=0)
    for d, t in zip(many["data"], TEXTS[:3]):
        np.testing.assert_allclose(np.array(d["embedding"], np.float32), cli_vectors[t], atol=ATOL, rtol=0)
    assert many["usage"]["prompt_tokens"] == sum(len(i) for i in ids)


def test_huggingface_hub_feature_extraction(server, cli_vectors):
    client = InferenceClient(model=server.url)
    v = client.feature_extraction(TEXTS[0])
    assert v.shape == (1, 384)
    np.testing.assert_allclose(v[0], cli_vectors[TEXTS[0]], atol=ATOL, rtol=0)
    v = client.feature_extraction(TEXTS[1], dimensions=32)
    want = cli_vectors[TEXTS[1]][:32]
    np.testing.assert_allclose(v[0], want / np.linalg.norm(want), atol=DIMS_ATOL, rtol=0)


def test_tei_embed_and_root(server, cli_vectors):
    for route in ("/embed", "/"):
        r = requests.post(server.url + route, json={"inputs": TEXTS[:4], "truncate": False})
        assert r.status_code == 200, r.text
        got = np.array(r.json(), dtype=np.float32)
        np.testing.assert_allclose(got, np.stack([cli_vectors[t] for t in TEXTS[:4]]), atol=ATOL, rtol=0)
    single = requests.post(server.url + "/embed", json={"inputs": TEXTS[2]}).json()
    assert len(single) == 1 and len(single[0]) == 384
    for h in ("x-tokenization-time", "x-queue-time", "x-inference-time", "x-total-time"):
        assert float(r.headers[h]) >= 0


def test_truncation(server):
    long_text = "word " * 1000
    r = requests.post(server.url + "/embed", json={"inputs": long_text})
    assert r.status_code == 422 and r.json()["error_type"] == "Validation"
    right = requests.post(server.url + "/embed", json={"inputs": long_text + "end", "truncate": True})
    left = requests.post(server.url + "/embed",
                         json={"inputs": "start " + long_text, "truncate": True, "truncation_direction": "Left"})
    assert right.status_code == left.status_code == 200
    r = requests.post(server.url + "/v1/embeddings", json={"input": long_text, "truncate": True})
    assert r.status_code == 200 and r.json()["usage"]["prompt_tokens"] == 256


def test_tokenize_matches_hf_tokenizers(server, posy_model):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(posy_model, "tokenizer.json"))
    tok.no_padding()   # the model's tokenizer.json pads to 128 for training; the server never pads
    r = requests.post(server.url + "/tokenize", json={"inputs": TEXTS[:4]})
    assert r.status_code == 200, r.text
    for toks, t in zip(r.json(), TEXTS[:4]):
        enc = tok.encode(t)
        assert [x["id"] for x in toks] == enc.ids
        assert toks[0]["special"] and toks[-1]["special"]
        for x, (s, e) in zip(toks[1:-1], enc.offsets[1:-1]):
            assert (x["start"], x["stop"]) == (len(t[:s].encode()), len(t[:e].encode()))
            assert x["text"] == t[s:e]   # the input's own text, as TEI answers
    r = requests.post(server.url + "/tokenize", json={"inputs": "hello", "add_special_tokens": False})
    assert [x["id"] for x in r.json()[0]] == tok.encode("hello", add_special_tokens=False).ids


def test_decode_matches_hf_tokenizers(server, posy_model):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(posy_model, "tokenizer.json"))
    tok.no_padding()
    texts = [t for t in TEXTS if t] + ["Don't stop-believing, 3.14 ½ naïve café [MASK]"]
    batch = [tok.encode(t).ids for t in texts]
    for skip in (True, False):
        r = requests.post(server.url + "/decode", json={"ids": batch, "skip_special_tokens": skip})
        assert r.status_code == 200, r.text
        assert r.json() == [tok.decode(ids, skip_special_tokens=skip) for ids in batch]
    # one list of ids (TEI answers a one-string list), skip_special_tokens defaulting to true
    r = requests.post(server.url + "/decode", json={"ids": batch[0]})
    assert r.status_code == 200 and r.json() == [tok.decode(batch[0])]
    assert r.json()[0] != tok.decode(batch[0], skip_special_tokens=False)
    r = requests.post(server.url + "/decode", json={"ids": [[], [101, 102]], "skip_special_tokens": True})
    assert r.status_code == 200 and r.json() == ["", ""]


@pytest.mark.parametrize("body,status", [
    ({"ids": [101, 30522, 102]}, 422),            # vocab is 30522
    ({"ids": [[101], [-1]]}, 422),
    ({"ids": [[101], [2 ** 40]]}, 422),
    ({"ids": []}, 422),
    ({}, 422),
    ({"ids": "hello"}, 400),
    ({"ids": [101, "x"]}, 400),
    ({"ids": [[101], 7]}, 400),
    ({"ids": [1.5]}, 400),
    ({"ids": [101], "skip_special_tokens": "yes"}, 400),
    ([101, 102], 400),
])
def test_decode_errors(server, body, status):
    r = requests.post(server.url + "/decode", json=body)
    assert r.status_code == status, r.text
    assert r.json()["error_type"] == "Validation" and r.json()["error"]


def test_info_models_health_metrics(server, posy_model):
    assert requests.get(server.url + "/health").status_code == 200
    info = requests.get(server.url + "/info").json()
    assert info["model_id"] == os.path.basename(posy_model)
    assert info["max_input_length"] == 256 and info["dimensions"] == 384
    assert info["max_batch_tokens"] == 4096   # the flag, as the engine took it
    models = oa_client(server).models.list()
    assert [m.id for m in models.data] == [os.path.basename(posy_model)]
    before = server.metric("posy_inputs_total")
    requests.post(server.url + "/embed", json={"inputs": ["a", "b", "c"]})
    text = requests.get(server.url + "/metrics").text
    assert server.metric("posy_inputs_total") == before + 3
    for name in ("posy_tokenization_seconds_bucket", "posy_queue_seconds_count", "posy_inference_seconds_sum",
                 "posy_batch_size_bucket", "posy_batch_tokens_count", "posy_queue_sequences", "posy_tokens_total",
                 'posy_requests_total{route="/embed",status="200"}'):
        assert name in text, name


def test_64_concurrent_clients_get_their_own_vectors(server, cli_vectors):
    pool_texts = [t for t in cli_vectors if t]
    rng = random.Random(4)
    jobs = []
    for c in range(64):
        for k in range(3):
            n = 1 if rng.random() < 0.5 else rng.randint(2, 12)
            jobs.append((rng.choice(["openai", "tei"]), rng.sample(pool_texts, n)))

    def run(job):
        kind, texts = job
        with requests.Session() as s:
            if kind == "openai":
                r = s.post(server.url + "/v1/embeddings", json={"input": texts if len(texts) > 1 else texts[0]})
                assert r.status_code == 200, r.text
                return texts, [d["embedding"] for d in r.json()["data"]]
            r = s.post(server.url + "/embed", json={"inputs": texts})
            assert r.status_code == 200, r.text
            return texts, r.json()

    with cf.ThreadPoolExecutor(64) as ex:
        results = list(ex.map(run, jobs))
    for texts, vecs in results:
        assert len(vecs) == len(texts)
        for t, v in zip(texts, vecs):
            np.testing.assert_allclose(np.array(v, np.float32), cli_vectors[t], atol=ATOL, rtol=0)
    assert server.metric("posy_batch_size_count") > 0


def test_sigterm_under_openai_load_loses_no_accepted_request(posy_bin, posy_model, cli_vectors):
    """16 `openai` clients keep sending single and batched requests; SIGTERM
    arrives mid-load.  Every request sent well before the signal (so surely
    read by the server) gets its own vectors; a later one may instead be
    refused (503 shutting_down on an open connection, or a refused
    connection), but nothing is cut off or answered wrongly, and the server
    exits 0 once the accepted requests are answered."""
    s = Server(posy_bin, posy_model, "--device", "cpu", "--threads", "1", "--max-batch-seqs", "8")
    pool_texts = [t for t in cli_vectors if t]
    stop_at = [None]
    outcomes = []

    def client(seed):
        rng = random.Random(seed)
        c = oa_client(s)
        while stop_at[0] is None or time.time() < stop_at[0] + 1.0:
            texts = rng.sample(pool_texts, 1 if rng.random() < 0.5 else rng.randint(2, 6))
            t0 = time.time()
            try:
                r = c.embeddings.create(model="m", input=texts if len(texts) > 1 else texts[0])
                outcomes.append((t0, "ok", texts, [d.embedding for d in r.data]))
            except openai.APIStatusError as e:
                outcomes.append((t0, e.status_code, texts, e.body))
                time.sleep(0.02)
            except openai.APIConnectionError:
                outcomes.append((t0, "conn", texts, None))
                return   # the listener is closed: this client is done

    try:
        with cf.ThreadPoolExecutor(16) as ex:
            futs = [ex.submit(client, i) for i in range(16)]
            time.sleep(1.5)
            stop_at[0] = time.time()
            s.proc.send_signal(signal.SIGTERM)
            for f in futs:
                f.result()
        assert s.proc.wait(timeout=60) == 0, s.output()
        assert "stopped cleanly" in s.output()
    finally:
        s.stop()
    ok = [o for o in outcomes if o[1] == "ok"]
    assert len(ok) > 16
    for t0, kind, texts, data in outcomes:
        if t0 < stop_at[0] - 0.2:
            assert kind == "ok", (kind, data)
        if kind == "ok":
            got = np.array(data, dtype=np.float32)
            want = np.array([cli_vectors[t] for t in texts], dtype=np.float32)
            np.testing.assert_allclose(got, want, rtol=0, atol=ATOL)
        elif kind != "conn":
            assert kind == 503 and data["code"] == "shutting_down", (kind, data)
