"""SPLADE sparse encoders on POST /embed_sparse (TEI's route), against
sentence-transformers.

tests/fixtures/splade/ (tests/gen/gen_splade_fixtures.py) holds three tiny
random SparseEncoders -- BertForMaskedLM with max pooling, DistilBertForMaskedLM
with sum pooling and log1p_relu (opensearch's variant), XLMRobertaForMaskedLM --
with expected.json: texts, their ids, and the sparse vectors
sentence-transformers computes (fp32) as [index, value] pairs.  posy must
give the same non-zero entries with the same values, in index order,
through `posy serve` and through a gateway in front of a worker.  And the
refusals: the dense routes on a sparse model, /embed_sparse on a dense
one, options that do not apply, broken SpladePooling configs.  (The GPU
path: tests/cuda/e2e_splade.py and dev/cuda/lab_splade.cu.)
"""
import json
import os
import shutil
import subprocess

import pytest

from conftest import FIXTURES
from serve_util import Server, serve_each, free_port, post_json as post

MODELS = ["bert", "distil_sum", "xlmr"]


def model(name):
    return os.path.join(FIXTURES, "splade", name)


def expected(name):
    return json.load(open(os.path.join(model(name), "expected.json")))


def check_sparse(got, want):
    """got: one input's /embed_sparse list; want: [[index, value], ...] from sentence-transformers."""
    assert [x["index"] for x in got] == [i for i, _ in want], (len(got), len(want))
    for x, (_, v) in zip(got, want):
        assert abs(x["value"] - v) <= 2e-5 * max(1.0, abs(v)), (x, v)


@pytest.mark.parametrize("name", MODELS)
def test_splade_ids(posy_bin, name):
    """The ids the saved folder's tokenizer gives (transformers re-saves BERT's with its CJK splitting)."""
    exp = expected(name)
    r = subprocess.run([posy_bin, "tokenize", "--model", model(name), "--", *exp["texts"]], capture_output=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    assert [json.loads(line)["ids"] for line in r.stdout.decode().splitlines()] == exp["ids"]


def test_splade_embed_cli(posy_bin, tmp_path):
    """posy embed writes a SPLADE model's vectors as their non-zero entries (JSON lines), dense in .npy."""
    import numpy as np
    exp = expected("distil_sum")
    r = subprocess.run([posy_bin, "embed", "--model", model("distil_sum"), "--device", "cpu", "--", *exp["texts"]],
                       capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    lines = [json.loads(line) for line in r.stdout.decode().splitlines()]
    assert len(lines) == len(exp["texts"])
    for got, want in zip(lines, exp["vectors"]):
        check_sparse(got, want)
    npy = tmp_path / "v.npy"
    r = subprocess.run([posy_bin, "embed", "--model", model("distil_sum"), "--device", "cpu", "--output", str(npy),
                        "--", *exp["texts"]], capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    v = np.load(npy)
    assert v.shape == (len(exp["texts"]), exp["vocab"])
    assert [int(i) for i in np.nonzero(v[0])[0]] == [i for i, _ in exp["vectors"][0]]


@pytest.fixture(scope="module")
def servers(posy_bin):
    yield from serve_each(posy_bin, {n: model(n) for n in MODELS}, "--device", "auto", "--threads", "1")


@pytest.mark.parametrize("name", MODELS)
def test_embed_sparse(servers, name):
    exp, url = expected(name), servers[name]
    st, body = post(url, "/embed_sparse", {"inputs": exp["texts"]})
    assert st == 200, body
    assert len(body) == len(exp["texts"])
    for got, want in zip(body, exp["vectors"]):
        check_sparse(got, want)
    st, body = post(url, "/embed_sparse", {"inputs": exp["texts"][3]})   # one text alone: the same vector
    assert st == 200 and len(body) == 1, body
    check_sparse(body[0], exp["vectors"][3])


def test_splade_info_and_refusals(servers, posy_bin, posy_model):
    import requests
    url = servers["bert"]
    info = requests.get(url + "/info", timeout=30).json()
    assert info["model_type"] == {"embedding": {"pooling": "splade"}} and info["dimensions"] == 2500, info
    st, err = post(url, "/embed", {"inputs": "a"})
    assert st == 422 and "/embed_sparse" in err["error"], err
    st, err = post(url, "/v1/embeddings", {"input": "a"})
    assert st == 422 and "/embed_sparse" in err["error"]["message"], err
    for body, word in [({"inputs": "a", "dimensions": 8}, "dimensions"), ({"inputs": "a", "chunked": True}, "chunked"),
                       ({"inputs": {"source_sentence": "a", "sentences": ["b"]}}, "texts")]:
        st, err = post(url, "/embed_sparse", body)
        assert st == 422 and word in err["error"], (body, err)
    long_text = "the capital city of a very large country " * 40
    st, err = post(url, "/embed_sparse", {"inputs": ["a", long_text]})
    assert st == 422 and "input 1" in err["error"], err
    st, body = post(url, "/embed_sparse", {"inputs": ["a", long_text], "truncate": True})
    assert st == 200 and len(body) == 2, body
    s = Server(posy_bin, posy_model, "--device", "cpu", "--threads", "1")
    try:
        st, err = post(s.url, "/embed_sparse", {"inputs": "a"})
        assert st == 422 and "SPLADE" in err["error"], err
    finally:
        assert s.stop() == 0


def test_splade_request_cap(posy_bin):
    """A request's vocabulary-wide vectors are capped at 64 MiB: 6710 inputs of this 2500-token vocabulary."""
    s = Server(posy_bin, model("bert"), "--device", "cpu", "--threads", "1", "--max-client-batch", "8000")
    try:
        st, err = post(s.url, "/embed_sparse", {"inputs": ["a"] * 6711})
        assert st == 422 and "at most 6710" in err["error"], err
        st, body = post(s.url, "/embed_sparse", {"inputs": ["a"] * 20})
        assert st == 200 and len(body) == 20, body
    finally:
        assert s.stop() == 0


@pytest.mark.parametrize("change,word", [({"pooling_strategy": "mean"}, "pooling_strategy 'mean'"),
                                         ({"activation_function": "gelu"}, "activation_function 'gelu'"),
                                         ({"embedding_dimension": 30522}, "differs from the vocabulary's 2500")])
def test_splade_bad_pooling(posy_bin, tmp_path, change, word):
    d = tmp_path / "bad"
    shutil.copytree(model("bert"), d)
    p = d / "1_SpladePooling" / "config.json"
    cfg = json.load(open(p))
    cfg.update(change)
    json.dump(cfg, open(p, "w"))
    r = subprocess.run([posy_bin, "serve", "--model", str(d), "--device", "cpu", "--host", "127.0.0.1", "--port",
                        str(free_port())], capture_output=True, timeout=120)
    err = r.stderr.decode(errors="replace") + r.stdout.decode(errors="replace")
    assert 0 < r.returncode < 128 and word in err, err


def test_splade_on_a_classifier_refused(posy_bin, tmp_path):
    """SpladePooling in modules.json over a config.json that names a classification head: refused by name
    (found by fuzz_config: the vector's size was the head's labels, not the vocabulary's)."""
    d = tmp_path / "bad"
    shutil.copytree(model("bert"), d)
    cfg = json.load(open(d / "config.json"))
    cfg["architectures"] = ["BertForSequenceClassification"]
    json.dump(cfg, open(d / "config.json", "w"))
    r = subprocess.run([posy_bin, "serve", "--model", str(d), "--device", "cpu", "--host", "127.0.0.1", "--port",
                        str(free_port())], capture_output=True, timeout=120)
    err = r.stderr.decode(errors="replace") + r.stdout.decode(errors="replace")
    assert 0 < r.returncode < 128 and "a SPLADE model is a masked-LM" in err, err


def test_splade_gateway_and_worker(posy_bin):
    """A gateway in front of a worker: the vocabulary-wide vectors cross gRPC."""
    from grpc_util import http_post, start_gateway, start_worker
    exp = expected("xlmr")
    procs = []
    try:
        procs.append(start_worker(model=model("xlmr")))
        procs.append(start_gateway([procs[0].addr], model=model("xlmr")))
        st, body = http_post(procs[1].port, "/embed_sparse", {"inputs": exp["texts"]})
        assert st == 200, body
        for got, want in zip(body, exp["vectors"]):
            check_sparse(got, want)
    finally:
        for p in procs:
            p.stop()


# ---- inference-free SPLADE: a Router of a query route and a document route ----

ROUTER = os.path.join(FIXTURES, "splade_router", "ifs")


def router_expected():
    return json.load(open(os.path.join(ROUTER, "expected.json")))


@pytest.fixture(scope="module")
def router_server(posy_bin):
    s = Server(posy_bin, ROUTER, "--device", "cpu", "--threads", "1")
    yield s.url
    assert s.stop() == 0


def test_router_routes(router_server):
    """tests/fixtures/splade_router/ifs (tests/gen/gen_splade_router_fixture.py): "task": "query" is
    encode_query's vector (a weight per distinct token, no transformer), "document" encode_document's, and
    no task the default route's (document), all against sentence-transformers."""
    exp, url = router_expected(), router_server
    for task, key in (("query", "query"), ("document", "document"), (None, "default")):
        body = {"inputs": exp["texts"], **({"task": task} if task else {})}
        st, got = post(url, "/embed_sparse", body)
        assert st == 200, (task, got)
        assert len(got) == len(exp["texts"])
        for g, w in zip(got, exp[key]):
            check_sparse(g, w)
    assert exp["query"] != exp["document"]   # the routes differ, so the test tells them apart
    st, got = post(url, "/embed_sparse", {"inputs": exp["query_ids"], "task": "query"})   # token ids in
    assert st == 200, got
    for g, w in zip(got, exp["query"]):
        check_sparse(g, w)
    st, toks = post(url, "/tokenize", {"inputs": exp["texts"], "add_special_tokens": False})
    assert st == 200 and [[t["id"] for t in s] for s in toks] == exp["query_ids"], toks


def test_router_embed_cli(posy_bin, tmp_path):
    """posy embed --task query / document, and without --task the default route (document)."""
    exp = router_expected()
    for args, key in ((["--task", "query"], "query"), (["--task", "document"], "document"), ([], "default")):
        r = subprocess.run([posy_bin, "embed", "--model", ROUTER, "--device", "cpu", *args, "--", *exp["texts"]],
                           capture_output=True, timeout=120)
        assert r.returncode == 0, r.stderr.decode(errors="replace")
        lines = [json.loads(line) for line in r.stdout.decode().splitlines()]
        assert len(lines) == len(exp["texts"])
        for got, want in zip(lines, exp[key]):
            check_sparse(got, want)
    d = tmp_path / "nodefault"
    shutil.copytree(ROUTER, d)
    cfg = json.load(open(d / "router_config.json"))
    cfg["parameters"]["default_route"] = None
    json.dump(cfg, open(d / "router_config.json", "w"))
    r = subprocess.run([posy_bin, "embed", "--model", str(d), "--device", "cpu", "--", "a"], capture_output=True,
                       timeout=120)
    assert r.returncode == 2 and b"--task" in r.stderr, r.stderr


def test_router_refusals(router_server, posy_bin, tmp_path):
    url = router_server
    st, err = post(url, "/embed_sparse", {"inputs": "a", "task": "passage"})
    assert st == 422 and "task" in err["error"], err
    st, err = post(url, "/embed_sparse", {"inputs": "a", "task": 3})
    assert st == 400, err
    st, err = post(url, "/embed", {"inputs": "a"})
    assert st == 422 and "/embed_sparse" in err["error"], err
    # no default route: a request must say which
    d = tmp_path / "nodefault"
    shutil.copytree(ROUTER, d)
    cfg = json.load(open(d / "router_config.json"))
    cfg["parameters"]["default_route"] = None
    json.dump(cfg, open(d / "router_config.json", "w"))
    s = Server(posy_bin, str(d), "--device", "cpu", "--threads", "1")
    try:
        st, err = post(s.url, "/embed_sparse", {"inputs": "a"})
        assert st == 422 and "default_route" in err["error"], err
        st, got = post(s.url, "/embed_sparse", {"inputs": "a", "task": "query"})
        assert st == 200, got
    finally:
        assert s.stop() == 0
    # shapes posy does not run are refused at start, by name
    def broken(name, edit, word):
        b = tmp_path / name
        shutil.copytree(ROUTER, b)
        edit(b)
        r = subprocess.run([posy_bin, "serve", "--model", str(b), "--device", "cpu", "--host", "127.0.0.1", "--port",
                            str(free_port())], capture_output=True, timeout=120)
        out = r.stderr.decode(errors="replace") + r.stdout.decode(errors="replace")
        assert 0 < r.returncode < 128 and word in out, (name, out)

    def edit_json(path, fn):
        v = json.load(open(path))
        fn(v)
        json.dump(v, open(path, "w"))

    broken("mapped", lambda b: edit_json(b / "router_config.json",
                                         lambda c: c["parameters"].update(route_mappings={"passage": "document"})),
           "route_mappings")
    broken("three", lambda b: edit_json(b / "router_config.json", lambda c: c["structure"].update(other=[])),
           "exactly two routes")
    broken("dense_query", lambda b: edit_json(b / "router_config.json", lambda c: c["types"].update(
        query_0_SparseStaticEmbedding="sentence_transformers.models.Dense")), "SparseStaticEmbedding")
    broken("escape", lambda b: edit_json(b / "router_config.json", lambda c: (
        c["types"].update({"../x": c["types"]["document_1_SpladePooling"]}),
        c["structure"].update(document=["document_0_MLMTransformer", "../x"]))), "leaves the model directory")

    def other_tokenizer(b):
        t = json.load(open(b / "query_0_SparseStaticEmbedding" / "tokenizer.json"))
        t["model"]["vocab"]["zzzz"] = len(t["model"]["vocab"])
        json.dump(t, open(b / "query_0_SparseStaticEmbedding" / "tokenizer.json", "w"))
    broken("two_tokenizers", other_tokenizer, "tokenizer.json differs")

    def short_weights(b):   # a safetensors file of 10 weights, written by hand (no safetensors package in CI)
        import struct
        head = json.dumps({"weight": {"dtype": "F32", "shape": [10], "data_offsets": [0, 40]}}).encode()
        with open(b / "query_0_SparseStaticEmbedding" / "model.safetensors", "wb") as f:
            f.write(struct.pack("<Q", len(head)) + head + struct.pack("<10f", *([1.0] * 10)))
    broken("short", short_weights, "weight")


def test_router_gateway_and_worker(posy_bin):
    """The document route runs on the worker; the query route in the gateway, from its own copy of the weights."""
    from grpc_util import http_post, start_gateway, start_worker
    exp = router_expected()
    procs = []
    try:
        procs.append(start_worker(model=ROUTER))
        procs.append(start_gateway([procs[0].addr], model=ROUTER))
        for task in ("query", "document"):
            st, body = http_post(procs[1].port, "/embed_sparse", {"inputs": exp["texts"], "task": task})
            assert st == 200, body
            for got, want in zip(body, exp[task]):
                check_sparse(got, want)
    finally:
        for p in procs:
            p.stop()
