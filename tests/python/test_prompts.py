"""Prompts (config_sentence_transformers.json) against sentence-transformers.

tests/fixtures/prompts/prompts.json (tests/gen/gen_prompt_fixtures.py)
records, for fixed texts and each prompt case (no prompt_name, so the
model's default_prompt_name applies; each named prompt; an empty prompt,
which overrides the default), the token ids sentence-transformers feeds the
model and the embeddings it returns.  posy must produce:
  - the same token ids: `posy tokenize` of prompt + text (sentence-
    transformers prepends the prompt text before tokenizing; posy embed and
    the server do the same);
  - the same embeddings (cosine >= 0.99999) from `posy embed --prompt-name`
    and from the server's `prompt_name` on /embed and /v1/embeddings.
The MiniLM case runs on a temporary copy of the default model directory
with the fixture's config_sentence_transformers.json.  The Qwen3 cases use
the tiny random-weight models of tests/fixtures/qwen3 (byte-level BPE
tokenizer appending <|endoftext|>): causal/ with last-token pooling, and
bidir/ whose config says "is_causal": false (transformers, and so
sentence-transformers, run it bidirectionally) with mean pooling; so these
also check posy's whole Qwen3 path, text to vector, against
sentence-transformers.
"""
import json
import os
import subprocess

import numpy as np
import pytest

from conftest import FIXTURES, ROOT
from serve_util import Server, post_json as post

FIX = json.load(open(os.path.join(FIXTURES, "prompts", "prompts.json")))
TEXTS = FIX["texts"]


@pytest.fixture(scope="module")
def minilm_dir(tmp_path_factory, posy_model):
    d = tmp_path_factory.mktemp("minilm_prompts")
    for name in os.listdir(posy_model):
        if name != "config_sentence_transformers.json":
            os.symlink(os.path.join(posy_model, name), d / name)
    (d / "config_sentence_transformers.json").write_text(json.dumps(FIX["models"]["minilm"]["st_config"]))
    return str(d)


def model_dir(key, minilm_dir):
    return minilm_dir if key == "minilm" else os.path.join(ROOT, FIX["models"][key]["model_dir"])


def min_cos(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(((a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)).min())


def cases(key):
    return [pytest.param(key, i, id=f"{key}-{c['prompt_name']}") for i, c in enumerate(FIX["models"][key]["cases"])]


ALL = cases("minilm") + cases("qwen3_causal") + cases("qwen3_bidir")


@pytest.mark.parametrize("key,i", ALL)
def test_prompt_token_ids(posy_bin, minilm_dir, key, i):
    c = FIX["models"][key]["cases"][i]
    lines = "".join(json.dumps(c["prompt"] + t) + "\n" for t in TEXTS)
    r = subprocess.run([posy_bin, "tokenize", "--model", model_dir(key, minilm_dir), "--json-input"],
                       input=lines.encode(), capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    got = [json.loads(line)["ids"] for line in r.stdout.decode().splitlines()]
    assert got == c["ids"]


@pytest.mark.parametrize("key,i", ALL)
def test_prompt_embed_cli(posy, minilm_dir, key, i):
    c = FIX["models"][key]["cases"][i]
    args = ["--prompt-name", c["prompt_name"]] if c["prompt_name"] else []
    v = posy.embed_jsonl(*args, "--", *TEXTS, model=model_dir(key, minilm_dir))
    assert min_cos(v, c["embeddings"]) >= 0.99999


def test_prompt_flag_overrides_default(posy, minilm_dir):
    """--prompt TEXT replaces the default prompt, as encode(prompt=...) does."""
    c = next(c for c in FIX["models"]["minilm"]["cases"] if c["prompt_name"] == "passage")
    v = posy.embed_jsonl("--prompt", c["prompt"], "--", *TEXTS, model=minilm_dir)
    assert min_cos(v, c["embeddings"]) >= 0.99999
    d = next(c for c in FIX["models"]["minilm"]["cases"] if c["prompt_name"] is None)
    assert min_cos(v, d["embeddings"]) < 0.999   # the default (query) was not applied on top


def test_attention_flag_on_qwen3(posy):
    """--attention: the config's own mode reproduces sentence-transformers,
    the other mode does not (tests/unit/test_qwen3.c checks its numbers)."""
    for key, own, other in (("qwen3_causal", "causal", "bidirectional"), ("qwen3_bidir", "bidirectional", "causal")):
        c = FIX["models"][key]["cases"][0]
        d = os.path.join(ROOT, FIX["models"][key]["model_dir"])
        assert min_cos(posy.embed_jsonl("--attention", own, "--", *TEXTS, model=d), c["embeddings"]) >= 0.99999
        assert min_cos(posy.embed_jsonl("--attention", other, "--", *TEXTS, model=d), c["embeddings"]) < 0.9999


@pytest.fixture(scope="module", params=["minilm", "qwen3_causal", "qwen3_bidir"])
def server(request, posy_bin, minilm_dir):
    s = Server(posy_bin, model_dir(request.param, minilm_dir), "--device", "cpu", "--threads", "2")
    yield request.param, s.url
    assert s.stop() == 0




def test_prompt_server(server):
    key, url = server
    for c in FIX["models"][key]["cases"]:
        check_server_case(url, c)


def check_server_case(server, c):
    extra = {"prompt_name": c["prompt_name"]} if c["prompt_name"] else {}
    st, tei = post(server, "/embed", {"inputs": TEXTS, **extra})
    assert st == 200, tei
    assert min_cos(tei, c["embeddings"]) >= 0.99999
    st, oa = post(server, "/v1/embeddings", {"input": TEXTS, "model": "m", **extra})
    assert st == 200, oa
    assert min_cos([d["embedding"] for d in oa["data"]], c["embeddings"]) >= 0.99999


def test_unknown_prompt_name(server):
    st, r = post(server[1], "/embed", {"inputs": ["x"], "prompt_name": "nope"})
    assert st == 422, r
