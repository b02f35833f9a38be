#!/usr/bin/env bash
# bench_serve_json_ab: the JSON float serializer before and after a change,
# in the same run.  Builds bench/bench_serve_json.c twice, against
# src/gateway/gw_float.c and against an older gw_float.c (BEFORE=path, or
# REV=git revision to take it from, default HEAD), runs the two binaries
# interleaved ROUNDS times (default 7) pinned to one core (CORE, default 0),
# and prints the median of each: µs per 1024-float vector for posy's JSON,
# base64 and printf("%.9g") (the peer, timed inside each binary), and the
# ratios.  Usage: [BEFORE=f.c | REV=rev] [ROUNDS=7] bench/bench_serve_json_ab.sh [iters]
set -euo pipefail
cd "$(dirname "$0")/.."
ITERS=${1:-20000}
ROUNDS=${ROUNDS:-7}
CORE=${CORE:-0}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
if [ -n "${BEFORE:-}" ]; then cp "$BEFORE" "$T/gw_float_before.c"
else git show "${REV:-HEAD}:src/gateway/gw_float.c" > "$T/gw_float_before.c"; fi
CC=${CC:-cc}
for v in before after; do
    src=src/gateway/gw_float.c; [ $v = before ] && src=$T/gw_float_before.c
    $CC -O2 -Isrc/gateway bench/bench_serve_json.c "$src" src/gateway/gw_buf.c -lm -lpthread -o "$T/bench_$v"
done
PIN=""; command -v taskset >/dev/null && PIN="taskset -c $CORE"
for r in $(seq "$ROUNDS"); do
    for v in before after; do $PIN "$T/bench_$v" "$ITERS" | sed "s/^/$v /" >> "$T/out"; done
done
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
m() { grep "^$1 $2 " "$T/out" | awk '{print $3}' | median; }
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg), $ROUNDS interleaved rounds of $ITERS vectors, medians (µs per 1024-float vector)"
for v in before after; do
    j=$(m $v json_1024_floats_us); b=$(m $v base64_1024_floats_us); p=$(m $v 'printf_%.9g_1024_floats_us')
    awk -v v=$v -v j="$j" -v b="$b" -v p="$p" 'BEGIN {printf "%-6s json %6.2f  base64 %5.2f  printf %7.1f  printf/json %5.1fx\n", v, j, b, p, p / j}'
done
awk -v a="$(m before json_1024_floats_us)" -v b="$(m after json_1024_floats_us)" 'BEGIN {printf "json before/after: %.2fx\n", a / b}'
echo "per-round json µs (before | after):"
paste <(grep '^before json' "$T/out" | awk '{print $3}') <(grep '^after json' "$T/out" | awk '{print $3}') | tr '\n' ' '; echo
