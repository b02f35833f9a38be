"""Golden embeddings: posy on CPU against sentence-transformers.

The fixture (tests/fixtures/golden_minilm, made by tests/gen/make_golden.py)
holds 212 varied sentences and the fp32 embeddings sentence-transformers
computes for them with all-MiniLM-L6-v2.  posy's CPU engine must reach a
cosine similarity of at least 0.99999 on every sentence and differ by at
most 1e-4 in every component (ARCHITECTURE.md, "Numerics").  The worst
sentence is printed so that a failure points at its cause.

The same comparison runs through two input/output paths: a JSONL file to
a .npy file, and JSON lines on stdin to JSON lines on stdout.
"""
import json
import os

import numpy as np
import pytest

from conftest import FIXTURES

GOLDEN = os.path.join(FIXTURES, "golden_minilm")
MIN_COSINE = 0.99999
MAX_ABS = 1e-4


@pytest.fixture(scope="module")
def golden():
    with open(os.path.join(GOLDEN, "sentences.jsonl"), encoding="utf-8") as f:
        sentences = [json.loads(line) for line in f]
    ref = np.load(os.path.join(GOLDEN, "embeddings.npy"))
    assert ref.dtype == np.float32 and ref.shape == (len(sentences), 384)
    assert len(sentences) >= 200
    return sentences, ref


def compare(got, ref, sentences, label):
    assert got.shape == ref.shape, f"{label}: shape {got.shape}, expected {ref.shape}"
    assert np.isfinite(got).all(), f"{label}: non-finite values"
    g = got.astype(np.float64)
    r = ref.astype(np.float64)
    cos = (g * r).sum(1) / (np.linalg.norm(g, axis=1) * np.linalg.norm(r, axis=1))
    diff = np.abs(g - r).max(1)
    wc, wd = int(np.argmin(cos)), int(np.argmax(diff))
    print(f"\n{label}: min cosine {cos[wc]:.9f} (1 - cos = {1 - cos[wc]:.2e}) (sentence {wc}: {sentences[wc][:60]!r}); "
          f"max abs diff {diff[wd]:.3g} (sentence {wd}: {sentences[wd][:60]!r})")
    bad_cos = np.nonzero(cos < MIN_COSINE)[0]
    bad_abs = np.nonzero(diff > MAX_ABS)[0]
    assert len(bad_cos) == 0, (f"{label}: {len(bad_cos)} sentences below cosine {MIN_COSINE}, worst "
                               f"{cos[wc]:.8f} on sentence {wc}: {sentences[wc][:80]!r}")
    assert len(bad_abs) == 0, (f"{label}: {len(bad_abs)} sentences with a component off by more than "
                               f"{MAX_ABS}, worst {diff[wd]:.3g} on sentence {wd}: {sentences[wd][:80]!r}")


def test_golden_file_to_npy(posy, golden, tmp_path):
    sentences, ref = golden
    out = tmp_path / "out.npy"
    posy.embed("--input", os.path.join(GOLDEN, "sentences.jsonl"), "--output", str(out))
    got = np.load(out)
    assert got.dtype == np.float32
    compare(got, ref, sentences, "jsonl file -> npy")


def test_golden_stdin_jsonl(posy, golden):
    sentences, ref = golden
    stdin = "".join(json.dumps(s, ensure_ascii=False) + "\n" for s in sentences)
    got = posy.embed_jsonl("--input-format", "jsonl", input=stdin)
    compare(got, ref, sentences, "stdin JSON lines -> stdout")


def test_golden_small_batches(posy, golden, tmp_path):
    """Packing many small batches must not change any vector or their order."""
    sentences, ref = golden
    out = tmp_path / "small.npy"
    posy.embed("--input", os.path.join(GOLDEN, "sentences.jsonl"), "--output", str(out),
               "--max-batch-tokens", "256")
    compare(np.load(out), ref, sentences, "batches of <= 256 tokens")


def test_golden_one_short_sentence_per_batch(posy, golden, monkeypatch):
    """One short sentence per forward (a batch of a few tokens), on the
    packed linear kernel (eng_cpu_gemm_packed.c, where the CPU has AVX2+FMA
    or AVX-512) and with POSY_CPU_SMALL_GEMM=0 on OpenBLAS: both must meet
    the golden bar."""
    sentences, ref = golden
    idx = list(range(16))
    assert all(len(sentences[i]) < 64 for i in idx)  # short: a few tokens each
    for env in ("1", "0"):
        monkeypatch.setenv("POSY_CPU_SMALL_GEMM", env)
        got = np.concatenate([posy.embed_jsonl("--", sentences[i]) for i in idx])
        compare(got, ref[idx], [sentences[i] for i in idx],
                f"one sentence per batch, POSY_CPU_SMALL_GEMM={env}")
