#!/usr/bin/env python3
"""posy's SPLADE engine on the GPU against sentence-transformers'
SparseEncoder on the same GPU, in the same run.

The model has naver/splade-v3's shape (a BertForMaskedLM of bert-base's
size, the bert-base-uncased vocabulary from TOKENIZER_JSON, SpladePooling
max + relu), random weights with the vocabulary bias shifted down by 2 so
most entries are zero, written into WORK_DIR.  N passages of 20-200 words
(about 30-260 tokens):

  * sentence-transformers: SparseEncoder.encode(passages, batch_size=64)
    on cuda in bf16 (the model cast with .to(torch.bfloat16)), tokenization
    included, after a warm-up call; the best of three;
  * posy: api_embed (the engine's public API) on the token ids of the same
    passages, --max-batch-tokens 16384, its own "embedded in" time (the
    engine's steps, copies in and out included, tokenization not); the
    best of three runs, each a fresh process (its buckets' first runs, the
    lazy graph captures, inside the time).

Prints passages/s of each and the ratio, and the min cosine between the two
sides' vectors.  A measurement, not a test.  Needs torch, transformers,
sentence-transformers, a CUDA build of api_embed:

  python3 bench/splade_gpu.py BUILD_DIR TOKENIZER_JSON [WORK_DIR] [--passages 2048]
"""
import argparse
import os
import random
import sys
import time

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(ROOT, "tests", "cuda"))
from bench_cpu import WORDS  # noqa: E402
from e2e_common import api_embed_best  # noqa: E402


def build_model(d, tok_json):
    import transformers as T
    from sentence_transformers import SparseEncoder
    from sentence_transformers.sparse_encoder.modules import MLMTransformer, SpladePooling
    if os.path.exists(os.path.join(d, "model.safetensors")):
        return
    hf = d + "-hf"
    torch.manual_seed(2048)
    m = T.BertForMaskedLM(T.BertConfig(vocab_size=30522)).eval()
    with torch.no_grad():
        m.cls.predictions.bias.sub_(2.0)
    m.save_pretrained(hf, safe_serialization=True)
    import shutil
    shutil.copy(tok_json, os.path.join(hf, "tokenizer.json"))
    SparseEncoder(modules=[MLMTransformer(hf, max_seq_length=512), SpladePooling("max")], device="cpu").save(d)
    shutil.rmtree(hf)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("tokenizer")
    ap.add_argument("work", nargs="?", default="/tmp/posy-splade-gpu")
    ap.add_argument("--passages", type=int, default=2048)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    d = os.path.join(a.work, "splade-v3-shape")
    build_model(d, a.tokenizer)
    rng = random.Random(9)
    texts = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 200))) for _ in range(a.passages)]
    from sentence_transformers import SparseEncoder
    enc = SparseEncoder(d, device="cuda")
    enc.to(torch.bfloat16)
    ids = [x.tolist() for x in enc.tokenize(texts)["input_ids"]]
    ids = [[t for t in x if t != 0] for x in ids]   # the padding off (pad id 0): each passage's own ids
    enc.encode(texts[:64], batch_size=64)
    best_st, ref = None, None
    for _ in range(3):
        torch.cuda.synchronize()
        t = time.perf_counter()
        v = enc.encode(texts, batch_size=64, convert_to_tensor=True)
        torch.cuda.synchronize()
        dt = time.perf_counter() - t
        best_st = dt if best_st is None or dt < best_st else best_st
        ref = v
    ref = ref.to_dense().float().cpu().numpy().astype(np.float64)
    posy = api_embed_best(a.build, d, ids, a.work)
    if posy is None:
        return 1
    best_posy, got = posy
    got = got.reshape(ref.shape)
    cos = (got * ref).sum(1) / np.linalg.norm(got, axis=1) / np.linalg.norm(ref, axis=1)
    n_tok = sum(map(len, ids))
    print(f"{torch.cuda.get_device_name()}: {a.passages} passages, {n_tok} tokens; sentence-transformers bf16 "
          f"{a.passages / best_st:,.0f} passages/s, posy {a.passages / best_posy:,.0f} passages/s, "
          f"posy / sentence-transformers {best_st / best_posy:.2f}x; min cosine between them {cos.min():.5f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
