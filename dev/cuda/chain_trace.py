#!/usr/bin/env python3
"""chain_trace.py: lay out the per-block stamps of one traced query
(bench_gpu with BENCH_TRACE in a -DENG_CU_TRACE build; eng_cu_trace.h).

    python3 dev/cuda/chain_trace.py TRACE.txt

One row per traced launch (chain GEMMs, attention + O, attention version 2
-- Qwen3's attention node), in the order their waits returned, times in us
from the first block's start:
  start      first block started .. last block started
  reached    the last block reached griddepcontrol.wait (attention: began
             the reads of its work item, which end in the wait)
  returned   first .. last block's wait returned (the predecessor was done)
  weights    the last block's weight slice landed (after "returned": the
             weights, not the predecessor, held this node up; attention:
             its first key tile loaded and q/k normed)
  end        the last block ended
  gap        from the previous traced node's end to this one's first
             return: the untraced nodes between them (norms, attention)
             plus the dependency's own latency
  after      end - first return: the node's own time on the critical path
The summary splits the query into those parts.
"""
import sys
from collections import defaultdict


def main(path):
    nodes = defaultdict(list)
    for line in open(path):
        if line.startswith("#") or not line.strip():
            continue
        f = line.split()
        unit, grid = f[0], int(f[1])
        t = [int(x) for x in f[4:9]]
        nodes[(unit, grid)].append(t)
    if not nodes:
        print("no records")
        return 1
    rows = []
    for (unit, grid), recs in nodes.items():
        col = lambda k: [r[k] for r in recs if r[k]]
        rows.append(dict(unit=unit, n=len(recs), s0=min(col(0)), s1=max(col(0)), reached=max(col(1)),
                         r0=min(col(2)), r1=max(col(2)), w=max(col(3)) if col(3) else None, end=max(col(4))))
    rows.sort(key=lambda r: r["r0"])
    o = min(r["s0"] for r in rows)
    us = lambda t: (t - o) / 1e3
    print(f"{'#':>3} {'unit':<13} {'blocks':>6} {'start':>15} {'reached':>8} {'returned':>15} {'weights':>8} "
          f"{'end':>8} {'gap':>6} {'after':>6}")
    gaps = after = late = 0.0
    n_late = 0
    prev_end = None
    for i, r in enumerate(rows):
        gap = (r["r0"] - prev_end) / 1e3 if prev_end is not None else 0.0
        aft = (r["end"] - r["r0"]) / 1e3
        wl = (r["w"] - r["r1"]) / 1e3 if r["w"] else None
        if wl is not None and wl > 0:
            late += wl
            n_late += 1
        gaps += gap
        after += aft
        w = f"{us(r['w']):8.2f}" if r["w"] else f"{'-':>8}"
        print(f"{i:>3} {r['unit']:<13} {r['n']:>6} {us(r['s0']):7.2f}-{us(r['s1']):<7.2f} {us(r['reached']):8.2f} "
              f"{us(r['r0']):7.2f}-{us(r['r1']):<7.2f} {w} {us(r['end']):8.2f} {gap:6.2f} {aft:6.2f}")
        prev_end = r["end"]
    span = (max(r["end"] for r in rows) - o) / 1e3
    print(f"\n{len(rows)} traced launches over {span:.1f} us: {after:.1f} us after their waits returned, "
          f"{gaps:.1f} us between them (untraced nodes and dependency latency); weights landed after the wait "
          f"in {n_late} launches, by {late:.1f} us in all")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
