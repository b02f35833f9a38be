"""/tokenize and /decode with the tokenizer fixtures of tests/fixtures/tokenizers
(byte-level BPE as GPT-2 and Qwen2 ship it, Llama's SentencePiece-style BPE,
XLM-R's Unigram), each served from a model directory made of the tiny BERT
config, the fixture as tokenizer.json and `--engine noop` (no weights
needed: these routes never reach the engine).  Ids and offsets from /tokenize
and text from /decode are compared with the Python `tokenizers` package on
the same file.
"""
import os
import shutil

import pytest
import requests
from tokenizers import Tokenizer

from conftest import FIXTURES
from serve_util import Server

TEXTS = ["Hello world, naïve 🙂", "  leading spaces and\ttabs\nnew lines", "Ça va? Привет 你好",
         "don't stop-believing 3.14", "a"]


@pytest.fixture(scope="module", params=["bpe_gpt2", "bpe_llama", "bpe_qwen2", "unigram_xlmr"])
def served(request, posy_bin, tmp_path_factory):
    d = tmp_path_factory.mktemp(request.param)
    shutil.copy(os.path.join(FIXTURES, "tiny-bert", "config.json"), d / "config.json")
    path = os.path.join(FIXTURES, "tokenizers", request.param + ".json")
    shutil.copy(path, d / "tokenizer.json")
    s = Server(posy_bin, str(d), "--engine", "noop")
    tok = Tokenizer.from_file(path)
    tok.no_padding()
    tok.no_truncation()
    yield s, tok
    assert s.stop() == 0, s.output()


def test_tokenize_ids(served):
    s, tok = served
    r = requests.post(s.url + "/tokenize", json={"inputs": TEXTS})
    assert r.status_code == 200, r.text
    for toks, t in zip(r.json(), TEXTS):
        assert [x["id"] for x in toks] == tok.encode(t).ids, t


def test_decode_round_trip(served):
    s, tok = served
    batch = [tok.encode(t).ids for t in TEXTS]
    # pieces that cut multi-byte characters in two (byte-level BPE): HF decodes them lossily (U+FFFD)
    batch += [ids[k:k + 2] for ids in batch for k in range(0, len(ids), 3)]
    for skip in (True, False):
        r = requests.post(s.url + "/decode", json={"ids": batch, "skip_special_tokens": skip})
        assert r.status_code == 200, r.text
        assert r.json() == [tok.decode(ids, skip_special_tokens=skip) for ids in batch]
    vocab = tok.get_vocab_size()
    r = requests.post(s.url + "/decode", json={"ids": [0, vocab]})
    assert r.status_code == 422 and "vocabulary" in r.json()["error"]
