"""TEI's sentence similarity on `posy serve`: POST /similarity, and POST /
with the same body (where huggingface_hub's InferenceClient.sentence_similarity
sends it).  The answer is the cosine between the source sentence's embedding
and each sentence's, checked here against the vectors of /embed; options
(truncation, prompt_name, dimensions) come under "parameters"; malformed
bodies get TEI-shaped errors."""
import numpy as np
import pytest
import requests
from huggingface_hub import InferenceClient

from serve_util import Server

SOURCE = "A man is eating food."
SENTENCES = ["A man is eating a piece of bread.", "The girl is carrying a baby.", "A man is riding a horse.",
             "Stock markets fell sharply today."]


@pytest.fixture(scope="module")
def server(posy_bin, posy_model):
    s = Server(posy_bin, posy_model, "--device", "cpu", "--max-client-batch", "4")
    yield s.url
    assert s.stop() == 0


def embed(url, texts, **opts):
    r = requests.post(url + "/embed", json={"inputs": texts, **opts}, timeout=60)
    assert r.status_code == 200, r.text
    return np.array(r.json(), dtype=np.float64)


def cosines(v):
    return [float(v[0] @ w / np.linalg.norm(v[0]) / np.linalg.norm(w)) for w in v[1:]]


def test_similarity_is_the_cosine_of_the_embeddings(server):
    want = cosines(embed(server, [SOURCE] + SENTENCES[:3]))
    for route in ("/similarity", "/"):
        r = requests.post(server + route, json={"inputs": {"source_sentence": SOURCE, "sentences": SENTENCES[:3]}},
                          timeout=60)
        assert r.status_code == 200, r.text
        np.testing.assert_allclose(r.json(), want, atol=1e-6)
    assert want[0] > want[1] and want[0] > want[2]   # the bread sentence is the closest


def test_huggingface_hub_sentence_similarity(server):
    got = InferenceClient(model=server).sentence_similarity(SOURCE, other_sentences=SENTENCES[:3])
    np.testing.assert_allclose(got, cosines(embed(server, [SOURCE] + SENTENCES[:3])), atol=1e-6)


def test_parameters(server):
    long = " ".join(["word"] * 400)
    body = {"inputs": {"source_sentence": long, "sentences": ["word word", "other"]}}
    r = requests.post(server + "/similarity", json=body, timeout=60)
    assert r.status_code == 422 and r.json()["error_type"] == "Validation", r.text   # too long, no truncation
    body["parameters"] = {"truncate": True, "truncation_direction": "left"}
    r = requests.post(server + "/similarity", json=body, timeout=60)
    assert r.status_code == 200, r.text
    want = cosines(embed(server, [long, "word word", "other"], truncate=True, truncation_direction="left"))
    np.testing.assert_allclose(r.json(), want, atol=1e-6)
    r = requests.post(server + "/similarity", timeout=60, json={
        "inputs": {"source_sentence": SOURCE, "sentences": SENTENCES[:2]}, "parameters": {"dimensions": 32}})
    assert r.status_code == 200, r.text
    v = embed(server, [SOURCE] + SENTENCES[:2])[:, :32]
    np.testing.assert_allclose(r.json(), cosines(v), atol=1e-6)   # cosine of the truncated vectors


@pytest.mark.parametrize("body,status,needle", [
    ({"inputs": {"source_sentence": SOURCE}}, 422, "inputs.sentences"),
    ({"inputs": {"source_sentence": SOURCE, "sentences": []}}, 422, "empty array"),
    ({"inputs": {"source_sentence": SOURCE, "sentences": SENTENCES}}, 422, "limit of 4"),   # 5 inputs > 4
    ({"inputs": {"source_sentence": 1, "sentences": ["x"]}}, 400, "source_sentence"),
    ({"inputs": ["a", "b"]}, 422, "/similarity takes"),
])
def test_refusals(server, body, status, needle):
    r = requests.post(server + "/similarity", json=body, timeout=60)
    assert r.status_code == status, r.text
    assert needle in r.json()["error"], r.text
