"""Throughput against tokens per step, from bench_gpu (posy) and hf_peer
rows of one run, as a small self-contained SVG (no plotting library:
CI and dev machines need not carry matplotlib).
usage: plot_gpu_svg.py POSY.jsonl PEER.jsonl OUT.svg"""
import json, math, sys

posy = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
peer = [json.loads(l) for l in open(sys.argv[2]) if l.startswith("{")]
W, Hh, L, R, T, B = 760, 420, 70, 200, 30, 50
xmin, xmax = math.log2(256), math.log2(65536)
ymax = 16e6
series = []
colors = {"minilm-l6": "#1f77b4", "bert-base": "#d62728"}
dash = {"equal128": "", "equal512": "6,3", "random16-512": "2,3"}
for m in ("minilm-l6", "bert-base"):
    for p in ("equal128", "equal512", "random16-512"):
        pts = [(r["tokens"], r["tok_per_s"]) for r in posy if r.get("kind") == "batch" and r["model"] == m and r["pattern"] == p]
        series.append((f"posy {m} {p}", colors[m], dash[p], 2.2, pts))
    for s in (128, 512):
        pts = [(r["tokens"], r["tok_per_s"]) for r in peer if r.get("kind") == "batch" and r["model"] == m and r["seq"] == s]
        series.append((f"HF peer {m} equal{s} (padded)", colors[m], "1,4" if s == 512 else "8,2,1,2", 1.0, pts))


def X(t):
    return L + (math.log2(t) - xmin) / (xmax - xmin) * (W - L - R)


def Y(v):
    return T + (1 - v / ymax) * (Hh - T - B)


out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{Hh}" font-family="sans-serif" font-size="11">',
       f'<rect width="{W}" height="{Hh}" fill="white"/>',
       f'<text x="{L}" y="18" font-size="13">Throughput vs tokens per step, H200, bf16 (posy CUDA engine vs transformers+SDPA)</text>']
for k in range(0, 17, 2):
    y = Y(k * 1e6)
    out.append(f'<line x1="{L}" x2="{W - R}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>')
    out.append(f'<text x="{L - 6}" y="{y + 4:.1f}" text-anchor="end">{k}M</text>')
for e in range(8, 17):
    x = X(2 ** e)
    out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{T}" y2="{Hh - B}" stroke="#eee"/>')
    out.append(f'<text x="{x:.1f}" y="{Hh - B + 15}" text-anchor="middle">{2 ** e if e < 10 else str(2 ** (e - 10)) + "k"}</text>')
out.append(f'<text x="{(L + W - R) / 2}" y="{Hh - 12}" text-anchor="middle">tokens per step (log scale)</text>')
out.append(f'<text x="14" y="{(T + Hh - B) / 2}" transform="rotate(-90 14 {(T + Hh - B) / 2})" text-anchor="middle">tokens/s</text>')
ly = T + 6
for name, col, da, w, pts in series:
    if not pts:
        continue
    pts.sort()
    d = " ".join(f"{X(t):.1f},{Y(v):.1f}" for t, v in pts)
    out.append(f'<polyline points="{d}" fill="none" stroke="{col}" stroke-width="{w}" stroke-dasharray="{da}"/>')
    out.append(f'<line x1="{W - R + 8}" x2="{W - R + 30}" y1="{ly}" y2="{ly}" stroke="{col}" stroke-width="{w}" stroke-dasharray="{da}"/>')
    out.append(f'<text x="{W - R + 34}" y="{ly + 4}" font-size="9">{name}</text>')
    ly += 14
out.append("</svg>")
open(sys.argv[3], "w").write("\n".join(out))
