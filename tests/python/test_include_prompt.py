"""Pooling include_prompt false in `posy embed` and `posy serve`: prompt
tokens ([CLS] + the prompt, as sentence-transformers' prompt_length counts
them) are left out of mean pooling; the server's vectors equal the CLI's
(also for the model's default prompt, token-id inputs, concurrent mixed
requests and "chunked" windows).  Reference vectors: tests/gen/gen_include_prompt_fixtures.py
(sentence-transformers); the fixture also holds the vectors with the prompt
pooled, which posy must NOT produce here (so the test can fail) and must
produce when include_prompt is true.
"""
import json
import os

import numpy as np
import pytest

from conftest import FIXTURES

FIX = json.load(open(os.path.join(FIXTURES, "include_prompt", "expected.json")))


def make_dir(tmp_path_factory, posy_model, include_prompt):
    d = tmp_path_factory.mktemp("incl_prompt")
    for name in os.listdir(posy_model):
        if name not in ("1_Pooling", "config_sentence_transformers.json"):
            os.symlink(os.path.abspath(os.path.join(posy_model, name)), d / name)
    (d / "1_Pooling").mkdir()
    (d / "1_Pooling" / "config.json").write_text(json.dumps({**FIX["pooling"], "include_prompt": include_prompt}))
    (d / "config_sentence_transformers.json").write_text(json.dumps(FIX["st_config"]))
    return str(d)


@pytest.fixture(scope="module")
def excl_dir(tmp_path_factory, posy_model):
    return make_dir(tmp_path_factory, posy_model, False)


@pytest.fixture(scope="module")
def incl_dir(tmp_path_factory, posy_model):
    return make_dir(tmp_path_factory, posy_model, True)


def min_cos(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(((a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)).min())


CASES = [pytest.param(c, id=str(c["prompt_name"])) for c in FIX["cases"]]


@pytest.mark.parametrize("case", CASES)
def test_prompt_name_excluded(posy, excl_dir, case):
    args = ["--prompt-name", case["prompt_name"]] if case["prompt_name"] else []
    v = posy.embed_jsonl(*args, "--", *FIX["texts"], model=excl_dir)
    assert min_cos(v, case["embeddings"]) >= 0.99999
    if case["prompt_name"]:
        assert min_cos(v, case["embeddings_prompt_pooled"]) < 0.999


def test_prompt_flag_excluded(posy, excl_dir):
    case = next(c for c in FIX["cases"] if c["prompt_name"] == "query")
    v = posy.embed_jsonl("--prompt", FIX["st_config"]["prompts"]["query"], "--", *FIX["texts"], model=excl_dir)
    assert min_cos(v, case["embeddings"]) >= 0.99999


@pytest.mark.parametrize("case", CASES)
def test_include_prompt_true_pools_prompt(posy, incl_dir, case):
    args = ["--prompt-name", case["prompt_name"]] if case["prompt_name"] else []
    v = posy.embed_jsonl(*args, "--", *FIX["texts"], model=incl_dir)
    assert min_cos(v, case["embeddings_prompt_pooled"]) >= 0.99999


def test_text_no_longer_than_prompt_is_refused(posy, excl_dir):
    """With --max-seq-length-style truncation the prompt can fill the sequence:
    a clear error, not a crash or a NaN vector."""
    long_prompt = "word " * 300
    r = posy.run("embed", "--model", excl_dir, "--device", "cpu", "--prompt", long_prompt, "--", "x")
    assert r.returncode != 0 and r.returncode > 0
    assert b"prompt tokens" in r.stderr, r.stderr


# ---- posy serve: the same skip on /v1/embeddings and /embed ----------------
#
# One server on a copy whose default prompt is "query" and which has two more
# prompts: "none" (empty: nothing to skip) and "long" (longer than the
# model's 256 tokens, for the refusals).  The CPU engine is batch-invariant,
# so the server must give `posy embed`'s floats exactly (POSY_TEST_ATOL
# relaxes that for an engine that is not), and sentence-transformers'
# vectors to cosine 0.99999.

from serve_util import Server, post_json as post  # noqa: E402

ATOL = float(os.environ.get("POSY_TEST_ATOL", "0"))
CASE = {c["prompt_name"]: c for c in FIX["cases"]}
WORDS = "the cat sat on a mat and dog ran far away".split()   # one WordPiece token each


@pytest.fixture(scope="module")
def dflt_dir(tmp_path_factory, posy_model):
    d = make_dir(tmp_path_factory, posy_model, False)
    prompts = {**FIX["st_config"]["prompts"], "none": "", "long": "word " * 300}
    with open(os.path.join(d, "config_sentence_transformers.json"), "w") as f:
        json.dump({"prompts": prompts, "default_prompt_name": "query"}, f)
    return d


@pytest.fixture(scope="module")
def server(posy_bin, dflt_dir):
    s = Server(posy_bin, dflt_dir, "--device", "cpu", "--threads", "2")
    yield s
    assert s.stop() == 0, s.output()


@pytest.fixture(scope="module")
def cli(posy, dflt_dir):
    """prompt name -> `posy embed` vectors of FIX["texts"] on the same directory."""
    out = {"query": posy.embed_jsonl("--", *FIX["texts"], model=dflt_dir)}   # the default prompt
    for name in ("instruct", "none"):
        out[name] = posy.embed_jsonl("--prompt-name", name, "--", *FIX["texts"], model=dflt_dir)
    return out


def serve_vectors(server, name, openai):
    extra = {"prompt_name": name} if name != "query" else {}   # query: the model's default
    if openai:
        st, body = post(server.url, "/v1/embeddings", {"input": FIX["texts"], "model": "m", **extra})
        assert st == 200, body
        return np.array([d["embedding"] for d in body["data"]], dtype=np.float32)
    st, body = post(server.url, "/embed", {"inputs": FIX["texts"], **extra})
    assert st == 200, body
    return np.array(body, dtype=np.float32)


@pytest.mark.parametrize("openai", [False, True], ids=["embed", "openai"])
@pytest.mark.parametrize("name", ["query", "instruct", "none"])
def test_serve_matches_cli_and_st(server, cli, name, openai):
    got = serve_vectors(server, name, openai)
    np.testing.assert_allclose(got, cli[name], atol=ATOL, rtol=0)
    case = CASE[None if name == "none" else name]
    assert min_cos(got, case["embeddings"]) >= 0.99999
    if name != "none":
        assert min_cos(got, case["embeddings_prompt_pooled"]) < 0.999


@pytest.fixture(scope="module")
def text_ids(dflt_dir):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(dflt_dir, "tokenizer.json"))
    tok.no_padding()
    return [tok.encode(t).ids for t in FIX["texts"]]


def test_serve_token_ids_get_no_skip(server, cli, text_ids):
    """Token-id inputs get no prompt, so nothing is skipped: [CLS] is pooled."""
    st, body = post(server.url, "/embed", {"inputs": text_ids})
    assert st == 200, body
    np.testing.assert_allclose(np.array(body, dtype=np.float32), cli["none"], atol=ATOL, rtol=0)


def test_serve_concurrent_requests_keep_their_skips(server, cli, text_ids):
    """Requests with and without a prompt (and of token ids) arriving
    together share the scheduler's batches; each sequence keeps its skip."""
    from concurrent.futures import ThreadPoolExecutor

    def one(n):
        if n != "ids":
            return serve_vectors(server, n, False)
        st, body = post(server.url, "/embed", {"inputs": text_ids})
        assert st == 200, body
        return np.array(body, dtype=np.float32)
    names = ["query", "none", "ids", "instruct", "none", "query", "ids", "instruct", "none", "query"]
    with ThreadPoolExecutor(len(names)) as ex:
        got = list(ex.map(one, names))
    for n, v in zip(names, got):
        np.testing.assert_allclose(v, cli["none" if n == "ids" else n], atol=ATOL, rtol=0)


def test_serve_prompt_longer_than_the_model_is_refused(server):
    st, body = post(server.url, "/embed", {"inputs": ["x"], "prompt_name": "long", "truncate": True})
    assert st == 422 and "prompt tokens" in json.dumps(body), body
    st, body = post(server.url, "/embed", {"inputs": ["x " * 400], "prompt_name": "long", "chunked": True})
    assert st == 422 and "prompt tokens" in json.dumps(body), body
    assert post(server.url, "/embed", {"inputs": ["x"]})[0] == 200   # still serving


def test_serve_chunked_skips_the_prompt_in_the_first_window(server, posy, dflt_dir):
    """A long input under "chunked": window 0 is [CLS] prompt text[:W-p] [SEP]
    with the prompt left out, window 1 [CLS] rest [SEP] pooled whole; the
    result is their mean weighted by the tokens each pooled (docs/DECODERS.md).
    Words of one token each make the windows plain texts of their own."""
    words = [WORDS[i % len(WORDS)] for i in range(300)]
    skip, W = CASE["query"]["prompt_length"], 256 - 2
    first = W - (skip - 1)                  # text tokens in window 0
    st, body = post(server.url, "/embed", {"inputs": [" ".join(words)], "chunked": True})
    assert st == 200, body
    got = np.array(body[0], dtype=np.float64)
    st, w0 = post(server.url, "/embed", {"inputs": [" ".join(words[:first])]})
    assert st == 200, w0
    np.testing.assert_allclose(np.array(w0, np.float32), posy.embed_jsonl("--", " ".join(words[:first]), model=dflt_dir),
                               atol=ATOL, rtol=0)
    st, w1 = post(server.url, "/embed", {"inputs": [" ".join(words[first:])], "prompt_name": "none"})
    assert st == 200, w1
    n0, n1 = 256 - skip, len(words) - first + 2
    want = n0 * np.array(w0[0], np.float64) + n1 * np.array(w1[0], np.float64)
    want /= np.linalg.norm(want)
    np.testing.assert_allclose(got, want, atol=1e-6, rtol=0)
