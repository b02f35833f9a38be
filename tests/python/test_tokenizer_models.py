"""Differential tests of every model type against Hugging Face tokenizers:
the committed fixtures trained by tests/gen/gen_tok_fixtures.py (BPE with
Qwen2's split regex, GPT-2 byte-level BPE with RobertaProcessing, a
byte-fallback BPE, two Unigrams, a WordPiece with NFD/Digits/Punctuation),
each over 20,000 seeded hostile strings through one `posy tokenize` run.
ids, type ids, special masks and character offsets must be identical on
every string; also without special tokens, with truncation and for pairs."""
import os

import pytest

from tok_diff import ROOT, compare, hf_row, run_posy

tokenizers = pytest.importorskip("tokenizers")
import tok_corpus  # noqa: E402

FIX = os.path.join(ROOT, "tests", "fixtures", "tokenizers")
FILES = sorted(f for f in os.listdir(FIX) if f.endswith(".json"))
SPECIALS = ("<s>", "</s>", "<unk>", "<pad>", "<mask>", "[CLS]", "[SEP]", "<|endoftext|>", "<|im_start|>",
            "<|im_end|>", "<think>", "</think>", " <mask> ", "<s", "<0x41>")
N = int(os.environ.get("POSY_TOK_N", "20000"))


@pytest.fixture(scope="module")
def texts():
    return tok_corpus.corpus(seed=4321, n=N, specials=SPECIALS)


def load(name, trunc=None, direction="right"):
    t = tokenizers.Tokenizer.from_file(os.path.join(FIX, name))
    t.no_padding()
    if trunc:
        t.enable_truncation(max_length=trunc, direction=direction)
    else:
        t.no_truncation()
    return t


@pytest.mark.parametrize("name", FILES)
def test_corpus_identical(name, texts):
    path = os.path.join(FIX, name)
    ours = run_posy(path, texts)
    theirs = [hf_row(e) for e in load(name).encode_batch(texts)]
    agree, total, _ = compare(texts, ours, theirs, name)
    assert total >= 20000 or total == N
    assert agree == total


@pytest.mark.parametrize("name", FILES)
def test_no_special_truncation_pairs(name, texts):
    path = os.path.join(FIX, name)
    sub = texts[:2000]
    ours = run_posy(path, sub, ["--no-special"])
    theirs = [hf_row(e) for e in load(name).encode_batch(sub, add_special_tokens=False)]
    a1, t1, _ = compare(sub, ours, theirs, name + " --no-special")
    ours = run_posy(path, sub, ["--max-len", "12", "--truncate-left"])
    theirs = [hf_row(e) for e in load(name, 12, "left").encode_batch(sub)]
    a2, t2, _ = compare(sub, ours, theirs, name + " --max-len 12 --truncate-left")
    pairs = [[sub[i], sub[i + 1]] for i in range(0, len(sub), 2)]
    ours = run_posy(path, pairs, ["--max-len", "20"], pairs=True)
    theirs = [hf_row(e) for e in load(name, 20).encode_batch([tuple(p) for p in pairs])]
    a3, t3, _ = compare(pairs, ours, theirs, name + " pairs --max-len 20")
    assert (a1, a2, a3) == (t1, t2, t3)
