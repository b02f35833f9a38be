"""Markdown tables from bench_gpu (posy) and hf_peer (transformers) JSON
lines of the same run, with ratios.  usage: bench_gpu_report.py POSY.jsonl [PEER.jsonl]"""
import json, sys


def rows(path):
    out = []
    try:
        for line in open(path):
            line = line.strip()
            if line.startswith("{"):
                out.append(json.loads(line))
    except FileNotFoundError:
        pass
    return out


posy = rows(sys.argv[1])
peer = rows(sys.argv[2]) if len(sys.argv) > 2 else []
MODELS = list(dict.fromkeys(r["model"] for r in posy if "model" in r))  # in the order bench_gpu ran them


def find(rs, **kw):
    for r in rs:
        if all(r.get(k) == v for k, v in kw.items()):
            return r
    return None


print("### Batch-1 latency (one query), microseconds\n")
print("| model | tokens | posy GPU time | posy GPU time, back to back | posy step wall (pack+copies+GPU) | peer CUDA graph | peer eager | peer graph / posy GPU |")
print("|---|---|---|---|---|---|---|---|")
for m in MODELS:
    for L in (16, 64):
        p = find(posy, kind="latency", model=m, seq=L, mode="posy-cuda-graph")
        b = find(posy, kind="latency", model=m, seq=L, mode="posy-cuda-graph-back-to-back")
        bu = f"{b['gpu_us']:.1f}" if b else "-"
        g = find(peer, kind="latency", model=m, seq=L, mode="cuda-graph")
        e = find(peer, kind="latency", model=m, seq=L, mode="eager")
        if not p:
            continue
        gu = g["ms"] * 1e3 if g and "ms" in g else None
        eu = e["ms"] * 1e3 if e and "ms" in e else None
        print(f"| {m} | {L} | {p['gpu_us']:.1f} | {bu} | {p['wall_us']:.1f} | "
              f"{gu:.1f} | {eu:.1f} | {gu / p['gpu_us']:.1f}x |" if gu and eu else
              f"| {m} | {L} | {p['gpu_us']:.1f} | {bu} | {p['wall_us']:.1f} | - | - | - |")

print("\n### Throughput against tokens per step (tokens/s, wall clock, steps pipelined)\n")
print("| model | pattern | tokens/step | posy tok/s | posy GPU ms/step | peer tok/s (padded) | ratio |")
print("|---|---|---|---|---|---|---|")
for m in MODELS:
    for r in posy:
        if r.get("kind") != "batch" or r["model"] != m:
            continue
        pr = None
        if r["pattern"].startswith("equal"):
            pr = find(peer, kind="batch", model=m, seq=r["seq"], tokens=r["tokens"])
        pt = f"{pr['tok_per_s'] / 1e6:.2f}M" if pr else "-"
        ratio = f"{r['tok_per_s'] / pr['tok_per_s']:.1f}x" if pr else "-"
        print(f"| {m} | {r['pattern']} | {r['tokens']} | {r['tok_per_s'] / 1e6:.2f}M | {r['gpu_ms']:.3f} | {pt} | {ratio} |")

print("\n### Saturation (peak and tokens per step reaching 90% of it)\n")
print("| model | pattern | peak tok/s | tokens/step at 90% |")
print("|---|---|---|---|")
for r in posy:
    if r.get("kind") == "saturation":
        print(f"| {r['model']} | {r['pattern']} | {r['peak_tok_per_s'] / 1e6:.2f}M | {r['tokens_at_90pct']} |")

print("\n### 64 sequences of mixed lengths 16..512 in one step (real tokens/s)\n")
print("| model | posy | peer (padded to longest) | ratio |")
print("|---|---|---|---|")
for m in MODELS:
    p = find(posy, kind="mixed", model=m)
    q = find(peer, kind="mixed", model=m)
    if p:
        print(f"| {m} | {p['real_tok_per_s'] / 1e6:.2f}M | "
              + (f"{q['real_tok_per_s'] / 1e6:.2f}M | {p['real_tok_per_s'] / q['real_tok_per_s']:.1f}x |" if q else "- | - |"))

# Issue 7's targets for the Qwen3-0.6B configuration (docs/BENCHMARKS.md)
if "qwen3-0.6b" in MODELS:
    print("\n### Qwen3-0.6B against its targets\n")
    lat = find(posy, kind="latency", model="qwen3-0.6b", seq=16, mode="posy-cuda-graph")
    peak = max([r["peak_tok_per_s"] for r in posy if r.get("kind") == "saturation" and r["model"] == "qwen3-0.6b"],
               default=None)
    if lat:
        print(f"- batch-1 16-token GPU time: {lat['gpu_us']:.1f} us (target <= 400 us): "
              f"{'MET' if lat['gpu_us'] <= 400 else 'NOT MET'}")
    if peak:
        print(f"- throughput at saturation: {peak / 1e3:.0f}k tokens/s (target >= 600k): "
              f"{'MET' if peak >= 600e3 else 'NOT MET'}")
