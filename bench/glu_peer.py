#!/usr/bin/env python3
"""transformers on the GPU beside posy for the models ../shared/bench/hf_peer.py
does not cover (Gemma 3 / EmbeddingGemma, ModernBERT): the same model
folder posy loads (tests/cuda/e2e_decoders.py writes them), bf16, SDPA
attention, timed with CUDA events -- one query of 16 and 64 tokens (eager,
the mean of 20 after 5 warm-ups) and padded batches of equal lengths
(tokens/s).  Prints JSON lines shaped like bench_gpu's, so
bench/bench_gpu_report.py-style tables can sit them side by side.

  python3 bench/glu_peer.py MODEL_DIR NAME

Random token ids: speed does not depend on them.
"""
import json
import sys

import torch
import transformers as T


def timed(fn, iters=20, warm=5):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(iters):
        fn()
    e.record()
    torch.cuda.synchronize()
    return s.elapsed_time(e) / iters  # ms


def main():
    d, name = sys.argv[1], sys.argv[2]
    m = T.AutoModel.from_pretrained(d, dtype=torch.bfloat16, attn_implementation="sdpa").cuda().eval()
    vocab = m.config.vocab_size
    g = torch.Generator(device="cuda").manual_seed(0)
    with torch.inference_mode():
        for n in (16, 64):
            ids = torch.randint(1000, vocab, (1, n), device="cuda", generator=g)
            ms = timed(lambda: m(input_ids=ids))
            print(json.dumps({"kind": "latency", "model": name, "impl": "transformers-eager", "tokens": n,
                              "gpu_us": ms * 1e3}), flush=True)
        for seq in (128, 512):
            for tokens in (4096, 16384, 65536):
                b = tokens // seq
                ids = torch.randint(1000, vocab, (b, seq), device="cuda", generator=g)
                try:
                    ms = timed(lambda: m(input_ids=ids), iters=5, warm=2)
                except torch.OutOfMemoryError:
                    torch.cuda.empty_cache()
                    continue
                print(json.dumps({"kind": "batch", "model": name, "impl": "transformers-eager", "seq": seq,
                                  "tokens": tokens, "tok_per_s": tokens / (ms * 1e-3)}), flush=True)


if __name__ == "__main__":
    main()
