"""WordPiece differential test: posy tokenize vs Hugging Face tokenizers on
the default model's tokenizer.json (all-MiniLM-L6-v2, BERT uncased) over a
seeded corpus of 12,000 hostile lines; ids, type ids, special masks and
character offsets must be identical on every line.  Also truncation (right
and left) and pairs."""
import os

import pytest

from tok_diff import ROOT, compare, hf_row, run_posy

import tokenizers  # noqa: E402  (requirements-test.txt; a missing package must fail, not skip)
import tok_corpus  # noqa: E402  (tests/gen, put on the path by tok_diff)

MODEL = os.environ.get("POSY_MODEL", os.path.join(ROOT, "models", "all-MiniLM-L6-v2"))
TOKJSON = os.path.join(MODEL, "tokenizer.json")


@pytest.fixture(scope="module")
def hf():
    assert os.path.exists(TOKJSON), f"{TOKJSON} missing (scripts/fetch-model.sh)"
    t = tokenizers.Tokenizer.from_file(TOKJSON)
    t.no_truncation()
    t.no_padding()
    return t


@pytest.fixture(scope="module")
def texts():
    return tok_corpus.corpus(seed=1234, n=12000)


def test_wordpiece_corpus_identical(hf, texts):
    ours = run_posy(TOKJSON, texts)
    theirs = [hf_row(e) for e in hf.encode_batch(texts)]
    agree, total, bad = compare(texts, ours, theirs, "wordpiece")
    assert total >= 10000
    assert agree == total


def test_wordpiece_no_special(hf, texts):
    sub = texts[:2000]
    ours = run_posy(TOKJSON, sub, ["--no-special"])
    theirs = [hf_row(e) for e in hf.encode_batch(sub, add_special_tokens=False)]
    agree, total, _ = compare(sub, ours, theirs, "wordpiece --no-special")
    assert agree == total


@pytest.mark.parametrize("direction", ["right", "left"])
def test_wordpiece_truncation(texts, direction):
    t = tokenizers.Tokenizer.from_file(TOKJSON)
    t.no_padding()
    t.enable_truncation(max_length=16, direction=direction)
    sub = texts[:3000]
    extra = ["--max-len", "16"] + (["--truncate-left"] if direction == "left" else [])
    ours = run_posy(TOKJSON, sub, extra)
    theirs = [hf_row(e) for e in t.encode_batch(sub)]
    agree, total, _ = compare(sub, ours, theirs, f"wordpiece truncation {direction}")
    assert agree == total
    assert any(len(r["ids"]) == 16 for r in ours)


def test_wordpiece_pairs(hf, texts):
    t = tokenizers.Tokenizer.from_file(TOKJSON)
    t.no_padding()
    t.enable_truncation(max_length=24)
    pairs = [[texts[i], texts[i + 1]] for i in range(0, 2000, 2)]
    ours = run_posy(TOKJSON, pairs, ["--max-len", "24"], pairs=True)
    theirs = [hf_row(e) for e in t.encode_batch([tuple(p) for p in pairs])]
    agree, total, _ = compare(pairs, ours, theirs, "wordpiece pairs")
    assert agree == total
