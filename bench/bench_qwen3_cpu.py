#!/usr/bin/env python3
"""posy's CPU engine against transformers (torch CPU) on a Qwen3 model,
same token ids, same thread count, in the same run.

  python3 bench/bench_qwen3_cpu.py --model DIR [--threads 2] [--seconds 3]
                                   [--shapes 1x16,8x128]

DIR: any Qwen3 embedding model directory, e.g. the one
`python3 tests/gen/gen_qwen3_fixtures.py --full /tmp/qwen3_full` writes
(/tmp/qwen3_full/causal: Qwen3-0.6B sizes, 4 layers).  Each shape BxL is B
sequences of L ids: posy packs them (build/posy_bench_ids), transformers
runs them as one [B, L] batch (equal lengths, so no padding either).
Prints ms per step, tokens/s and posy's speed-up; asserts nothing.
"""
import argparse
import json
import os
import subprocess
import time

import torch
import transformers as T

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def hf_time(model, vocab, B, L, seconds):
    ids = torch.tensor([[(i * 7919 + 13) % vocab for i in range(b * L, (b + 1) * L)] for b in range(B)])
    with torch.inference_mode():
        model(input_ids=ids)
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            model(input_ids=ids)
            n += 1
        dt = (time.perf_counter() - t0) / n
    return dt * 1e3, B * L / dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=3)
    ap.add_argument("--shapes", default="1x16,8x128")
    a = ap.parse_args()
    out = subprocess.run([os.path.join(ROOT, "build", "posy_bench_ids"), "--model", a.model, "--threads",
                          str(a.threads), "--seconds", str(a.seconds), "--shapes", a.shapes],
                         capture_output=True, text=True, check=True).stdout
    posy = json.loads(out)["shapes"]
    torch.set_num_threads(a.threads)
    model = T.AutoModel.from_pretrained(a.model, dtype=torch.float32).eval()
    vocab = model.config.vocab_size
    print(f"{'shape':>8} {'posy ms':>9} {'hf ms':>9} {'posy tok/s':>11} {'hf tok/s':>10} {'speed-up':>8}")
    for s in a.shapes.split(","):
        B, L = map(int, s.split("x"))
        hms, htps = hf_time(model, vocab, B, L, a.seconds)
        p = posy[s]
        print(f"{s:>8} {p['ms_per_step']:9.2f} {hms:9.2f} {p['tokens_per_s']:11.0f} {htps:10.0f} "
              f"{hms / p['ms_per_step']:7.2f}x")


if __name__ == "__main__":
    main()
