"""Differential tests of every model type against Hugging Face tokenizers:
the committed fixtures trained by tests/gen/gen_tok_fixtures.py (BPE with
Qwen2's split regex, GPT-2 byte-level BPE with RobertaProcessing and in
DeBERTa v1's form (no prefix space, a [CLS] / [SEP] template), a
byte-fallback BPE, two Unigrams, a WordPiece with NFD/Digits/Punctuation),
each over 20,000 seeded hostile strings through one `posy tokenize` run.
ids, type ids, special masks and character offsets must be identical on
every string; also without special tokens, with truncation and for pairs."""
import os

import pytest

from tok_diff import ROOT, compare, hf_row, run_posy, run_posy_decode

import tokenizers  # noqa: E402  (requirements-test.txt; a missing package must fail, not skip)
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


@pytest.mark.parametrize("name", FILES + ["../../../models/all-MiniLM-L6-v2/tokenizer.json"])
def test_decode_identical(name, texts):
    """decode(ids) through the file's decoder chain, with and without
    skip_special_tokens, on the ids HF produced for 2,000 strings and on 500
    random id lists."""
    path = os.path.normpath(os.path.join(FIX, name))
    assert os.path.exists(path), path + " missing"
    t = tokenizers.Tokenizer.from_file(path)
    t.no_truncation()
    t.no_padding()
    ids = [e.ids for e in t.encode_batch(texts[:2000])]
    # plus random id soups (byte tokens out of order, invalid UTF-8, unknown ids)
    import random
    r = random.Random(7)
    v = t.get_vocab_size()
    ids += [[r.randrange(v + 5) for _ in range(r.randint(0, 30))] for _ in range(500)]
    for skip in (False, True):
        ours = run_posy_decode(path, ids, skip)
        theirs = t.decode_batch(ids, skip_special_tokens=skip)
        bad = [(i, a, b) for i, (a, b) in enumerate(zip(ours, theirs)) if a != b]
        print(f"{name} decode skip_special={skip}: {len(ids) - len(bad)}/{len(ids)} identical")
        for i, a, b in bad[:3]:
            print(f"  {i}: posy {a!r}\n      hf   {b!r}")
        assert not bad


def _variant(name, tmp_path):
    """Options no committed fixture sets, patched into a copy of one."""
    import json
    if name == "bpe_ignore_merges":
        d = json.load(open(os.path.join(FIX, "bpe_qwen2.json"), encoding="utf-8"))
        d["model"]["ignore_merges"] = True
    elif name == "unigram_byte_fallback":
        d = json.load(open(os.path.join(FIX, "unigram.json"), encoding="utf-8"))
        d["model"]["byte_fallback"] = True
        d["model"]["vocab"] += [[f"<0x{b:02X}>", -30.0] for b in range(256)]
    elif name == "added_token_options":
        d = json.load(open(os.path.join(ROOT, "models", "all-MiniLM-L6-v2", "tokenizer.json"), encoding="utf-8"))
        extra = [("Hello World", dict(normalized=True)), ("<ent>", dict(lstrip=True, rstrip=True)),
                 ("naïve", dict(normalized=True, single_word=True)), ("[MASK]x", dict(special=True)),
                 ("東京", dict(normalized=False, single_word=True)), ("don't", dict(rstrip=True, normalized=True))]
        for i, (content, opts) in enumerate(extra):
            tok = {"id": 30522 + i, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
                   "normalized": False, "special": False}
            tok.update(opts)
            d["added_tokens"].append(tok)
    else:
        raise ValueError(name)
    path = str(tmp_path / (name + ".json"))
    json.dump(d, open(path, "w", encoding="utf-8"), ensure_ascii=False)
    return path


@pytest.mark.parametrize("name", ["bpe_ignore_merges", "unigram_byte_fallback", "added_token_options"])
def test_option_variants(name, texts, tmp_path):
    """ignore_merges, Unigram byte_fallback and the added-token options
    (normalized, lstrip, rstrip, single_word) on 5,000 strings + decode."""
    if name == "added_token_options":
        assert os.path.exists(os.path.join(ROOT, "models", "all-MiniLM-L6-v2")), "default model missing (scripts/fetch-model.sh)"
    path = _variant(name, tmp_path)
    extra = ["Hello World, hello world! <ent>  naïve naïveté 東京 東京都 don't  x", " <ent> a<ent>b [MASK]x"]
    sub = extra + texts[:5000]
    t = tokenizers.Tokenizer.from_file(path)
    t.no_truncation()
    t.no_padding()
    enc = t.encode_batch(sub)
    agree, total, _ = compare(sub, run_posy(path, sub), [hf_row(e) for e in enc], name)
    assert agree == total
    ids = [e.ids for e in enc[:1000]]
    assert run_posy_decode(path, ids, True) == t.decode_batch(ids, skip_special_tokens=True)
