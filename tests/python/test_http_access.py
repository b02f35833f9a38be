"""The HTTP front's access flags end to end: `--api-key` / POSY_API_KEY on
`posy serve` and `posy gateway`, `--served-model-name`, `--cors-allow-origin`.

- the official `openai` SDK with the right key gets the same vectors as an
  open server; with a wrong key it gets AuthenticationError (401);
  `huggingface_hub`'s InferenceClient passes with its `token`;
- TEI routes answer 401 in TEI's error shape; /health and /metrics stay open
  (probes, scrapers) and /metrics counts the refusals;
- the key comes from the environment as well as the flag, is never written
  to the log, and an unusable key (empty, with a space) stops start-up with
  a clear message;
- `posy gateway` takes the same flag.
- CORS: a browser's preflight and its POST, with the key, from an allowed
  origin and from another.
(The bearer and origin parsing themselves: tests/unit/test_gw_server.c.)
"""
import os
import subprocess

import numpy as np
import openai
import pytest
import requests
from huggingface_hub import InferenceClient

from grpc_util import POSY_BIN, POSY_MODEL, free_port, start_gateway, start_worker
from serve_util import Server

KEY = "posy-test-Key_0123456789"
TEXTS = ["the capital of France", "a fast vector search engine", "blue river"]


@pytest.fixture(scope="module")
def keyed(posy_bin, posy_model):
    s = Server(posy_bin, posy_model, "--device", "cpu", env={"POSY_API_KEY": KEY})
    yield s
    assert s.stop() == 0


def client(url, key):
    return openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0)


def vectors(resp):
    return np.array([d.embedding for d in resp.data], dtype=np.float32)


def test_openai_sdk_with_the_key_equals_an_open_server(keyed, posy_bin, posy_model):
    got = vectors(client(keyed.url, KEY).embeddings.create(input=TEXTS, model="m"))
    open_srv = Server(posy_bin, posy_model, "--device", "cpu")
    try:
        want = vectors(client(open_srv.url, "unused").embeddings.create(input=TEXTS, model="m"))
    finally:
        assert open_srv.stop() == 0
    assert got.shape == (3, 384)
    np.testing.assert_array_equal(got, want)


def test_openai_sdk_with_a_wrong_key_is_refused(keyed):
    with pytest.raises(openai.AuthenticationError) as e:
        client(keyed.url, KEY + "x").embeddings.create(input=TEXTS, model="m")
    assert e.value.status_code == 401
    assert e.value.code == "invalid_api_key"


def test_huggingface_hub_token(keyed):
    v = InferenceClient(model=keyed.url, token=KEY).feature_extraction(TEXTS[0])
    assert v.shape == (1, 384)
    with pytest.raises(Exception) as e:
        InferenceClient(model=keyed.url, token="hf_wrong").feature_extraction(TEXTS[0])
    assert "401" in str(e.value)


def test_tei_routes_health_and_metrics(keyed):
    before = keyed.metric('posy_request_failures_total{reason="unauthorized"}')
    r = requests.post(keyed.url + "/embed", json={"inputs": "hello"}, timeout=30)
    assert r.status_code == 401
    assert r.headers["WWW-Authenticate"] == "Bearer"
    assert r.json()["error_type"] == "Unauthorized" and "API key is required" in r.json()["error"]
    r = requests.post(keyed.url + "/embed", json={"inputs": "hello"}, timeout=30,
                      headers={"Authorization": "Bearer " + KEY})
    assert r.status_code == 200 and len(r.json()[0]) == 384
    for path in ("/info", "/v1/models"):
        assert requests.get(keyed.url + path, timeout=5).status_code == 401
        assert requests.get(keyed.url + path, timeout=5, headers={"Authorization": "bearer " + KEY}).status_code == 200
    r = requests.post(keyed.url + "/tokenize", json={"inputs": "hi"}, timeout=5,
                      headers={"Authorization": "Basic " + KEY})
    assert r.status_code == 401 and "API key is wrong" in r.json()["error"]
    assert requests.get(keyed.url + "/health", timeout=5).status_code == 200
    assert keyed.metric('posy_request_failures_total{reason="unauthorized"}') == before + 4
    assert keyed.metric('posy_requests_total{route="/embed",status="401"}') >= 1


def test_the_key_is_not_logged(keyed):
    out = keyed.output()
    assert "API key is required on every route but /health and /metrics" in out
    assert KEY not in out


@pytest.mark.parametrize("value,why", [("", "empty"), ("two words", "visible ASCII")])
def test_an_unusable_key_stops_start_up(posy_bin, posy_model, value, why):
    r = subprocess.run([posy_bin, "serve", "--model", posy_model, "--device", "cpu", "--host", "127.0.0.1",
                        "--port", str(free_port()), "--api-key", value], capture_output=True, timeout=60)
    err = r.stderr.decode(errors="replace") + r.stdout.decode(errors="replace")
    assert r.returncode == 1, err
    assert "--api-key" in err and why in err, err


def test_gateway_takes_the_key():
    w = start_worker()
    gw = start_gateway([w.addr], "--api-key", KEY)
    try:
        url = f"http://127.0.0.1:{gw.port}"
        with pytest.raises(openai.AuthenticationError):
            client(url, "nope").embeddings.create(input=TEXTS, model="m")
        got = vectors(client(url, KEY).embeddings.create(input=TEXTS, model="m"))
        assert got.shape == (3, 384)
        np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
        assert requests.get(url + "/health", timeout=5).status_code == 200
    finally:
        gw.stop()
        w.stop()


def test_served_model_name(posy_bin, posy_model):
    """--served-model-name renames the model in every answer that names it."""
    s = Server(posy_bin, posy_model, "--device", "cpu", "--served-model-name", "text-embedding-3-small")
    try:
        r = client(s.url, "unused").embeddings.create(input="hi", model="anything")
        assert r.model == "text-embedding-3-small"
        assert requests.get(s.url + "/v1/models", timeout=5).json()["data"][0]["id"] == "text-embedding-3-small"
        assert requests.get(s.url + "/info", timeout=5).json()["model_id"] == "text-embedding-3-small"
    finally:
        assert s.stop() == 0
    r = subprocess.run([posy_bin, "serve", "--model", posy_model, "--served-model-name", ""], capture_output=True,
                       timeout=60)
    assert r.returncode == 2 and b"--served-model-name is empty" in r.stderr, r.stderr


def test_cors_preflight_and_post(posy_bin, posy_model):
    s = Server(posy_bin, posy_model, "--device", "cpu", env={"POSY_API_KEY": KEY,
               "POSY_CORS_ALLOW_ORIGIN": "https://app.example.com,http://localhost:5173"})
    try:
        pre = requests.options(s.url + "/v1/embeddings", timeout=5, headers={
            "Origin": "http://localhost:5173", "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization,content-type"})
        assert pre.status_code == 204
        assert pre.headers["Access-Control-Allow-Origin"] == "http://localhost:5173"
        assert "authorization" in pre.headers["Access-Control-Allow-Headers"].lower()
        assert "POST" in pre.headers["Access-Control-Allow-Methods"]
        r = requests.post(s.url + "/v1/embeddings", json={"input": "hi", "model": "m"}, timeout=30,
                          headers={"Origin": "http://localhost:5173", "Authorization": "Bearer " + KEY})
        assert r.status_code == 200 and len(r.json()["data"][0]["embedding"]) == 384
        assert r.headers["Access-Control-Allow-Origin"] == "http://localhost:5173"
        assert "x-total-time" in r.headers["Access-Control-Expose-Headers"]
        other = requests.post(s.url + "/v1/embeddings", json={"input": "hi", "model": "m"}, timeout=30,
                              headers={"Origin": "https://evil.example.com", "Authorization": "Bearer " + KEY})
        assert other.status_code == 200   # the server answers; the browser withholds it from the page
        assert "Access-Control-Allow-Origin" not in other.headers
    finally:
        assert s.stop() == 0
    r = subprocess.run([posy_bin, "serve", "--model", posy_model, "--device", "cpu", "--host", "127.0.0.1",
                        "--port", str(free_port()), "--cors-allow-origin", "https://app.example.com/"],
                       capture_output=True, timeout=60)
    assert r.returncode == 1 and b"is not an origin" in r.stderr + r.stdout, r.stderr
