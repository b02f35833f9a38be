"""Sequence classifiers on POST /predict (TEI's route) and POST /classify
(vLLM's), against transformers.

tests/fixtures/classify/ (tests/gen/gen_classify_fixtures.py) holds three
tiny random classifiers -- BertForSequenceClassification with three named
labels, XLMRobertaForSequenceClassification with four labels and
problem_type multi_label_classification, DistilBertForSequenceClassification
with transformers' default two labels (no id2label in its config.json),
and three decoders' GenericForSequenceClassification (a `score` head on the
rightmost token that is not pad_token_id): Qwen3 of one label (a
Qwen3-Reranker conversion), Qwen2 of three labels whose tokenizer appends
its pad token (so transformers pools the token before it), Gemma 3 causal
with a sliding window -- and two DeBERTa v2 / v3 classifiers
(DebertaV2ForSequenceClassification: v3's form with log position buckets,
three NLI labels; v2's form with absolute positions, its own position
projections and token types, one label) and two DeBERTa v1 ones
(DebertaForSequenceClassification, model_type deberta: the fused in_proj
with q_bias / v_bias read into v2's form; deberta-base's shape with three
NLI labels and GPT-2 BPE, and one with absolute positions, token types, 16
relative positions and a third pos_att_type name that v1 counts in its
scale) -- with expected.json: texts and (text, text) pairs, their ids as the
tokenizers package encodes them, and the logits transformers computes
(fp32).  posy must give every input the same logits (raw_scores), their
softmax (or sigmoids for the multi-label model, as transformers' pipeline
does), labelled with id2label's names and sorted; through `posy serve` and
through a gateway in front of a worker.  And the refusals: /rerank and the
embedding routes on a classifier, /predict on an embedding model, bad
bodies, an input over the limit unless "truncate", broken id2label.
"""
import json
import math
import os
import shutil
import subprocess

import pytest

from conftest import FIXTURES
from serve_util import Server, serve_each, free_port, post_json as post

MODELS = ["bert3", "xlmr_multi", "distil2", "qwen3_rr", "qwen2_cls", "gemma3_cls", "deberta3", "deberta2_rr", "deberta1",
          "deberta1_rr"]


def model(name):
    return os.path.join(FIXTURES, "classify", name)


def expected(name):
    return json.load(open(os.path.join(model(name), "expected.json")))


def scores(exp, logits):
    if exp["multi_label"] or len(logits) == 1:
        return [1.0 / (1.0 + math.exp(-x)) for x in logits]
    m = max(logits)
    e = [math.exp(x - m) for x in logits]
    return [x / sum(e) for x in e]


def check_prediction(answer, exp, logits, raw):
    """answer: one input's /predict list: every label once, sorted by score, each its (soft)max'd logit."""
    want = logits if raw else scores(exp, logits)
    assert sorted(x["label"] for x in answer) == sorted(exp["labels"]), answer
    got = [x["score"] for x in answer]
    assert got == sorted(got, reverse=True), answer
    for x in answer:
        assert abs(x["score"] - want[exp["labels"].index(x["label"])]) < 2e-5, (x, want)


def inputs(exp):
    """The fixture's inputs as /predict takes them: texts, then pairs as [a, b]."""
    return exp["texts"] + [list(p) for p in exp["pairs"]]


@pytest.mark.parametrize("name", MODELS)
def test_classify_ids(posy_bin, name):
    exp = expected(name)
    r = subprocess.run([posy_bin, "tokenize", "--model", model(name), "--", *exp["texts"]], capture_output=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    got = [json.loads(line)["ids"] for line in r.stdout.decode().splitlines()]
    n = len(exp["texts"])
    assert got == exp["ids"][:n]
    args = [t for p in exp["pairs"] for t in p]
    r = subprocess.run([posy_bin, "tokenize", "--model", model(name), "--pair", "--", *args], capture_output=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    assert [json.loads(line)["ids"] for line in r.stdout.decode().splitlines()] == exp["ids"][n:]


@pytest.fixture(scope="module")
def servers(posy_bin):
    yield from serve_each(posy_bin, {n: model(n) for n in MODELS}, "--device", "auto", "--threads", "1")


@pytest.mark.parametrize("name", MODELS)
def test_predict_batch(servers, name):
    exp, url = expected(name), servers[name]
    for raw in (True, False):
        st, body = post(url, "/predict", {"inputs": inputs(exp), "raw_scores": raw})
        assert st == 200, body
        assert len(body) == len(exp["logits"]), body
        for answer, logits in zip(body, exp["logits"]):
            check_prediction(answer, exp, logits, raw)


@pytest.mark.parametrize("name", MODELS)
def test_predict_single(servers, name):
    """One input alone: a text, or a pair as a list of two strings (TEI's reading), answers one list."""
    exp, url = expected(name), servers[name]
    n = len(exp["texts"])
    st, body = post(url, "/predict", {"inputs": exp["texts"][3]})
    assert st == 200 and isinstance(body[0], dict), body
    check_prediction(body, exp, exp["logits"][3], raw=False)
    st, body = post(url, "/predict", {"inputs": list(exp["pairs"][1]), "raw_scores": True})
    assert st == 200 and isinstance(body[0], dict), body
    check_prediction(body, exp, exp["logits"][n + 1], raw=True)
    st, body = post(url, "/predict", {"inputs": [list(exp["pairs"][0])], "raw_scores": True})
    assert st == 200 and len(body) == 1 and isinstance(body[0], list), body
    check_prediction(body[0], exp, exp["logits"][n], raw=True)


@pytest.mark.parametrize("name", ["qwen3_rr", "deberta2_rr", "deberta1_rr"])
def test_one_label_reranker(servers, name):
    """One-label classifiers on /rerank: Qwen3-Reranker's conversion (Qwen3ForSequenceClassification: the
    query and the text back to back, its tokenizer has no pair template, scored on the last token) and a
    DeBERTa v2 cross-encoder (the pair template with token types, the first token through the pooler)."""
    exp, url = expected(name), servers[name]
    n = len(exp["texts"])
    for k, (q, t) in enumerate(exp["pairs"]):
        st, body = post(url, "/rerank", {"query": q, "texts": [t, exp["texts"][0]], "raw_scores": True})
        assert st == 200, body
        got = {x["index"]: x["score"] for x in body}
        assert abs(got[0] - exp["logits"][n + k][0]) < 2e-5, (body, exp["logits"][n + k])


def test_classify_metrics(servers):
    """/predict and /classify count under their own route in /metrics, as /rerank and /embed_sparse do."""
    import requests
    url = servers["distil2"]
    assert post(url, "/predict", {"inputs": "a"})[0] == 200
    assert post(url, "/classify", {"input": ["a", "b"]})[0] == 200
    assert post(url, "/predict", {"inputs": []})[0] == 422
    text = requests.get(url + "/metrics", timeout=30).text
    for line in ('posy_requests_total{route="/predict",status="200"}', 'posy_requests_total{route="/classify",status="200"}',
                 'posy_requests_total{route="/predict",status="422"}'):
        assert line in text, (line, [x for x in text.splitlines() if "requests_total" in x])


def test_classify_vllm(servers):
    """vLLM's /classify: data[i] has the best label, probs in label order, num_classes; usage counts tokens."""
    exp, url = expected("bert3"), servers["bert3"]
    st, body = post(url, "/classify", {"model": "x", "input": exp["texts"]})
    assert st == 200, body
    assert body["object"] == "list" and body["id"].startswith("classify-") and body["model"] == "bert3", body
    assert body["usage"]["prompt_tokens"] == sum(len(i) for i in exp["ids"][:len(exp["texts"])]), body
    for d, logits in zip(body["data"], exp["logits"]):
        want = scores(exp, logits)
        assert d["num_classes"] == 3 and len(d["probs"]) == 3, d
        assert all(abs(a - b) < 2e-5 for a, b in zip(d["probs"], want)), (d, want)
        assert d["label"] == exp["labels"][want.index(max(want))], d
    assert [d["index"] for d in body["data"]] == list(range(len(exp["texts"])))
    st, body = post(url, "/classify", {"input": exp["texts"][0]})
    assert st == 200 and len(body["data"]) == 1, body
    for bad, word in [({"input": [["a", "b"]]}, "input[0]"), ({"input": 5}, "input"), ({}, "input")]:
        st, err = post(url, "/classify", bad)
        assert st in (400, 422) and word in err["error"]["message"], (bad, err)


def test_classify_info_and_refusals(servers, posy_bin, posy_model):
    import requests
    url = servers["bert3"]
    info = requests.get(url + "/info", timeout=30).json()
    assert info["model_type"] == {"classifier": {"id2label": {"0": "negative", "1": "neutral", "2": "positive"},
                                                 "label2id": {"negative": 0, "neutral": 1, "positive": 2}}}, info
    assert info["dimensions"] == 3, info
    info = requests.get(servers["distil2"] + "/info", timeout=30).json()
    assert info["model_type"]["classifier"]["id2label"] == {"0": "LABEL_0", "1": "LABEL_1"}, info
    st, err = post(url, "/rerank", {"query": "q", "texts": ["a"]})
    assert st == 422 and "3 labels" in err["error"] and "/predict" in err["error"], err
    st, err = post(url, "/embed", {"inputs": "a"})
    assert st == 422 and "classifier" in err["error"], err
    for body, status, word in [({}, 422, "inputs"), ({"inputs": []}, 422, "empty"),
                               ({"inputs": ["a", 3, "c"]}, 400, "inputs[1]"),
                               ({"inputs": ["a", ["b"]]}, 400, "inputs[1]"),
                               ({"inputs": "a", "raw_scores": "yes"}, 400, "raw_scores"),
                               ({"inputs": "a", "truncation_direction": "up"}, 422, "truncation")]:
        st, err = post(url, "/predict", body)
        assert st == status and word in err["error"], (body, st, err)
    long_text = "the capital city of a very large country " * 40
    st, err = post(url, "/predict", {"inputs": ["a", long_text, "b"]})
    assert st == 422 and "256" in err["error"] and "input 1" in err["error"], err
    st, body = post(url, "/predict", {"inputs": ["a", long_text, "b"], "truncate": True})
    assert st == 200 and len(body) == 3, body
    # an embedding model has no /predict or /classify (a reranker's: test_predict_on_a_reranker)
    s = Server(posy_bin, posy_model, "--device", "cpu", "--threads", "1")
    try:
        st, err = post(s.url, "/predict", {"inputs": "a"})
        assert st == 422 and "classifier" in err["error"], err
        st, err = post(s.url, "/classify", {"input": "a"})
        assert st == 422 and "classifier" in err["error"]["message"], err
    finally:
        assert s.stop() == 0


def test_predict_on_a_reranker(posy_bin):
    """A reranker (one label) on /predict: one score, the sigmoid of its logit, as TEI answers."""
    rr = os.path.join(FIXTURES, "rerank", "bert")
    exp = json.load(open(os.path.join(rr, "expected.json")))
    s = Server(posy_bin, rr, "--device", "cpu", "--threads", "1")
    try:
        st, body = post(s.url, "/predict", {"inputs": [exp["query"], exp["texts"][0]]})
        assert st == 200 and len(body) == 1 and body[0]["label"] == "LABEL_0", body
        assert abs(body[0]["score"] - 1.0 / (1.0 + math.exp(-exp["logits"][0]))) < 2e-5, body
    finally:
        assert s.stop() == 0


def refused_at_start(posy_bin, tmp_path, name, change, word):
    """A copy of fixture `name` with its config.json updated by `change` stops `posy serve` at start-up with an
    error (not a crash) that says `word`."""
    d = tmp_path / name
    shutil.copytree(model(name), d)
    cfg = json.load(open(d / "config.json"))
    cfg.update(change)
    json.dump(cfg, open(d / "config.json", "w"))
    r = subprocess.run([posy_bin, "serve", "--model", str(d), "--device", "cpu", "--host", "127.0.0.1", "--port",
                        str(free_port())], capture_output=True, timeout=120)
    err = r.stderr.decode(errors="replace") + r.stdout.decode(errors="replace")
    assert 0 < r.returncode < 128 and word in err, err


@pytest.mark.parametrize("change,word", [({"conv_kernel_size": 3}, "convolution layer"),
                                         ({"embedding_size": 32}, "embedding_size 32"),
                                         ({"pooler_hidden_act": "swishy"}, "pooler_hidden_act 'swishy'"),
                                         ({"pos_att_type": 7}, "pos_att_type is not a list"),
                                         ({"position_buckets": 8}, "rel_embeddings.weight"),
                                         ({"position_buckets": 600}, "position_buckets 600 needs")])
def test_deberta_refusals(posy_bin, tmp_path, change, word):
    """DeBERTa forms posy does not run (deberta-v2-xlarge's convolution, an embedding projection, an unknown
    pooler activation) or configs that do not match the weights: a start-up error naming it."""
    refused_at_start(posy_bin, tmp_path, "deberta3", change, word)


@pytest.mark.parametrize("change,word", [({"talking_head": True}, "talking_head"),
                                         ({"max_relative_positions": 8}, "rel_embeddings.weight has shape")])
def test_deberta_v1_refusals(posy_bin, tmp_path, change, word):
    """DeBERTa v1: its talking heads are refused by name; a config that does not match the weights (the
    relative table's size) names the tensor."""
    refused_at_start(posy_bin, tmp_path, "deberta1_rr", change, word)


def test_deberta_v1_ignores_v2_keys(posy_bin, tmp_path):
    """DeBERTa v1 reads none of v2's keys (as transformers' DebertaConfig): a v1 config that carries them,
    even with values v2 would refuse, still loads and gives the same logits."""
    exp = expected("deberta1_rr")
    d = tmp_path / "v1"
    shutil.copytree(model("deberta1_rr"), d)
    cfg = json.load(open(d / "config.json"))
    cfg.update({"position_buckets": "many", "share_att_key": True, "norm_rel_ebd": "layer_norm",
                "conv_kernel_size": 3})
    json.dump(cfg, open(d / "config.json", "w"))
    s = Server(posy_bin, str(d), "--device", "cpu", "--threads", "1")
    try:
        st, body = post(s.url, "/predict", {"inputs": exp["texts"][2], "raw_scores": True})
        assert st == 200, body
        assert abs(body[0]["score"] - exp["logits"][2][0]) < 2e-5, (body, exp["logits"][2])
    finally:
        assert s.stop() == 0


def test_deberta_pos_att_type_string(posy_bin, tmp_path):
    """pos_att_type as transformers also reads it: a string of names joined by '|', in any case, spaced;
    the same logits as the list form (and "c2p" alone changes them: the term is read, not assumed)."""
    exp = expected("deberta2_rr")
    for form, same in ((" C2P | p2c ", True), ("c2p", False)):
        d = tmp_path / form.strip().replace(" ", "").replace("|", "_")
        shutil.copytree(model("deberta2_rr"), d)
        cfg = json.load(open(d / "config.json"))
        cfg["pos_att_type"] = form
        json.dump(cfg, open(d / "config.json", "w"))
        s = Server(posy_bin, str(d), "--device", "cpu", "--threads", "1")
        try:
            st, body = post(s.url, "/predict", {"inputs": exp["texts"][3], "raw_scores": True})
            assert st == 200, body
            got, want = body[0]["score"], exp["logits"][3][0]
            assert (abs(got - want) < 2e-5) == same, (form, got, want)
        finally:
            assert s.stop() == 0


def test_classify_embed_cli_refuses(posy_bin):
    r = subprocess.run([posy_bin, "embed", "--model", model("bert3"), "x"], capture_output=True, timeout=120)
    assert r.returncode == 2 and "/predict" in r.stderr.decode(), r.stderr.decode()


@pytest.mark.parametrize("id2label,word", [({"0": "a", "2": "b"}, "id2label key '2'"),
                                           ({"0": "a", "x": "b"}, "id2label key 'x'"),
                                           ({"0": "a", "1": 7}, "is not a string"),
                                           ("abc", "id2label is not an object")])
def test_broken_id2label(posy_bin, tmp_path, id2label, word):
    """A config.json whose labels cannot be read: a start-up error that says which, never a crash."""
    d = tmp_path / "bad"
    shutil.copytree(model("bert3"), d)
    cfg = json.load(open(d / "config.json"))
    cfg["id2label"] = id2label
    json.dump(cfg, open(d / "config.json", "w"))
    r = subprocess.run([posy_bin, "serve", "--model", str(d), "--device", "cpu", "--host", "127.0.0.1", "--port",
                        str(free_port())], capture_output=True, timeout=120)
    err = r.stderr.decode(errors="replace") + r.stdout.decode(errors="replace")
    assert 0 < r.returncode < 128 and word in err, err


@pytest.mark.parametrize("name", ["bert3", "deberta2_rr"])
def test_classify_gateway_and_worker(posy_bin, name):
    """A gateway in front of a worker: the logits of each sequence cross gRPC, pairs with their token types."""
    from grpc_util import http_post, start_gateway, start_worker
    exp = expected(name)
    procs = []
    try:
        procs.append(start_worker(model=model(name)))
        procs.append(start_gateway([procs[0].addr], model=model(name)))
        st, body = http_post(procs[1].port, "/predict", {"inputs": inputs(exp), "raw_scores": True})
        assert st == 200, body
        for answer, logits in zip(body, exp["logits"]):
            check_prediction(answer, exp, logits, raw=True)
    finally:
        for p in procs:
            p.stop()


# ---- the original Qwen3-Reranker: a ...ForCausalLM scored by two tokens' LM logits (classifier_from_token) ----

def orig_model():
    return os.path.join(FIXTURES, "classify", "qwen3_orig")


def test_reranker_from_tokens(posy_bin, tmp_path):
    """tests/fixtures/classify/qwen3_orig (tests/gen/gen_reranker_orig_fixture.py): config.json keeps
    Qwen3ForCausalLM and adds vLLM's hf_overrides keys; /rerank's logit is the true token's LM logit minus the
    false one's at the last position (transformers fp32), its score their 2-way softmax; with method
    no_post_processing the head is one label a token, named by it, on /predict."""
    exp = json.load(open(os.path.join(orig_model(), "expected.json")))
    s = Server(posy_bin, orig_model(), "--device", "cpu", "--threads", "1")
    try:
        for (q, d), ids, lg in zip(exp["pairs"], exp["ids"], exp["token_logits"]):
            want = lg[1] - lg[0]
            st, body = post(s.url, "/rerank", {"query": q, "texts": [d], "raw_scores": True})
            assert st == 200 and abs(body[0]["score"] - want) <= 2e-5 * max(1.0, abs(want)), (body, want)
            st, body = post(s.url, "/rerank", {"query": q, "texts": [d]})
            soft = math.exp(lg[1]) / (math.exp(lg[0]) + math.exp(lg[1]))
            assert st == 200 and abs(body[0]["score"] - soft) <= 1e-5, (body, soft)
        st, body = post(s.url, "/embed", {"inputs": "a"})
        assert st == 422 and "reranker" in body["error"], body
    finally:
        assert s.stop() == 0
    d = tmp_path / "per_token"
    shutil.copytree(orig_model(), d)
    cfg = json.load(open(d / "config.json"))
    cfg.pop("is_original_qwen3_reranker")
    cfg["method"] = "no_post_processing"
    json.dump(cfg, open(d / "config.json", "w"))
    s = Server(posy_bin, str(d), "--device", "cpu", "--threads", "1")
    try:
        (q, t), lg = exp["pairs"][0], exp["token_logits"][0]
        st, body = post(s.url, "/predict", {"inputs": [[q, t]], "raw_scores": True})
        assert st == 200, body
        got = {x["label"]: x["score"] for x in body[0]}
        assert set(got) == set(exp["tokens"]), got
        for tok, v in zip(exp["tokens"], lg):
            assert abs(got[tok] - v) <= 2e-5 * max(1.0, abs(v)), (tok, got, lg)
    finally:
        assert s.stop() == 0

    def refused(name, edit, word, src=orig_model()):
        b = tmp_path / name
        shutil.copytree(src, b)
        c = json.load(open(b / "config.json"))
        edit(c)
        json.dump(c, open(b / "config.json", "w"))
        r = subprocess.run([posy_bin, "serve", "--model", str(b), "--device", "cpu", "--host", "127.0.0.1", "--port",
                            str(free_port())], capture_output=True, timeout=120)
        out = r.stderr.decode(errors="replace") + r.stdout.decode(errors="replace")
        assert 0 < r.returncode < 128 and word in out, (name, out)

    refused("unknown_token", lambda c: c.update(classifier_from_token=["Ġno", "zzqq"]), "zzqq")
    refused("three_way", lambda c: c.update(classifier_from_token=["Ġno", "Ġtrue", "Ġis"]), "two classifier_from_token")
    refused("method", lambda c: c.update(method="from_3_way"), "method")
    refused("encoder", lambda c: c.update(classifier_from_token=["a", "b"]), "applies to decoders",
            src=model("bert3"))


def test_reranker_hf_overrides(posy_bin, tmp_path):
    """The same checkpoint with config.json as Qwen3-Reranker ships it (no classifier keys) and vLLM's
    --hf-overrides on the command line: the same logits, through posy serve and through a gateway in front of a
    worker (both given the overrides: they are part of the model's fingerprint)."""
    from grpc_util import http_post, start_gateway, start_worker
    exp = json.load(open(os.path.join(orig_model(), "expected.json")))
    d = tmp_path / "as_shipped"
    shutil.copytree(orig_model(), d)
    cfg = json.load(open(d / "config.json"))
    over = {k: cfg.pop(k) for k in ("classifier_from_token", "is_original_qwen3_reranker")}
    over["architectures"] = ["Qwen3ForSequenceClassification"]   # as vLLM's override says it
    json.dump(cfg, open(d / "config.json", "w"))
    flag = ["--hf-overrides", json.dumps(over)]
    (q, t), lg = exp["pairs"][0], exp["token_logits"][0]
    s = Server(posy_bin, str(d), "--device", "cpu", "--threads", "1", *flag)
    try:
        st, body = post(s.url, "/rerank", {"query": q, "texts": [t], "raw_scores": True})
        assert st == 200 and abs(body[0]["score"] - (lg[1] - lg[0])) <= 2e-5 * abs(lg[1] - lg[0]), body
    finally:
        assert s.stop() == 0
    procs = []
    try:
        procs.append(start_worker(None, *flag, model=str(d)))
        procs.append(start_gateway([procs[0].addr], *flag, model=str(d)))
        st, body = http_post(procs[1].port, "/rerank", {"query": q, "texts": [t], "raw_scores": True})
        assert st == 200 and abs(body[0]["score"] - (lg[1] - lg[0])) <= 2e-5 * abs(lg[1] - lg[0]), body
    finally:
        for p in procs:
            p.stop()
    r = subprocess.run([posy_bin, "serve", "--model", str(d), "--hf-overrides", "[1, 2]", "--port", str(free_port())],
                       capture_output=True, timeout=60)
    assert r.returncode != 0 and b"JSON object" in r.stderr + r.stdout, r.stderr
