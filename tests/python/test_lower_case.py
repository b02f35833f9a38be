"""do_lower_case in sentence_bert_config.json (gap: it was only logged).

sentence-transformers 6 applies do_lower_case by putting a tokenizers
Lowercase normalizer in front of the tokenizer's (older releases ran
str.lower() on the text); posy lowercases prompt + text the same way before
tokenizing, for `posy embed` and the server's /embed and /v1/embeddings
(not /tokenize, which mirrors tokenizer.json alone).

To be able to fail, both temp models use a tokenizer.json whose
BertNormalizer does NOT lowercase: model A has do_lower_case false, model B
true.  Then B(text) must equal A(Lowercase(text)) and differ from A(text).
The expected lowercasing comes from the tokenizers package at test time
(requirements-test.txt), so the tricky strings are checked against the
reference implementation, not against hard-coded output.
"""
import json
import os

import numpy as np
import pytest
import requests
from tokenizers.normalizers import Lowercase

from serve_util import Server

# 'İ' -> 'i̇' (two code points), final sigma stays 'σ' under Lowercase (str.lower()
# gives 'ς'), Kelvin/Angstrom signs, titlecase digraph, Greek with ypogegrammeni,
# capital sharp s, Cherokee, Deseret (4-byte), plus ordinary mixed case.
TEXTS = [
    "Hello World, THIS is A Test.",
    "İSTANBUL İzmir DİYARBAKIR",
    "ΟΔΟΣ ΣΟΦΟΣ Σ",
    "Temperature 300 K and 5 Å",
    "ǅemal ǈubljana ǋ",
    "ᾈ ᾯ ῼ Ἀθῆναι",
    "Straße GROẞ",
    "ᏣᎳᎩ 𐐀𐐁 ÀÉÎÕÜ",
]


def lower_ref(s):
    return Lowercase().normalize_str(s)


@pytest.fixture(scope="module")
def models(tmp_path_factory, posy_model):
    tok = json.load(open(os.path.join(posy_model, "tokenizer.json"), encoding="utf-8"))
    assert tok["normalizer"]["type"] == "BertNormalizer"
    tok["normalizer"]["lowercase"] = False
    out = {}
    for key, lower in (("A", False), ("B", True)):
        d = tmp_path_factory.mktemp("lower" + key)
        for name in os.listdir(posy_model):
            if name not in ("tokenizer.json", "sentence_bert_config.json"):
                os.symlink(os.path.abspath(os.path.join(posy_model, name)), d / name)
        (d / "tokenizer.json").write_text(json.dumps(tok), encoding="utf-8")
        (d / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 256, "do_lower_case": lower}))
        out[key] = str(d)
    return out


def test_reference_is_not_identity():
    """The strings really change (and the sigma case differs from str.lower())."""
    assert all(lower_ref(t) != t for t in TEXTS)
    assert lower_ref("ΟΔΟΣ") == "οδοσ" and "ΟΔΟΣ".lower() == "οδος"
    assert lower_ref("İ") == "i\u0307"


def test_cli_lowercases(posy, models):
    got = posy.embed_jsonl("--", *TEXTS, model=models["B"])
    want = posy.embed_jsonl("--", *[lower_ref(t) for t in TEXTS], model=models["A"])
    raw = posy.embed_jsonl("--", *TEXTS, model=models["A"])
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
    # without lowercasing the vectors change (some all-[UNK] texts may not)
    changed = [np.abs(got[i] - raw[i]).max() > 1e-3 for i in range(len(TEXTS))]
    assert changed[0] and sum(changed) >= len(TEXTS) // 2, changed


def test_cli_lowercases_prompt(posy, models):
    got = posy.embed_jsonl("--prompt", "QUERY: ", "--", *TEXTS[:3], model=models["B"])
    want = posy.embed_jsonl("--prompt", lower_ref("QUERY: "), "--", *[lower_ref(t) for t in TEXTS[:3]],
                            model=models["A"])
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)


def test_server_lowercases(posy_bin, posy, models):
    want = posy.embed_jsonl("--", *[lower_ref(t) for t in TEXTS], model=models["A"])
    srv = Server(posy_bin, models["B"], "--device", "cpu", "--threads", "2")
    try:
        r = requests.post(srv.url + "/embed", json={"inputs": TEXTS}, timeout=60)
        assert r.status_code == 200, r.text
        np.testing.assert_allclose(np.array(r.json(), dtype=np.float32), want, rtol=0, atol=1e-5)
        r = requests.post(srv.url + "/v1/embeddings", json={"input": TEXTS, "model": "m"}, timeout=60)
        assert r.status_code == 200, r.text
        got = np.array([d["embedding"] for d in r.json()["data"]], dtype=np.float32)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)
        # /tokenize mirrors tokenizer.json alone (lowercase off here): "Hello" stays cased
        r = requests.post(srv.url + "/tokenize", json={"inputs": "Hello"}, timeout=60)
        assert r.status_code == 200, r.text
        ids_cased = [t["id"] for t in r.json()[0]]
        r = requests.post(srv.url + "/tokenize", json={"inputs": "hello"}, timeout=60)
        assert ids_cased != [t["id"] for t in r.json()[0]]
    finally:
        assert srv.stop() == 0
