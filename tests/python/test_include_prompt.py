"""Pooling include_prompt false in `posy embed`: prompt tokens ([CLS] + the
prompt, as sentence-transformers' prompt_length counts them) are left out of
mean pooling.  Reference vectors: tests/gen/gen_include_prompt_fixtures.py
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
