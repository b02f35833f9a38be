#!/usr/bin/env python3
"""posy's reranker engine on the GPU against sentence-transformers'
CrossEncoder on the same GPU, in the same run.

The reranker has mixedbread-ai/mxbai-rerank-base-v1's shape with --arch
deberta (DeBERTa v3 base: 12 layers of 768, 12 heads, 256 position
buckets, shared position keys, no absolute positions), or
cross-encoder/ms-marco-MiniLM-L-6-v2's with --arch bert (6 layers of 384);
one label, random weights, the bert-base-uncased vocabulary of
TOKENIZER_JSON, written into WORK_DIR.  N (query, passage) pairs, queries
of 3-9 words and passages of 20-200 words (about 30-260 tokens a pair):

  * sentence-transformers: CrossEncoder.predict(pairs, batch_size=64) on
    cuda in bf16 (the model cast with .to(torch.bfloat16)), tokenization
    included, after a warm-up call; the best of three;
  * posy: api_embed (the engine's public API) on the token ids of the same
    pairs (the tokenizer's pair template), --max-batch-tokens 16384, its own
    "embedded in" time (the engine's steps, copies in and out included,
    tokenization not); the best of three runs, each a fresh process (its
    buckets' first runs and graph captures inside the time).

api_embed sends no token type ids, so with --arch bert (whose pairs have
types 0 / 1) the scores are not compared; DeBERTa v3 has no token types
and its scores are: max |sigmoid(posy) - sentence-transformers| and the
Spearman correlation.  Prints pairs/s of each and the ratio.  A
measurement, not a test.  Needs torch, transformers,
sentence-transformers, a CUDA build of api_embed:

  python3 bench/rerank_gpu.py BUILD_DIR TOKENIZER_JSON [WORK_DIR] [--arch deberta|bert] [--pairs 2048]
"""
import argparse
import os
import random
import shutil
import sys
import time

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(ROOT, "tests", "cuda"))
from bench_cpu import WORDS  # noqa: E402
from rerank_cpu import reranker_config  # noqa: E402
from e2e_common import api_embed_best  # noqa: E402


def build_model(d, arch, tok_json):
    if os.path.exists(os.path.join(d, "model.safetensors")):
        return
    cfg, cls = reranker_config(arch, *{"bert": (384, 6, 12), "deberta": (768, 12, 12)}[arch])
    torch.manual_seed(4096)
    m = cls(cfg).eval()
    with torch.no_grad():   # a wide last layer, so that the scores spread and their order means something
        m.classifier.weight.normal_(0.0, 1.0)
    m.save_pretrained(d, safe_serialization=True)
    shutil.copy(tok_json, os.path.join(d, "tokenizer.json"))
    import json   # transformers' fast tokenizer over that file (its pair template: [CLS] q [SEP] p [SEP])
    json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 512, "cls_token": "[CLS]",
               "sep_token": "[SEP]", "pad_token": "[PAD]", "unk_token": "[UNK]", "mask_token": "[MASK]"},
              open(os.path.join(d, "tokenizer_config.json"), "w"))


def spearman(a, b):
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("tokenizer")
    ap.add_argument("work", nargs="?", default="/tmp/posy-rerank-gpu")
    ap.add_argument("--arch", choices=["deberta", "bert"], default="deberta")
    ap.add_argument("--pairs", type=int, default=2048)
    a = ap.parse_args()
    d = os.path.join(a.work, "mxbai-rerank-base-shape" if a.arch == "deberta" else "ms-marco-minilm-shape")
    os.makedirs(d, exist_ok=True)
    build_model(d, a.arch, a.tokenizer)
    rng = random.Random(11)
    pairs = [(" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9))),
              " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 200)))) for _ in range(a.pairs)]
    from sentence_transformers import CrossEncoder
    ce = CrossEncoder(d, device="cuda", max_length=512)
    ce.model.to(torch.bfloat16)
    enc = ce.tokenizer([q for q, _ in pairs], [p for _, p in pairs], truncation=True, max_length=512)
    ids = enc["input_ids"]
    ce.predict(pairs[:64], batch_size=64)
    best_st, ref = None, None
    for _ in range(3):
        torch.cuda.synchronize()
        t = time.perf_counter()
        s = ce.predict(pairs, batch_size=64)
        torch.cuda.synchronize()
        dt = time.perf_counter() - t
        best_st = dt if best_st is None or dt < best_st else best_st
        ref = np.asarray(s, dtype=np.float64).reshape(-1)
    posy = api_embed_best(a.build, d, ids, a.work)
    if posy is None:
        return 1
    best_posy, logits = posy
    got = 1.0 / (1.0 + np.exp(-logits))
    n_tok = sum(map(len, ids))
    check = (f"max |posy - sentence-transformers| {np.abs(got - ref).max():.4f}, Spearman {spearman(got, ref):.5f}"
             if a.arch == "deberta" else "scores not compared (api_embed sends no token types)")
    print(f"{torch.cuda.get_device_name()}: {a.arch}, {a.pairs} pairs, {n_tok} tokens; sentence-transformers "
          f"CrossEncoder bf16 {a.pairs / best_st:,.0f} pairs/s, posy {a.pairs / best_posy:,.0f} pairs/s, "
          f"posy / sentence-transformers {best_st / best_posy:.2f}x; {check}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
