"""Summarise an ncu --csv run (metric gpu__time_duration.sum) of one
forward: kernel count, sum of kernel durations, and time per kernel kind.
usage: ncu_summary.py NCU.csv MODEL [WHAT]   (WHAT: the title's subject)"""
import csv, re, sys
from collections import defaultdict

path, model = sys.argv[1], sys.argv[2]
what = sys.argv[3] if len(sys.argv) > 3 else "one 16-token forward (ncu, eager, each kernel timed alone)"
rows = []
try:
    lines = [l for l in open(path) if l.startswith('"')]
    for r in csv.DictReader(lines):
        if r.get("Metric Name") == "gpu__time_duration.sum":
            v = float(r["Metric Value"].replace(",", ""))
            unit = r.get("Metric Unit", "ns")
            us = v / 1e3 if unit == "nsecond" or unit == "ns" else v if unit in ("usecond", "us") else v * 1e3
            rows.append((r["Kernel Name"], us))
except FileNotFoundError:
    pass
if not rows:
    print(f"\n(ncu: no kernel rows for {model}; see /tmp/ncu_{model}.err)")
    sys.exit(0)
kinds = defaultdict(lambda: [0, 0.0])
for name, us in rows:
    base = re.sub(r"<.*", "", name.split("(")[0]).replace("void ", "").strip()
    lib = base.startswith(("nvjet", "cublas", "sm90_", "sm80_", "cutlass")) or "splitK" in base
    k = "cuBLASLt: " + base[:48] if lib else base
    kinds[k][0] += 1
    kinds[k][1] += us
print(f"\n### {model}: kernels of {what}\n")
print(f"{len(rows)} kernels, sum of kernel times {sum(u for _, u in rows):.1f} us\n")
total = sum(u for _, u in rows)
print("| kernel | count | total us | us each | share |")
print("|---|---|---|---|---|")
for k, (c, t) in sorted(kinds.items(), key=lambda x: -x[1][1]):
    print(f"| {k} | {c} | {t:.1f} | {t / c:.2f} | {100 * t / total:.1f}% |")
