"""Shared driver for the tokenizer differential tests: run `posy tokenize`
once over a whole corpus (stdin, --json-input) and compare every line with
the Python `tokenizers` package."""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "gen"))

POSY_BIN = os.environ.get("POSY_BIN", os.path.join(ROOT, "build", "posy"))


def run_posy(tokenizer_path, texts, extra=(), pairs=False):
    inp = "".join(json.dumps(t) + "\n" for t in texts)
    cmd = [POSY_BIN, "tokenize", "--model", tokenizer_path, "--json-input"] + list(extra)
    if pairs:
        cmd.append("--pair")
    p = subprocess.run(cmd, input=inp.encode(), capture_output=True, timeout=600)
    assert p.returncode in (0, 1), p.stderr.decode()
    lines = p.stdout.decode().split("\n")[:-1]  # not splitlines: U+2028 etc. may occur in tokens
    assert len(lines) == len(texts), (len(lines), len(texts), p.stderr.decode()[-2000:])
    return [json.loads(x) for x in lines]


def hf_row(e):
    return {"ids": e.ids, "type_ids": e.type_ids, "special_tokens_mask": e.special_tokens_mask,
            "offsets": [list(o) for o in e.offsets]}


def compare(texts, ours, theirs, label):
    """Return (agree, total, first mismatches) and print a summary line."""
    bad = []
    for i, (t, a, b) in enumerate(zip(texts, ours, theirs)):
        row = {k: a.get(k) for k in ("ids", "type_ids", "special_tokens_mask", "offsets")}
        if row != b:
            bad.append((i, t, a, b))
    agree = len(texts) - len(bad)
    print(f"{label}: {agree}/{len(texts)} identical ({100.0 * agree / max(1, len(texts)):.3f}%)")
    for i, t, a, b in bad[:5]:
        print(f"  line {i} {t!r}\n    posy {a}\n    hf   {b}")
    return agree, len(texts), bad


def run_posy_decode(tokenizer_path, id_lists, skip_special):
    inp = "".join(json.dumps(ids) + "\n" for ids in id_lists)
    cmd = [POSY_BIN, "tokenize", "--model", tokenizer_path, "--decode"] + (["--skip-special"] if skip_special else [])
    p = subprocess.run(cmd, input=inp.encode(), capture_output=True, timeout=600)
    assert p.returncode in (0, 1), p.stderr.decode()
    lines = p.stdout.decode().split("\n")[:-1]
    assert len(lines) == len(id_lists), (len(lines), len(id_lists), p.stderr.decode()[-2000:])
    return [json.loads(x) for x in lines]
